// A value an API object's map (data, labels, annotations) holds itself: a key
// named `constructor` or `__proto__` must not reach Object.prototype.
export function ownValue<T>(m: Record<string, T> | undefined, key: string): T | undefined {
  return m !== undefined && Object.hasOwn(m, key) ? m[key] : undefined;
}
