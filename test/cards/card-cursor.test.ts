import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CardCursorSealer, type CursorBinding } from '../../src/cards/card-cursor.js';

/** D44, D37: list cursors are sealed, bound to the account and the filters, and rotate with the card-record keys. */

const key = (kid: string) => ({ kid, key: randomBytes(32) });
const OLD = key('card-1');
const NEW = key('card-2');
const BINDING: CursorBinding = { issuingAccount: 'acct-eu', status: 'active', createdAfter: '2026-11-01T00:00:00.000Z', createdBefore: undefined };

/** The cursor with one character of part `index` changed to another base64url character. */
function altered(cursor: string, index: number, at: number): string {
  const parts = cursor.split('.');
  const part = parts[index]!;
  const position = at < 0 ? part.length + at : at;
  const replacement = part[position] === 'A' ? 'B' : 'A';
  parts[index] = part.slice(0, position) + replacement + part.slice(position + 1);
  return parts.join('.');
}

describe('CardCursorSealer', () => {
  const sealer = new CardCursorSealer(OLD);
  const cursor = sealer.seal('connector-cursor-42', BINDING);

  it('opens its own cursor for the same binding; the connector cursor does not show through', () => {
    expect(cursor).toMatch(/^c1\.card-1\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]+$/);
    expect(cursor).not.toContain('connector-cursor');
    expect(sealer.open(cursor, BINDING)).toBe('connector-cursor-42');
    expect(sealer.open(cursor, { ...BINDING })).toBe('connector-cursor-42');
  });

  it('does not open for another account or other filters (each member of the binding)', () => {
    expect(sealer.open(cursor, { ...BINDING, issuingAccount: 'acct-uk' })).toBeUndefined();
    expect(sealer.open(cursor, { ...BINDING, status: 'inactive' })).toBeUndefined();
    expect(sealer.open(cursor, { ...BINDING, status: undefined })).toBeUndefined();
    expect(sealer.open(cursor, { ...BINDING, createdAfter: '2026-11-01T00:00:00.001Z' })).toBeUndefined();
    expect(sealer.open(cursor, { ...BINDING, createdBefore: '2026-12-01T00:00:00.000Z' })).toBeUndefined();
  });

  it('does not open once altered anywhere: version, kid, iv, ciphertext, tag; nor truncated, extended or re-encoded', () => {
    const parts = cursor.split('.');
    const tampered = [
      `c2.${parts.slice(1).join('.')}`,
      [parts[0], 'card-9', parts[2], parts[3]].join('.'),
      altered(cursor, 2, 0),
      altered(cursor, 3, 0),
      altered(cursor, 3, -1),
      cursor.slice(0, -2),
      `${cursor}A`,
      `${cursor}.x`,
      parts.slice(0, 3).join('.'),
      // Same bytes in standard base64 instead of base64url: a second spelling is refused.
      [parts[0], parts[1], parts[2], Buffer.from(parts[3]!, 'base64url').toString('base64')].join('.'),
      '',
      'garbage',
    ];
    for (const text of tampered) expect(sealer.open(text, BINDING), text).toBeUndefined();
  });

  it('a cursor made by another gateway key, or a forged one, does not open', () => {
    expect(new CardCursorSealer(key('card-1')).open(cursor, BINDING)).toBeUndefined();
  });

  it('rotates with the card-record keys: an old cursor opens while its key is configured as previous, not after', () => {
    const rotated = new CardCursorSealer(NEW, [OLD]);
    expect(rotated.open(cursor, BINDING)).toBe('connector-cursor-42');
    expect(rotated.seal('next', BINDING)).toMatch(/^c1\.card-2\./);
    expect(new CardCursorSealer(NEW).open(cursor, BINDING)).toBeUndefined();
  });

  it('never uses the card-record key itself (a derived key): the same key as AES-GCM key does not open it', async () => {
    const { createDecipheriv } = await import('node:crypto');
    const [, , iv, body] = cursor.split('.');
    const bytes = Buffer.from(body!, 'base64url');
    const decipher = createDecipheriv('aes-256-gcm', OLD.key, Buffer.from(iv!, 'base64url'));
    decipher.setAuthTag(bytes.subarray(bytes.length - 16));
    expect(() => Buffer.concat([decipher.update(bytes.subarray(0, bytes.length - 16)), decipher.final()])).toThrow();
  });
});
