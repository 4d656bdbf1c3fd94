import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { createRedisClient, waitUntilReady } from '../../src/store/redis/redis-client.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import type { StoreEvent } from '../../src/store/store-types.js';
import { postLogin, RELAXED_LIMITS } from '../support/auth-requests.js';
import { PASSWORD, createTestGateway, type TestGateway } from '../support/gateway-fixture.js';
import { startPrivateRedis, type PrivateRedis } from '../support/private-redis.js';
import { uniquePrefix } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

/**
 * D55: service resumes within about a second of the store answering, however long the outage
 * was. Shown by what brings recovery, not by timing it: the store's scheduled health checks are
 * pushed out of reach (ten minutes apart), so only the reconnection itself or the first request
 * that succeeds can have told the store it is back. The reconnection delay never grows past
 * 500 ms however many attempts failed, and the first attempt after the server is back succeeds.
 */
const OUT_OF_REACH = 600_000;
const LONG_OUTAGE_ATTEMPTS = 15;

describe('recovery once the store answers again (D55)', () => {
  let redis: PrivateRedis | undefined;
  let store: RedisStore | undefined;
  let gw: TestGateway | undefined;

  afterEach(async () => {
    await gw?.close();
    await store?.close();
    await redis?.stop();
    [redis, store, gw] = [undefined, undefined, undefined];
  });

  async function start(): Promise<{ client: Redis; events: StoreEvent[]; delays: number[] }> {
    redis = await startPrivateRedis();
    const client = createRedisClient({ url: redis.url, commandTimeoutMs: 300, connectTimeoutMs: 500 });
    const delays: number[] = [];
    client.on('reconnecting', (delay: number) => delays.push(delay));
    store = new RedisStore(client, uniquePrefix('recovery'), { monitorIntervalMs: OUT_OF_REACH, fastMonitorIntervalMs: OUT_OF_REACH });
    const events: StoreEvent[] = [];
    store.subscribe((event) => events.push(event));
    expect(await waitUntilReady(client, 5_000)).toBe(true);
    gw = await createTestGateway({ store, overrides: { rateLimits: RELAXED_LIMITS } });
    await waitFor('the store to report itself up', async () => events.some((event) => event.kind === 'up'));
    expect((await postLogin(gw, 'full', PASSWORD)).statusCode).toBe(200);
    return { client, events, delays };
  }

  it(`after ${LONG_OUTAGE_ATTEMPTS} failed reconnections: the first attempt after the server is back succeeds, the store says so at once, the next login works`, async () => {
    const { events, delays } = await start();
    await redis!.kill();
    await waitFor(`${LONG_OUTAGE_ATTEMPTS} reconnection attempts`, async () => delays.length >= LONG_OUTAGE_ATTEMPTS);
    expect(events.filter((event) => event.kind === 'down')).toEqual([expect.objectContaining({ reason: 'unreachable' })]);
    expect((await postLogin(gw!, 'full', PASSWORD)).statusCode).toBe(503);
    // Capped: an outage of any length is followed by an attempt at most 500 ms after the server is back.
    expect(Math.max(...delays)).toBe(500);

    await redis!.restart();
    const attemptsBefore = delays.length;
    await waitFor('the store to report itself up after the restart', async () => events.at(-1)?.kind === 'up');
    // At most the attempt already scheduled when the server came back, and no scheduled check.
    expect(delays.length - attemptsBefore).toBeLessThanOrEqual(1);
    expect(events.map((event) => event.kind)).toEqual(['up', 'down', 'up']);
    expect((await postLogin(gw!, 'full', PASSWORD)).statusCode).toBe(200);
  }, 60_000);

  it('after CLIENT PAUSE: the first login once Redis answers succeeds, and that success tells the store it is back', async () => {
    const { events } = await start();
    const admin = new Redis(redis!.url, { maxRetriesPerRequest: 0, lazyConnect: true });
    admin.on('error', () => undefined);
    try {
      await admin.connect();
      expect(await admin.call('CLIENT', 'PAUSE', '1500', 'ALL')).toBe('OK');
      // Requests fail while it lasts; a failure prompts a check, which finds the store timed out.
      expect((await postLogin(gw!, 'full', PASSWORD)).statusCode).toBe(503);
      await waitFor('the store to report itself down', async () => events.at(-1)?.kind === 'down');
      expect(events.at(-1)).toMatchObject({ kind: 'down', reason: 'timed_out' });
      // Answered when the pause ends: from here on Redis serves.
      expect(await admin.ping()).toBe('PONG');
    } finally {
      admin.disconnect();
    }
    expect((await postLogin(gw!, 'full', PASSWORD)).statusCode).toBe(200);
    await waitFor('the store to report itself up after the pause', async () => events.at(-1)?.kind === 'up');
    expect(events.map((event) => event.kind)).toEqual(['up', 'down', 'up']);
  }, 30_000);
});
