// The one catalogue of reasons podvol reports: a stable CamelCase word in /status,
// logs, Events and the `reason` label of podvol_operation_errors_total (never a
// per-pod label). Every reason here is documented in docs/reasons.md (a test
// checks), and the types at the end make a reason that is not here a compile error.

/** Why a volume failed (VolumeError.reason, /status `volumes[].reason`). */
export const volumeReasons = {
  // The pod's volumes as written (validation, before any work is done).
  InvalidVolumeName: 'a volume name that is not a DNS-1123 label',
  DuplicateVolumeName: 'two volumes of the pod have the same name',
  UnknownVolumeSource: 'no volume source, more than one, an unknown or disabled one (gitRepo)',
  VolumeNotFound: 'a volumeMount or volumeDevice names a volume the pod does not have',
  InvalidPath: "a path that is absolute, climbs with '..', or is too long",
  InvalidSizeLimit: 'an emptyDir sizeLimit that is not a quantity, negative, or above 2^63-1 bytes',
  InvalidQuantity: 'a memory quantity (limit, overhead, node allocatable) that cannot be used',
  InvalidMode: 'a file mode outside 0..0777, or none at all',
  InvalidHostPathType: 'a hostPath type that does not exist',
  InvalidField: 'any other malformed field of a volume source',
  UnknownPlugin: 'a volume on disk whose plugin podvol does not have',
  TooManyVolumes: 'the pod has more volumes than podvol sets up for one pod (1,024); none of them is set up',
  // hostPath.
  HostPathNotFound: 'the hostPath does not exist (and its type does not create it)',
  HostPathTypeMismatch: 'the hostPath exists but is not of the declared type',
  HostPathCreateFailed: 'DirectoryOrCreate/FileOrCreate could not create the path',
  // emptyDir.
  NotADirectory: 'the volume directory exists and is not a directory',
  SizeLimitExceeded:
    'a mounted emptyDir uses more than its sizeLimit (it stays mounted; a Warning Event is posted)',
  UnknownStorageMedium: 'an emptyDir medium podvol does not know',
  HugePagesNotRequested: 'medium HugePages without a hugepages resource request',
  HugePagesMultipleSizes: 'medium HugePages with containers requesting several page sizes',
  HugePagesSizeMismatch: 'the hugetlbfs already mounted has another page size',
  HugePagesSizeUnknown: 'the page size of the hugetlbfs already mounted cannot be read',
  InvalidHugePagesMedium: 'a HugePages-<size> medium whose size is not a quantity',
  // downwardAPI, configMap, secret, projected.
  DownwardAPIFieldError: 'a downwardAPI item whose field or resource cannot be read',
  KeyNotFound: 'an item names a key the configMap or secret does not have',
  ConfigMapNotFound: 'the configMap does not exist (and is not optional)',
  SecretNotFound: 'the secret does not exist (and is not optional)',
  ConfigMapFetchFailed: 'the configMap could not be read from the API server',
  SecretFetchFailed: 'the secret could not be read from the API server',
  ObjectNotRegistered: 'the object is not (yet) watched for this pod',
  Forbidden: 'the API server refused to give podvol the object',
  StandaloneMode: 'the volume needs an API server and podvol runs without one',
  TokenRequestForbidden: 'the API server refused the service account token request',
  TokenRequestFailed: 'the service account token could not be obtained',
  ProjectionFailed: 'a projected source failed for another reason',
  WriteFailed: 'the files of the volume could not be written',
  UnsafePath: "a path in the pod's directories is a symbolic link, not a directory, or crosses a mount",
  FilesystemUnresponsive:
    'a filesystem the volume touches (its hostPath, or a mount at or below it) did not answer a stat within 5 s (a stopped FUSE daemon, an unreachable NFS server); retried with backoff',
  // The runtime contract (runtime socket).
  SubPathFailed: "a container's subPath could not be prepared (kubelet's message; details in the log)",
  SpecChangeRequiresRestart:
    'a static pod with an explicit uid changed a volume that cannot be re-rendered in place; it stays mounted until the pod is recreated',
  // persistentVolumeClaim (the populator's claim resolution, kubelet's messages).
  ClaimLookupPending: 'the claim has not been read from the API server yet',
  ClaimNotFound: 'the PersistentVolumeClaim does not exist',
  ClaimPending: 'the claim is not bound to a volume yet',
  ClaimLost: 'the claim lost its volume (phase Lost)',
  ClaimTerminating: 'the claim is being deleted',
  ClaimNotOwnedByPod: "a generic ephemeral volume's claim belongs to another pod",
  VolumeLookupPending: 'the PersistentVolume has not been read from the API server yet',
  PersistentVolumeNotFound: 'the PersistentVolume the claim is bound to does not exist',
  PersistentVolumeNotBound: 'the PersistentVolume is not bound to the claim',
  PersistentVolumeClaimMismatch: "the PersistentVolume's claimRef names another claim",
  BlockVolumeNotSupported: 'a block volume (volumeDevices), which podvol does not serve',
  VolumeModeMismatch: "the claim's volumeMode differs from the volume's",
  NodeAffinityMismatch: "the PersistentVolume's required node affinity does not match this node",
  // local PersistentVolumes.
  LocalPathInvalid: "a local volume's path is empty, missing, or neither a directory nor a block device",
  LocalBlockDeviceNotSupported:
    'a local volume whose path is a block device (podvol does not format devices)',
  // CSI.
  DriverNotRegistered: 'the CSI driver has not registered on this node',
  InvalidDriverName: 'a CSI driver name that cannot name a directory',
  InvalidVolumeHandle: 'a CSI volume without a volumeHandle',
  LifecycleModeNotSupported:
    'the CSIDriver does not allow this volume lifecycle mode (Persistent or Ephemeral)',
  AttachRequired: 'the driver needs an attach step and there is no API server for VolumeAttachments',
  AttachPending: 'the VolumeAttachment is not attached yet (no Event while it waits)',
  AttachTimedOut:
    'the VolumeAttachment was not attached within the attach wait (10 minutes, as kubelet); one Event, then the wait starts again',
  AttachFailed: 'the VolumeAttachment reports an error, is being deleted, or cannot be read',
  CSICallFailed: 'a CSI call failed with a final error',
  CSICallUncertain: 'a CSI call failed in a way that leaves the volume maybe set up (retried)',
  FSGroupFailed: "applying the pod's fsGroup to the volume failed",
  CorruptVolumeData: "a CSI volume's vol_data.json cannot be read",
  CSIMigrationFailed:
    'an in-tree volume (gcePersistentDisk, awsElasticBlockStore, cinder, portworxVolume) that cannot be translated to its CSI driver',
  SELinuxLabelConflict:
    'containers of the pod that use one volume the driver mounts with an SELinux context need different labels',
  StillMounted: 'a directory to be removed is still mounted',
  ExpansionFailed:
    "growing a volume's filesystem for its claim failed (NodeExpandVolume, or reading or updating the claim)",
  // Operations of the volume manager (fallbacks when the cause carries no reason).
  MountFailed: 'SetUp failed',
  UnmountFailed: 'TearDown failed',
  ReconstructFailed: 'a volume found on disk after a restart could not be rebuilt',
  CleanupFailed: "an orphaned pod's directory could not be removed",
  MountsRemain:
    "mounts podvol cannot attribute to a volume: in an orphaned pod's directory, or (podvol drain) below the root directory outside any pod directory",
  RecordWriteFailed:
    "podvol's record of a volume (under <root>/podvol/pods) could not be written before SetUp: SetUp goes ahead (logged, not a volume failure), and a crash before the next sync leaves the volume to be rebuilt from its directory alone",
} as const;

/**
 * Reasons that retrying cannot cure: the pod asks for something this node
 * will never do (a spec the API server or podvol refuses, a medium or source
 * podvol does not have, an attach step without an API server). Only a new pod
 * spec (or a podvol started differently) changes them, so a runtime waiting
 * for the pod's volumes is told at once (`podvol wait`, `?wait=`) instead of
 * waiting out its timeout. Every other reason may clear by itself: an object
 * created, a driver registered, a claim bound, a path made, a transient error.
 * StandaloneMode is not here: in cluster mode it also stands for an API the
 * server does not serve yet (ClusterTrustBundle), which podvol looks for again.
 */
export const permanentVolumeReasons: ReadonlySet<VolumeReason> = new Set<VolumeReason>([
  'InvalidVolumeName',
  'DuplicateVolumeName',
  'UnknownVolumeSource',
  'VolumeNotFound',
  'InvalidPath',
  'InvalidSizeLimit',
  'InvalidMode',
  'InvalidHostPathType',
  'InvalidField',
  'UnknownStorageMedium',
  'HugePagesNotRequested',
  'HugePagesMultipleSizes',
  'InvalidHugePagesMedium',
  'BlockVolumeNotSupported',
  'VolumeModeMismatch',
  'InvalidDriverName',
  'InvalidVolumeHandle',
  'AttachRequired',
]);

export function isPermanentVolumeReason(v: unknown): boolean {
  return isVolumeReason(v) && permanentVolumeReasons.has(v);
}

export function isVolumeReason(v: unknown): v is VolumeReason {
  return typeof v === 'string' && Object.hasOwn(volumeReasons, v);
}

/** What went wrong talking to (or without) the API server, as plugins branch on it (ApiError.reason). */
export const apiReasons = {
  NotFound: 'the object does not exist',
  Forbidden: 'the API server refused podvol the object',
  Unauthorized: 'the API server rejected the credentials',
  Conflict: 'the object changed under the write (HTTP 409)',
  Gone: 'the resourceVersion asked for expired (HTTP 410)',
  Invalid: 'the API server refused the request as invalid (HTTP 422)',
  TooManyRequests: 'the API server asked podvol to slow down (HTTP 429)',
  ServerError: 'the API server answered with another HTTP error',
  Unreachable: 'the API server cannot be reached',
  NotRegistered:
    'an object podvol does not watch for this pod (kubelet\'s `object "ns"/"name" not registered`)',
  NotSynced: "the object's watch has not listed successfully in time",
  StandaloneMode: 'podvol runs without an API server',
} as const;

/** Why an input to a pod source was refused, or a source cannot read (/status `errors[].reason`). */
export const sourceReasons = {
  ParseError: 'a manifest document is not valid YAML or JSON',
  NotAPod: 'a manifest document is not a v1 Pod',
  InvalidPod: 'a manifest pod fails validation (names, containers)',
  DuplicateUID: 'two manifest pods have the same UID',
  DuplicatePod: 'two manifest pods have the same namespace and name',
  ReadError: 'a manifest file or the manifest directory cannot be read',
  FileTooLarge: 'a manifest file is larger than the limit (10 MiB, as kubelet)',
  DocumentTooLarge:
    'a manifest document is larger than the limit (1.5 MiB, the largest object etcd stores by default)',
  TooDeeplyNested: 'a manifest document nests maps and lists deeper than the limit (64 levels)',
  TooManyVolumes: 'a manifest pod has more volumes than the limit (1,024)',
  TooManyDocuments:
    'a manifest file has more documents than the limit (1,000; kubelet reads one pod per file): none of it is read',
  EmptyManifest:
    'a manifest file holds no document (empty, or only comments), as a file caught between a truncate and a write does: the pods it last defined are kept, as kubelet keeps them',
  ScanFailed:
    'reading the manifest path failed unexpectedly (a bug in podvol): the pods last read are kept, and /readyz says so until a scan succeeds',
  StaticPodAPIReference:
    'in cluster mode, a static pod may not use secrets, configMaps, service account tokens, claims or trust bundles (as the API server refuses mirror pods that do)',
  // A watch fails for the reasons any API request does (said once, in apiReasons), and two of its own.
  Unauthorized: apiReasons.Unauthorized,
  Forbidden: 'the API server refused the list or watch',
  Unreachable: apiReasons.Unreachable,
  Expired: 'the watch resourceVersion expired (podvol relists)',
  ServerError: apiReasons.ServerError,
  WatchError: 'the watch failed without an HTTP status',
} as const;

/**
 * Why the runtime API refused a request (the `reason` of its JSON error body;
 * src/agent/runtime/). SubPathFailed is also a volume reason, with the same meaning.
 */
export const runtimeReasons = {
  BadRequest: 'a malformed request: its target, its percent-encoding, or a `wait` or `for` parameter',
  NotFound: 'no such endpoint',
  MethodNotAllowed: 'the endpoint does not take this HTTP method',
  Forbidden: 'the caller is neither root nor in `--runtime-socket-group` (checked by peer credentials)',
  InternalError: 'the request failed unexpectedly (a bug in podvol; logged)',
  PodNotFound: 'the pod is not known to podvol, or is being torn down',
  ContainerNotFound: 'the pod has no container, init container or ephemeral container of that name',
  VolumesNotReady: 'a wait ended with volumes of the pod not yet mounted (or unmounted)',
  VolumesFailedPermanently: 'a volume of the pod failed with a permanent reason: waiting longer cannot help',
  VolumeNotReady: 'a container mounts a volume that has no path on the host yet',
  InvalidSubPath: "a volumeMount's subPath is absolute or contains '..'",
  InvalidSubPathExpr: "a volumeMount's subPathExpr cannot be expanded",
  InvalidMountPropagation: 'a mountPropagation mode that does not exist',
  BidirectionalNotPrivileged:
    'Bidirectional mount propagation asked for by a container that is not privileged',
  SubPathFailed: "a container's subPath could not be prepared (kubelet's message; details in the log)",
} as const;

/**
 * What `podvol drain` reports left over (`leftovers[].reason`): one of these, a
 * volume's own reason, or MountsRemain for a mount below the root directory.
 */
export const drainReasons = {
  TearDownPending:
    'a volume whose teardown did not finish before the timeout (and that reported no reason of its own)',
  PodDirectoryRemains: "a pod's directory that was not removed before the timeout",
} as const;

// The reasons as types, one per table: a reason that is not in its table is a compile error.
export type VolumeReason = keyof typeof volumeReasons;
export type ApiReason = keyof typeof apiReasons;
export type SourceReason = keyof typeof sourceReasons;
export type RuntimeReason = keyof typeof runtimeReasons;
export type DrainReason = keyof typeof drainReasons;
