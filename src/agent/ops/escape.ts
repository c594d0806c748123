// What the CLI prints comes partly from pods (paths, names, messages): a
// terminal escape sequence in a hostPath must reach the operator's screen as
// text, not as a command to the terminal. Every C0 control but newline, DEL and
// every C1 control (U+0080-U+009F: 0x9B is a one-character CSI) is escaped.
// The one home for that rule: every subcommand (status, plan, wait, mounts,
// drain, usage errors) passes what it prints through these two functions.

const CONTROL_TEXT = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/g;
const CONTROL_JSON = /[\u007f-\u009f]/g;

const hex = (c: string) => c.charCodeAt(0).toString(16).padStart(2, '0');

/** Text for a terminal: `\x1b` for ESC, `\x9b` for CSI, and so on; newlines are kept. */
export function escapeControl(text: string): string {
  return text.replace(CONTROL_TEXT, (c) => `\\x${hex(c)}`);
}

/** JSON text for a terminal: DEL and C1 as \u00XX, which JSON.parse reads back unchanged. */
export function escapeControlJSON(json: string): string {
  return json.replace(CONTROL_JSON, (c) => `\\u00${hex(c)}`);
}
