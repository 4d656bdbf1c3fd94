import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/foundation/clock.js';
import { MemoryAuditSink } from '../../src/observability/audit.js';
import { LogCapture } from '../support/config-fixture.js';

/**
 * D58 for every line the gateway writes: a card number in any logged or audited string (a reason,
 * a card id as typed, metadata, an error message, the log message itself) is masked to its last
 * four digits by the writer, whatever the caller passed. Before issue 31 only the status change's
 * reason was masked, by the caller, with a regex (test/foundation/card-number-detector.test.ts).
 */

const PAN = '4111111111111111';
const CORRELATION_ID = '41111111-1111-4111-8111-111111111111';

/** Decimal digits in `text` after NFKC, any script, as a count. */
const visibleDigits = (text: string): number => [...text.normalize('NFKC')].filter((char) => /\p{Nd}/u.test(char)).length;

/** Every string value of a parsed line, with its key, depth first. */
function strings(value: unknown, key = ''): [string, string][] {
  if (typeof value === 'string') return [[key, value]];
  if (value === null || typeof value !== 'object') return [];
  return Object.entries(value as Record<string, unknown>).flatMap(([name, inner]) => strings(inner, name));
}

describe('log lines mask card numbers in every field and in the message (D58)', () => {
  it('masks fields at any depth, metadata, arrays, errors and the message; leaves the correlation id and the client address as written', () => {
    const logs = new LogCapture();
    const error = new Error(`connector said ${PAN}`);
    logs.logger.warn(
      {
        correlationId: CORRELATION_ID,
        clientAddress: '192.168.100.201',
        cardId: `${PAN.slice(0, 8)} ${PAN.slice(8)}`,
        metadata: { note: `pay with ${PAN.replace(/(\d{4})/g, '$1.')}`, trip: 'Lisbon' },
        ids: ['ok', `x${PAN}x`],
        err: error,
      },
      `refused card ${PAN}`,
    );
    expect(logs.lines).toHaveLength(1);
    const line = JSON.parse(logs.lines[0]!) as Record<string, unknown>;
    expect(line).toMatchObject({
      correlationId: CORRELATION_ID,
      clientAddress: '192.168.100.201',
      cardId: '******** ****1111',
      metadata: { note: 'pay with ****.****.****.1111.', trip: 'Lisbon' },
      ids: ['ok', 'x************1111x'],
      msg: 'refused card ************1111',
    });
    expect((line['err'] as { message: string }).message).toBe('connector said ************1111');
    expect(logs.text()).not.toContain(PAN);
    // The caller's objects are not changed.
    expect(error.message).toContain(PAN);
  });

  it('passes a line with nothing to mask unchanged', () => {
    const logs = new LogCapture();
    logs.logger.info({ correlationId: CORRELATION_ID, route: '/api/v1/issuing/cards', count: 3 }, 'nothing here');
    expect(JSON.parse(logs.lines[0]!)).toMatchObject({ correlationId: CORRELATION_ID, route: '/api/v1/issuing/cards', count: 3, msg: 'nothing here' });
  });
});

describe('audit lines mask card numbers in every field of client origin (D58)', () => {
  it('masks reason, card id, request id and credential; keeps correlation id and client address', () => {
    const audit = new MemoryAuditSink(new ManualClock(0));
    audit.record({
      event: 'card.status_changed',
      outcome: 'success',
      correlationId: CORRELATION_ID,
      clientAddress: '192.168.100.201',
      credential: `cred ${PAN}`,
      reason: `card ${PAN.replace(/(\d{4})(?=\d)/g, '$1\u00a0')}`,
      requestId: PAN,
      cardId: `${PAN}/`,
    });
    expect(audit.events()[0]).toMatchObject({
      correlationId: CORRELATION_ID,
      clientAddress: '192.168.100.201',
      credential: 'cred ************1111',
      reason: 'card ****\u00a0****\u00a0****\u00a01111',
      requestId: '************1111',
      cardId: '************1111/',
    });
  });
});

/** Separators D58 allows between two digits of one number. */
const SEPARATORS = [' ', '\t', '\u00a0', '\u2009', '\u202f', '\u3000', '.', '-', '\u2013', '/', '_', ',', '\u200b', '\u200d', '\ufeff'];
/** Zeros of digit scripts: ASCII, full-width, Arabic-Indic, extended Arabic-Indic, Devanagari, mathematical bold. */
const ZEROS = [0x30, 0xff10, 0x0660, 0x06f0, 0x0966, 0x1d7ce];

/** Luhn-valid numbers of 12 to 19 digits: random digits, then the check digit. */
const luhnNumber = fc.array(fc.integer({ min: 0, max: 9 }), { minLength: 11, maxLength: 18 }).map((body) => {
  let sum = 0;
  for (let i = 0; i < body.length; i += 1) {
    // Counted from the right of the whole number, the check digit at 0: body's last digit is doubled.
    let digit = body[body.length - 1 - i]!;
    if (i % 2 === 0) digit = digit * 2 > 9 ? digit * 2 - 9 : digit * 2;
    sum += digit;
  }
  return [...body, (10 - (sum % 10)) % 10];
});

/** The number written with 0 to 2 separators between digits, each digit in one of the scripts. */
const written = fc
  .tuple(
    luhnNumber,
    fc.array(fc.array(fc.constantFrom(...SEPARATORS), { maxLength: 2 }), { minLength: 19, maxLength: 19 }),
    fc.array(fc.constantFrom(...ZEROS), { minLength: 19, maxLength: 19 }),
  )
  .map(([digits, separators, zeros]) =>
    digits.map((digit, i) => `${i === 0 ? '' : separators[i]!.join('')}${String.fromCodePoint(zeros[i]! + digit)}`).join(''),
  );

/** Text around the number: anything but digits (a digit next to it would make another number). */
const around = fc.string({ maxLength: 20 }).map((text) => text.replace(/[\p{Nd}\p{No}]/gu, 'x'));

describe('property: a card number never appears unmasked in a captured log or audit line (D58)', () => {
  it('whatever separators and digits it is written with, at most its last four digits are readable', () => {
    fc.assert(
      fc.property(written, around, around, (number, before, after) => {
        const text = `${before}${number}${after}`;
        const logs = new LogCapture();
        logs.logger.info({ reason: text, metadata: { note: text }, nested: [{ cardId: text }] }, text);
        const audit = new MemoryAuditSink(new ManualClock(0));
        audit.record({ event: 'card.status_changed', outcome: 'success', correlationId: 'c', clientAddress: '10.0.0.1', reason: text, cardId: text });
        const lines = [...logs.lines, ...audit.lines].map((line) => JSON.parse(line) as unknown);
        for (const [key, value] of lines.flatMap((line) => strings(line))) {
          if (key === 'time' || key === 'level' || key === 'clientAddress') continue;
          expect(visibleDigits(value), `${key}: ${JSON.stringify(value)}`).toBeLessThanOrEqual(4);
        }
      }),
      { numRuns: 2000 },
    );
  });
});
