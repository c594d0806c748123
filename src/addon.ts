// The project's Node-API addons (native/<name>/<name>.c, built by npm's
// install hook into native/<name>/build/<name>.node): one way to load them and
// one way to hand them a socket's descriptor. Every addon is optional; each
// caller says what podvol does without it.
import { createRequire } from 'node:module';
import { fieldOf } from './errno.ts';

/**
 * Loads addon `name`, or the file `file` (tests name a missing one); throws when
 * it is not built. Call it when the addon is first needed, not at import: in
 * the single executable import.meta.url extracts the SEA assets then.
 */
export function loadAddon<T>(name: string, file?: URL): T {
  const url = file ?? new URL(`../native/${name}/build/${name}.node`, import.meta.url);
  // Cast: require() types a native module as any; native/<name>/<name>.c exports what T says.
  return createRequire(import.meta.url)(url.pathname) as T;
}

/** The descriptor of a socket or server: libuv keeps it in `_handle.fd`; undefined once closed. */
export function fdOf(handleOwner: unknown): number | undefined {
  const fd = fieldOf(fieldOf(handleOwner, '_handle'), 'fd');
  return typeof fd === 'number' && fd >= 0 ? fd : undefined;
}
