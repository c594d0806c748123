// kubelet's checkNodeAffinity (operation_generator.go, storagehelpers
// CheckNodeAffinity): a PersistentVolume whose required node affinity does not
// match this node is not mounted here. Terms are ORed, the requirements of a
// term ANDed, a term with no requirement matches nothing (component-helpers'
// MatchNodeSelectorTerms).
import type { V1NodeSelectorRequirement, V1PersistentVolume } from '@kubernetes/client-node';
import { errorMessage } from '../../errno.ts';
import { ownValue } from '../../own.ts';

/** undefined when the volume may be used on this node, else kubelet's error text. */
export function nodeAffinityMismatch(
  pv: V1PersistentVolume,
  node: { name: string; labels: Record<string, string> },
): string | undefined {
  const terms = pv.spec?.nodeAffinity?.required?.nodeSelectorTerms;
  if (!pv.spec?.nodeAffinity?.required) return undefined;
  const errors: string[] = [];
  for (const term of terms ?? []) {
    const exprs = term.matchExpressions ?? [];
    const fields = term.matchFields ?? [];
    if (exprs.length === 0 && fields.length === 0) continue;
    try {
      if (
        exprs.every((r) => requirementMatches(r, node.labels)) &&
        fields.every((r) => fieldMatches(r, node.name))
      ) {
        return undefined;
      }
    } catch (err) {
      errors.push(errorMessage(err));
    }
  }
  return errors.length > 0 ? errors.join(', ') : 'no matching NodeSelectorTerms';
}

function requirementMatches(r: V1NodeSelectorRequirement, labels: Record<string, string>): boolean {
  const value = ownValue(labels, r.key);
  const values = r.values ?? [];
  switch (r.operator) {
    case 'In':
      return value !== undefined && values.includes(value);
    case 'NotIn':
      return value === undefined || !values.includes(value);
    case 'Exists':
      return value !== undefined;
    case 'DoesNotExist':
      return value === undefined;
    case 'Gt':
    case 'Lt': {
      const bound = values[0];
      if (values.length !== 1 || bound === undefined || !/^-?\d+$/.test(bound)) {
        throw new Error(
          `for 'Gt', 'Lt' operators, the value must be a single integer: ${JSON.stringify(values)}`,
        );
      }
      if (value === undefined || !/^-?\d+$/.test(value)) return false;
      const a = BigInt(value);
      const b = BigInt(bound);
      return r.operator === 'Gt' ? a > b : a < b;
    }
    default:
      throw new Error(`"${r.operator}" is not a valid label selector operator`);
  }
}

/** Only metadata.name is a node field a selector may name. */
function fieldMatches(r: V1NodeSelectorRequirement, nodeName: string): boolean {
  if (r.key !== 'metadata.name') throw new Error(`"${r.key}" is not a valid field selector key`);
  const values = r.values ?? [];
  if (r.operator === 'In') return values.includes(nodeName);
  if (r.operator === 'NotIn') return !values.includes(nodeName);
  throw new Error(`"${r.operator}" is not a valid field selector operator`);
}
