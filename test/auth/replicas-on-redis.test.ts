import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/foundation/clock.js';
import { PASSWORD, createTestGateway, login, testConfig, type RawConfig, type TestGateway } from '../support/gateway-fixture.js';
import { createTestRedisStore, openReplicaStore, type TestRedisStore } from '../support/redis.js';
import {
  SECOND,
  T0,
  expectRateLimited,
  expectUnauthorized,
  getWhoami,
  postLogin,
  postLogout,
  postRefresh,
  rateLimitHeaders,
  refreshOk,
  whoamiRoute,
} from '../support/auth-requests.js';

/**
 * Two gateway instances, one config, one Redis namespace: what one does, the other sees
 * (D5, D6, D11 "shared by all replicas"). Each has its own Redis client, as separate processes would.
 */
describe('two gateway instances on one Redis', () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });

  async function pair(overrides: RawConfig = {}): Promise<{ a: TestGateway; b: TestGateway; clock: ManualClock }> {
    const shared: TestRedisStore = await createTestRedisStore('auth-replicas');
    closers.push(() => shared.cleanup());
    const second = await openReplicaStore(shared.prefix);
    closers.push(() => second.close());

    const config = await testConfig(overrides);
    const clock = new ManualClock(T0);
    const a = await createTestGateway({ config, clock, store: shared.store, extend: whoamiRoute });
    closers.push(() => a.close());
    const b = await createTestGateway({ config, clock, store: second, extend: whoamiRoute });
    closers.push(() => b.close());
    return { a, b, clock };
  }

  it('accepts on one instance the tokens the other issued', async () => {
    const { a, b } = await pair();
    const session = await login(a);
    expect((await getWhoami(b, session.accessToken)).json()).toEqual({ credential: 'cred-full' });
    const rotated = await refreshOk(b, session.accessToken, session.refreshToken);
    expect((await getWhoami(a, rotated.accessToken)).json()).toEqual({ credential: 'cred-full' });
    await refreshOk(a, rotated.accessToken, rotated.refreshToken);
  });

  it('sees a logout made on the other instance', async () => {
    const { a, b } = await pair();
    const session = await login(a);
    const rotated = await refreshOk(a, session.accessToken, session.refreshToken);
    expect((await postLogout(b, session.accessToken, rotated.refreshToken)).statusCode).toBe(200);
    expectUnauthorized(await postRefresh(a, session.accessToken, rotated.refreshToken), 'Refresh token is revoked');
    expectUnauthorized(await postRefresh(a, session.accessToken, session.refreshToken), 'Refresh token is revoked');
    expectUnauthorized(await postLogout(a, session.accessToken, rotated.refreshToken), 'Refresh token is revoked');
  });

  it('sees a reuse detected on the other instance: the family is dead on both', async () => {
    const { a, b, clock } = await pair();
    const session = await login(a);
    const rotated = await refreshOk(a, session.accessToken, session.refreshToken);
    clock.advance(60 * SECOND);
    expectUnauthorized(await postRefresh(b, rotated.accessToken, session.refreshToken), 'Refresh token is revoked');
    expectUnauthorized(await postRefresh(a, rotated.accessToken, rotated.refreshToken), 'Refresh token is revoked');
  });

  it('shares the login limit: 5 attempts spread over both are answered, the 6th on either is 429', async () => {
    const { a, b, clock } = await pair();
    clock.set(T0 + 10 * SECOND);
    const attempts = [a, b, a, b, a];
    const remaining: number[] = [];
    for (const [index, gw] of attempts.entries()) {
      // a wrong password for the first four, the right one for the fifth: both kinds count
      const response = await postLogin(gw, 'full', index === 4 ? PASSWORD : 'wrong password');
      expect(response.statusCode).toBe(index === 4 ? 200 : 401);
      const headers = rateLimitHeaders(response);
      expect(headers.limit).toBe(5);
      expect(headers.reset).toBe(50);
      remaining.push(headers.remaining);
    }
    expect(remaining).toEqual([4, 3, 2, 1, 0]);

    for (const gw of [b, a]) {
      const refused = await postLogin(gw, 'full', PASSWORD);
      expect(expectRateLimited(refused)).toBe(50);
      expect(rateLimitHeaders(refused)).toEqual({ limit: 5, remaining: 0, reset: 50 });
    }
    // another username has its own count, on both instances
    expect((await postLogin(b, 'create-only', PASSWORD)).statusCode).toBe(200);

    clock.set(T0 + 60 * SECOND);
    expect((await postLogin(b, 'full', PASSWORD)).statusCode).toBe(200);
  });

  it('shares the refresh limit per credential across both instances', async () => {
    const { a, b } = await pair({ rateLimits: { login: { points: 100, windowSeconds: 60 } } });
    const session = await login(a);
    for (const gw of [a, b, a, b, a]) await refreshOk(gw, session.accessToken, session.refreshToken);
    expectRateLimited(await postRefresh(b, session.accessToken, session.refreshToken));
  });

  it('shares the failed-login lockout across both instances (D11a)', async () => {
    const { a, b } = await pair({ rateLimits: { login: { points: 100, windowSeconds: 60 } } });
    for (let attempt = 0; attempt < 10; attempt += 1) {
      expect((await postLogin(attempt % 2 === 0 ? a : b, 'full', 'wrong password')).statusCode).toBe(401);
    }
    expect(expectRateLimited(await postLogin(a, 'full', PASSWORD))).toBe(1800);
    expect(expectRateLimited(await postLogin(b, 'full', PASSWORD))).toBe(1800);
  });
});
