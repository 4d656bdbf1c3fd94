import { createHash } from 'node:crypto';

/** The value as JSON with object members in key order, built in one string (no intermediate arrays). */
function canonical(value: unknown): string {
  if (Array.isArray(value)) {
    let text = '[';
    for (let i = 0; i < value.length; i += 1) text += (i === 0 ? '' : ',') + canonical(value[i]);
    return `${text}]`;
  }
  if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    const keys = Object.keys(record).sort();
    let text = '{';
    for (let i = 0; i < keys.length; i += 1) {
      const key = keys[i]!;
      text += `${i === 0 ? '' : ','}${JSON.stringify(key)}:${canonical(record[key])}`;
    }
    return `${text}}`;
  }
  return JSON.stringify(value);
}

/** sha256 of the body with keys sorted: member order alone is not a different payload (D16). */
export function requestFingerprint(body: unknown): string {
  return createHash('sha256').update(canonical(body)).digest('base64url');
}
