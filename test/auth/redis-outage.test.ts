import type { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/foundation/clock.js';
import { createRedisClient, waitUntilReady } from '../../src/store/redis/redis-client.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { PASSWORD, createTestGateway, login, type TestGateway } from '../support/gateway-fixture.js';
import { startPrivateRedis, type PrivateRedis } from '../support/private-redis.js';
import { uniquePrefix } from '../support/redis.js';
import { RELAXED_LIMITS, T0, expectStoreUnavailable, postLogin, postLogout, postRefresh, refreshOk } from '../support/auth-requests.js';
import { HANG_GUARD_MS, waitFor, withinHangGuard } from '../support/wait.js';

/**
 * D23 against a redis-server of this test's own (the shared one on 6379 is never touched):
 * paused with SIGSTOP (socket open, no answers) and killed then restarted on the same port.
 *
 * The store's own command deadline (300 ms here) is what must answer 503 while Redis is paused.
 * The ioredis client has a backstop timeout of its own; it is set past the hang guard here, so a
 * store that stopped applying its deadline hangs the requests (and fails the test) instead of
 * being rescued, a little later, by the backstop.
 */
describe('authentication while the shared store is down (D23)', () => {
  let redis: PrivateRedis;
  let client: Redis;
  let store: RedisStore;
  let gw: TestGateway;

  beforeEach(async () => {
    redis = await startPrivateRedis();
    client = createRedisClient({ url: redis.url, commandTimeoutMs: HANG_GUARD_MS, connectTimeoutMs: 500 });
    client.on('error', () => undefined);
    store = new RedisStore(client, uniquePrefix('auth-outage'), { commandTimeoutMs: 300 });
    expect(await waitUntilReady(client, 5_000)).toBe(true);
    gw = await createTestGateway({ clock: new ManualClock(T0), store, overrides: { rateLimits: RELAXED_LIMITS } });
  });

  afterEach(async () => {
    await gw?.close();
    // A paused server would hold QUIT until the command timeout: let it answer first.
    try {
      redis?.resume();
    } catch {
      // already gone
    }
    await store?.close();
    await redis?.stop();
  });

  /** Login, refresh and logout each answer 503 with retryAfter: never 401/429, never a hang (the hang guard). */
  async function expectAllUnavailable(session: { accessToken: string; refreshToken: string }): Promise<void> {
    const attempts = {
      login: () => postLogin(gw, 'full', PASSWORD),
      'login of an unknown user': () => postLogin(gw, 'nobody', 'wrong'),
      refresh: () => postRefresh(gw, session.accessToken, session.refreshToken),
      logout: () => postLogout(gw, session.accessToken, session.refreshToken),
    };
    for (const [what, attempt] of Object.entries(attempts)) {
      expectStoreUnavailable(await withinHangGuard(`${what} (the store's command deadline did not bound it)`, attempt()));
    }
  }

  /** The store's line of /readyz (the connector, unreachable in these tests, has its own). */
  async function storeReadiness(): Promise<unknown> {
    const response = await gw.gateway.admin.inject({ method: 'GET', url: '/readyz' });
    return response.json<{ checks: Record<string, unknown> }>().checks['store'];
  }

  const loginSucceeds = async () => (await postLogin(gw, 'full', PASSWORD)).statusCode === 200;

  it('answers 503 while Redis is paused (SIGSTOP) and recovers by itself after SIGCONT', async () => {
    const session = await login(gw);
    const kept = await login(gw);
    expect(await storeReadiness()).toBe('ok');

    redis.pause();
    await expectAllUnavailable(session);
    const readiness = await gw.gateway.admin.inject({ method: 'GET', url: '/readyz' });
    expect(readiness.statusCode).toBe(503);
    expect(readiness.json()).toMatchObject({ status: 'not ready', checks: { store: 'unavailable' } });

    redis.resume();
    await waitFor('login to succeed again after SIGCONT', loginSucceeds);
    // the same gateway instance, never restarted: sessions from before the pause still work
    const rotated = await refreshOk(gw, kept.accessToken, kept.refreshToken);
    expect((await postLogout(gw, rotated.accessToken, rotated.refreshToken)).statusCode).toBe(200);
    expect(await storeReadiness()).toBe('ok');
  });

  it('answers 503 while Redis is dead and recovers when a new one starts on the same port', async () => {
    const session = await login(gw);
    await redis.kill();
    await expectAllUnavailable(session);

    await redis.restart();
    await waitFor('login to succeed again after the restart', loginSucceeds);
    const fresh = await login(gw);
    const rotated = await refreshOk(gw, fresh.accessToken, fresh.refreshToken);
    expect((await postLogout(gw, rotated.accessToken, rotated.refreshToken)).statusCode).toBe(200);
  });
});
