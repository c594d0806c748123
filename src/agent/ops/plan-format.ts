// The human rendering of a plan: one shell-like line per host operation,
// grouped by pod, then volume, set-up before tear-down.
import type { Plan, PlanStep } from './plan.ts';

export function stepLine(s: PlanStep): string {
  switch (s.action) {
    case 'mkdir':
      return `mkdir -m ${s.detail} ${s.path}`;
    case 'chmod':
      return `chmod ${s.detail} ${s.path}`;
    case 'mount':
      return `mount ${s.detail} ${s.path}`;
    case 'umount':
      return `umount ${s.path}`;
    case 'rm':
      return `rm -r ${s.path}`;
    case 'chown':
      return `chown ${s.path} (${s.detail})`;
    case 'write':
      return `write ${s.path} (${s.detail})`;
    case 'symlink':
    case 'rename':
      return `${s.action} ${s.path} -> ${s.detail}`;
    case 'fetch':
      return `fetch ${s.detail}`;
    case 'driver':
      return `driver ${s.detail}`;
    case 'skip':
    case 'ignore':
      return `${s.action} volume ${s.volume}: ${s.detail}`;
  }
}

function section(steps: PlanStep[], indent: string): string[] {
  const lines: string[] = [];
  let volume: string | undefined;
  for (const s of steps) {
    if (s.action === 'skip' || s.action === 'ignore' || s.volume === '') {
      volume = undefined;
      lines.push(`${indent}${stepLine(s)}`);
      continue;
    }
    if (s.volume !== volume) lines.push(`${indent}volume ${s.volume}:`);
    volume = s.volume;
    lines.push(`${indent}  ${stepLine(s)}`);
  }
  return lines;
}

export function formatPlan(plan: Plan): string {
  const lines = [
    `podvol plan for node ${plan.nodeName}, root directory ${plan.rootDir}`,
    'A dry run: nothing was changed. At run time, steps already done are skipped (set-up is idempotent).',
    ...plan.steps.filter((s) => s.pod === '').map(stepLine),
  ];
  for (const { pod, uid } of plan.pods) {
    const setup = plan.steps.filter((s) => s.pod === pod && s.phase === 'setup');
    const teardown = plan.steps.filter((s) => s.pod === pod && s.phase === 'teardown');
    lines.push('', `pod ${pod} (uid ${uid})`, '  set up:');
    lines.push(...(setup.length > 0 ? section(setup, '    ') : ['    (no volumes)']));
    if (teardown.length > 0) {
      lines.push('  tear down, when the pod goes away (the pod directory once no mount is left below it):');
      lines.push(...section(teardown, '    '));
    }
  }
  return `${lines.join('\n')}\n`;
}
