import { afterEach, describe, expect, it } from 'vitest';
import { createRedisClient } from '../../src/store/redis/redis-client.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { metricValue } from '../support/auth-requests.js';
import { connectorStats, createCard, expectError, mintToken, startCardFixture, validCardBody, type CardFixture } from '../support/card-fixture.js';
import { FaultyStore } from '../support/faulty-store.js';
import { unusedPort } from '../support/redis.js';

/**
 * D23: with the shared store unreachable, card creation answers 503 with retryAfter within
 * about a second; it never hangs, never forwards unguarded, and never becomes a 401 or 429.
 */

const closers: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function gatewayWithDeadStore(): Promise<CardFixture> {
  const port = await unusedPort();
  const client = createRedisClient({ url: `redis://127.0.0.1:${port}`, commandTimeoutMs: 300, connectTimeoutMs: 300 });
  client.on('error', () => undefined);
  const store = new RedisStore(client, 'test:card-outage:');
  closers.push(async () => {
    await store.close();
    client.disconnect();
  });
  const fixture = await startCardFixture({ store });
  closers.push(() => fixture.close());
  return fixture;
}

describe('card creation with the store down (D23)', () => {
  it('answers 503 with retryAfter and forwards nothing', async () => {
    const fixture = await gatewayWithDeadStore();
    // Login needs the store too: mint the access token directly.
    const token = await mintToken(fixture.gw, 'full');
    const before = (await connectorStats(fixture.connector)).requestsReceived;
    const unavailableBefore = await metricValue(fixture.gw, 'gateway_store_unavailable_total');

    for (const query of [undefined, 'revealDetails=true']) {
      const response = await createCard(fixture.gw, token, validCardBody(), query);
      const body = expectError(response, 503, 'Service temporarily unavailable');
      expect(body.retryAfter).toBe(1);
      expect(response.headers['retry-after']).toBe('1');
      expect(body.details).toEqual({});
    }
    expect(await metricValue(fixture.gw, 'gateway_store_unavailable_total')).toBe(unavailableBefore + 2);
    const stats = await connectorStats(fixture.connector);
    expect(stats.requestsReceived).toBe(before);
    expect(stats.cardsCreated).toBe(0);
    // No card event was audited for requests that never ran.
    expect(fixture.gw.audit.lines.filter((line) => line.includes('"card.'))).toEqual([]);
  });

  it('still answers 401 and 400 first: the store is consulted only for a valid, authorised request', async () => {
    // The store went away after the start, once the credentials' not-before instants were read (D41).
    const store = new FaultyStore(new MemoryStore());
    const fixture = await startCardFixture({ store });
    closers.push(async () => {
      await fixture.close();
      await store.close();
    });
    for (const part of ['sessions', 'idempotency', 'lockouts', 'limiter'] as const) store.faults[part] = 'unavailable';
    const token = await mintToken(fixture.gw, 'full');
    expectError(await createCard(fixture.gw, undefined, validCardBody()), 401, 'Authorization header is missing');
    expectError(await createCard(fixture.gw, token, validCardBody({ cardLimit: 0 })), 400, 'Request validation failed');
    expectError(await createCard(fixture.gw, await mintToken(fixture.gw, 'no-perms'), validCardBody()), 403, 'Permission cards:create is required');
    expectError(await createCard(fixture.gw, token, validCardBody()), 503, 'Service temporarily unavailable');
    expect((await connectorStats(fixture.connector)).requestsReceived).toBe(0);
  });

  it('answers 503 to every bearer request of a gateway that has not reached the store since its start, after the 401s (D41)', async () => {
    // It cannot know whether a token's session ended (the not-before instants live in the store): it takes none.
    const fixture = await gatewayWithDeadStore();
    const token = await mintToken(fixture.gw, 'full');
    expectError(await createCard(fixture.gw, undefined, validCardBody()), 401, 'Authorization header is missing');
    expectError(await createCard(fixture.gw, token, validCardBody({ cardLimit: 0 })), 503, 'Service temporarily unavailable');
    expect((await connectorStats(fixture.connector)).requestsReceived).toBe(0);
  });
});
