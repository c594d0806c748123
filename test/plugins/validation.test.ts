import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { MAX_VOLUMES_PER_POD, usedVolumeNames, validatePodVolumes } from '../../src/plugins/validation.ts';
import { must } from '../helpers/must.ts';
import { validationPod } from './harness.ts';

function pod(volumes: unknown[], mounts: { name: string; subPath?: string }[] = []): V1Pod {
  return validationPod(
    {
      name: 'c',
      image: 'i',
      resources: { limits: { cpu: '1' } },
      volumeMounts: mounts.map((m) => ({ mountPath: `/m/${m.name}`, ...m })),
    },
    volumes,
  );
}

/** The single problem expected for volume `key`, with every other volume fine. */
function only(p: V1Pod, key: string) {
  const problems = validatePodVolumes(p);
  assert.deepEqual([...problems.keys()], [key], JSON.stringify([...problems]));
  return must(problems.get(key), `problems of ${key}`);
}

describe('validatePodVolumes', () => {
  test(`a pod with more than ${MAX_VOLUMES_PER_POD} volumes: every volume fails with TooManyVolumes`, () => {
    const vols = (n: number) => Array.from({ length: n }, (_, i) => ({ name: `v${i}`, emptyDir: {} }));
    assert.equal(validatePodVolumes(pod(vols(MAX_VOLUMES_PER_POD))).size, 0);
    const problems = validatePodVolumes(pod([...vols(MAX_VOLUMES_PER_POD), { name: '' }]));
    assert.equal(problems.size, MAX_VOLUMES_PER_POD + 1);
    assert.ok(problems.has(`spec.volumes[${MAX_VOLUMES_PER_POD}]`));
    for (const p of problems.values()) {
      assert.equal(p.reason, 'TooManyVolumes');
      assert.equal(p.nodeOnly, undefined);
    }
  });

  test('valid volumes of every common kind produce no problems', () => {
    const p = pod([
      { name: 'scratch', emptyDir: {} },
      { name: 'mem', emptyDir: { medium: 'Memory', sizeLimit: '64Mi' } },
      { name: 'host', hostPath: { path: '/srv/data', type: 'DirectoryOrCreate' } },
      {
        name: 'sec',
        secret: { secretName: 's', defaultMode: 0o400, items: [{ key: 'k', path: 'a/b.txt', mode: 0o600 }] },
      },
      { name: 'cm', configMap: { name: 'c' } },
      {
        name: 'info',
        downwardAPI: {
          items: [
            { path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } },
            { path: 'app', fieldRef: { fieldPath: "metadata.labels['app']" } },
            { path: 'cpu', resourceFieldRef: { containerName: 'c', resource: 'limits.cpu', divisor: '1m' } },
            {
              path: 'mem',
              resourceFieldRef: { containerName: 'c', resource: 'requests.memory', divisor: '1Mi' },
            },
          ],
        },
      },
      {
        name: 'proj',
        projected: {
          sources: [
            { serviceAccountToken: { path: 'token', expirationSeconds: 3600 } },
            { configMap: { name: 'ca', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
          ],
        },
      },
    ]);
    assert.deepEqual([...validatePodVolumes(p)], []);
  });

  test('InvalidVolumeName: not a DNS-1123 label, or longer than 63', () => {
    const bad = only(pod([{ name: 'Bad_Name', emptyDir: {} }]), 'Bad_Name');
    assert.equal(bad.reason, 'InvalidVolumeName');
    assert.match(
      bad.message,
      /^spec.volumes\[0\].name: Invalid value: "Bad_Name": a lowercase RFC 1123 label/,
    );
    const long = 'a'.repeat(64);
    assert.match(only(pod([{ name: long, emptyDir: {} }]), long).message, /no more than 63 characters/);
    const traversal = only(pod([{ name: '../../etc', emptyDir: {} }]), '../../etc');
    assert.equal(traversal.reason, 'InvalidVolumeName');
    const missing = only(pod([{ emptyDir: {} }]), 'spec.volumes[0]');
    assert.deepEqual(missing, {
      reason: 'InvalidVolumeName',
      message: 'spec.volumes[0].name: Required value',
    });
  });

  test('DuplicateVolumeName', () => {
    const dup = only(
      pod([
        { name: 'd', emptyDir: {} },
        { name: 'd', hostPath: { path: '/x' } },
      ]),
      'd',
    );
    assert.deepEqual(dup, {
      reason: 'DuplicateVolumeName',
      message: 'spec.volumes[1].name: Duplicate value: "d"',
    });
  });

  test('UnknownVolumeSource: none, several or an unknown field, named in the message', () => {
    const none = only(pod([{ name: 'v' }]), 'v');
    assert.deepEqual(none, {
      reason: 'UnknownVolumeSource',
      message: 'spec.volumes[0]: Required value: must specify a volume type',
    });
    const two = only(pod([{ name: 'v', emptyDir: {}, hostPath: { path: '/x' } }]), 'v');
    assert.equal(two.reason, 'UnknownVolumeSource');
    assert.match(two.message, /may not specify more than 1 volume type \(found "emptyDir", "hostPath"\)/);
    const unknown = only(pod([{ name: 'v', nfsv5: { server: 's' } }]), 'v');
    assert.equal(unknown.reason, 'UnknownVolumeSource');
    assert.match(unknown.message, /unknown volume source field\(s\) "nfsv5"/);
    const git = only(pod([{ name: 'v', gitRepo: { repository: 'https://example.invalid/r.git' } }]), 'v');
    assert.equal(git.reason, 'UnknownVolumeSource');
    assert.match(git.message, /gitRepo volume type is disabled/);
    const projection = only(pod([{ name: 'v', projected: { sources: [{ vault: {} }] } }]), 'v');
    assert.equal(projection.reason, 'UnknownVolumeSource');
  });

  test('VolumeNotFound: a volumeMount or volumeDevice naming a missing volume, keyed by that name', () => {
    const p = pod([{ name: 'data', emptyDir: {} }], [{ name: 'data' }, { name: 'ghost' }]);
    assert.deepEqual(only(p, 'ghost'), {
      reason: 'VolumeNotFound',
      message: 'spec.containers[0].volumeMounts[1].name: Not found: "ghost"',
    });
    const withDevice = pod([]);
    (withDevice.spec as { initContainers?: unknown[] }).initContainers = [
      { name: 'i', image: 'i', volumeDevices: [{ name: 'blk', devicePath: '/dev/x' }] },
    ];
    assert.match(
      only(withDevice, 'blk').message,
      /^spec.initContainers\[0\].volumeDevices\[0\].name: Not found/,
    );
  });

  test('InvalidPath: items paths that are absolute, climb, start with ".." or are empty', () => {
    const cases: [unknown, RegExp][] = [
      ['/etc/passwd', /must be a relative path/],
      ['a/../../x', /must not contain '\.\.'/],
      ['..data', /must not start with '\.\.'/],
      ['', /path: Required value/],
    ];
    // The API server admits long names; the atomic writer refuses them when it writes, as in kubelet.
    for (const path of ['x'.repeat(256), `${'abcd/'.repeat(820)}x`]) {
      const p = pod([{ name: 's', secret: { secretName: 's', items: [{ key: 'k', path }] } }]);
      assert.deepEqual([...validatePodVolumes(p)], []);
    }
    for (const [path, expected] of cases) {
      const p = pod([{ name: 's', secret: { secretName: 's', items: [{ key: 'k', path }] } }]);
      const problem = only(p, 's');
      assert.equal(problem.reason, 'InvalidPath', String(path));
      assert.match(problem.message, expected);
    }
    const downward = only(
      pod([
        { name: 'd', downwardAPI: { items: [{ path: '/abs', fieldRef: { fieldPath: 'metadata.name' } }] } },
      ]),
      'd',
    );
    assert.equal(downward.reason, 'InvalidPath');
    const token = only(
      pod([{ name: 't', projected: { sources: [{ serviceAccountToken: { path: '../token' } }] } }]),
      't',
    );
    assert.equal(token.reason, 'InvalidPath');
  });

  test('InvalidPath: projected sources may not write the same path twice', () => {
    const p = pod([
      {
        name: 'p',
        projected: {
          sources: [
            { configMap: { name: 'a', items: [{ key: 'k', path: 'x' }] } },
            { secret: { name: 'b', items: [{ key: 'k', path: 'x' }] } },
          ],
        },
      },
    ]);
    assert.match(only(p, 'p').message, /conflicting duplicate paths/);
  });

  test('InvalidPath: hostPath with ".."; subPath escaping the volume', () => {
    const climb = only(pod([{ name: 'h', hostPath: { path: '/srv/../etc' } }]), 'h');
    assert.deepEqual(climb, {
      reason: 'InvalidPath',
      message: `spec.volumes[0].hostPath.path: Invalid value: "/srv/../etc": must not contain '..'`,
    });
    // The API server admits a relative hostPath (it is taken from /).
    assert.deepEqual([...validatePodVolumes(pod([{ name: 'h', hostPath: { path: 'relative/dir' } }]))], []);
    const sub = only(pod([{ name: 'e', emptyDir: {} }], [{ name: 'e', subPath: '../../x' }]), 'e');
    assert.equal(sub.reason, 'InvalidPath');
    assert.match(sub.message, /^spec.containers\[0\].volumeMounts\[0\].subPath/);
  });

  test('InvalidSizeLimit: unparseable or negative', () => {
    const cases: [unknown, RegExp][] = [
      ['lots', /must match the regular expression/],
      ['64MB', /must match the regular expression/],
      ['-1Gi', /Forbidden: SizeLimit field must be a valid resource quantity/],
    ];
    // Absurdly large limits are admitted by the API server and change nothing on a node.
    for (const huge of ['100Ei', '1e30']) {
      assert.deepEqual(
        [...validatePodVolumes(pod([{ name: 'e', emptyDir: { sizeLimit: huge } }]))],
        [],
        huge,
      );
    }
    for (const [sizeLimit, expected] of cases) {
      const problem = only(pod([{ name: 'e', emptyDir: { sizeLimit } }]), 'e');
      assert.equal(problem.reason, 'InvalidSizeLimit', String(sizeLimit));
      assert.match(problem.message, expected);
    }
    for (const ok of ['0', '64Mi', '1.5Gi', '500M', '1e9', '7Ei']) {
      assert.deepEqual([...validatePodVolumes(pod([{ name: 'e', emptyDir: { sizeLimit: ok } }]))], [], ok);
    }
  });

  test('sizeLimit is read by the exact parser the plugin sizes with, not a float regex', () => {
    // Go's scanner (and so the plugin) reads a bare sign as 0 and a trailing dot as a number;
    // the float regex validation used to have refused "+" and "-".
    for (const ok of ['+', '-', '1.', '.5Gi', '9223372036854775807', '9223372036854775808', '8Ei']) {
      assert.deepEqual([...validatePodVolumes(pod([{ name: 'e', emptyDir: { sizeLimit: ok } }]))], [], ok);
    }
    // A suffix Go does not know is refused by both.
    for (const bad of ['1Kb', '1e', '1.5.5']) {
      assert.equal(
        only(pod([{ name: 'e', emptyDir: { sizeLimit: bad } }]), 'e').reason,
        'InvalidSizeLimit',
        bad,
      );
    }
  });

  test('InvalidMode: outside 0..0777', () => {
    const p = only(pod([{ name: 's', secret: { secretName: 's', defaultMode: 0o1000 } }]), 's');
    assert.deepEqual(p, {
      reason: 'InvalidMode',
      message:
        'spec.volumes[0].secret.defaultMode: Invalid value: 512: must be a number between 0 and 0777 (octal), both inclusive',
    });
    assert.equal(
      only(pod([{ name: 'c', configMap: { name: 'c', items: [{ key: 'k', path: 'k', mode: -1 }] } }]), 'c')
        .reason,
      'InvalidMode',
    );
    assert.equal(
      only(pod([{ name: 'p', projected: { defaultMode: 1.5, sources: [] } }]), 'p').reason,
      'InvalidMode',
    );
  });

  test('InvalidHostPathType', () => {
    const p = only(pod([{ name: 'h', hostPath: { path: '/srv', type: 'Folder' } }]), 'h');
    assert.equal(p.reason, 'InvalidHostPathType');
    assert.match(
      p.message,
      /^spec.volumes\[0\].hostPath.type: Unsupported value: "Folder": supported values: "", "BlockDevice"/,
    );
  });

  test('InvalidField: other malformed source fields', () => {
    const cases: unknown[] = [
      { name: 'v', secret: {} },
      { name: 'v', configMap: { items: [] } },
      { name: 'v', downwardAPI: { items: [{ path: 'x', fieldRef: { fieldPath: 'status.podIP' } }] } },
      { name: 'v', downwardAPI: { items: [{ path: 'x' }] } },
      { name: 'v', downwardAPI: { items: [{ path: 'x', resourceFieldRef: { resource: 'limits.cpu' } }] } },
      {
        name: 'v',
        downwardAPI: {
          items: [
            { path: 'x', resourceFieldRef: { containerName: 'c', resource: 'limits.cpu', divisor: '1Mi' } },
          ],
        },
      },
      { name: 'v', projected: { sources: [{ serviceAccountToken: { path: 't', expirationSeconds: 60 } }] } },
      { name: 'v', hostPath: 'not-an-object' },
    ];
    for (const v of cases) assert.equal(only(pod([v]), 'v').reason, 'InvalidField', JSON.stringify(v));
    assert.match(
      only(pod([cases[2]]), 'v').message,
      /Unsupported value: "status.podIP": unsupported fieldPath/,
    );
  });

  test('one bad volume does not affect the others', () => {
    const problems = validatePodVolumes(
      pod([
        { name: 'good', emptyDir: {} },
        { name: 'bad', hostPath: { path: '/x', type: 'Nope' } },
        { name: 'fine', configMap: { name: 'c' } },
      ]),
    );
    assert.deepEqual([...problems.keys()], ['bad']);
  });

  test('several problems of one volume: the first reason, every message', () => {
    const p = only(pod([{ name: 'h', hostPath: { path: 'rel/../x', type: 'Nope' } }]), 'h');
    assert.equal(p.reason, 'InvalidPath');
    assert.match(p.message, /'\.\.'.*; .*Unsupported value: "Nope"/);
  });

  test('never throws on malformed pods', () => {
    for (const weird of [
      {},
      { spec: { volumes: 'x' } },
      { spec: { volumes: [null, 1], containers: [null, { volumeMounts: [1] }] } },
    ]) {
      assert.doesNotThrow(() => validatePodVolumes(weird as V1Pod));
    }
  });
});

describe('usedVolumeNames', () => {
  test('collects volumeMounts and volumeDevices of containers, init and ephemeral containers', () => {
    const p = {
      spec: {
        containers: [
          {
            name: 'a',
            image: 'i',
            volumeMounts: [{ name: 'm1', mountPath: '/a' }],
            volumeDevices: [{ name: 'd1', devicePath: '/dev/a' }],
          },
        ],
        initContainers: [
          {
            name: 'b',
            image: 'i',
            volumeMounts: [
              { name: 'm2', mountPath: '/b' },
              { name: 'm1', mountPath: '/c' },
            ],
          },
        ],
        ephemeralContainers: [{ name: 'e', image: 'i', volumeMounts: [{ name: 'm3', mountPath: '/e' }] }],
        volumes: [{ name: 'unused', emptyDir: {} }],
      },
    } as V1Pod;
    assert.deepEqual([...usedVolumeNames(p)].sort(), ['d1', 'm1', 'm2', 'm3']);
  });
});
