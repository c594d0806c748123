// Name rules kubelet relies on: apimachinery's DNS-1123 label and
// qualified-name (label key) validation with its exact messages
// (k8s.io/apimachinery pkg/util/validation, pkg/api/validate/content).

const DNS1123_LABEL_FMT = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';
const DNS1123_LABEL_ERR =
  "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_LABEL_MAX = 63;
const DNS1123_SUBDOMAIN_FMT = `${DNS1123_LABEL_FMT}(\\.${DNS1123_LABEL_FMT})*`;
const DNS1123_SUBDOMAIN_ERR =
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_MAX = 253;
const QUALIFIED_NAME_FMT = '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]';
const QUALIFIED_NAME_ERR =
  "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_MAX = 63;

const dns1123LabelRe = new RegExp(`^${DNS1123_LABEL_FMT}$`);
const dns1123SubdomainRe = new RegExp(`^${DNS1123_SUBDOMAIN_FMT}$`);
const qualifiedNameRe = new RegExp(`^${QUALIFIED_NAME_FMT}$`);

// Go's len() counts bytes, not UTF-16 units.
function byteLength(s: string): number {
  return Buffer.byteLength(s, 'utf8');
}

function maxLenError(n: number): string {
  return `must be no more than ${n} characters`;
}

// apimachinery's RegexError, including its odd "'a',  or 'b', " punctuation.
function regexError(msg: string, fmt: string, ...examples: string[]): string {
  if (examples.length === 0) return `${msg} (regex used for validation is '${fmt}')`;
  let out = `${msg} (e.g. `;
  examples.forEach((ex, i) => {
    if (i > 0) out += ' or ';
    out += `'${ex}', `;
  });
  return `${out}regex used for validation is '${fmt}')`;
}

/** apimachinery IsDNS1123Label: the list of problems, empty when valid (pod volume names). */
export function validateDNS1123Label(value: string): string[] {
  const errs: string[] = [];
  if (byteLength(value) > DNS1123_LABEL_MAX) errs.push(maxLenError(DNS1123_LABEL_MAX));
  if (!dns1123LabelRe.test(value)) {
    // A valid subdomain that is not a label can only differ by its dots.
    if (dns1123SubdomainRe.test(value)) errs.push('must not contain dots');
    else errs.push(regexError(DNS1123_LABEL_ERR, DNS1123_LABEL_FMT, 'my-name', '123-abc'));
  }
  return errs;
}

export function isDNS1123Label(value: string): boolean {
  return validateDNS1123Label(value).length === 0;
}

/** apimachinery IsDNS1123Subdomain. */
export function validateDNS1123Subdomain(value: string): string[] {
  const errs: string[] = [];
  if (byteLength(value) > DNS1123_SUBDOMAIN_MAX) errs.push(maxLenError(DNS1123_SUBDOMAIN_MAX));
  if (!dns1123SubdomainRe.test(value)) {
    errs.push(regexError(DNS1123_SUBDOMAIN_ERR, DNS1123_SUBDOMAIN_FMT, 'example.com'));
  }
  return errs;
}

/** apimachinery IsQualifiedName (= content.IsLabelKey): `[prefix/]name` label and annotation keys. */
export function validateQualifiedName(value: string): string[] {
  const errs: string[] = [];
  const parts = value.split('/');
  let name: string;
  if (parts.length === 1) {
    name = value;
  } else if (parts.length === 2) {
    const [prefix = '', last = ''] = parts;
    name = last;
    if (prefix.length === 0) errs.push('prefix part must be non-empty');
    else errs.push(...validateDNS1123Subdomain(prefix).map((m) => `prefix part ${m}`));
  } else {
    return [
      'a valid label key ' +
        regexError(QUALIFIED_NAME_ERR, QUALIFIED_NAME_FMT, 'MyName', 'my.name', '123-abc') +
        " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
    ];
  }
  if (name.length === 0) errs.push('name part must be non-empty');
  else if (byteLength(name) > QUALIFIED_NAME_MAX) errs.push(`name part ${maxLenError(QUALIFIED_NAME_MAX)}`);
  if (!qualifiedNameRe.test(name)) {
    errs.push(
      `name part ${regexError(QUALIFIED_NAME_ERR, QUALIFIED_NAME_FMT, 'MyName', 'my.name', '123-abc')}`,
    );
  }
  return errs;
}

export function isQualifiedName(value: string): boolean {
  return validateQualifiedName(value).length === 0;
}
