// What the real API server does to a pod before storing it, for the fields
// podvol reads: the v1 defaulting (defaultMode 0644 on configMap, secret,
// downwardAPI and projected volumes, items' mode left unset, a token
// projection's expirationSeconds 3600, a volume with no source an emptyDir,
// ...), which is podvol's own static-pod defaulting (src/agent/pods/defaults.ts,
// kept in one place), and on create what the ServiceAccount admission plugin
// adds: serviceAccountName "default" when the pod names none, mirrored into
// the deprecated serviceAccount field as the v1 conversion does. Without it a
// pod posted as a user writes it fails in podvol with InvalidMode, which no
// real cluster would let happen.
//
// Not done: the admission plugin's kube-api-access projected volume (tests
// that want one add kubeApiAccessVolume() themselves; injecting it would give
// every pod a volume its test did not ask for) and its refusal of a pod whose
// service account does not exist.
import { defaultPodDocument } from '../../src/agent/pods/defaults.ts';
import { isObj } from '../../src/plugins/util/field-errors.ts';
import type { KubeObj } from './selectors.ts';

/** Defaults `pod` in place (the store's own copy), as a create or an update through the API would. */
export function defaultStoredPod(pod: KubeObj, op: 'create' | 'update'): void {
  const doc: unknown = pod;
  if (!isObj(doc)) return;
  defaultPodDocument(doc);
  const spec = doc.spec;
  if (!isObj(spec)) return;
  if (!spec.serviceAccountName && spec.serviceAccount) spec.serviceAccountName = spec.serviceAccount;
  if (op === 'create' && !spec.serviceAccountName) spec.serviceAccountName = 'default';
  if (spec.serviceAccountName) spec.serviceAccount = spec.serviceAccountName;
}
