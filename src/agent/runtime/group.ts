// --runtime-socket-group takes a group name or a GID; names are looked up in
// /etc/group (no NSS: a node agent should not depend on a directory service
// to decide who may talk to it).
import { readFileSync } from 'node:fs';
import { errorMessage } from '../../errno.ts';

export function resolveGroup(value: string, groupFile = '/etc/group'): number {
  if (/^\d+$/.test(value)) {
    const gid = Number(value);
    if (gid > 0xfffffffe) throw new Error(`group id ${value} is out of range`);
    return gid;
  }
  let text = '';
  try {
    text = readFileSync(groupFile, 'utf8');
  } catch (err) {
    throw new Error(`cannot read ${groupFile} to look up group "${value}": ${errorMessage(err)}`);
  }
  for (const line of text.split('\n')) {
    const [name, , gid] = line.split(':');
    if (name === value && /^\d+$/.test(gid ?? '')) return Number(gid);
  }
  throw new Error(`no group "${value}" in ${groupFile}`);
}
