import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { at, must } from '../helpers/must.ts';

type Unit = Map<string, Map<string, string[]>>;

function parseUnit(text: string): Unit {
  const unit: Unit = new Map();
  let section: Map<string, string[]> | undefined;
  let pending = '';
  for (const raw of text.split('\n')) {
    const line = pending + raw.trim();
    pending = '';
    if (line.endsWith('\\')) {
      pending = `${line.slice(0, -1).trim()} `;
      continue;
    }
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      section = new Map();
      unit.set(at(header, 1), section);
      continue;
    }
    const eq = line.indexOf('=');
    assert.ok(section && eq > 0, `unparseable unit line: ${line}`);
    const key = line.slice(0, eq).trim();
    section.set(key, [...(section.get(key) ?? []), line.slice(eq + 1).trim()]);
  }
  return unit;
}

const unit = parseUnit(readFileSync(new URL('../../deploy/systemd/podvol.service', import.meta.url), 'utf8'));
const get = (section: string, key: string) => unit.get(section)?.get(key);
const envFile = readFileSync(new URL('../../deploy/systemd/podvol.env', import.meta.url), 'utf8');
const envVars = new Map(
  envFile
    .split('\n')
    .filter((l) => /^\w+=/.test(l))
    .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)] as const),
);

// Each of these gives the service a mount namespace of its own (or makes
// parts of the host read-only to it), hiding podvol's mounts from the host.
const namespacing = [
  'MountFlags',
  'PrivateMounts',
  'PrivateTmp',
  'PrivateDevices',
  'PrivateUsers',
  'PrivateNetwork',
  'ProtectSystem',
  'ProtectHome',
  'ProtectKernelTunables',
  'ProtectKernelModules',
  'ProtectKernelLogs',
  'ProtectControlGroups',
  'ProtectClock',
  'ProtectHostname',
  'ProtectProc',
  'ProcSubset',
  'ReadOnlyPaths',
  'ReadWritePaths',
  'InaccessiblePaths',
  'ExecPaths',
  'NoExecPaths',
  'TemporaryFileSystem',
  'BindPaths',
  'BindReadOnlyPaths',
  'RootDirectory',
  'RootImage',
  'MountImages',
  'ExtensionImages',
  'ExtensionDirectories',
  'DynamicUser',
];

describe('deploy/systemd/podvol.service', () => {
  test('always restarts, without a start limit, once the network is online', () => {
    assert.deepEqual(get('Service', 'Restart'), ['always']);
    assert.deepEqual(get('Unit', 'StartLimitIntervalSec'), ['0']);
    assert.ok(get('Unit', 'After')?.join(' ').split(/\s+/).includes('network-online.target'));
    assert.ok(get('Unit', 'Wants')?.join(' ').split(/\s+/).includes('network-online.target'));
  });

  test('shares the host mount namespace: no setting that would give it its own', () => {
    const service = must(unit.get('Service'), '[Service]');
    for (const key of namespacing)
      assert.equal(service.has(key), false, `${key}= would hide podvol's mounts`);
  });

  test('stopping signals podvol alone, so mount helpers and transient mount scopes survive', () => {
    assert.deepEqual(get('Service', 'KillMode'), ['process']);
    const timeout = Number(get('Service', 'TimeoutStopSec')?.[0]);
    assert.ok(timeout >= 60, 'in-flight operations get time to finish');
  });

  test('memory is bounded: MemoryHigh below MemoryMax, both above the measured 195 MiB peak', () => {
    const mib = (key: string) => Number(/^(\d+)M$/.exec(get('Service', key)?.[0] ?? '')?.[1]);
    assert.ok(mib('MemoryMax') >= 256, 'MemoryMax');
    assert.ok(mib('MemoryHigh') > 195 && mib('MemoryHigh') < mib('MemoryMax'), 'MemoryHigh');
  });

  test('runs the single executable, `podvol run`, with settings from the environment file', () => {
    const exec = at(must(get('Service', 'ExecStart'), 'ExecStart'), 0);
    assert.deepEqual(exec.split(/\s+/), ['/usr/local/bin/podvol', 'run', '$PODVOL_ARGS']);
    assert.deepEqual(get('Service', 'EnvironmentFile'), ['-/etc/default/podvol']);
    assert.deepEqual(get('Service', 'Type'), ['exec'], 'Node cannot sd_notify, so not Type=notify');
  });

  test("the environment file sets podvol's own variables, listening on loopback", () => {
    for (const v of ['PODVOL_ROOT_DIR', 'PODVOL_LISTEN', 'PODVOL_LOG_LEVEL', 'PODVOL_ARGS']) {
      assert.ok(envVars.has(v), v);
    }
    assert.equal(envVars.get('PODVOL_LISTEN'), '127.0.0.1:10280');
    assert.equal(envVars.get('PODVOL_ROOT_DIR'), '/var/lib/podvol');
  });

  test("the node name follows podvol's own rule, not systemd's short host name", () => {
    assert.equal(get('Service', 'Environment'), undefined);
    assert.equal(envVars.has('PODVOL_NODE_NAME'), false, 'unset unless the operator sets it');
    assert.ok(!/%[lHm]/.test(must(get('Service', 'ExecStart'), 'ExecStart').join(' ')));
  });

  test('hardened without a mount namespace: capabilities, no new privileges, seccomp, address families', () => {
    const caps = get('Service', 'CapabilityBoundingSet')?.join(' ').split(/\s+/).sort();
    assert.deepEqual(caps, [
      'CAP_CHOWN',
      'CAP_DAC_OVERRIDE',
      'CAP_DAC_READ_SEARCH',
      'CAP_FOWNER',
      'CAP_FSETID',
      'CAP_NET_BIND_SERVICE',
      'CAP_SYS_ADMIN',
    ]);
    assert.deepEqual(get('Service', 'NoNewPrivileges'), ['yes']);
    assert.deepEqual(get('Service', 'LockPersonality'), ['yes']);
    assert.deepEqual(get('Service', 'SystemCallArchitectures'), ['native']);
    assert.deepEqual(get('Service', 'RestrictAddressFamilies'), ['AF_UNIX AF_INET AF_INET6 AF_NETLINK']);
    const filter = get('Service', 'SystemCallFilter')?.join(' ') ?? '';
    assert.ok(filter.startsWith('~'), 'a deny list: mount helpers need more than @system-service');
    for (const set of ['@module', '@reboot', '@swap', '@raw-io', '@debug', '@clock'])
      assert.ok(filter.includes(set), set);
    assert.ok(!filter.includes('@mount'), 'mounting is the job');
    for (const key of ['RestrictSUIDSGID', 'MemoryDenyWriteExecute', 'ProtectClock', 'DeviceAllow', 'UMask'])
      assert.equal(
        must(unit.get('Service'), '[Service]').has(key),
        false,
        `${key}= breaks podvol (see the unit's comment)`,
      );
  });

  test('points at documentation that exists, and that the install steps install', () => {
    const docs = get('Unit', 'Documentation')?.[0] ?? '';
    assert.equal(docs, 'file:///opt/podvol/operating.md');
    const operating = readFileSync(new URL('../../docs/operating.md', import.meta.url), 'utf8');
    assert.match(operating, /^sudo install -D -m 0644 docs\/operating\.md \/opt\/podvol\/operating\.md /m);
  });

  test('is enabled into multi-user.target', () => {
    assert.deepEqual(get('Install', 'WantedBy'), ['multi-user.target']);
  });
});
