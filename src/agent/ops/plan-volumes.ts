// The host operations each plugin's SetUp and TearDown perform, as data.
// Mirrors src/plugins/*.ts step for step, using their exported pure helpers
// for every rule (tmpfs size, huge page size, downward API rendering, payload
// path validation, hostPath backsteps) so the plan cannot drift from them.
import type { V1KeyToPath, V1Pod, V1VolumeProjection } from '@kubernetes/client-node';
import { configMapPluginName } from '../../plugins/configmap.ts';
import { downwardAPIPluginName } from '../../plugins/downwardapi.ts';
import { emptyDirMemorySize, emptyDirPluginName, pageSizeMountOption } from '../../plugins/emptydir.ts';
import { hostPathPluginName, validatePathNoBacksteps } from '../../plugins/hostpath.ts';
import { imagePluginName } from '../../plugins/image.ts';
import { nestedMountpoints } from '../../plugins/nested-mountpoints.ts';
import { projectedPluginName } from '../../plugins/projected.ts';
import { secretPluginName } from '../../plugins/secret.ts';
import { type MounterArgs, type Spec, VolumeError } from '../../plugins/types.ts';
import {
  cleanPath,
  DATA_DIR_NAME,
  NEW_DATA_DIR_NAME,
  validatePayloadPath,
} from '../../plugins/util/atomic-writer.ts';
import { collectDownwardAPIData } from '../../plugins/util/fieldpath.ts';
import type { WrapperMedium } from '../../plugins/wrapped-volume.ts';
import { escapeQualifiedName, podPluginDir } from '../../volumehost/paths.ts';
import type { HostPathFound, PlanContext } from './plan-host.ts';

/**
 * One host operation. `detail` depends on the action:
 * mkdir: octal mode; mount: the arguments before the target; write: mode and
 * size or origin; symlink: the link's target; rename: the new path; chown: the
 * fsGroup rule; check: what is checked; fetch: what is fetched; skip/ignore:
 * why; umount, rm: empty.
 */
export interface PlanStep {
  phase: 'setup' | 'teardown';
  /** `<namespace>/<name>`; empty for node-wide steps. */
  pod: string;
  volume: string;
  action: PlanAction;
  path: string;
  detail: string;
}

export type PlanAction =
  | 'mkdir'
  | 'mount'
  | 'chown'
  | 'write'
  | 'symlink'
  | 'rename'
  | 'check'
  | 'fetch'
  | 'skip'
  | 'ignore'
  | 'umount'
  | 'rm';

/** Adds a step of the current pod, volume and phase. */
export type Emit = (action: PlanAction, path: string, detail?: string) => void;

export interface VolumePlanInput {
  ctx: PlanContext;
  pod: V1Pod;
  uid: string;
  volumeName: string;
  pluginName: string;
  spec: Spec;
  /** The volume's path as the plugin reports it. */
  path: string;
  args: MounterArgs;
}

export const octal = (mode: number) => `0${(mode & 0o7777).toString(8).padStart(3, '0')}`;

const TS_DIR = '..<timestamp>';
const escapedEmptyDir = escapeQualifiedName(emptyDirPluginName);

/** A file the atomic writer would write; bytes unknown until the data is fetched. */
interface PlannedFile {
  path: string;
  mode: number;
  bytes?: number;
  origin?: string;
  fsUser?: number;
}

function chownDetail(fsGroup: number, readOnly: boolean): string {
  const bits = readOnly ? 'group read' : 'group read-write';
  return `recursively: group ${fsGroup}, ${bits}, setgid on directories (fsGroup)`;
}

/** emptyDir SetUpAt (also as the wrapper `wrapped_<vol>` of the atomic-writer plugins). */
function emptyDirSetUp(
  emit: Emit,
  v: VolumePlanInput,
  metaName: string,
  medium: string,
  sizeLimit: string | undefined,
): void {
  // Everything that can fail is computed before the first step, so a failing
  // volume shows as one skip line instead of half a plan.
  let mount: string | undefined;
  if (medium === 'Memory') {
    const size = emptyDirMemorySize(v.ctx.host, v.pod, sizeLimit);
    const options = size > 0n ? [`size=${size}`] : [];
    if (v.ctx.noswap) options.push('noswap');
    mount = `-t tmpfs${options.length > 0 ? ` -o ${options.join(',')}` : ''} tmpfs`;
  } else if (medium === 'HugePages' || medium.startsWith('HugePages-')) {
    mount = `-t hugetlbfs -o ${pageSizeMountOption(medium, v.pod)} nodev`;
  } else if (medium !== '') {
    throw new VolumeError('UnknownStorageMedium', `unknown storage medium "${medium}"`);
  }
  emit('mkdir', v.path, '0777');
  if (mount) emit('mount', v.path, mount);
  if (v.args.fsGroup !== undefined) emit('chown', v.path, chownDetail(v.args.fsGroup, false));
  const meta = `${podPluginDir(v.ctx.rootDir, v.uid, escapedEmptyDir)}/${metaName}`;
  emit('mkdir', meta, '0750');
  emit('write', `${meta}/ready`, 'mode 0644, 0 bytes');
}

function emptyDirTearDown(emit: Emit, v: VolumePlanInput, metaName: string, mounted: boolean): void {
  emit('rm', `${podPluginDir(v.ctx.rootDir, v.uid, escapedEmptyDir)}/${metaName}`);
  if (mounted) emit('umount', v.path);
  emit('rm', v.path);
}

function validateFiles(files: PlannedFile[]): void {
  for (const f of files) {
    if (f.path.startsWith('<')) continue;
    try {
      validatePayloadPath(f.path);
    } catch (err) {
      throw new VolumeError('InvalidPath', (err as Error).message);
    }
  }
}

/** kubelet's AtomicWriter.Write into an empty volume (src/plugins/util/atomic-writer.ts). */
function atomicWrite(emit: Emit, v: VolumePlanInput, files: PlannedFile[]): void {
  const dir = v.path;
  const ts = `${dir}/${TS_DIR}`;
  emit('mkdir', ts, '0755');
  const made = new Set<string>();
  for (const f of files) {
    const rel = f.path.startsWith('<') ? f.path : cleanPath(f.path);
    const parts = rel.split('/');
    for (let i = 1; i < parts.length; i++) {
      const sub = parts.slice(0, i).join('/');
      if (!made.has(sub)) emit('mkdir', `${ts}/${sub}`, '0777');
      made.add(sub);
    }
    const what = [`mode ${octal(f.mode & 0o777)}`];
    if (f.bytes !== undefined) what.push(`${f.bytes} bytes`);
    if (f.origin) what.push(f.origin);
    if (f.fsUser !== undefined) what.push(`owner uid ${f.fsUser}`);
    emit('write', `${ts}/${rel}`, what.join(', '));
  }
  // The atomic-writer volumes are read-only to containers: only group read is added.
  if (v.args.fsGroup !== undefined) emit('chown', dir, chownDetail(v.args.fsGroup, true));
  emit('symlink', `${dir}/${NEW_DATA_DIR_NAME}`, TS_DIR);
  emit('rename', `${dir}/${NEW_DATA_DIR_NAME}`, `${dir}/${DATA_DIR_NAME}`);
  const top = new Set(files.map((f) => (f.path.startsWith('<') ? f.path : cleanPath(f.path)).split('/')[0]));
  for (const name of top) emit('symlink', `${dir}/${name}`, `${DATA_DIR_NAME}/${name}`);
}

/** setUpWrapped: the wrapper emptyDir, then the atomic writer. Files are planned before anything runs. */
function wrappedSetUp(emit: Emit, v: VolumePlanInput, medium: WrapperMedium, files: PlannedFile[]): void {
  validateFiles(files);
  // The same check SetUp makes (a mountPath of `..` is refused), so plan shows it as an error.
  const nested = nestedMountpoints(v.volumeName, v.pod);
  emptyDirSetUp(emit, v, `wrapped_${v.volumeName}`, medium, undefined);
  for (const rel of nested) emit('mkdir', `${v.path}/${rel}`, '0755');
  atomicWrite(emit, v, files);
}

function requireMode(mode: number | undefined): number {
  if (mode === undefined || mode === null) {
    throw new VolumeError('InvalidMode', 'no defaultMode used, not even the default value for it');
  }
  return mode;
}

function renderedFiles(
  v: VolumePlanInput,
  items: Parameters<typeof collectDownwardAPIData>[0],
  defaultMode: number,
): PlannedFile[] {
  const { payload, errors } = collectDownwardAPIData(
    items ?? [],
    v.pod,
    v.ctx.host.getNodeAllocatable(),
    defaultMode,
  );
  if (errors.length > 0) throw new VolumeError('DownwardAPIFieldError', errors.join(', '));
  return [...payload].map(([path, f]) => ({ path, mode: f.mode, bytes: Buffer.byteLength(f.data) }));
}

/** configMap/secret keys: the files are known by path when items are listed, otherwise only after the fetch. */
function keyFiles(
  items: V1KeyToPath[] | undefined,
  defaultMode: number,
  object: string,
  optional: boolean,
): PlannedFile[] {
  if (!items || items.length === 0) {
    return [{ path: '<key>', mode: defaultMode, origin: `one file per key of ${object}` }];
  }
  const missing = optional ? ', left out if missing' : '';
  return items.map((i) => ({
    path: i.path,
    mode: i.mode ?? defaultMode,
    origin: `key "${i.key}" of ${object}${missing}`,
  }));
}

function fetchDetail(kind: string, ns: string, name: string | undefined, optional: boolean): string {
  return `${kind} ${ns}/${name ?? ''} (needs the API server${optional ? '; optional: a missing one counts as empty' : ''})`;
}

function projectedFiles(
  emit: Emit,
  v: VolumePlanInput,
  sources: V1VolumeProjection[],
  defaultMode: number,
): PlannedFile[] {
  const ns = v.pod.metadata?.namespace ?? 'default';
  const files = new Map<string, PlannedFile>();
  const merge = (list: PlannedFile[]) => {
    for (const f of list) files.set(f.path, f);
  };
  // The token file is 0600 when fsUser/fsGroup is set; SetVolumeOwnership then makes it 0640.
  const privateMode = v.args.fsUser !== undefined || v.args.fsGroup !== undefined ? 0o600 : defaultMode;
  const fetches: string[] = [];
  for (const s of sources) {
    if (s.secret) {
      const optional = s.secret.optional === true;
      fetches.push(fetchDetail('secret', ns, s.secret.name, optional));
      merge(keyFiles(s.secret.items, defaultMode, `secret ${ns}/${s.secret.name ?? ''}`, optional));
    } else if (s.configMap) {
      const optional = s.configMap.optional === true;
      fetches.push(fetchDetail('configMap', ns, s.configMap.name, optional));
      merge(keyFiles(s.configMap.items, defaultMode, `configMap ${ns}/${s.configMap.name ?? ''}`, optional));
    } else if (s.downwardAPI) {
      merge(renderedFiles(v, s.downwardAPI.items, defaultMode));
    } else if (s.serviceAccountToken) {
      const tp = s.serviceAccountToken;
      const sa = v.pod.spec?.serviceAccountName || 'default';
      const audience = tp.audience ? `audience "${tp.audience}", ` : '';
      fetches.push(
        `serviceAccountToken of ${ns}/${sa} (${audience}expirationSeconds ${tp.expirationSeconds ?? 3600}; needs the API server)`,
      );
      merge([{ path: tp.path, mode: privateMode, origin: 'the token', fsUser: v.args.fsUser }]);
    } else if (s.clusterTrustBundle) {
      const ctb = s.clusterTrustBundle;
      const which = ctb.name
        ? `clusterTrustBundle ${ctb.name}`
        : ctb.signerName
          ? `clusterTrustBundles of signer ${ctb.signerName}`
          : '';
      if (!which) {
        throw new VolumeError(
          'InvalidField',
          'ClusterTrustBundle projection requires either name or signerName to be set',
        );
      }
      fetches.push(`${which} (needs the API server)`);
      merge([{ path: ctb.path, mode: privateMode, origin: 'the PEM bundle', fsUser: v.args.fsUser }]);
    }
  }
  for (const f of fetches) emit('fetch', '', f);
  return [...files.values()];
}

function hostPathSetUp(emit: Emit, v: VolumePlanInput): void {
  const src = v.spec.volume?.hostPath;
  const path = src?.path ?? '';
  validatePathNoBacksteps(path);
  const type = src?.type ?? '';
  if (type === '') {
    emit('check', path, 'has no type: nothing is checked or created');
    return;
  }
  const expected: Record<string, [Exclude<HostPathFound, 'missing' | 'other'>, string]> = {
    DirectoryOrCreate: ['Directory', 'directory'],
    Directory: ['Directory', 'directory'],
    FileOrCreate: ['File', 'file'],
    File: ['File', 'file'],
    Socket: ['Socket', 'socket file'],
    CharDevice: ['CharDevice', 'character device'],
    BlockDevice: ['BlockDevice', 'block device'],
  };
  const want = expected[type];
  if (!want) throw new VolumeError('InvalidHostPathType', `${type} is an invalid volume type`);
  const [kind, description] = want;
  const found = v.ctx.inspectHostPath(path);
  const create = type.endsWith('OrCreate');
  if (found === 'missing' && !create)
    throw new VolumeError('HostPathNotFound', `hostPath ${path} doesn't exist`);
  if (found === 'other') {
    throw new VolumeError(
      'HostPathTypeMismatch',
      `hostPath type check failed, ${path} is not a ${description}, unable to determine its type`,
    );
  }
  if (found !== 'missing' && found !== kind) {
    throw new VolumeError(
      'HostPathTypeMismatch',
      `hostPath type check failed: ${path} is not a ${description}, it's a ${found}`,
    );
  }
  if (found === 'missing') {
    emit('check', path, `is a ${kind} (${type}: missing now, so it is created)`);
    if (kind === 'Directory') emit('mkdir', path, '0755');
    else emit('write', path, 'mode 0644, 0 bytes, the parent directory must exist');
    return;
  }
  emit('check', path, `is a ${kind} (it is now)`);
}

const wrappedMedia: Record<string, WrapperMedium> = {
  [downwardAPIPluginName]: 'Memory',
  [configMapPluginName]: '',
  [secretPluginName]: 'Memory',
  [projectedPluginName]: 'Memory',
};

/** Emits the SetUp steps of one volume; throws a VolumeError (before emitting anything) when SetUp would fail. */
export function planSetUp(emit: Emit, v: VolumePlanInput): void {
  const vol = v.spec.volume ?? { name: v.volumeName };
  const ns = v.pod.metadata?.namespace ?? 'default';
  // Buffered, so a failure found half-way leaves no partial plan.
  const steps: Parameters<Emit>[] = [];
  const local: Emit = (...s) => {
    steps.push(s);
  };
  switch (v.pluginName) {
    case emptyDirPluginName:
      emptyDirSetUp(local, v, v.volumeName, vol.emptyDir?.medium ?? '', vol.emptyDir?.sizeLimit);
      break;
    case hostPathPluginName:
      hostPathSetUp(local, v);
      break;
    case downwardAPIPluginName: {
      const files = renderedFiles(v, vol.downwardAPI?.items, vol.downwardAPI?.defaultMode ?? 0o644);
      wrappedSetUp(local, v, wrappedMedia[v.pluginName], files);
      break;
    }
    case configMapPluginName:
    case secretPluginName: {
      const isSecret = v.pluginName === secretPluginName;
      const src = isSecret ? vol.secret : vol.configMap;
      const name = isSecret ? vol.secret?.secretName : vol.configMap?.name;
      const optional = src?.optional === true;
      const kind = isSecret ? 'secret' : 'configMap';
      const files = keyFiles(
        src?.items,
        requireMode(src?.defaultMode),
        `${kind} ${ns}/${name ?? ''}`,
        optional,
      );
      local('fetch', '', fetchDetail(kind, ns, name, optional));
      wrappedSetUp(local, v, wrappedMedia[v.pluginName], files);
      break;
    }
    case projectedPluginName: {
      const mode = requireMode(vol.projected?.defaultMode);
      const files = projectedFiles(local, v, vol.projected?.sources ?? [], mode);
      wrappedSetUp(local, v, wrappedMedia[v.pluginName], files);
      break;
    }
    case imagePluginName:
      // Nothing on the host: the runtime mounts the image.
      break;
    default:
      throw new VolumeError(
        'UnknownVolumeSource',
        `podvol plan does not know the steps of plugin ${v.pluginName}`,
      );
  }
  for (const s of steps) emit(...s);
}

/** Emits what TearDown of the volume does (the record is the caller's). */
export function planTearDown(emit: Emit, v: VolumePlanInput): void {
  const vol = v.spec.volume;
  if (v.pluginName === emptyDirPluginName) {
    emptyDirTearDown(emit, v, v.volumeName, (vol?.emptyDir?.medium ?? '') !== '');
  } else if (v.pluginName in wrappedMedia) {
    emptyDirTearDown(emit, v, `wrapped_${v.volumeName}`, wrappedMedia[v.pluginName] === 'Memory');
  }
  // hostPath: nothing to undo; the host path stays.
}
