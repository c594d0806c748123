// A stand-in for kubernetes-csi/node-driver-registrar: serves kubelet's
// pluginregistration.Registration on <registrationDir>/<driver>-reg.sock,
// answering GetInfo with type CSIPlugin, the driver's name, the endpoint
// given by --kubelet-registration-path and supported_versions ["1.0.0"].
// Told that registration failed, it stops (the real one exits 1 and leaves its
// socket behind); stop() removes the socket as the real one does on SIGTERM.
import { join } from 'node:path';
import { grpc, loadRegistrationProto } from '../../src/plugins/csi/grpc.ts';
import { serveOnUnixSocket } from './serve.ts';

export interface RegistrarOptions {
  registrationDir: string;
  driverName: string;
  /** --kubelet-registration-path: the driver's socket as the node agent sees it. */
  endpoint: string;
  versions?: string[];
  /** Overrides the socket file name (default `<driver>-reg.sock`). */
  socketName?: string;
  type?: string;
}

export interface TestRegistrar {
  socket: string;
  /** Resolves with the first NotifyRegistrationStatus received. */
  status: Promise<{ plugin_registered: boolean; error: string }>;
  notifications: { plugin_registered: boolean; error: string }[];
  stop(): Promise<void>;
}

export async function startTestRegistrar(o: RegistrarOptions): Promise<TestRegistrar> {
  const { Registration } = loadRegistrationProto();
  const socket = join(o.registrationDir, o.socketName ?? `${o.driverName}-reg.sock`);
  const server = new grpc.Server();
  const notifications: { plugin_registered: boolean; error: string }[] = [];
  const { promise: status, resolve: resolveStatus } = Promise.withResolvers<{
    plugin_registered: boolean;
    error: string;
  }>();
  server.addService(Registration.service, {
    GetInfo: (_call: unknown, cb: grpc.sendUnaryData<object>) =>
      cb(null, {
        type: o.type ?? 'CSIPlugin',
        name: o.driverName,
        endpoint: o.endpoint,
        supported_versions: o.versions ?? ['1.0.0'],
      }),
    NotifyRegistrationStatus: (
      call: grpc.ServerUnaryCall<{ plugin_registered: boolean; error: string }, object>,
      cb: grpc.sendUnaryData<object>,
    ) => {
      notifications.push(call.request);
      resolveStatus(call.request);
      cb(null, {});
      // node-driver-registrar: "Registration process failed with error ... restarting registration container." and exit 1.
      if (!call.request.plugin_registered) setImmediate(() => server.forceShutdown());
    },
  });
  const stop = await serveOnUnixSocket(server, socket);
  return { socket, status, notifications, stop };
}
