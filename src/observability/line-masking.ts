import { maskCardNumbers } from '../foundation/card-number-detector.js';

/**
 * D58 for log and audit lines: every string a line carries passes the card-number detector
 * (foundation/card-number-detector.ts) before it is written, whatever its field: a reason, a card
 * id as a client typed it, metadata, an error message. A string with fewer than 12 characters
 * that could be digits costs one short loop (the detector's fast path).
 *
 * Left out are the fields the gateway writes itself in a fixed shape that holds no client text:
 * the correlation id (a UUID the gateway generates; a client never names it), the client address
 * (parsed and written back by the edge, D10) and the instants of a summary window. Their digits
 * would be taken for card numbers often (a dotted IPv4 address has up to 12 digits, a UUID long
 * runs of them) and would be masked for nothing.
 */
export const UNMASKED_FIELDS: ReadonlySet<string> = new Set(['time', 'level', 'correlationId', 'clientAddress', 'client', 'windowStart', 'windowEnd']);

/** Deeper than this, a logged value is replaced: log objects are small, and a cycle must end. */
const MAX_DEPTH = 8;

/**
 * `value` with every string masked (D58), fields of UNMASKED_FIELDS kept. Copies only what
 * changes: an object with nothing to mask comes back as it is. An Error becomes the plain
 * `{ type, message, stack, ... }` a log line shows, masked.
 */
export function maskedForLine(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return maskCardNumbers(value);
  if (value === null || typeof value !== 'object') return value;
  if (depth >= MAX_DEPTH) return '[nested too deep]';
  if (value instanceof Error) {
    const { name, message, stack } = value;
    return maskedFields({ ...value, type: name, message, stack }, depth);
  }
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined;
    for (let i = 0; i < value.length; i += 1) {
      const item: unknown = value[i];
      const masked = maskedForLine(item, depth + 1);
      if (masked !== item) (copy ??= value.slice())[i] = masked;
    }
    return copy ?? value;
  }
  if (Buffer.isBuffer(value) || value instanceof Date) return value;
  return maskedFields(value as Record<string, unknown>, depth);
}

function maskedFields(object: Record<string, unknown>, depth: number): Record<string, unknown> {
  let copy: Record<string, unknown> | undefined;
  for (const key in object) {
    if (!Object.hasOwn(object, key) || UNMASKED_FIELDS.has(key)) continue;
    const field = object[key];
    const masked = maskedForLine(field, depth + 1);
    if (masked !== field) (copy ??= { ...object })[key] = masked;
  }
  return copy ?? object;
}
