// `--config FILE`: a YAML (or JSON) mapping whose keys mirror the command's
// flags, as kubelet's --config does. A key is the flag's name without dashes,
// in either spelling (`syncFrequency` or `sync-frequency`); a value goes
// through the same parser as the flag, so `syncFrequency: 1m0s` and a bad
// value fail exactly as on the command line. Precedence, highest first:
// command-line flag, PODVOL_* environment variable, config file, default.
// A relative path in the file is relative to the file's directory, as kubelet
// resolves the paths of its KubeletConfiguration (resolveRelativePaths).
import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { type Command, Option } from 'commander';
import { parse } from 'yaml';
import { errorMessage } from '../errno.ts';
import { stringOption, suggestFlag } from './command.ts';

export const configOption = () =>
  new Option('--config <file>', 'YAML file whose keys mirror these flags (flags and env win)').env(
    'PODVOL_CONFIG',
  );

const camel = (key: string) => key.replace(/-([a-z0-9])/g, (_, c: string) => c.toUpperCase());

/** Sources a config value may override: nothing the operator typed or exported. */
const overridable: ReadonlySet<string | undefined> = new Set([undefined, 'default', 'implied']);

/**
 * Reads the file named by --config and fills in every option the operator did
 * not set. strict: an unknown key is an error (the daemon's own config);
 * otherwise keys for flags this command lacks are ignored (a drain reading the
 * daemon's config file).
 */
export function applyConfigFile(cmd: Command, strict: boolean): void {
  const file = stringOption(cmd, 'config');
  if (!file) return;
  const fail = (msg: string): never => cmd.error(`--config ${file}: ${msg}`, { code: 'podvol.config' });
  let doc: unknown;
  try {
    doc = parse(readFileSync(file, 'utf8'));
  } catch (err) {
    fail(errorMessage(err).split('\n')[0] ?? '');
  }
  if (doc === null || doc === undefined) return;
  if (typeof doc !== 'object' || Array.isArray(doc)) {
    fail('must be a mapping of flag names to values');
    return;
  }
  const byName = new Map(
    cmd.options.filter((o) => o.attributeName() !== 'config').map((o) => [o.attributeName(), o]),
  );
  for (const [key, value] of Object.entries(doc)) {
    const opt = byName.get(camel(key));
    if (!opt) {
      if (strict) fail(`unknown key "${key}" (${didYouMean(key, [...byName.values()], cmd.name())})`);
      continue;
    }
    const name = opt.attributeName();
    if (!overridable.has(cmd.getOptionValueSource(name))) continue;
    cmd.setOptionValueWithSource(name, convert(opt, key, value, dirname(resolve(file)), fail), 'config');
  }
}

const dashed = (key: string) => key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);

/** The key meant, in the spelling the file uses (camelCase or dashed), as commander suggests a flag. */
function didYouMean(key: string, options: readonly Option[], command: string): string {
  const flag = suggestFlag(
    dashed(key),
    options.flatMap((o) => (o.long ? [o.long] : [])),
  );
  if (!flag) return `keys are the flags of podvol ${command}`;
  const name = flag.slice(2);
  return `Did you mean ${key.includes('-') ? name : camel(name)}?`;
}

/** The flags that name a file or directory: their placeholder says so (`--root-dir <dir>`). */
const takesPath = (opt: Option) => /<(file|dir|path)>/.test(opt.flags);

function convert(
  opt: Option,
  key: string,
  value: unknown,
  fileDir: string,
  fail: (msg: string) => never,
): unknown {
  const takesValue = opt.required || opt.optional;
  if (!takesValue) {
    if (typeof value !== 'boolean') return fail(`"${key}" must be true or false`);
    return opt.negate ? !value : value;
  }
  if (value === null || typeof value === 'object') return fail(`"${key}" must be a single value`);
  let text = String(value);
  // An empty value keeps its meaning (an empty --runtime-socket disables the socket).
  if (takesPath(opt) && text !== '' && !isAbsolute(text)) text = resolve(fileDir, text);
  if (!opt.parseArg) return text;
  try {
    return opt.parseArg(text, undefined);
  } catch (err) {
    return fail(`"${key}": ${errorMessage(err)}`);
  }
}
