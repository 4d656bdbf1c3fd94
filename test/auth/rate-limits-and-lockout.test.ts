import { afterEach, describe, expect, it } from 'vitest';
import { PasswordHashGate } from '../../src/auth/password-hash-gate.js';
import { ManualClock } from '../../src/foundation/clock.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import type { GatewayStore } from '../../src/store/store-types.js';
import { PASSWORD, createTestGateway, login, type RawConfig, type TestGateway } from '../support/gateway-fixture.js';
import { createTestRedisStore } from '../support/redis.js';
import {
  MINUTE,
  SECOND,
  T0,
  expectRateLimited,
  expectUnauthorized,
  metricValue,
  postLogin,
  postRefresh,
  rateLimitHeaders,
  refreshOk,
} from '../support/auth-requests.js';

type StoreFactory = (clock: ManualClock) => Promise<{ store: GatewayStore; cleanup(): Promise<void> }>;

const factories: [string, StoreFactory][] = [
  [
    'memory',
    async (clock) => {
      const store = new MemoryStore(() => clock.now());
      return { store, cleanup: () => store.close() };
    },
  ],
  ['redis', async () => createTestRedisStore('auth-limits')],
];

/** D11 (5 per minute per credential on login and refresh) and D11a (lockout), on each store. */
for (const [name, make] of factories) {
  describe(`rate limits and lockout on the ${name} store`, () => {
    const opened: { gw: TestGateway; cleanup(): Promise<void> }[] = [];
    afterEach(async () => {
      for (const { gw, cleanup } of opened.splice(0)) {
        await gw.close();
        await cleanup();
      }
    });

    async function open(overrides: RawConfig = {}, hashGate?: PasswordHashGate): Promise<TestGateway> {
      const clock = new ManualClock(T0);
      const made = await make(clock);
      try {
        const gw = await createTestGateway({ clock, store: made.store, overrides, ...(hashGate && { hashGate }) });
        opened.push({ gw, cleanup: () => made.cleanup() });
        return gw;
      } catch (error) {
        await made.cleanup();
        throw error;
      }
    }

    const events = (gw: TestGateway, event: string) => gw.audit.events().filter((e) => e.event === event);

    describe('login: 5 per minute per submitted username (D11)', () => {
      it('answers 5 attempts of an unknown username and refuses the 6th with 429, retryAfter and RateLimit-* headers', async () => {
        const gw = await open();
        gw.clock.set(T0 + 15 * SECOND);
        for (let attempt = 1; attempt <= 5; attempt += 1) {
          const response = await postLogin(gw, 'nobody-at-all', 'whatever');
          expectUnauthorized(response, 'Authentication failed');
          expect(rateLimitHeaders(response)).toEqual({ limit: 5, remaining: 5 - attempt, reset: 45 });
        }
        const refused = await postLogin(gw, 'nobody-at-all', 'whatever');
        expect(expectRateLimited(refused)).toBe(45);
        expect(Object.keys(refused.json()).sort()).toEqual(['code', 'correlationId', 'details', 'message', 'retryAfter', 'status', 'timestamp']);
        expect(rateLimitHeaders(refused)).toEqual({ limit: 5, remaining: 0, reset: 45 });
        expect(await metricValue(gw, 'gateway_rate_limited_total', { limiter: 'login' })).toBe(1);
      });

      it('refuses the 6th attempt even with the right password, until the clock passes the minute boundary', async () => {
        const gw = await open();
        for (let attempt = 0; attempt < 4; attempt += 1) expect((await postLogin(gw, 'full', 'wrong password')).statusCode).toBe(401);
        expect((await postLogin(gw, 'full', PASSWORD)).statusCode).toBe(200);
        // another username has its own count
        expect((await postLogin(gw, 'create-only', PASSWORD)).statusCode).toBe(200);

        gw.clock.set(T0 + 30 * SECOND);
        expect(expectRateLimited(await postLogin(gw, 'full', PASSWORD))).toBe(30);
        gw.clock.set(T0 + MINUTE - 1);
        expect(expectRateLimited(await postLogin(gw, 'full', PASSWORD))).toBe(1);

        gw.clock.set(T0 + MINUTE);
        const fresh = await postLogin(gw, 'full', PASSWORD);
        expect(fresh.statusCode).toBe(200);
        expect(rateLimitHeaders(fresh)).toEqual({ limit: 5, remaining: 4, reset: 60 });
      });

      it('checks the limit before the password: refused attempts cost no hashing and count no failure', async () => {
        const gate = new PasswordHashGate(4, 4);
        const gw = await open({}, gate);
        for (let attempt = 0; attempt < 10; attempt += 1) {
          const response = await postLogin(gw, 'full', 'wrong password');
          expect(response.statusCode).toBe(attempt < 5 ? 401 : 429);
          // Counted at the hash gate: each answered attempt ran one hash, a 429 none.
          expect(gate.admitted, `hashes after attempt ${attempt + 1}`).toBe(Math.min(attempt + 1, 5));
        }

        // Had the five refused attempts counted as failures, the lockout (10) would hold now.
        gw.clock.set(T0 + MINUTE);
        for (let attempt = 0; attempt < 4; attempt += 1) expect((await postLogin(gw, 'full', 'wrong password')).statusCode).toBe(401);
        expect((await postLogin(gw, 'full', PASSWORD)).statusCode).toBe(200);
        expect(events(gw, 'login.failed')).toHaveLength(9);
        expect(events(gw, 'login.rate_limited')).toHaveLength(5);
        expect(events(gw, 'login.locked_out')).toHaveLength(0);
      });
    });

    describe('refresh: 5 per minute per credential (D11)', () => {
      it('refuses the 6th refresh of a credential with 429, lets other credentials refresh, and resets with the minute', async () => {
        const gw = await open({ rateLimits: { login: { points: 100, windowSeconds: 60 } } });
        const session = await login(gw, 'full');
        const second = await login(gw, 'full');
        const other = await login(gw, 'create-only');
        gw.clock.set(T0 + 20 * SECOND);
        for (let attempt = 1; attempt <= 5; attempt += 1) {
          // alternating sessions of one credential: the count is per credential, not per token
          const response = await postRefresh(gw, session.accessToken, attempt % 2 ? session.refreshToken : second.refreshToken);
          expect(response.statusCode).toBe(200);
          expect(rateLimitHeaders(response)).toEqual({ limit: 5, remaining: 5 - attempt, reset: 40 });
        }
        const refused = await postRefresh(gw, session.accessToken, second.refreshToken);
        expect(expectRateLimited(refused)).toBe(40);
        expect(rateLimitHeaders(refused)).toEqual({ limit: 5, remaining: 0, reset: 40 });
        expect(gw.audit.events().filter((e) => e.event === 'refresh.rate_limited')).toHaveLength(1);
        expect(await metricValue(gw, 'gateway_rate_limited_total', { limiter: 'refresh' })).toBe(1);

        await refreshOk(gw, other.accessToken, other.refreshToken);
        // a new window: the credential refreshes again (its tokens, first rotated at +20 s, are still in their grace)
        gw.clock.set(T0 + MINUTE);
        const again = await postRefresh(gw, session.accessToken, session.refreshToken);
        expect(again.statusCode).toBe(200);
        expect(rateLimitHeaders(again)).toEqual({ limit: 5, remaining: 4, reset: 60 });
      });
    });

    describe('failed-login lockout (D11a)', () => {
      const generous = { rateLimits: { login: { points: 100, windowSeconds: 60 } } };

      it('after 10 consecutive failures refuses even the right password with 429 for 30 minutes, audited', async () => {
        const gw = await open(generous);
        for (let attempt = 1; attempt <= 10; attempt += 1) expectUnauthorized(await postLogin(gw, 'full', `wrong ${attempt}`), 'Authentication failed');
        const started = events(gw, 'login.locked_out');
        expect(started).toHaveLength(1);
        expect(started[0]).toMatchObject({ credential: 'cred-full', outcome: 'denied', reason: 'lockout_started' });

        const locked = await postLogin(gw, 'full', PASSWORD);
        expect(expectRateLimited(locked)).toBe(1800);
        expect(events(gw, 'login.locked_out')[1]).toMatchObject({ correlationId: locked.headers['x-correlation-id'], outcome: 'denied', reason: 'lockout' });
        expect(await metricValue(gw, 'gateway_rate_limited_total', { limiter: 'login_lockout' })).toBe(1);
        expect(await metricValue(gw, 'gateway_logins_total', { outcome: 'locked_out' })).toBe(1);
        // other usernames are not locked
        expect((await postLogin(gw, 'create-only', PASSWORD)).statusCode).toBe(200);

        gw.clock.set(T0 + 29 * MINUTE + 59 * SECOND);
        expect(expectRateLimited(await postLogin(gw, 'full', PASSWORD))).toBe(1);
        gw.clock.set(T0 + 30 * MINUTE);
        expect((await postLogin(gw, 'full', PASSWORD)).statusCode).toBe(200);
      });

      it('locks out an unknown username the same way', async () => {
        const gw = await open(generous);
        for (let attempt = 0; attempt < 10; attempt += 1) expect((await postLogin(gw, 'ghost', 'pw')).statusCode).toBe(401);
        expect(expectRateLimited(await postLogin(gw, 'ghost', 'pw'))).toBe(1800);
        expect(events(gw, 'login.locked_out')[0]).toMatchObject({ reason: 'lockout_started' });
        expect(events(gw, 'login.locked_out')[0]?.credential).toBeUndefined();
      });

      it('resets the count on a success: 9 failures, a success, 9 failures never lock', async () => {
        const gw = await open(generous);
        for (let attempt = 0; attempt < 9; attempt += 1) expect((await postLogin(gw, 'full', 'wrong')).statusCode).toBe(401);
        expect((await postLogin(gw, 'full', PASSWORD)).statusCode).toBe(200);
        for (let attempt = 0; attempt < 9; attempt += 1) expect((await postLogin(gw, 'full', 'wrong')).statusCode).toBe(401);
        expect((await postLogin(gw, 'full', PASSWORD)).statusCode).toBe(200);
        expect(events(gw, 'login.locked_out')).toHaveLength(0);
        // and the 10th consecutive failure after that success does lock
        for (let attempt = 0; attempt < 10; attempt += 1) expect((await postLogin(gw, 'full', 'wrong')).statusCode).toBe(401);
        expectRateLimited(await postLogin(gw, 'full', PASSWORD));
      });

      it('counts failures across minutes under the default 5/min limit', async () => {
        const gw = await open();
        for (let minute = 0; minute < 2; minute += 1) {
          gw.clock.set(T0 + minute * MINUTE);
          for (let attempt = 0; attempt < 5; attempt += 1) expect((await postLogin(gw, 'full', 'wrong')).statusCode).toBe(401);
        }
        gw.clock.set(T0 + 2 * MINUTE);
        // inside the fresh minute's limit, but locked out since the 10th failure at +1 min
        expect(expectRateLimited(await postLogin(gw, 'full', PASSWORD))).toBe(1800 - 60);
        gw.clock.set(T0 + MINUTE + 30 * MINUTE);
        expect((await postLogin(gw, 'full', PASSWORD)).statusCode).toBe(200);
      });
    });
  });
}
