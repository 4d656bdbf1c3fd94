import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LightMyRequestResponse } from 'fastify';
import { validCardBody } from '../support/card-fixture.js';
import { startLifecycleFixture, type LifecycleFixture } from '../support/lifecycle-fixture.js';

/**
 * D43: a client of account A cannot tell A's unknown ids from account B's cards. The answers
 * are compared whole: the bodies are equal once the correlation id and the timestamp are
 * removed, and the headers are equal once the per-request values are (the correlation id, the
 * date, and the read limit's remaining count, which counts every request alike).
 */

let f: LifecycleFixture;
let tokenA: string;
let cardOfB: string;

beforeAll(async () => {
  f = await startLifecycleFixture();
  tokenA = await f.token('life');
  cardOfB = await f.create(await f.token('life-uk'), validCardBody({ currency: 'GBP' }));
  // An id of the very shape B's card has, that no account holds.
  expect(cardOfB).toMatch(/^card_\d{8}$/);
});
afterAll(async () => f.close());

const PER_REQUEST_HEADERS = new Set(['x-correlation-id', 'date', 'ratelimit', 'ratelimit-remaining']);

function comparable(response: LightMyRequestResponse): { status: number; body: Record<string, unknown>; headers: Record<string, unknown> } {
  const { correlationId: _c, timestamp: _t, ...body } = response.json<Record<string, unknown>>();
  const headers = Object.fromEntries(Object.entries(response.headers).filter(([name]) => !PER_REQUEST_HEADERS.has(name)));
  return { status: response.statusCode, body, headers };
}

describe('404 card_not_found says nothing about other accounts', () => {
  it.each([
    ['GET', (id: string) => f.get(tokenA, id), 'get'],
    ['GET with revealDetails=true', (id: string) => f.get(tokenA, id, 'revealDetails=true'), 'get'],
    // A status change asks nothing before the change itself (D57).
    ['PATCH', (id: string) => f.patch(tokenA, id, { status: 'inactive' }), 'status'],
  ] as const)('%s: an unknown id, B’s card and a malformed id answer alike, the first two after the same connector call', async (_name, call, asked) => {
    const calls = () => f.connector.calls[asked] as { cardId: string }[];
    const before = calls().length;
    const unknown = await call('card_99999999');
    const foreign = await call(cardOfB);
    const malformed = await call('card 1/..');
    expect(unknown.statusCode).toBe(404);
    expect(comparable(foreign)).toEqual(comparable(unknown));
    expect(comparable(malformed)).toEqual(comparable(unknown));
    // The per-request values are there, and differ only as they must.
    expect(foreign.json<{ correlationId: string }>().correlationId).not.toBe(unknown.json<{ correlationId: string }>().correlationId);
    expect(Object.keys(foreign.headers).sort()).toEqual(Object.keys(unknown.headers).sort());
    expect(
      calls()
        .slice(before)
        .map((made) => made.cardId),
    ).toEqual(['card_99999999', cardOfB]);
    // B's card is still there, untouched, for B.
    expect((await f.get(await f.token('life-uk'), cardOfB)).json<{ status: string }>().status).toBe('active');
  });
});
