// Assertions that narrow: with noUncheckedIndexedAccess an element or a
// lookup may be undefined, and a test that expects it to be there says so
// with one of these. A missing value fails the test with an assertion error
// naming what was missing, instead of a TypeError a few lines later (and
// instead of a `!` that would hide it from the type checker).
import assert from 'node:assert/strict';

/** `value`, asserted to be neither undefined nor null. */
export function must<T>(value: T | undefined | null, what = 'value'): T {
  assert.ok(value !== undefined && value !== null, `expected ${what}, got ${value}`);
  return value;
}

/** Element `index` of `items` (negative counts from the end), asserted to exist. */
export function at<T>(items: ArrayLike<T>, index: number, what = 'element'): T {
  const i = index < 0 ? items.length + index : index;
  assert.ok(i >= 0 && i < items.length, `expected ${what} [${index}] of ${items.length}`);
  // In bounds, so the element is a T (a T that may itself admit undefined).
  return items[i] as T;
}

/** The one element of `items`, asserted to be the only one. */
export function only<T>(items: ArrayLike<T>, what = 'element'): T {
  assert.equal(items.length, 1, `expected exactly one ${what}, got ${items.length}`);
  // Length 1, so element 0 is a T.
  return items[0] as T;
}
