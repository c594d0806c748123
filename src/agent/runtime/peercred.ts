// Who is on the other end of a unix socket, as the kernel recorded it at
// connect(2) time (SO_PEERCRED, SO_PEERGROUPS). Node has no API for it, so a
// 60-line Node-API addon (native/peercred, built by `npm ci`) asks the kernel.
// Filesystem permissions on the socket are not the check: a descriptor can be
// passed to, or inherited by, a process that could not open the path.

import type { Socket } from 'node:net';
import { fdOf, loadAddon } from '../../addon.ts';
import { errorMessage } from '../../errno.ts';

export interface PeerCredentials {
  pid: number;
  uid: number;
  gid: number;
  /** Supplementary groups (SO_PEERGROUPS, Linux ≥ 4.13); empty where the kernel has none. */
  groups: number[];
}

type Addon = { peerCred(fd: number): PeerCredentials };

/** Loads the addon; throws a message that says how to get it. */
export function loadPeerCred(): (socket: Socket) => PeerCredentials {
  let addon: Addon;
  try {
    addon = loadAddon<Addon>('peercred');
  } catch (err) {
    throw new Error(
      `cannot check the runtime socket's callers: the peercred addon is not built (${errorMessage(err).split('\n')[0]}); install a C compiler and run npm rebuild, or disable the socket with --runtime-socket ''`,
    );
  }
  return (socket) => {
    const fd = fdOf(socket);
    if (fd === undefined) throw new Error('socket has no file descriptor');
    return addon.peerCred(fd);
  };
}

/** A caller may use the runtime socket if it is root, or in `group` when one is configured. */
export function callerAllowed(cred: PeerCredentials, group: number | undefined): boolean {
  if (cred.uid === 0) return true;
  return group !== undefined && (cred.gid === group || cred.groups.includes(group));
}
