import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { at, must, only } from './must.ts';

describe('narrowing assertions for tests', () => {
  test('must returns a present value and fails with an AssertionError naming what is missing', () => {
    assert.equal(must(0, 'zero'), 0);
    assert.equal(must('', 'empty'), '');
    assert.throws(() => must(undefined, 'the pod'), { name: 'AssertionError', message: /expected the pod/ });
    assert.throws(() => must(null, 'the pod'), { name: 'AssertionError' });
  });

  test('at indexes from either end and fails out of bounds', () => {
    assert.equal(at(['a', 'b'], 1), 'b');
    assert.equal(at(['a', 'b'], -1), 'b');
    assert.equal(at([undefined], 0), undefined, 'an element that is undefined is still there');
    assert.throws(() => at(['a'], 1, 'volume'), {
      name: 'AssertionError',
      message: /expected volume \[1\] of 1/,
    });
    assert.throws(() => at(['a'], -2), { name: 'AssertionError' });
  });

  test('only returns the single element and fails on none or several', () => {
    assert.equal(only(['x']), 'x');
    assert.throws(() => only([], 'Event'), { name: 'AssertionError', message: /exactly one Event, got 0/ });
    assert.throws(() => only([1, 2]), { name: 'AssertionError' });
  });
});
