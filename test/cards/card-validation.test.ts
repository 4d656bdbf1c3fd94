import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  connectorStats,
  createCard,
  expectCard,
  expectError,
  expectFieldError,
  fullCardBody,
  startCardFixture,
  validCardBody,
  type CardFixture,
} from '../support/card-fixture.js';

/**
 * D14: every rule of the card body is accepted at its bound and refused just past it, with a
 * 400 naming the field; a refused body never reaches the connector, an accepted one does.
 */

let fixture: CardFixture;
let token: string;

beforeAll(async () => {
  fixture = await startCardFixture();
  token = await fixture.token('full');
});
afterAll(async () => {
  await fixture.close();
});

const received = async () => (await connectorStats(fixture.connector)).requestsReceived;

/** 201, and exactly one more request reached the connector. */
async function expectAccepted(body: unknown): Promise<void> {
  const before = await received();
  const card = expectCard(await createCard(fixture.gw, token, body));
  expect(card.pan).toMatch(/^\*{12}\d{4}$/);
  expect(await received()).toBe(before + 1);
}

/** 400 naming `path` (with `message` when given), and the connector saw nothing. */
async function expectRejected(body: unknown, path: string, message?: string | RegExp): Promise<void> {
  const before = await received();
  expectFieldError(await createCard(fixture.gw, token, body), path, message);
  expect(await received()).toBe(before);
}

/** Any non-201 error with this status and message, and the connector saw nothing. */
async function expectRefused(body: string, status: number, message: string, headers: Record<string, string> = {}): Promise<void> {
  const before = await received();
  expectError(await createCard(fixture.gw, token, body, undefined, headers), status, message);
  expect(await received()).toBe(before);
}

const withConfig = (config: Record<string, unknown>) => validCardBody({ config });
const members = (count: number, value = 'v') => Object.fromEntries(Array.from({ length: count }, (_, i) => [`key_${i}`, value]));

describe('requestId: UUID-shaped string', () => {
  it('accepts a UUID in either letter case', async () => {
    await expectAccepted(validCardBody({ requestId: '123e4567-e89b-12d3-a456-426614174000' }));
    await expectAccepted(validCardBody({ requestId: 'ABCDEF01-2345-6789-ABCD-EF0123456789' }));
  });
  it('refuses one character short', async () => {
    await expectRejected(validCardBody({ requestId: '123e4567-e89b-12d3-a456-42661417400' }), 'requestId', /^must match pattern/);
  });
  it('refuses a non-hex character', async () => {
    await expectRejected(validCardBody({ requestId: '123e4567-e89b-12d3-a456-42661417400g' }), 'requestId', /^must match pattern/);
  });
  it('refuses a number', async () => {
    await expectRejected(validCardBody({ requestId: 1234 }), 'requestId', 'must be string');
  });
});

describe('cardLimit: positive safe integer', () => {
  it('accepts 1 and MAX_SAFE_INTEGER (no tolerance), forwarding the exact value', async () => {
    await expectAccepted(validCardBody({ cardLimit: 1 }));
    await expectAccepted(validCardBody({ cardLimit: Number.MAX_SAFE_INTEGER }));
    expect((await connectorStats(fixture.connector)).lastBody).toMatchObject({
      cardLimit: Number.MAX_SAFE_INTEGER,
      requestedCardLimit: Number.MAX_SAFE_INTEGER,
    });
  });
  it('refuses 0 and -1', async () => {
    await expectRejected(validCardBody({ cardLimit: 0 }), 'cardLimit', 'must be >= 1');
    await expectRejected(validCardBody({ cardLimit: -1 }), 'cardLimit', 'must be >= 1');
  });
  it('refuses 1.5 and the string "100"', async () => {
    await expectRejected(validCardBody({ cardLimit: 1.5 }), 'cardLimit', 'must be a JSON integer (no fraction or exponent)');
    await expectRejected(validCardBody({ cardLimit: '100' }), 'cardLimit', 'must be integer');
  });
  it('refuses MAX_SAFE_INTEGER + 1', async () => {
    // The literal 9007199254740992 is not a safe integer (D29): refused before the schema sees it.
    await expectRejected(validCardBody({ cardLimit: Number.MAX_SAFE_INTEGER + 1 }), 'cardLimit', 'must be a safe integer');
  });
});

describe('currency: uppercase ISO 4217 code enabled for the issuing account', () => {
  it('accepts EUR and USD for acct-eu', async () => {
    await expectAccepted(validCardBody({ currency: 'EUR' }));
    await expectAccepted(validCardBody({ currency: 'USD' }));
  });
  it('refuses lowercase and two letters', async () => {
    await expectRejected(validCardBody({ currency: 'eur' }), 'currency', /^must match pattern/);
    await expectRejected(validCardBody({ currency: 'EU' }), 'currency', /^must match pattern/);
  });
  it('refuses a code that is not ISO 4217', async () => {
    await expectRejected(validCardBody({ currency: 'ABC' }), 'currency', 'is not an ISO 4217 currency code');
  });
  it('refuses a real code not enabled for the account (GBP on acct-eu)', async () => {
    await expectRejected(validCardBody({ currency: 'GBP' }), 'currency', 'is not enabled for this issuing account');
  });
});

describe('config.expiryDuration: months 1..60', () => {
  it('accepts 1 and 60', async () => {
    await expectAccepted(withConfig({ expiryDuration: 1 }));
    await expectAccepted(withConfig({ expiryDuration: 60 }));
  });
  it('refuses 0 and 61', async () => {
    await expectRejected(withConfig({ expiryDuration: 0 }), 'config.expiryDuration', 'must be >= 1');
    await expectRejected(withConfig({ expiryDuration: 61 }), 'config.expiryDuration', 'must be <= 60');
  });
});

describe('config.authorizationWindow: UTC timestamps, start before end', () => {
  const window = (startDate: string | undefined, endDate: string | undefined) =>
    withConfig({ authorizationWindow: { ...(startDate !== undefined && { startDate }), ...(endDate !== undefined && { endDate }) } });

  it('accepts start before end', async () => {
    await expectAccepted(window('2026-12-01T00:00:00Z', '2026-12-01T00:00:00.001Z'));
  });
  it('refuses start equal to end', async () => {
    await expectRejected(window('2026-12-01T00:00:00Z', '2026-12-01T00:00:00Z'), 'config.authorizationWindow', 'startDate must be before endDate');
  });
  it('refuses a non-UTC offset', async () => {
    await expectRejected(window('2026-12-01T00:00:00+02:00', '2026-12-02T00:00:00Z'), 'config.authorizationWindow.startDate', /^must match pattern/);
  });
  it('refuses an impossible calendar date', async () => {
    await expectRejected(window('2026-02-30T00:00:00Z', '2026-03-05T00:00:00Z'), 'config.authorizationWindow.startDate', 'is not a valid date and time');
  });
  it('refuses a missing endDate', async () => {
    await expectRejected(window('2026-12-01T00:00:00Z', undefined), 'config.authorizationWindow.endDate', 'is required');
  });
});

describe('config.tolerance.percentage: integer 0..100', () => {
  it('accepts 0 and 100', async () => {
    await expectAccepted(withConfig({ tolerance: { percentage: 0 } }));
    await expectAccepted(withConfig({ tolerance: { percentage: 100 } }));
  });
  it('refuses -1, 101 and 1.5', async () => {
    await expectRejected(withConfig({ tolerance: { percentage: -1 } }), 'config.tolerance.percentage', 'must be >= 0');
    await expectRejected(withConfig({ tolerance: { percentage: 101 } }), 'config.tolerance.percentage', 'must be <= 100');
    await expectRejected(withConfig({ tolerance: { percentage: 1.5 } }), 'config.tolerance.percentage', 'must be a JSON integer (no fraction or exponent)');
  });
});

describe('config.cardType: up to 32 characters', () => {
  it('accepts 32 characters', async () => {
    await expectAccepted(withConfig({ cardType: 'c'.repeat(32) }));
  });
  it('refuses 33 characters', async () => {
    await expectRejected(withConfig({ cardType: 'c'.repeat(33) }), 'config.cardType', 'must NOT have more than 32 characters');
  });
});

describe('config.maxTransactions: positive integer', () => {
  it('accepts 1', async () => {
    await expectAccepted(withConfig({ maxTransactions: 1 }));
  });
  it('refuses 0 and a string', async () => {
    await expectRejected(withConfig({ maxTransactions: 0 }), 'config.maxTransactions', 'must be >= 1');
    await expectRejected(withConfig({ maxTransactions: '3' }), 'config.maxTransactions', 'must be integer');
  });
});

describe('config.allowedCategories: up to 100 non-empty strings', () => {
  const categories = (count: number) => Array.from({ length: count }, (_, i) => `cat-${i}`);
  it('accepts an empty list and 100 items', async () => {
    await expectAccepted(withConfig({ allowedCategories: [] }));
    await expectAccepted(withConfig({ allowedCategories: categories(100) }));
  });
  it('refuses 101 items', async () => {
    await expectRejected(withConfig({ allowedCategories: categories(101) }), 'config.allowedCategories', 'must NOT have more than 100 items');
  });
  it('refuses an empty string', async () => {
    await expectRejected(withConfig({ allowedCategories: [''] }), 'config.allowedCategories[0]', 'must NOT have fewer than 1 characters');
  });
});

describe('metadata: 50 string members, keys up to 40, values up to 500 characters', () => {
  it('accepts 50 members, a 40-character key and a 500-character value', async () => {
    await expectAccepted(validCardBody({ metadata: members(50) }));
    await expectAccepted(validCardBody({ metadata: { ['k'.repeat(40)]: 'v' } }));
    await expectAccepted(validCardBody({ metadata: { card_name: 'v'.repeat(500) } }));
  });
  it('refuses 51 members', async () => {
    await expectRejected(validCardBody({ metadata: members(51) }), 'metadata', 'must NOT have more than 50 properties');
  });
  it('refuses a 41-character key', async () => {
    await expectRejected(validCardBody({ metadata: { ['k'.repeat(41)]: 'v' } }), 'metadata', 'has a key that is too long or invalid');
  });
  it('refuses a 501-character value', async () => {
    await expectRejected(validCardBody({ metadata: { card_name: 'v'.repeat(501) } }), 'metadata.card_name', 'must NOT have more than 500 characters');
  });
  it('refuses a value that is not a string', async () => {
    await expectRejected(validCardBody({ metadata: { project_id: 42 } }), 'metadata.project_id', 'must be string');
    await expectRejected(validCardBody({ metadata: { project_id: { nested: 'x' } } }), 'metadata.project_id', 'must be string');
  });
});

describe('unknown members', () => {
  it('are refused at the top level, inside config, tolerance and authorizationWindow', async () => {
    await expectRejected(validCardBody({ cardholder: 'x' }), 'cardholder', 'is not a known field');
    await expectRejected(withConfig({ colour: 'red' }), 'config.colour', 'is not a known field');
    await expectRejected(withConfig({ tolerance: { percentage: 5, absolute: 10 } }), 'config.tolerance.absolute', 'is not a known field');
    await expectRejected(
      withConfig({ authorizationWindow: { startDate: '2026-12-01T00:00:00Z', endDate: '2026-12-02T00:00:00Z', timezone: 'UTC' } }),
      'config.authorizationWindow.timezone',
      'is not a known field',
    );
  });
  it('are all reported at once', async () => {
    const response = await createCard(fixture.gw, token, validCardBody({ extra: 1, config: { extra: 2, tolerance: { percentage: 1, extra: 3 } } }));
    const body = expectError(response, 400, 'Request validation failed');
    expect(body.details.fields).toEqual([
      { path: 'extra', message: 'is not a known field' },
      { path: 'config.extra', message: 'is not a known field' },
      { path: 'config.tolerance.extra', message: 'is not a known field' },
    ]);
  });
  it('are accepted inside metadata, and forwarded as sent', async () => {
    await expectAccepted(validCardBody({ metadata: { anything_goes: 'yes', hotel_brand: 'H' } }));
    expect((await connectorStats(fixture.connector)).lastBody).toMatchObject({ metadata: { anything_goes: 'yes', hotel_brand: 'H' } });
  });
});

describe('required members', () => {
  for (const field of ['requestId', 'cardLimit', 'currency']) {
    it(`refuses a body without ${field}`, async () => {
      const body = validCardBody();
      delete body[field];
      const before = await received();
      const answer = expectFieldError(await createCard(fixture.gw, token, body), field, 'is required');
      expect(answer.details.fields).toEqual([{ path: field, message: 'is required' }]);
      expect(await received()).toBe(before);
    });
  }
  it('names all three on an empty object', async () => {
    const answer = expectError(await createCard(fixture.gw, token, {}), 400, 'Request validation failed');
    expect(answer.details.fields).toEqual([
      { path: 'requestId', message: 'is required' },
      { path: 'cardLimit', message: 'is required' },
      { path: 'currency', message: 'is required' },
    ]);
  });
});

describe('the body as a whole', () => {
  /** A valid body padded with metadata to exactly `size` bytes of JSON. */
  function bodyOfSize(size: number): string {
    const base = validCardBody({ metadata: {} });
    const emptyLength = Buffer.byteLength(JSON.stringify(base));
    const metadata: Record<string, string> = {};
    let length = emptyLength;
    for (let i = 0; length < size; i += 1) {
      const key = `k${String(i).padStart(2, '0')}`;
      // `"kNN":"…"` plus a comma after the first member.
      const overhead = key.length + 5 + (i === 0 ? 0 : 1);
      const valueLength = Math.min(500, size - length - overhead);
      if (valueLength < 0) throw new Error('cannot pad to that size');
      metadata[key] = 'v'.repeat(valueLength);
      length += overhead + valueLength;
    }
    const text = JSON.stringify({ ...base, metadata });
    expect(Buffer.byteLength(text)).toBe(size);
    return text;
  }

  it('accepts exactly 16 KiB and refuses one byte more with 413', async () => {
    await expectAccepted(bodyOfSize(16 * 1024));
    await expectRefused(bodyOfSize(16 * 1024 + 1), 413, 'Request body is too large');
  });
  it('refuses text/plain with 415', async () => {
    await expectRefused(JSON.stringify(validCardBody()), 415, 'Content-Type must be application/json', { 'content-type': 'text/plain' });
  });
  it('refuses malformed JSON with 400', async () => {
    await expectRefused('{"requestId": "123e4567-e89b-12d3-a456-426614174000", "cardLimit": 1', 400, 'Request body is not valid JSON');
  });
  it('refuses a JSON array and an empty body with 400', async () => {
    await expectRejected([], '(body)', 'must be object');
    await expectRefused('', 400, 'Request body is empty');
  });
  it('forwards every member of a full body to the connector as the contract says', async () => {
    const body = fullCardBody();
    await expectAccepted(body);
    expect((await connectorStats(fixture.connector)).lastBody).toEqual({
      requestId: body['requestId'],
      issuingAccount: 'acct-eu',
      requestedCardLimit: 10_000,
      cardLimit: 10_500,
      currency: 'EUR',
      config: body['config'],
      metadata: body['metadata'],
    });
  });
});
