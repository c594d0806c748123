import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  compareQuantities,
  ERR_FORMAT_WRONG,
  ERR_NUMERIC,
  ERR_SUFFIX,
  isZeroQuantity,
  parseByteSize,
  parseQuantity,
  quantityMilliValue,
  quantityValue,
} from '../../../src/plugins/util/quantity.ts';

const value = (s: string) => quantityValue(parseQuantity(s));
const milli = (s: string) => quantityMilliValue(parseQuantity(s));

describe('parseQuantity', () => {
  test('decimal SI suffixes', () => {
    assert.equal(value('1'), 1n);
    assert.equal(value('1k'), 1000n);
    assert.equal(value('1M'), 1_000_000n);
    assert.equal(value('2G'), 2_000_000_000n);
    assert.equal(value('1T'), 10n ** 12n);
    assert.equal(value('1P'), 10n ** 15n);
    assert.equal(value('1E'), 10n ** 18n);
    assert.equal(milli('100m'), 100n);
    assert.equal(parseQuantity('5u').nanos, 5000n);
    assert.equal(parseQuantity('7n').nanos, 7n);
  });

  test('binary SI suffixes', () => {
    assert.equal(value('1Ki'), 1024n);
    assert.equal(value('64Mi'), 64n * 1024n * 1024n);
    assert.equal(value('1Gi'), 1n << 30n);
    assert.equal(value('1Ti'), 1n << 40n);
    assert.equal(value('1Pi'), 1n << 50n);
    assert.equal(value('7Ei'), 7n << 60n);
    assert.equal(parseQuantity('1Mi').format, 'BinarySI');
  });

  test('fractions and exponents are exact', () => {
    assert.equal(value('0.5Gi'), 512n * 1024n * 1024n);
    assert.equal(value('1.5Gi'), 1536n * 1024n * 1024n);
    assert.equal(milli('0.5'), 500n);
    assert.equal(milli('.5'), 500n);
    assert.equal(value('1.'), 1n);
    assert.equal(value('1e3'), 1000n);
    assert.equal(value('1E3'), 1000n);
    assert.equal(value('12e+2'), 1200n);
    assert.equal(milli('5e-3'), 5n);
    assert.equal(value('+3k'), 3000n);
    assert.equal(value('-3k'), -3000n);
    assert.equal(value('007'), 7n);
    assert.equal(parseQuantity('1e3').format, 'DecimalExponent');
  });

  test('rounds like Quantity: to nano on parse, away from zero on Value/MilliValue', () => {
    assert.equal(parseQuantity('0.1n').nanos, 1n);
    assert.equal(parseQuantity('1e-30').nanos, 1n);
    assert.equal(parseQuantity('-0.1n').nanos, -1n);
    assert.equal(value('100m'), 1n);
    assert.equal(value('1001m'), 2n);
    assert.equal(value('-100m'), -1n);
    assert.equal(milli('1u'), 1n);
    assert.equal(milli('1500u'), 2n);
    assert.equal(value('0.3Ki'), 308n); // 307.2 rounds up
  });

  test('zero in its many spellings', () => {
    for (const z of ['0', '0m', '0Gi', '00', '+', '-', '.', '0.0', '0e5']) {
      assert.equal(isZeroQuantity(parseQuantity(z)), true, z);
    }
  });

  test('rejects garbage with apimachinery error texts', () => {
    const fails = (s: string, reason: string) =>
      assert.throws(
        () => parseQuantity(s),
        (err: Error) => err.message === `invalid quantity ${JSON.stringify(s)}: ${reason}`,
      );
    fails('', ERR_FORMAT_WRONG);
    fails('abc', ERR_FORMAT_WRONG);
    fails('1 Gi', ERR_FORMAT_WRONG);
    fails('1KiB', ERR_FORMAT_WRONG);
    fails('1.5.5', ERR_FORMAT_WRONG);
    fails(' 1', ERR_FORMAT_WRONG);
    fails('1Gi5', ERR_SUFFIX);
    fails('1K', ERR_SUFFIX);
    fails('1e', ERR_SUFFIX);
    fails('1mm', ERR_SUFFIX);
    fails('1e+', ERR_SUFFIX);
    fails('.e-10', ERR_NUMERIC);
    assert.equal(
      ERR_FORMAT_WRONG,
      "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
    );
  });

  test('rejects magnitudes beyond 2^63-1 instead of capping them', () => {
    assert.equal(value('9223372036854775807'), 9223372036854775807n);
    assert.equal(value('-9223372036854775807'), -9223372036854775807n);
    assert.throws(
      () => parseQuantity('9223372036854775808'),
      /magnitude exceeds 2\^63-1 \(9223372036854775807\)/,
    );
    assert.throws(() => parseQuantity('8Ei'), /magnitude exceeds 2\^63-1/);
    assert.throws(() => parseQuantity('1e19'), /magnitude exceeds 2\^63-1/);
    assert.throws(() => parseQuantity('1e999999999'), /magnitude exceeds 2\^63-1/);
    assert.throws(() => parseQuantity(`1${'0'.repeat(400)}`), /magnitude exceeds 2\^63-1/);
  });
});

describe('helpers', () => {
  test('compareQuantities orders by value across suffix families', () => {
    assert.equal(compareQuantities(parseQuantity('1Ki'), parseQuantity('1k')), 1);
    assert.equal(compareQuantities(parseQuantity('1000m'), parseQuantity('1')), 0);
    assert.equal(compareQuantities(parseQuantity('1e3'), parseQuantity('1Ki')), -1);
  });

  test('parseByteSize gives whole bytes', () => {
    assert.equal(parseByteSize('128Mi'), 134217728n);
    assert.equal(parseByteSize('1G'), 1000000000n);
  });
});
