// A socket's two kernel queues, through the native/sockq addon (Node exposes
// neither), for the connection budget under a flood:
// - unread(socket): the bytes a client has sent that Node has not read yet
//   (FIONREAD). Node reads a connection only on a later turn of the event
//   loop than the one that accepted it; until then a probe whose request is
//   already in the kernel and a connection that never sent a byte look alike,
//   and only this tells them apart.
// - deferAccept(server): TCP_DEFER_ACCEPT on a listening TCP socket. The
//   kernel then hands over a connection only when its first bytes arrive (or
//   after DEFER_ACCEPT_S), so a probe is accepted with its request already
//   there, and a flood of silent connections waits in the kernel, costing no
//   descriptor and no turn of the event loop.
import type { Server, Socket } from 'node:net';
import { fdOf, loadAddon } from '../addon.ts';

/**
 * How long the kernel holds a connection that has sent nothing before it
 * hands it over anyway (it counts in SYN-ACK retransmissions: 5 s is three,
 * about 7 s). The TLS handshake and header timeouts are 5 s: a client that has
 * said nothing by then would be closed anyway.
 */
export const DEFER_ACCEPT_S = 5;

export interface SocketQueues {
  /** Bytes waiting unread on `socket` (0 once it is closed or when the kernel will not say). */
  unread(socket: Socket): number;
  /** Sets TCP_DEFER_ACCEPT on a listening TCP server; false if it has no descriptor or the kernel refused. */
  deferAccept(server: Server, seconds?: number): boolean;
}

type Addon = { unread(fd: number): number; deferAccept(fd: number, seconds: number): void };

/** The addon's calls, or undefined when it is not built (`addon`: tests name a missing one). */
export function loadSocketQueues(addon?: URL): SocketQueues | undefined {
  let native: Addon;
  try {
    native = loadAddon<Addon>('sockq', addon);
  } catch {
    return undefined;
  }
  return {
    // A TLS socket's raw socket keeps its handle: the budget holds and asks the raw one.
    unread(socket) {
      const fd = fdOf(socket);
      if (fd === undefined) return 0;
      try {
        return native.unread(fd);
      } catch {
        return 0;
      }
    },
    deferAccept(server, seconds = DEFER_ACCEPT_S) {
      const fd = fdOf(server);
      if (fd === undefined) return false;
      try {
        native.deferAccept(fd, seconds);
        return true;
      } catch {
        return false;
      }
    },
  };
}
