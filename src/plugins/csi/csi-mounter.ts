// kubelet's csi_mounter.go: SetUp = NodePublishVolume of a pod's volume at
// <pod volume dir>/mount (after the volume manager's MountDevice staged a
// persistent one), its vol_data.json, the pod info and service account tokens
// a CSIDriver asks for, fsGroup; TearDown = NodeUnpublishVolume and the pod's
// directory. The unstage is not TearDown's: it is UnmountDevice, an operation
// of its own once no pod uses the volume (csi-attacher.ts).
import { dirname, join } from 'node:path';
import type { V1CSIDriver, V1Pod } from '@kubernetes/client-node';
import { errorMessage } from '../../errno.ts';
import { SafeDir } from '../../volumehost/safe-fs.ts';
import {
  type Attributes,
  type Mounter,
  type MounterArgs,
  type Spec,
  specName,
  type Unmounter,
  VolumeError,
} from '../../volumehost/volume.ts';
import { setVolumeOwnership } from '../volume-ownership.ts';
import type { CSIAttacher } from './csi-attacher.ts';
import type { CSIContext } from './csi-context.ts';
import { checkBeforeDriver, readOnlyOf, rpcError, supportsFSGroup, volumeRequest } from './csi-util.ts';
import { nodeExpand } from './expander.ts';
import { goString } from './gojson.ts';
import { isFinalError } from './grpc-status.ts';
import {
  attachmentName,
  checkDriverName,
  checkSpecName,
  loadVolumeData,
  mkdirAll,
  removeMountDir,
  saveVolumeData,
  stagingPath,
  volDataKey,
} from './vol-data.ts';

export class CSIMounter implements Mounter {
  readonly #ctx: CSIContext;
  readonly #attacher: CSIAttacher;
  readonly #spec: Spec;
  readonly #pod: V1Pod;
  readonly #uid: string;
  readonly #inner: string;
  /**
   * kubelet's needSELinuxRelabel: a volume mounted with `-o context` already
   * carries the pod's label, so the runtime must not relabel it; otherwise
   * it relabels when the host has SELinux (kubelet also asks whether the
   * mount supports labels; podvol, which runs no containers, has no runtime
   * to tell). False until SetUp ran.
   */
  #needSELinuxRelabel = false;

  constructor(ctx: CSIContext, attacher: CSIAttacher, spec: Spec, pod: V1Pod) {
    this.#ctx = ctx;
    this.#attacher = attacher;
    this.#spec = spec;
    this.#pod = pod;
    this.#uid = pod.metadata?.uid ?? '';
    this.#inner = specName(spec);
    checkSpecName(this.#inner);
  }

  getPath(): string {
    return join(this.#ctx.podVolumeDir(this.#uid, this.#inner), 'mount');
  }

  getAttributes(): Attributes {
    // kubelet's GetAttributes: the mounter's readOnly, the one NodePublishVolume got.
    const readOnly = readOnlyOf(this.#spec);
    return { readOnly, managed: !readOnly, selinuxRelabel: this.#needSELinuxRelabel };
  }

  setUp(args: MounterArgs): Promise<void> {
    return this.setUpAt(this.getPath(), args);
  }

  async setUpAt(target: string, args: MounterArgs): Promise<void> {
    const phaseKey = `${this.#uid}/${this.#inner}`;
    try {
      await this.#setUpAt(target, args, () => this.#ctx.phases.set(phaseKey, 'publishing'));
    } finally {
      this.#ctx.phases.delete(phaseKey);
    }
  }

  /** `publishing`: NodePublishVolume is about to be called (/status's phase). */
  async #setUpAt(target: string, args: MounterArgs, publishing: () => void): Promise<void> {
    const ctx = this.#ctx;
    await ctx.index.load();
    const pod = this.#pod;
    const ns = pod.metadata?.namespace ?? 'default';
    const { src, driverObj } = checkBeforeDriver(this.#spec, pod, ctx.csiDriverObject);
    const client = ctx.clientFor(src.driver);
    const caps = await ctx.capabilities(client);
    const { capability, seLinuxLabel, seLinuxData } = ctx.mountCapability(
      this.#spec,
      pod,
      src,
      driverObj,
      caps,
      args.fsGroup,
    );
    const node = ctx.host().getNodeName();
    const dir = dirname(target);
    const pubCtx = src.mode === 'Persistent' ? await this.#attacher.publishContext(src, driverObj) : {};
    const globalmount =
      src.mode === 'Persistent' && caps.has('STAGE_UNSTAGE_VOLUME')
        ? stagingPath(ctx.pluginDir(), src.driver, src.handle)
        : '';
    const fs = ctx.fs();
    await mkdirAll(fs, dir, 0o750);
    await saveVolumeData(fs, dir, {
      [volDataKey.specVolID]: this.#inner,
      [volDataKey.volHandle]: src.handle,
      [volDataKey.driverName]: src.driver,
      [volDataKey.nodeName]: node,
      [volDataKey.attachmentID]: attachmentName(src.handle, src.driver, node),
      [volDataKey.volumeLifecycleMode]: src.mode,
      ...seLinuxData,
    });
    ctx.index.addUser(dir, src.driver, src.handle);

    publishing();
    const volumeContext: Record<string, string> = { ...src.attributes };
    const secrets = await ctx.secretData(src.publishSecretRef);
    if (driverObj?.spec?.podInfoOnMount === true) {
      volumeContext['csi.storage.k8s.io/pod.name'] = pod.metadata?.name ?? '';
      volumeContext['csi.storage.k8s.io/pod.namespace'] = ns;
      volumeContext['csi.storage.k8s.io/pod.uid'] = this.#uid;
      volumeContext['csi.storage.k8s.io/serviceAccount.name'] = pod.spec?.serviceAccountName ?? '';
      volumeContext['csi.storage.k8s.io/ephemeral'] = String(src.mode === 'Ephemeral');
    }
    const tokens = await this.#tokens(driverObj);
    if (tokens !== undefined) {
      if (driverObj?.spec?.serviceAccountTokenInSecrets === true) {
        secrets['csi.storage.k8s.io/serviceAccount.tokens'] = tokens;
      } else {
        volumeContext['csi.storage.k8s.io/serviceAccount.tokens'] = tokens;
      }
    }
    try {
      await client.nodePublishVolume({
        ...volumeRequest(src, pubCtx, globalmount, capability),
        target_path: target,
        readonly: src.readOnly,
        secrets,
        volume_context: volumeContext,
      });
    } catch (err) {
      const e = rpcError('NodePublishVolume', err);
      // The driver finished and refused: nothing is mounted, so the directory and its json go.
      if (isFinalError(err)) await removePublishDir(ctx, dir, target).catch(() => {});
      throw e;
    }
    this.#needSELinuxRelabel = seLinuxLabel === '' && ctx.seLinuxEnabled();
    await nodeExpand(ctx, this.#spec, pod, { client, caps, target, globalmount });
    const policy = driverObj?.spec?.fsGroupPolicy ?? 'ReadWriteOnceWithFSType';
    const accessModes = src.mode === 'Ephemeral' ? ['ReadWriteOnce'] : src.accessModes;
    const fsGroup = args.fsGroup;
    if (
      fsGroup !== undefined &&
      !caps.has('VOLUME_MOUNT_GROUP') &&
      supportsFSGroup(policy, fsGroup, src.readOnly, src.fsType, accessModes)
    ) {
      try {
        // Opened on the volume host's fs, as every host access here (a plan's is its recording one).
        const root = await SafeDir.openRoot(target, target, fs);
        try {
          await setVolumeOwnership(root, fsGroup, {
            readOnly: src.readOnly,
            fsGroupChangePolicy: args.fsGroupChangePolicy,
          });
        } finally {
          await root.close();
        }
      } catch (err) {
        throw new VolumeError('FSGroupFailed', `applying fsGroup ${args.fsGroup}: ${errorMessage(err)}`);
      }
    }
  }

  /** csi.storage.k8s.io/serviceAccount.tokens: one TokenRequest per audience, bound to the pod. */
  async #tokens(driverObj: V1CSIDriver | undefined): Promise<string | undefined> {
    const requests = driverObj?.spec?.tokenRequests ?? [];
    if (requests.length === 0) return undefined;
    const pod = this.#pod;
    const out: Record<string, { token: string; expirationTimestamp: string }> = {};
    for (const r of requests) {
      const audience = r.audience ?? '';
      const tr = await this.#ctx
        .host()
        .getServiceAccountTokenFunc()(
          pod.metadata?.namespace ?? 'default',
          pod.spec?.serviceAccountName || 'default',
          {
            spec: {
              audiences: audience === '' ? [] : [audience],
              expirationSeconds: r.expirationSeconds,
              boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: pod.metadata?.name, uid: this.#uid },
            },
          },
        )
        .catch((err: unknown) => {
          throw new VolumeError(
            'TokenRequestFailed',
            `failed to request token for audience "${audience}": ${errorMessage(err)}`,
          );
        });
      // client-node declares a Date; what a server sent may still be its RFC 3339 string.
      const exp: unknown = tr.status?.expirationTimestamp;
      out[audience] = {
        token: tr.status?.token ?? '',
        expirationTimestamp:
          exp instanceof Date ? exp.toISOString().replace(/\.\d{3}Z$/, 'Z') : String(exp ?? ''),
      };
    }
    // json.Marshal(map[string]TokenRequestStatus): sorted audiences, token before expirationTimestamp.
    const entries = Object.entries(out).sort(([a], [b]) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
    const inner = entries.map(
      ([k, s]) =>
        `${goString(k)}:{"token":${goString(s.token)},"expirationTimestamp":${goString(s.expirationTimestamp)}}`,
    );
    return `{${inner.join(',')}}`;
  }
}

/** A pod's publication is gone: its mount directory, its json and its entry in the index. */
async function removePublishDir(ctx: CSIContext, dir: string, target: string): Promise<void> {
  await removeMountDir(ctx.fs(), dir, target);
  ctx.index.removeUser(dir);
}

export class CSIUnmounter implements Unmounter {
  readonly #ctx: CSIContext;
  readonly #attacher: CSIAttacher;
  readonly #uid: string;
  readonly #inner: string;
  constructor(ctx: CSIContext, attacher: CSIAttacher, inner: string, podUID: string) {
    checkSpecName(inner);
    this.#ctx = ctx;
    this.#attacher = attacher;
    this.#inner = inner;
    this.#uid = podUID;
  }

  getPath(): string {
    return join(this.#ctx.podVolumeDir(this.#uid, this.#inner), 'mount');
  }

  tearDown(): Promise<void> {
    return this.tearDownAt(this.getPath());
  }

  async tearDownAt(target: string): Promise<void> {
    const ctx = this.#ctx;
    // A wait for attachment ends with the pod's volume.
    this.#attacher.endAttachWait(`${this.#uid}/${this.#inner}`);
    await ctx.index.load();
    const fs = ctx.fs();
    const dir = dirname(target);
    const data = await loadVolumeData(fs, dir);
    if (!data) {
      ctx.index.removeUser(dir);
      // Nothing was published (or a final error already cleaned up): only an empty directory can be left.
      if (
        await ctx
          .host()
          .getMounter()
          .isMountPoint(target)
          .catch(() => false)
      ) {
        throw new VolumeError('StillMounted', `${target} is mounted but has no ${dir}/vol_data.json`);
      }
      await fs.rmdir(target).catch(() => {});
      await fs.rmdir(dir).catch(() => {});
      return;
    }
    const driver = data[volDataKey.driverName] ?? '';
    const handle = data[volDataKey.volHandle] ?? '';
    checkDriverName(driver);
    const client = ctx.clientFor(driver);
    try {
      await client.nodeUnpublishVolume(handle, target);
    } catch (err) {
      throw rpcError('NodeUnpublishVolume', err);
    }
    await removePublishDir(ctx, dir, target);
  }
}
