// The populator's FailedMount for a claim it cannot process is kubelet's
// Event; Events are logged only at debug, so it has its own warn line.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Logger } from '../../../src/logger.ts';
import { harness, pod } from './harness.ts';

test("a claim that cannot be processed: the populator's FailedMount Event and one warn line", async (t) => {
  const warnings: [Record<string, unknown>, string | undefined][] = [];
  const noop = () => {};
  const logger: Logger = {
    debug: noop,
    info: noop,
    error: noop,
    warn: (obj, msg) => warnings.push([obj, msg]),
    child: () => logger,
  };
  const h = await harness(t, [pod('u1', [{ name: 'data', persistentVolumeClaim: { claimName: 'gone' } }])], {
    logger,
    claims: { claim: () => ({ synced: true }), volume: () => ({ synced: true }) },
  });
  h.setReady(true);
  await h.settle();
  const failed = h.events.filter((e) => e[2] === 'FailedMount');
  assert.equal(failed.length, 1);
  const message = failed[0]?.[3];
  assert.match(
    message ?? '',
    /^Unable to attach or mount volumes: .*persistentvolumeclaims "gone" not found/,
  );
  assert.deepEqual(
    warnings.filter(([, msg]) => msg === message).map(([obj]) => obj),
    [{ pod: 'default/p-u1', podUID: 'u1', reason: 'FailedMount' }],
  );
});
