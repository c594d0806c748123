// Options shared by several commands (run, plan, drain), so all read the same
// flags, environment variables and defaults.
import { hostname } from 'node:os';
import { InvalidArgumentError, Option } from 'commander';

export const nonEmpty = (what: string) => (v: string) => {
  if (v.trim() === '') throw new InvalidArgumentError(`${what} must not be empty`);
  return v;
};

export const rootDirOption = () =>
  new Option('--root-dir <dir>', 'root directory (kubelet layout below it)')
    .env('PODVOL_ROOT_DIR')
    .default('/var/lib/podvol')
    .argParser(nonEmpty('--root-dir'));

export const nodeNameOption = () =>
  new Option('--node-name <name>', "this node's name")
    .env('PODVOL_NODE_NAME')
    .default(hostname().toLowerCase())
    .argParser(nonEmpty('--node-name'));
