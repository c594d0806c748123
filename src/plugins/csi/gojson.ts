// The bytes Go's encoding/json writes for a map[string]string: keys sorted
// by their UTF-8 bytes, HTML-safe escaping (<, >, & as \u003c...), U+2028 and
// U+2029 escaped, \b and \f short escapes (Go >= 1.22). kubelet writes
// vol_data.json with json.NewEncoder(file).Encode(map), which adds "\n", and
// the node annotation csi.volume.kubernetes.io/nodeid with json.Marshal.

/** A Go JSON string literal, HTML-safe escaped. */
export function goString(s: string): string {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0) ?? 0; // a string's iterator yields whole code points, never empty
    switch (ch) {
      case '"':
        out += '\\"';
        continue;
      case '\\':
        out += '\\\\';
        continue;
      case '\b':
        out += '\\b';
        continue;
      case '\f':
        out += '\\f';
        continue;
      case '\n':
        out += '\\n';
        continue;
      case '\r':
        out += '\\r';
        continue;
      case '\t':
        out += '\\t';
        continue;
    }
    if (c < 0x20 || ch === '<' || ch === '>' || ch === '&' || c === 0x2028 || c === 0x2029) {
      out += `\\u${c.toString(16).padStart(4, '0')}`;
    } else if (c >= 0xd800 && c <= 0xdfff) {
      out += '\\ufffd'; // a lone surrogate is invalid UTF-8: Go writes the replacement character
    } else {
      out += ch;
    }
  }
  return `${out}"`;
}

/** json.Marshal(map[string]string). */
export function goMarshalMap(m: Record<string, string>): string {
  const entries = Object.entries(m).sort(([a], [b]) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  return `{${entries.map(([k, v]) => `${goString(k)}:${goString(v)}`).join(',')}}`;
}

/** json.NewEncoder(w).Encode(map[string]string): Marshal plus a newline. */
export function goEncodeMap(m: Record<string, string>): string {
  return `${goMarshalMap(m)}\n`;
}
