// Public surface of the mount layer.

export {
  CORRUPTED_MOUNT_CODES,
  isCorruptedMountError,
  isNotExistError,
  MountError,
  MountInfoError,
  MountOptionError,
  type OptionProblem,
} from './errors.ts';
export {
  type CommandRunner,
  createExecaRunner,
  type RunRequest,
  type RunResult,
  recordingRunner,
} from './exec.ts';
export { type FakeCall, FakeMounter, type FakeMounterOptions } from './fake.ts';
export {
  createLinuxMounter,
  LinuxMounter,
  type LinuxMounterOptions,
  type MounterFs,
  maskSensitive,
} from './linux.ts';
export { type MountLogger, silentLogger } from './logger.ts';
export {
  consistentRead,
  isMountPointIn,
  mountContaining,
  parseMountInfo,
  readMountInfo,
  searchMountRefs,
  unescapeOctal,
} from './mountinfo.ts';
export {
  allowedOptions,
  type CheckOptions,
  checkMountOptions,
  MASKED,
  type OptionTable,
  type OptionTrust,
  type ValueRule,
  validateMountOptions,
  validateUserMountOptions,
} from './options.ts';
export {
  HUGETLBFS_MAGIC,
  kernelSupportsTmpfsNoswap,
  type PathState,
  pathExists,
  statfsType,
  TMPFS_MAGIC,
  tmpfsNoswapSupported,
} from './probe.ts';
export { detectSystemd } from './systemd.ts';
export type { MountCallOptions, Mounter, MountInfo, UnmountOutcome } from './types.ts';
