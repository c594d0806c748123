// A small Dockerfile reader for the tests: enough to see stages and
// instructions, not a builder.

export interface Instruction {
  keyword: string;
  args: string;
  flags: Record<string, string>;
}

export interface Stage {
  from: string;
  name?: string;
  instructions: Instruction[];
}

export interface Dockerfile {
  args: Record<string, string>;
  stages: Stage[];
}

function logicalLines(text: string): string[] {
  const lines: string[] = [];
  let current = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line.startsWith('#') || (line === '' && current === '')) continue;
    if (line.endsWith('\\')) {
      current += `${line.slice(0, -1).trim()} `;
      continue;
    }
    lines.push((current + line).trim());
    current = '';
  }
  if (current.trim()) lines.push(current.trim());
  return lines.filter((l) => l !== '');
}

export function parseDockerfile(text: string): Dockerfile {
  const result: Dockerfile = { args: {}, stages: [] };
  for (const line of logicalLines(text)) {
    const [, keyword = '', rest = ''] = /^(\S+)\s*(.*)$/.exec(line) ?? [];
    const flags: Record<string, string> = {};
    let args = rest;
    for (let m = /^--([\w-]+)(?:=(\S+))?\s+/.exec(args); m; m = /^--([\w-]+)(?:=(\S+))?\s+/.exec(args)) {
      const [flag, name = '', value = ''] = m;
      flags[name] = value;
      args = args.slice(flag.length);
    }
    const instruction = { keyword: keyword.toUpperCase(), args, flags };
    if (instruction.keyword === 'FROM') {
      const [image = '', as, name] = args.split(/\s+/);
      const resolved = image.replace(/\$\{?(\w+)\}?/g, (_, v: string) => result.args[v] ?? '');
      result.stages.push({
        from: resolved,
        name: as?.toUpperCase() === 'AS' ? name : undefined,
        instructions: [],
      });
    } else if (instruction.keyword === 'ARG' && result.stages.length === 0) {
      const [k = '', v = ''] = args.split('=');
      result.args[k] = v;
    } else {
      result.stages.at(-1)?.instructions.push(instruction);
    }
  }
  return result;
}

export function instructions(stage: Stage, keyword: string): Instruction[] {
  return stage.instructions.filter((i) => i.keyword === keyword);
}
