// kubelet's keymutex: operations on one key (a CSI volume, a local volume's path)
// run one after another; different keys run in parallel.

/** Runs `fn` after every earlier call with the same key has settled. */
export class KeyedMutex {
  readonly #tails = new Map<string, Promise<unknown>>();
  run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.#tails.get(key) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const tail = next.catch(() => {});
    this.#tails.set(key, tail);
    void tail.then(() => {
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    });
    return next;
  }
}
