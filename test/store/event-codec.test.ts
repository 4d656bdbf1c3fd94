import { describe, expect, it } from 'vitest';
import { decodeEventText, encodeEventText } from '../../src/store/redis/event-codec.js';

describe('event codec (how Redis keeps an event JSON)', () => {
  it('writes each member name of the event shapes as one character and gives back the very same text', () => {
    const json = JSON.stringify({
      id: 'evt_01',
      type: 'transaction.declined',
      createdAt: '2026-11-29T09:00:00.123Z',
      issuingAccount: 'acct_demo',
      sequence: 42,
      data: {
        transactionId: 't1',
        cardId: 'card_1',
        amount: 1250,
        currency: 'EUR',
        merchant: { name: 'Café', categoryCode: '5812', country: 'FR' },
        declineReason: 'limit',
      },
    });
    const stored = encodeEventText(json);
    expect(stored).not.toContain('"issuingAccount":');
    expect(stored).not.toContain('"declineReason":');
    expect(stored.length).toBeLessThan(json.length - 100);
    expect(decodeEventText(stored)).toBe(json);
  });

  it('leaves what only looks like a member alone, or gives it back exactly: names inside strings, escaped quotes, unknown members', () => {
    for (const value of [
      { reason: '"status":"frozen"', note: 'a \\"status\\": b', other: 'x' },
      { metadata: { 'status"': 1, 'sequence ': 2, unknownMember: '\u0001 escaped by JSON', 名前: '🙂' } },
      ['"id":', '"card":{', '\t\n\r whitespace'],
    ]) {
      const json = JSON.stringify(value);
      expect(decodeEventText(encodeEventText(json))).toBe(json);
    }
    // the insignificant whitespace JSON allows between tokens is never a code: it stays what it is
    const spaced = '{ "id":\t1,\n"x":2\r}';
    const stored = encodeEventText(spaced);
    expect(stored).toHaveLength(spaced.length - '"id":'.length + 1);
    expect(stored.replace(/[^\t\n\r]/g, '')).toBe('\t\n\r');
    expect(decodeEventText(stored)).toBe(spaced);
  });

  it('refuses text holding a raw control character (not JSON text: it could not be given back)', () => {
    expect(() => encodeEventText('{"reason":"a\u0001b"}')).toThrow(TypeError);
    expect(() => encodeEventText('{"reason":"a\u001fb"}')).toThrow(TypeError);
    expect(decodeEventText(encodeEventText('{"reason":"a\u0020b"}'))).toBe('{"reason":"a b"}');
  });
});
