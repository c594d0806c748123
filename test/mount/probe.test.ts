import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CORRUPTED_MOUNT_CODES, isCorruptedMountError } from '../../src/mount/errors.ts';
import {
  kernelSupportsTmpfsNoswap,
  pathExists,
  statfsType,
  tmpfsNoswapSupported,
} from '../../src/mount/probe.ts';

const errno = (code: string) => Object.assign(new Error(code), { code });

describe('pathExists (mount-utils semantics)', () => {
  test('exists, missing, corrupted, stale, other', async () => {
    const access = async () => Promise.reject(errno('ENOENT'));
    assert.deepEqual(await pathExists('/x', { stat: async () => ({}), access }), {
      exists: true,
      corrupted: false,
    });
    assert.deepEqual(await pathExists('/x', { stat: async () => Promise.reject(errno('ENOENT')), access }), {
      exists: false,
      corrupted: false,
    });
    const broken = await pathExists('/x', { stat: async () => Promise.reject(errno('ESTALE')), access });
    assert.equal(broken.exists && broken.corrupted && broken.error?.code, 'ESTALE');
    // stat says ENOENT but access(F_OK) works: a stale handle.
    const stale = await pathExists('/x', {
      stat: async () => Promise.reject(errno('ENOENT')),
      access: async () => {},
    });
    assert.equal(stale.exists && stale.corrupted && stale.error?.code, 'ESTALE');
    await assert.rejects(pathExists('/x', { stat: async () => Promise.reject(errno('ELOOP')), access }), {
      code: 'ELOOP',
    });
  });

  test('the corrupted errno set is the one from mount-utils', () => {
    for (const code of ['ENOTCONN', 'ESTALE', 'EIO', 'EACCES', 'EHOSTDOWN', 'EWOULDBLOCK', 'ENODEV']) {
      assert.ok(CORRUPTED_MOUNT_CODES.has(code), code);
      assert.ok(isCorruptedMountError(errno(code)));
    }
    assert.equal(isCorruptedMountError(errno('ENOENT')), false);
    assert.equal(isCorruptedMountError('ENOTCONN'), false);
  });
});

describe('host probes', () => {
  test('tmpfs noswap needs Linux 6.4', async () => {
    assert.equal(kernelSupportsTmpfsNoswap('6.3.13-generic'), false);
    assert.equal(kernelSupportsTmpfsNoswap('6.4.0'), true);
    assert.equal(kernelSupportsTmpfsNoswap('7.0.1'), true);
    assert.equal(kernelSupportsTmpfsNoswap('5.15.0-91-generic'), false);
    assert.equal(kernelSupportsTmpfsNoswap('garbage'), false);
    assert.equal(await tmpfsNoswapSupported({ kernelRelease: '5.10.0' }), false);
  });

  test('statfsType returns f_type', async () => {
    // /proc is procfs everywhere (PROC_SUPER_MAGIC).
    assert.equal(await statfsType('/proc'), 0x9fa0);
  });
});
