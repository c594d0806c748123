// One podvol per root directory. Two agents on one root would both reconcile
// the same volumes and unmount each other's work, so `run` and `drain` hold
// this lock for as long as they act on the directory.
//
// The lock is a listening Unix socket in the abstract namespace, named after
// the directory's device and inode (so every path to it, symlinks and bind
// mounts included, is the same lock). The kernel releases it when the process
// dies however it dies, so there is no stale lock file to clean up, and the
// holder answers a connection with its PID so the loser can name it. Abstract
// sockets belong to a network namespace: two podvols in different network
// namespaces (a container without hostNetwork) do not see each other's lock.
import { stat } from 'node:fs/promises';
import { createConnection, createServer, type Server } from 'node:net';
import { errnoCode } from '../errno.ts';

export interface RootDirLock {
  release(): Promise<void>;
}

export class RootDirLockedError extends Error {
  readonly code = 'RootDirLocked';
  readonly rootDir: string;
  readonly holder: { pid?: number; command?: string };
  constructor(rootDir: string, holder: { pid?: number; command?: string }) {
    super(
      `root directory ${rootDir} is in use by another podvol (${
        holder.pid !== undefined ? `pid ${holder.pid}` : 'pid unknown'
      }${holder.command ? `, podvol ${holder.command}` : ''}); stop it first`,
    );
    this.rootDir = rootDir;
    this.holder = holder;
  }
}

async function lockName(rootDir: string): Promise<string> {
  const st = await stat(rootDir, { bigint: true });
  return `\0podvol-root-dir/${st.dev}:${st.ino}`;
}

function listen(server: Server, name: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(name, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

/** Asks the holder who it is; undefined when nobody answers (it has just exited). */
function askHolder(name: string): Promise<{ pid?: number; command?: string } | undefined> {
  return new Promise((resolve) => {
    let data = '';
    const sock = createConnection(name);
    sock.setTimeout(5000, () => sock.destroy());
    sock.setEncoding('utf8');
    sock.on('data', (d) => {
      data += d;
    });
    sock.on('error', () => resolve(undefined));
    sock.on('close', () => {
      try {
        resolve(JSON.parse(data));
      } catch {
        resolve(data === '' ? undefined : {});
      }
    });
  });
}

/**
 * Takes the lock on an existing root directory for `command` (run, drain);
 * throws RootDirLockedError naming the holder when another podvol has it.
 */
export async function lockRootDir(rootDir: string, command: string): Promise<RootDirLock> {
  const name = await lockName(rootDir);
  const identity = `${JSON.stringify({ pid: process.pid, command })}\n`;
  for (let attempt = 0; ; attempt++) {
    const server = createServer((sock) => {
      sock.on('error', () => {});
      sock.end(identity);
    });
    try {
      await listen(server, name);
      // The lock must not keep a process alive that has nothing else to do.
      server.unref();
      return {
        release: () => new Promise<void>((res) => server.close(() => res())),
      };
    } catch (err) {
      if (errnoCode(err) !== 'EADDRINUSE') throw err;
    }
    const holder = await askHolder(name);
    // Nobody answered: the holder exited between our bind and our connect. Try again.
    if (holder || attempt >= 2) throw new RootDirLockedError(rootDir, holder ?? {});
  }
}
