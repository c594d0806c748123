// kubectl's table layout (text/tabwriter as kubectl's printers.GetNewTabWriter
// sets it up: padding 3, minimum cell width 6): every column as wide as its
// widest cell plus three spaces, the last column unpadded so lines carry no
// trailing blanks.

/** Shown for an empty cell, as kubectl does. */
export const NONE = '<none>';

import { escapeControl } from './escape.ts';

// Go's tabwriter counts runes, not UTF-16 units.
const width = (s: string) => [...s].length;

/** Renders rows under upper-cased headers; empty cells become `<none>`. */
export function formatTable(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const cells = [
    headers.map((h) => h.toUpperCase()),
    ...rows.map((r) => headers.map((_, i) => escapeControl(r[i] || NONE))),
  ];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => width(r[i] ?? ''))));
  return cells
    .map((r) =>
      r
        .map((c, i) =>
          i === r.length - 1 ? c : c + ' '.repeat(Math.max((widths[i] ?? 0) + 3, 6) - width(c)),
        )
        .join(''),
    )
    .map((line) => `${line}\n`)
    .join('');
}
