// A gRPC server on a unix socket, as CSI drivers and node-driver-registrar serve.
import { rmSync } from 'node:fs';
import { grpc } from '../../src/plugins/csi/grpc.ts';

/**
 * Serves `server` on the unix socket `socket` (a stale socket file of an
 * earlier run is replaced). The returned stop shuts it down gracefully and
 * removes the socket.
 */
export async function serveOnUnixSocket(server: grpc.Server, socket: string): Promise<() => Promise<void>> {
  rmSync(socket, { force: true });
  await new Promise<void>((resolve, reject) =>
    server.bindAsync(`unix:${socket}`, grpc.ServerCredentials.createInsecure(), (err) =>
      err ? reject(err) : resolve(),
    ),
  );
  return () =>
    new Promise<void>((resolve) =>
      server.tryShutdown(() => {
        rmSync(socket, { force: true });
        resolve();
      }),
    );
}
