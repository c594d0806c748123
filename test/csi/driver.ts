// A CSI node plugin for tests: real gRPC (Identity and Node services) on a
// unix socket; every volume is a real bind mount of a backing directory
// (<stateDir>/backing/<sha256 of the volume id>), or, with backend 'loop', a
// block device: NodeStage attaches a loop device to a sparse file
// (<stateDir>/backing/<sha256>.img), makes a filesystem on it if it has none
// (mkfs, as kubelet's SafeFormatAndMount) and mounts it at the staging path;
// NodePublish binds that into the pod; NodeUnstage unmounts and detaches;
// NodeExpandVolume grows the file, the loop device and the filesystem. It reads its configuration
// (capabilities, node info, injected errors and delays) from
// <stateDir>/config.json on every call, so a test changes its behaviour while
// it runs, in this process or in a child (test/csi/driver-main.ts), and it
// appends every call to <stateDir>/calls.jsonl.
import { createHash } from 'node:crypto';
import {
  appendFileSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmdirSync,
  statfsSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import { errorMessage } from '../../src/errno.ts';
import { createLinuxMounter } from '../../src/mount/linux.ts';
import { grpc, loadCSIProto } from '../../src/plugins/csi/grpc.ts';
import { serveOnUnixSocket } from './serve.ts';

export interface InjectedError {
  /** grpc status code number, e.g. 5 (NOT_FOUND), 14 (UNAVAILABLE). */
  code: number;
  message?: string;
  /** How many calls fail (default: every call until removed). */
  times?: number;
}

export interface DriverConfig {
  name: string;
  vendorVersion?: string;
  nodeID: string;
  maxVolumesPerNode?: number;
  topology?: Record<string, string>;
  /** Node capabilities by name (STAGE_UNSTAGE_VOLUME, GET_VOLUME_STATS, ...). */
  capabilities: string[];
  errors?: Record<string, InjectedError>;
  /** 'bind' (default): a bind mount of a directory; 'loop': a loop device with a filesystem (needs STAGE_UNSTAGE_VOLUME). */
  backend?: 'bind' | 'loop';
  /** Size of a new loop backing file (default 32 MiB). */
  loopSizeBytes?: number;
  /**
   * Milliseconds a method sleeps before answering (a hanging driver), by
   * method name, or `<method>/<volume_id>` for one volume only.
   */
  delays?: Record<string, number>;
}

export interface CallRecord {
  method: string;
  request: Record<string, unknown>;
  /** grpc code returned; 0 for success. */
  code: number;
  at: number;
  /** Time spent in the driver for this call (injected delays included), milliseconds. */
  ms: number;
}

export const configPath = (stateDir: string) => join(stateDir, 'config.json');
export const callsPath = (stateDir: string) => join(stateDir, 'calls.jsonl');
export const backingDir = (stateDir: string, volumeID: string) =>
  join(stateDir, 'backing', createHash('sha256').update(volumeID).digest('hex'));
export const backingImage = (stateDir: string, volumeID: string) => `${backingDir(stateDir, volumeID)}.img`;
export const formatsPath = (stateDir: string) => join(stateDir, 'formats.jsonl');

/** The filesystems the loop backend made: {volume_id, device, fsType}, one per mkfs. */
export function readFormats(stateDir: string): { volume_id: string; device: string; fsType: string }[] {
  try {
    return readFileSync(formatsPath(stateDir), 'utf8')
      .split('\n')
      .filter((l) => l.length > 0)
      .map((l) => JSON.parse(l));
  } catch {
    return [];
  }
}

const toolTimeout = { timeout: 60_000 };

/** Loop devices attached to `file` (losetup -j). */
export async function loopDevicesOf(file: string): Promise<string[]> {
  const r = await execa('losetup', ['--noheadings', '--output', 'NAME', '--associated', file], {
    ...toolTimeout,
    reject: false,
  });
  return r.exitCode === 0
    ? r.stdout
        .split('\n')
        .map((l) => l.trim())
        .filter((l) => l !== '')
    : [];
}

/**
 * Detaches every loop device backed by a file of a state directory (test
 * clean-up: loop devices are not per mount namespace). Found through
 * losetup's list, not the directory, so it works even after the temp
 * directory went first (a back file then shows as "<path> (deleted)"); a
 * device still in use is detached by the kernel once its last user goes.
 */
export async function detachLoops(stateDir: string): Promise<void> {
  const r = await execa('losetup', ['--list', '--noheadings', '--raw', '--output', 'NAME,BACK-FILE'], {
    ...toolTimeout,
    reject: false,
  });
  for (const line of r.stdout.split('\n')) {
    const [dev, ...file] = line.trim().split(' ');
    if (!dev || !file.join(' ').startsWith(`${join(stateDir, 'backing')}/`)) continue;
    await execa('umount', ['--all-targets', '--lazy', dev], { ...toolTimeout, reject: false });
    await execa('losetup', ['--detach', dev], { ...toolTimeout, reject: false });
  }
}

export function writeDriverConfig(stateDir: string, config: DriverConfig): void {
  mkdirSync(stateDir, { recursive: true });
  // rename is atomic: a call never reads half a file.
  writeFileSync(`${configPath(stateDir)}.tmp`, JSON.stringify(config));
  renameSync(`${configPath(stateDir)}.tmp`, configPath(stateDir));
}

export function readDriverConfig(stateDir: string): DriverConfig {
  return JSON.parse(readFileSync(configPath(stateDir), 'utf8')) as DriverConfig;
}

export function updateDriverConfig(stateDir: string, change: (c: DriverConfig) => void): void {
  const c = readDriverConfig(stateDir);
  change(c);
  writeDriverConfig(stateDir, c);
}

export function readCalls(stateDir: string): CallRecord[] {
  let text = '';
  try {
    text = readFileSync(callsPath(stateDir), 'utf8');
  } catch {
    return [];
  }
  return text
    .split('\n')
    .filter((l) => l.length > 0)
    .map((l) => JSON.parse(l) as CallRecord);
}

export interface TestDriver {
  socket: string;
  stop(): Promise<void>;
}

/** The request fields the handlers read (proto-loader fills defaults, so strings are never undefined). */
interface Req {
  volume_id: string;
  staging_target_path: string;
  target_path: string;
  volume_path: string;
  readonly: boolean;
  capacity_range?: { required_bytes: string } | null;
  volume_capability?: { mount?: { fs_type: string; mount_flags: string[] } | null } | null;
}

type Handler = (req: Req, cfg: DriverConfig) => Promise<object>;

class CallError extends Error {
  readonly code: number;
  constructor(code: number, message: string) {
    super(message);
    this.code = code;
  }
}

const exists = (p: string) => {
  try {
    statSync(p);
    return true;
  } catch {
    return false;
  }
};

/** Serves the driver on `socket` until stop(). */
export async function startTestDriver(socket: string, stateDir: string): Promise<TestDriver> {
  const proto = loadCSIProto();
  const mounter = createLinuxMounter({ systemd: 'off' });
  const server = new grpc.Server();
  const isMounted = (p: string) => mounter.isMountPoint(p).catch(() => false);
  const caps = (cfg: DriverConfig) => new Set(cfg.capabilities);

  const handlers: Record<string, Handler> = {
    GetPluginInfo: async (_req, cfg) => ({ name: cfg.name, vendor_version: cfg.vendorVersion ?? '0.0.1' }),
    GetPluginCapabilities: async () => ({ capabilities: [] }),
    Probe: async () => ({ ready: { value: true } }),
    NodeGetInfo: async (_req, cfg) => ({
      node_id: cfg.nodeID,
      max_volumes_per_node: String(cfg.maxVolumesPerNode ?? 0),
      accessible_topology: cfg.topology ? { segments: cfg.topology } : null,
    }),
    NodeGetCapabilities: async (_req, cfg) => ({
      capabilities: cfg.capabilities.map((type) => ({ rpc: { type } })),
    }),
    NodeStageVolume: async (req, cfg) => {
      if (!caps(cfg).has('STAGE_UNSTAGE_VOLUME')) throw new CallError(12, 'NodeStageVolume not supported');
      if (!req.volume_id || !req.staging_target_path)
        throw new CallError(3, 'volume_id and staging_target_path required');
      if (!exists(req.staging_target_path))
        throw new CallError(3, `staging path ${req.staging_target_path} does not exist`);
      if (await isMounted(req.staging_target_path)) return {};
      if (cfg.backend === 'loop') return stageLoop(req, cfg);
      const backing = backingDir(stateDir, req.volume_id);
      mkdirSync(backing, { recursive: true, mode: 0o777 });
      await mounter.mount(backing, req.staging_target_path, '', ['bind']);
      return {};
    },
    NodeUnstageVolume: async (req, cfg) => {
      const source = (await mounter.list()).find((m) => m.mountPoint === req.staging_target_path)?.source;
      await mounter.unmount(req.staging_target_path);
      if (cfg.backend === 'loop') {
        for (const dev of await loopDevicesOf(backingImage(stateDir, req.volume_id))) {
          if (source === undefined || source === dev) await execa('losetup', ['--detach', dev], toolTimeout);
        }
      }
      return {};
    },
    NodePublishVolume: async (req, cfg) => {
      if (!req.volume_id || !req.target_path) throw new CallError(3, 'volume_id and target_path required');
      // Inline ephemeral volumes are never staged: they come without a staging path.
      const staged = caps(cfg).has('STAGE_UNSTAGE_VOLUME') && req.staging_target_path !== '';
      let source = backingDir(stateDir, req.volume_id);
      if (staged) {
        if (!(await isMounted(req.staging_target_path))) throw new CallError(9, 'volume is not staged');
        source = req.staging_target_path;
      } else {
        mkdirSync(source, { recursive: true, mode: 0o777 });
      }
      mkdirSync(req.target_path, { recursive: true, mode: 0o750 });
      if (await isMounted(req.target_path)) return {};
      await mounter.mount(source, req.target_path, '', req.readonly ? ['bind', 'ro'] : ['bind']);
      return {};
    },
    NodeUnpublishVolume: async (req) => {
      await mounter.unmount(req.target_path);
      // The spec: the SP deletes the target path it created (an empty directory once unmounted).
      try {
        rmdirSync(req.target_path);
      } catch {}
      return {};
    },
    NodeGetVolumeStats: async (req) => {
      if (!(await isMounted(req.volume_path))) throw new CallError(5, `${req.volume_path} is not mounted`);
      const s = statfsSync(req.volume_path);
      return {
        usage: [
          {
            unit: 'BYTES',
            total: String(s.blocks * s.bsize),
            available: String(s.bavail * s.bsize),
            used: String((s.blocks - s.bfree) * s.bsize),
          },
          {
            unit: 'INODES',
            total: String(s.files),
            available: String(s.ffree),
            used: String(s.files - s.ffree),
          },
        ],
        volume_condition: null,
      };
    },
    NodeExpandVolume: async (req, cfg) => {
      const bytes = Number(req.capacity_range?.required_bytes ?? 0);
      if (cfg.backend === 'loop') {
        // Online growth, as a real block driver: the device first, then the mounted filesystem.
        const img = backingImage(stateDir, req.volume_id);
        const [dev] = await loopDevicesOf(img);
        if (!dev) throw new CallError(9, `volume ${req.volume_id} is not staged`);
        if (bytes > statSync(img).size) truncateSync(img, bytes);
        await execa('losetup', ['--set-capacity', dev], toolTimeout);
        // Growing a mounted ext4 needs CAP_SYS_RESOURCE; without it the driver reports resize2fs' refusal.
        const r = await execa('resize2fs', [dev], { ...toolTimeout, reject: false });
        if (r.exitCode !== 0)
          throw new CallError(13, `resize2fs ${dev}: ${r.stderr.trim().split('\n').at(-1)}`);
      }
      return { capacity_bytes: String(bytes) };
    },
  };

  /** The loop backend's NodeStage: attach, make a filesystem if there is none, mount. */
  async function stageLoop(req: Req, cfg: DriverConfig): Promise<object> {
    const img = backingImage(stateDir, req.volume_id);
    mkdirSync(join(stateDir, 'backing'), { recursive: true });
    if (!exists(img)) {
      writeFileSync(img, '');
      truncateSync(img, cfg.loopSizeBytes ?? 32 * 1024 * 1024);
    }
    const fsType = req.volume_capability?.mount?.fs_type || 'ext4';
    if (!/^ext[234]$/.test(fsType)) throw new CallError(3, `fs_type ${fsType} is not supported`);
    const dev =
      (await loopDevicesOf(img))[0] ??
      (await execa('losetup', ['--find', '--show', img], toolTimeout)).stdout.trim();
    try {
      // blkid exits 2 when it finds no filesystem: only then is the device formatted.
      const probe = await execa('blkid', ['-p', '-s', 'TYPE', '-o', 'value', dev], {
        ...toolTimeout,
        reject: false,
      });
      if (probe.exitCode === 2) {
        await execa(`mkfs.${fsType}`, ['-F', '-q', dev], toolTimeout);
        appendFileSync(
          formatsPath(stateDir),
          `${JSON.stringify({ volume_id: req.volume_id, device: dev, fsType })}\n`,
        );
      } else if (probe.exitCode !== 0) {
        throw new CallError(13, `blkid ${dev}: ${probe.stderr}`);
      }
      await mounter.mount(
        dev,
        req.staging_target_path,
        fsType,
        req.volume_capability?.mount?.mount_flags ?? [],
      );
    } catch (err) {
      await execa('losetup', ['--detach', dev], { ...toolTimeout, reject: false });
      throw err;
    }
    return {};
  }

  // A delayed (hanging) call ends when the driver stops, as it would if the process died.
  const sleeping = new Set<() => void>();
  const sleep = (ms: number) =>
    new Promise<void>((resolve, reject) => {
      const wake = () => {
        clearTimeout(timer);
        sleeping.delete(wake);
        reject(new CallError(grpc.status.UNAVAILABLE, 'driver stopped'));
      };
      const timer = setTimeout(() => {
        sleeping.delete(wake);
        resolve();
      }, ms);
      sleeping.add(wake);
    });
  const log = (rec: CallRecord) => {
    try {
      appendFileSync(callsPath(stateDir), `${JSON.stringify(rec)}\n`);
    } catch {
      // The test that owned the state directory is over.
    }
  };
  const wrap = (method: string) => {
    return (call: grpc.ServerUnaryCall<Record<string, unknown>, object>, cb: grpc.sendUnaryData<object>) => {
      const t0 = performance.now();
      const run = async () => {
        const cfg = readDriverConfig(stateDir);
        const volumeID = (call.request as { volume_id?: string }).volume_id;
        const delay = cfg.delays?.[`${method}/${volumeID}`] ?? cfg.delays?.[method];
        if (delay) await sleep(delay);
        const injected = cfg.errors?.[method];
        if (injected) {
          if (injected.times !== undefined) {
            updateDriverConfig(stateDir, (c) => {
              const errors = c.errors ?? {};
              const e = errors[method];
              if (!e || e.times === undefined) return;
              if (e.times <= 1) delete errors[method];
              else e.times--;
            });
          }
          throw new CallError(injected.code, injected.message ?? `injected error in ${method}`);
        }
        const handler = handlers[method];
        if (!handler) throw new CallError(grpc.status.UNIMPLEMENTED, `${method} is not implemented`);
        return handler(call.request as unknown as Req, cfg);
      };
      run().then(
        (res) => {
          log({ method, request: call.request, code: 0, at: Date.now(), ms: performance.now() - t0 });
          cb(null, res);
        },
        (err: unknown) => {
          const code = err instanceof CallError ? err.code : grpc.status.INTERNAL;
          log({ method, request: call.request, code, at: Date.now(), ms: performance.now() - t0 });
          cb({
            code,
            details: errorMessage(err),
            name: 'Error',
            message: errorMessage(err),
            metadata: new grpc.Metadata(),
          });
        },
      );
    };
  };
  const impl = (names: string[]) => Object.fromEntries(names.map((n) => [n, wrap(n)]));
  server.addService(proto.Identity.service, impl(['GetPluginInfo', 'GetPluginCapabilities', 'Probe']));
  server.addService(
    proto.Node.service,
    impl([
      'NodeStageVolume',
      'NodeUnstageVolume',
      'NodePublishVolume',
      'NodeUnpublishVolume',
      'NodeGetVolumeStats',
      'NodeExpandVolume',
      'NodeGetCapabilities',
      'NodeGetInfo',
    ]),
  );
  const stop = await serveOnUnixSocket(server, socket);
  return {
    socket,
    stop: () => {
      for (const wake of [...sleeping]) wake();
      return stop();
    },
  };
}
