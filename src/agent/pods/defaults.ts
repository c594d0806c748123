// What the API server's defaulting (k/k pkg/apis/core/v1/defaults.go and the
// generated SetObjectDefaults_Pod) does to a Pod before kubelet ever sees it.
// Static manifests never pass through the API server, so without this a
// static pod would behave differently from the same pod created through the
// API (e.g. a secret volume without defaultMode would have no file mode).
//
// Deliberately NOT done here: admission (the ServiceAccount admission plugin
// sets serviceAccountName "default" and injects the kube-api-access volume;
// static pods never get either), pod-level resource defaulting behind the
// PodLevelResources gate, rounding of quantities to milli scale.
import type { V1Pod } from '@kubernetes/client-node';
import { isObj, type Obj } from '../../plugins/util/field-errors.ts';

function objects(v: unknown): Obj[] {
  return Array.isArray(v) ? v.filter(isObj) : [];
}

function setIfAbsent(o: Obj, key: string, value: unknown): void {
  if (o[key] === undefined || o[key] === null) o[key] = value;
}

/** 0644: SecretVolumeSourceDefaultMode = ConfigMap... = DownwardAPI... = Projected... */
export const DEFAULT_VOLUME_MODE = 0o644;
/** ServiceAccountTokenProjection.expirationSeconds default: one hour. */
export const DEFAULT_TOKEN_EXPIRATION_SECONDS = 3600;

// YAML `cpu: 1` arrives as a number; the API server accepts it and hands it
// back as the string "1". Consumers only ever see strings.
function quantityString(v: unknown): unknown {
  return typeof v === 'number' && Number.isFinite(v) ? String(v) : v;
}

function normalizeResourceList(list: unknown): void {
  if (!isObj(list)) return;
  for (const [k, v] of Object.entries(list)) list[k] = quantityString(v);
}

function defaultFieldRef(item: Obj): void {
  if (isObj(item.fieldRef)) setIfAbsent(item.fieldRef, 'apiVersion', 'v1');
  if (isObj(item.resourceFieldRef) && item.resourceFieldRef.divisor !== undefined) {
    item.resourceFieldRef.divisor = quantityString(item.resourceFieldRef.divisor);
  }
}

// image:latest or no tag → Always, anything else → IfNotPresent (parsers.ParseImageName).
function defaultPullPolicy(image: unknown): string {
  if (typeof image !== 'string') return 'IfNotPresent';
  const [withoutDigest = ''] = image.split('@');
  const lastSlash = withoutDigest.lastIndexOf('/');
  const colon = withoutDigest.indexOf(':', lastSlash + 1);
  const tag = colon === -1 ? (image.includes('@') ? '' : 'latest') : withoutDigest.slice(colon + 1);
  return tag === 'latest' ? 'Always' : 'IfNotPresent';
}

function defaultContainer(c: Obj, isEphemeral: boolean): void {
  setIfAbsent(c, 'imagePullPolicy', defaultPullPolicy(c.image));
  setIfAbsent(c, 'terminationMessagePath', '/dev/termination-log');
  setIfAbsent(c, 'terminationMessagePolicy', 'File');
  for (const p of objects(c.ports)) setIfAbsent(p, 'protocol', 'TCP');
  for (const e of objects(c.env)) if (isObj(e.valueFrom)) defaultFieldRef(e.valueFrom);
  for (const probe of [c.livenessProbe, c.readinessProbe, c.startupProbe]) {
    if (!isObj(probe)) continue;
    setIfAbsent(probe, 'timeoutSeconds', 1);
    setIfAbsent(probe, 'periodSeconds', 10);
    setIfAbsent(probe, 'successThreshold', 1);
    setIfAbsent(probe, 'failureThreshold', 3);
    if (isObj(probe.httpGet)) {
      setIfAbsent(probe.httpGet, 'path', '/');
      setIfAbsent(probe.httpGet, 'scheme', 'HTTP');
    }
  }
  if (isEphemeral || !isObj(c.resources)) return;
  normalizeResourceList(c.resources.limits);
  normalizeResourceList(c.resources.requests);
  // SetDefaults_Pod: requests default to limits, per resource. This is what the
  // downward API's requests.* resourceFieldRef reports for such a container.
  if (isObj(c.resources.limits)) {
    const requests: Obj = isObj(c.resources.requests) ? c.resources.requests : {};
    for (const [k, v] of Object.entries(c.resources.limits)) setIfAbsent(requests, k, v);
    c.resources.requests = requests;
  }
}

function defaultProjected(p: Obj): void {
  setIfAbsent(p, 'defaultMode', DEFAULT_VOLUME_MODE);
  for (const s of objects(p.sources)) {
    if (isObj(s.serviceAccountToken)) {
      setIfAbsent(s.serviceAccountToken, 'expirationSeconds', DEFAULT_TOKEN_EXPIRATION_SECONDS);
    }
    if (isObj(s.downwardAPI)) for (const item of objects(s.downwardAPI.items)) defaultFieldRef(item);
  }
}

function defaultVolume(v: Obj): void {
  const keys = Object.keys(v).filter((k) => k !== 'name' && v[k] !== null && v[k] !== undefined);
  // SetDefaults_Volume: a volume with no source at all is an emptyDir. A volume
  // with an unrecognised key is left alone so validation can name that key
  // instead of silently turning a typo into an emptyDir.
  if (keys.length === 0) v.emptyDir = {};
  if (isObj(v.hostPath)) setIfAbsent(v.hostPath, 'type', '');
  // SetDefaults_ImageVolumeSource: as a container's imagePullPolicy.
  if (isObj(v.image)) setIfAbsent(v.image, 'pullPolicy', defaultPullPolicy(v.image.reference));
  if (isObj(v.emptyDir) && v.emptyDir.sizeLimit !== undefined) {
    v.emptyDir.sizeLimit = quantityString(v.emptyDir.sizeLimit);
  }
  if (isObj(v.secret)) setIfAbsent(v.secret, 'defaultMode', DEFAULT_VOLUME_MODE);
  if (isObj(v.configMap)) setIfAbsent(v.configMap, 'defaultMode', DEFAULT_VOLUME_MODE);
  if (isObj(v.downwardAPI)) {
    setIfAbsent(v.downwardAPI, 'defaultMode', DEFAULT_VOLUME_MODE);
    for (const item of objects(v.downwardAPI.items)) defaultFieldRef(item);
  }
  if (isObj(v.projected)) defaultProjected(v.projected);
  if (isObj(v.iscsi)) setIfAbsent(v.iscsi, 'iscsiInterface', 'default');
  if (isObj(v.rbd)) {
    setIfAbsent(v.rbd, 'pool', 'rbd');
    setIfAbsent(v.rbd, 'user', 'admin');
    setIfAbsent(v.rbd, 'keyring', '/etc/ceph/keyring');
  }
  if (isObj(v.azureDisk)) {
    setIfAbsent(v.azureDisk, 'cachingMode', 'ReadWrite');
    setIfAbsent(v.azureDisk, 'fsType', 'ext4');
    setIfAbsent(v.azureDisk, 'readOnly', false);
    setIfAbsent(v.azureDisk, 'kind', 'Shared');
  }
  if (isObj(v.scaleIO)) {
    setIfAbsent(v.scaleIO, 'storageMode', 'ThinProvisioned');
    setIfAbsent(v.scaleIO, 'fsType', 'xfs');
  }
  if (isObj(v.image)) setIfAbsent(v.image, 'pullPolicy', defaultPullPolicy(v.image.reference));
  if (isObj(v.ephemeral) && isObj(v.ephemeral.volumeClaimTemplate)) {
    const spec = v.ephemeral.volumeClaimTemplate.spec;
    if (isObj(spec)) {
      setIfAbsent(spec, 'volumeMode', 'Filesystem');
      if (isObj(spec.resources)) {
        normalizeResourceList(spec.resources.requests);
        normalizeResourceList(spec.resources.limits);
      }
    }
  }
}

/**
 * The pod as the API server would store it: a new object, the input is not
 * touched. Tolerates malformed input (fields of the wrong type are left as
 * they are for validation to report).
 */
export function defaultPod(pod: V1Pod): V1Pod {
  const out: unknown = structuredClone(pod);
  if (!isObj(out)) return pod;
  defaultPodDocument(out);
  return podFromDocument(out);
}

/**
 * A pod document (a manifest's, or one defaulted here) taken as client-node's V1Pod.
 * client-node checks nothing at run time either: it reads JSON into these types. The
 * cast is safe because everything downstream validates before trusting a field
 * (validatePodVolumes, the plugins' checks): a field of the wrong type is a
 * reported problem, never a crash.
 */
export function podFromDocument(doc: Obj): V1Pod {
  return doc as V1Pod;
}

/** defaultPod on a document the caller owns (a copy it just made): changed in place, no second copy. */
export function defaultPodDocument(out: Obj): void {
  if (!isObj(out.spec)) return;
  const spec = out.spec;
  setIfAbsent(spec, 'dnsPolicy', 'ClusterFirst');
  setIfAbsent(spec, 'restartPolicy', 'Always');
  setIfAbsent(spec, 'securityContext', {});
  setIfAbsent(spec, 'terminationGracePeriodSeconds', 30);
  setIfAbsent(spec, 'schedulerName', 'default-scheduler');
  setIfAbsent(spec, 'enableServiceLinks', true);
  for (const c of objects(spec.containers)) defaultContainer(c, false);
  for (const c of objects(spec.initContainers)) defaultContainer(c, false);
  for (const c of objects(spec.ephemeralContainers)) defaultContainer(c, true);
  if (spec.hostNetwork === true) {
    for (const c of [...objects(spec.containers), ...objects(spec.initContainers)]) {
      for (const p of objects(c.ports)) setIfAbsent(p, 'hostPort', p.containerPort);
    }
  }
  if (isObj(spec.resources)) {
    normalizeResourceList(spec.resources.limits);
    normalizeResourceList(spec.resources.requests);
  }
  for (const v of objects(spec.volumes)) defaultVolume(v);
}
