// Types of fresh-bundle.js (plain JavaScript, as bin/podvol.js) for the benches.
/** True when dist/bundle was built after every source file and the lock file last changed. */
export function freshBundle(): boolean;
