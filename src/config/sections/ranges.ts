import { compileRanges, type AddressRanges } from '../../foundation/address-ranges.js';
import type { SectionContext } from '../load-context.js';
import { entries } from '../schema-parts.js';

/**
 * `allowlist` and `trustedProxies`: every entry checked on its own, so each bad one is named by
 * its index. An entry that is no string (YAML's unquoted `10.1`) is the schema's to report.
 */
export function rangesLoader(field: 'allowlist' | 'trustedProxies') {
  return async (raw: unknown, context: SectionContext): Promise<AddressRanges | undefined> => {
    const list = entries(raw);
    list.forEach((entry, index) => {
      if (typeof entry !== 'string') return;
      try {
        compileRanges([entry]);
      } catch (error) {
        context.problems.add(`${field}[${index}]`, (error as Error).message);
      }
    });
    const strings = list.filter((entry): entry is string => typeof entry === 'string');
    return Array.isArray(raw) && strings.length === list.length && context.problems.problems.length === 0 ? compileRanges(strings) : undefined;
  };
}
