import { createCipheriv, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CardSealer } from '../../src/cards/card-sealing.js';
import type { CardRequest } from '../../src/cards/card-schemas.js';
import { ISO_4217_CODES } from '../../src/cards/iso-4217.js';
import { maskCvc, maskPan } from '../../src/foundation/masking.js';
import { requestFingerprint } from '../../src/cards/request-fingerprint.js';
import { applyTolerance } from '../../src/cards/tolerance.js';
import { checkCardRequest } from '../../src/cards/validate-card-request.js';
import { parseConnectorCard } from '../../src/connector/connector-contract.js';

/** The pure pieces of card creation, without a server. */

describe('maskPan / maskCvc (D18)', () => {
  it('keeps the length and the last four digits of a PAN', () => {
    expect(maskPan('4000001234567899')).toBe('************7899');
    expect(maskPan('4000001234567899')).toHaveLength(16);
    expect(maskPan('400000123456789')).toBe('***********6789');
    expect(maskPan('4000001234567890123')).toBe('***************0123');
  });

  it('never shows a PAN of four or fewer characters', () => {
    expect(maskPan('1234')).toBe('****');
    expect(maskPan('12')).toBe('**');
    expect(maskPan('')).toBe('');
  });

  it('replaces every CVC character', () => {
    expect(maskCvc('123')).toBe('***');
    expect(maskCvc('0123')).toBe('****');
  });
});

describe('applyTolerance (D15)', () => {
  it('adds floor(requested × P / 100)', () => {
    expect(applyTolerance(10_000, 5)).toBe(10_500);
    expect(applyTolerance(999, 10)).toBe(1098);
    expect(applyTolerance(1, 100)).toBe(2);
    expect(applyTolerance(1, 50)).toBe(1);
    expect(applyTolerance(1, 0)).toBe(1);
    expect(applyTolerance(199, 1)).toBe(200);
  });

  it('is exact where floating point is not (BigInt arithmetic)', () => {
    const requested = 5_435_905_595_774_729;
    // Plain doubles round requested × 24 and land one too high.
    expect(requested + Math.floor((requested * 24) / 100)).toBe(6_740_522_938_760_664);
    expect(applyTolerance(requested, 24)).toBe(6_740_522_938_760_663);
  });

  it('accepts results up to MAX_SAFE_INTEGER and refuses one more', () => {
    expect(applyTolerance(Number.MAX_SAFE_INTEGER, 0)).toBe(Number.MAX_SAFE_INTEGER);
    expect(applyTolerance(8_918_019_064_099_992, 1)).toBe(Number.MAX_SAFE_INTEGER);
    expect(applyTolerance(8_918_019_064_099_993, 1)).toBeUndefined();
    expect(applyTolerance(Number.MAX_SAFE_INTEGER, 1)).toBeUndefined();
  });
});

describe('requestFingerprint (D16)', () => {
  it('does not depend on member order, at any depth', () => {
    const a = { requestId: 'r', cardLimit: 1, currency: 'EUR', config: { tolerance: { percentage: 5 }, cardType: 'x' }, metadata: { a: '1', b: '2' } };
    const b = { metadata: { b: '2', a: '1' }, config: { cardType: 'x', tolerance: { percentage: 5 } }, currency: 'EUR', cardLimit: 1, requestId: 'r' };
    expect(requestFingerprint(a)).toBe(requestFingerprint(b));
  });

  it('changes with any value, and with array order', () => {
    const base = { requestId: 'r', cardLimit: 1, currency: 'EUR', config: { allowedCategories: ['a', 'b'] } };
    const print = requestFingerprint(base);
    expect(requestFingerprint({ ...base, cardLimit: 2 })).not.toBe(print);
    expect(requestFingerprint({ ...base, config: { allowedCategories: ['b', 'a'] } })).not.toBe(print);
    expect(requestFingerprint({ ...base, metadata: {} })).not.toBe(print);
    // "1" and 1 are different payloads.
    expect(requestFingerprint({ ...base, cardLimit: '1' })).not.toBe(print);
  });
});

describe('checkCardRequest (D14 rules beyond the JSON schema)', () => {
  const enabled = new Set(['EUR', 'USD']);
  const body = (overrides: Partial<CardRequest> = {}): CardRequest => ({
    requestId: '123e4567-e89b-12d3-a456-426614174000',
    cardLimit: 10_000,
    currency: 'EUR',
    ...overrides,
  });

  it('accepts a valid request and returns the effective limit', () => {
    expect(checkCardRequest(body({ config: { tolerance: { percentage: 5 } } }), enabled)).toEqual({ problems: [], effectiveLimit: 10_500 });
  });

  it('refuses a code that is not ISO 4217, and a real one not enabled for the account', () => {
    expect(checkCardRequest(body({ currency: 'ABC' }), enabled).problems).toEqual([{ path: 'currency', message: 'is not an ISO 4217 currency code' }]);
    expect(checkCardRequest(body({ currency: 'GBP' }), enabled).problems).toEqual([{ path: 'currency', message: 'is not enabled for this issuing account' }]);
    expect(checkCardRequest(body({ currency: 'EUR' }), undefined).problems).toEqual([{ path: 'currency', message: 'is not enabled for this issuing account' }]);
  });

  it('refuses impossible calendar dates and windows that do not move forward', () => {
    const window = (startDate: string, endDate: string) =>
      checkCardRequest(body({ config: { authorizationWindow: { startDate, endDate } } }), enabled).problems;
    expect(window('2026-02-28T00:00:00Z', '2026-03-01T00:00:00Z')).toEqual([]);
    expect(window('2026-02-30T00:00:00Z', '2026-03-05T00:00:00Z')).toEqual([
      { path: 'config.authorizationWindow.startDate', message: 'is not a valid date and time' },
    ]);
    expect(window('2026-03-01T00:00:00Z', '2026-04-31T00:00:00Z')).toEqual([
      { path: 'config.authorizationWindow.endDate', message: 'is not a valid date and time' },
    ]);
    expect(window('2026-03-01T24:00:00Z', '2026-03-05T00:00:00Z')).toEqual([
      { path: 'config.authorizationWindow.startDate', message: 'is not a valid date and time' },
    ]);
    expect(window('2026-03-01T00:00:00Z', '2026-03-01T00:00:00Z')).toEqual([
      { path: 'config.authorizationWindow', message: 'startDate must be before endDate' },
    ]);
    expect(window('2026-03-02T00:00:00Z', '2026-03-01T00:00:00Z')).toEqual([
      { path: 'config.authorizationWindow', message: 'startDate must be before endDate' },
    ]);
    expect(window('2028-02-29T00:00:00Z', '2028-03-01T00:00:00.001Z')).toEqual([]);
  });

  it('refuses a limit that the tolerance would push past MAX_SAFE_INTEGER', () => {
    expect(checkCardRequest(body({ cardLimit: Number.MAX_SAFE_INTEGER }), enabled)).toEqual({ problems: [], effectiveLimit: Number.MAX_SAFE_INTEGER });
    expect(checkCardRequest(body({ cardLimit: Number.MAX_SAFE_INTEGER, config: { tolerance: { percentage: 1 } } }), enabled).problems).toEqual([
      { path: 'cardLimit', message: 'with the tolerance applied exceeds the largest supported limit' },
    ]);
  });
});

describe('parseConnectorCard (D19)', () => {
  const card = {
    cardId: 'card_1',
    pan: '4000001234567899',
    cvc: '123',
    expMonth: 11,
    expYear: 2029,
    status: 'active',
    cardLimit: 10_500,
    currency: 'EUR',
    createdAt: '2026-11-22T12:00:00.000Z',
  };
  const expected = { cardLimit: 10_500, currency: 'EUR' };
  const parse = (overrides: Record<string, unknown>) => parseConnectorCard(JSON.stringify({ ...card, ...overrides }), expected);

  it('accepts the card that was asked for', () => {
    expect(parseConnectorCard(JSON.stringify(card), expected)).toEqual(card);
  });

  it('rejects text that is not JSON, or not a card', () => {
    expect(parseConnectorCard('<<not json>>', expected)).toBeUndefined();
    expect(parseConnectorCard('{"cardId":42}', expected)).toBeUndefined();
    expect(parseConnectorCard('{"cardId":"card_000000000', expected)).toBeUndefined();
    expect(parseConnectorCard('null', expected)).toBeUndefined();
  });

  it('rejects a card in another currency or with another limit', () => {
    expect(parse({ currency: 'USD' })).toBeUndefined();
    expect(parse({ cardLimit: 10_000 })).toBeUndefined();
  });

  it('rejects a malformed PAN, CVC, month or status', () => {
    expect(parse({ pan: '4000-0012-3456-7899' })).toBeUndefined();
    expect(parse({ pan: '40000012345' })).toBeUndefined();
    expect(parse({ pan: 4000001234567899 })).toBeUndefined();
    expect(parse({ cvc: '12' })).toBeUndefined();
    expect(parse({ expMonth: 13 })).toBeUndefined();
    expect(parse({ status: 'frozen' })).toBeUndefined();
    const { cardId: _dropped, ...withoutId } = card;
    expect(parseConnectorCard(JSON.stringify(withoutId), expected)).toBeUndefined();
  });
});

describe('ISO_4217_CODES', () => {
  it('holds the real codes the programmes use, and not made-up ones', () => {
    for (const code of ['EUR', 'GBP', 'USD', 'CHF', 'JPY']) expect(ISO_4217_CODES.has(code)).toBe(true);
    for (const code of ['ABC', 'XXX', 'eur', 'EU', 'XAU']) expect(ISO_4217_CODES.has(code)).toBe(false);
  });
});

describe('CardSealer (D18, D37)', () => {
  const current = { kid: 'card-2', key: randomBytes(32) };
  const previous = { kid: 'card-1', key: randomBytes(32) };
  const secrets = { pan: '4000001234567899', cvc: '123' };
  const recordKey = 'acct-eu:123e4567-e89b-12d3-a456-426614174000';

  /** A record in the first format (no key id), as the gateway wrote them before D37. */
  function sealV1(key: Buffer): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', key, iv);
    cipher.setAAD(Buffer.from(recordKey, 'utf8'));
    const ciphertext = Buffer.concat([cipher.update(JSON.stringify(secrets), 'utf8'), cipher.final()]);
    return ['v1', iv.toString('base64url'), cipher.getAuthTag().toString('base64url'), ciphertext.toString('base64url')].join('.');
  }

  it('seals with the current key id, opens with the same key and record key, and holds no plaintext', () => {
    const sealer = new CardSealer(current);
    const sealed = sealer.seal(secrets, recordKey);
    expect(sealed).toMatch(/^v2\.card-2\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    expect(sealed).not.toContain(secrets.pan);
    expect(sealed).not.toContain('"cvc"');
    expect(sealer.open(sealed, recordKey)).toEqual(secrets);
    // A fresh IV each time: equal secrets never seal to equal text.
    expect(sealer.seal(secrets, recordKey)).not.toBe(sealed);
  });

  it('opens records sealed under a previous key after a rotation, and new ones under the new key', () => {
    const before = new CardSealer(previous).seal(secrets, recordKey);
    const rotated = new CardSealer(current, [previous]);
    expect(rotated.open(before, recordKey)).toEqual(secrets);
    expect(rotated.seal(secrets, recordKey).split('.')[1]).toBe('card-2');
    // once the previous key is dropped, its records are unreadable, with a clear error
    expect(() => new CardSealer(current).open(before, recordKey)).toThrow(expect.objectContaining({ code: 'record_unreadable', status: 500 }));
  });

  it('opens first-format records (no key id) with whichever configured key seals them', () => {
    expect(new CardSealer(current, [previous]).open(sealV1(previous.key), recordKey)).toEqual(secrets);
    expect(() => new CardSealer(current).open(sealV1(previous.key), recordKey)).toThrow(expect.objectContaining({ code: 'record_unreadable' }));
  });

  it('does not open under another record key (AAD), another key, or after tampering', () => {
    const sealer = new CardSealer(current);
    const sealed = sealer.seal(secrets, recordKey);
    const unreadable = expect.objectContaining({ code: 'record_unreadable' });
    expect(() => sealer.open(sealed, 'acct-uk:123e4567-e89b-12d3-a456-426614174000')).toThrow(unreadable);
    expect(() => new CardSealer({ kid: 'card-2', key: randomBytes(32) }).open(sealed, recordKey)).toThrow(unreadable);
    const [version, kid, iv, tag, ciphertext] = sealed.split('.') as [string, string, string, string, string];
    const flipped = Buffer.from(ciphertext, 'base64url');
    flipped[0] = (flipped[0] ?? 0) ^ 1;
    expect(() => sealer.open([version, kid, iv, tag, flipped.toString('base64url')].join('.'), recordKey)).toThrow(unreadable);
    expect(() => sealer.open(`v3.${kid}.${iv}.${tag}.${ciphertext}`, recordKey)).toThrow(unreadable);
  });
});
