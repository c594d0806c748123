// kubelet's SetVolumeOwnership (pkg/volume/volume_linux.go): give the pod's
// fsGroup group ownership of everything in the volume, make it group-rw (ro:
// group-r), and set setgid on directories so new files inherit the group.
import { chmod, lchown, lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';

const rwMask = 0o660;
const roMask = 0o440;
const execMask = 0o110;
const setgid = 0o2000;

async function fixOne(path: string, fsGroup: number, readOnly: boolean): Promise<void> {
  const st = await lstat(path);
  await lchown(path, -1, fsGroup).catch(() => {});
  if (st.isSymbolicLink()) return;
  let mode = (st.mode & 0o7777) | (readOnly ? roMask : rwMask);
  if (st.isDirectory()) mode |= setgid | execMask;
  await chmod(path, mode).catch(() => {});
}

/** Post-order walk like filepath.Walk; never follows symlinks. */
export async function setVolumeOwnership(dir: string, fsGroup: number, readOnly: boolean): Promise<void> {
  const walk = async (path: string): Promise<void> => {
    const st = await lstat(path);
    if (st.isDirectory()) {
      for (const name of await readdir(path)) await walk(join(path, name));
    }
    await fixOne(path, fsGroup, readOnly);
  };
  await walk(dir);
}
