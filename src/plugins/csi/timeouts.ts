// Defaults of the CSI plugin that the CLI shows in --help: in a module without
// imports, so `podvol run --help` does not load the plugin (and gRPC).

/**
 * kubelet's waitForAttachTimeout (pkg/kubelet/volumemanager/volume_manager.go):
 * how long a mount waits for an attachable volume's VolumeAttachment.
 */
export const WAIT_FOR_ATTACH_TIMEOUT_MS = 10 * 60_000;
