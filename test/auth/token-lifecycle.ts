import { decodeJwt, decodeProtectedHeader } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/foundation/clock.js';
import type { GatewayStore } from '../../src/store/store-types.js';
import {
  DEFAULT_CREDENTIALS,
  PASSWORD,
  createTestGateway,
  login,
  testConfig,
  type RawConfig,
  type TestCredential,
  type TestGateway,
} from '../support/gateway-fixture.js';
import {
  HOUR,
  MINUTE,
  RELAXED_LIMITS,
  SECOND,
  T0,
  T0_SECONDS,
  expectUnauthorized,
  getWhoami,
  postLogin,
  postLogout,
  postRefresh,
  refreshOk,
  whoamiRoute,
} from '../support/auth-requests.js';

export interface LifecycleStore {
  store: GatewayStore;
  cleanup(): Promise<void>;
}

const DAY_SECONDS = 86_400;
/** Logout answers an unknown token, or one of another credential, as refresh does. */
const LOGOUT_REFUSED = 'Refresh token is invalid';

/**
 * The session-token lifecycle of spec 2.1, 3, 5 and D1-D7, driven through the HTTP API with a
 * manual clock (never a sleep). Written once, run once per store implementation: `makeStore`
 * returns a fresh, empty store for the test's clock.
 */
export function tokenLifecycleSuite(name: string, makeStore: (clock: ManualClock) => Promise<LifecycleStore>): void {
  describe(`token lifecycle on the ${name} store`, () => {
    const opened: { gw: TestGateway; cleanup(): Promise<void> }[] = [];

    afterEach(async () => {
      for (const { gw, cleanup } of opened.splice(0)) {
        await gw.close();
        await cleanup();
      }
    });

    /** `tolerance` undefined keeps the config default (5 s); the exact-boundary tests pass 0. */
    async function open(options: { tolerance?: number } = {}): Promise<{ gw: TestGateway; overrides: RawConfig }> {
      const clock = new ManualClock(T0);
      const made = await makeStore(clock);
      const overrides: RawConfig = {
        rateLimits: RELAXED_LIMITS,
        ...(options.tolerance !== undefined && { tokens: { clockToleranceSeconds: options.tolerance } }),
      };
      try {
        const gw = await createTestGateway({ clock, store: made.store, overrides, extend: whoamiRoute });
        opened.push({ gw, cleanup: () => made.cleanup() });
        return { gw, overrides };
      } catch (error) {
        await made.cleanup();
        throw error;
      }
    }

    const at = (gw: TestGateway, offsetMs: number) => gw.clock.set(T0 + offsetMs);

    describe('login (spec 4.1, D1-D3)', () => {
      it('answers the six session fields: access and ID tokens for 1 h, an opaque refresh token for 24 h', async () => {
        const { gw } = await open();
        const session = await login(gw);
        expect(Object.keys(session).sort()).toEqual([
          'accessToken',
          'accessTokenExpiresAt',
          'idToken',
          'idTokenExpiresAt',
          'refreshToken',
          'refreshTokenExpiresAt',
        ]);
        expect(session.accessTokenExpiresAt).toBe(T0_SECONDS + 3600);
        expect(session.idTokenExpiresAt).toBe(T0_SECONDS + 3600);
        expect(session.refreshTokenExpiresAt).toBe(T0_SECONDS + DAY_SECONDS);

        expect(decodeProtectedHeader(session.accessToken)).toEqual({ alg: 'EdDSA', kid: 'sbx-1', typ: 'at+jwt' });
        const claims = decodeJwt(session.accessToken);
        expect(claims).toMatchObject({ sub: 'cred-full', iat: T0_SECONDS, exp: T0_SECONDS + 3600, iss: 'https://sandbox.test/', aud: 'card-issuing-sandbox' });
        expect(typeof claims.jti).toBe('string');
        expect(decodeJwt(session.idToken)).toMatchObject({ sub: 'cred-full', aud: 'full', auth_time: T0_SECONDS, exp: T0_SECONDS + 3600 });
        // D3: opaque, not a JWT; a 22-character family id, its generation (0 at login) and a 43-character (256-bit) secret.
        expect(session.refreshToken).toMatch(/^[A-Za-z0-9_-]{22}\.0\.[A-Za-z0-9_-]{43}$/);
      });
    });

    describe('access token expiry (spec 3: 1 hour)', () => {
      it('is accepted at +3599 s and refused at +3600 s, cached or not, and cannot refresh once expired', async () => {
        const { gw } = await open({ tolerance: 0 });
        const used = await login(gw);
        const unused = await login(gw);
        expect((await getWhoami(gw, used.accessToken)).statusCode).toBe(200);

        at(gw, 3599 * SECOND);
        const before = await getWhoami(gw, used.accessToken);
        expect(before.statusCode).toBe(200);
        expect(before.json()).toEqual({ credential: 'cred-full' });

        at(gw, 3600 * SECOND);
        // `used` was verified before (cache path), `unused` never was (full verification path).
        expectUnauthorized(await getWhoami(gw, used.accessToken), 'Access token is expired');
        expectUnauthorized(await getWhoami(gw, unused.accessToken), 'Access token is expired');
        // Spec 5.4: with an expired access token refresh is impossible, a new login is required.
        expectUnauthorized(await postRefresh(gw, unused.accessToken, unused.refreshToken), 'Access token is expired');
        expect((await postLogin(gw, 'full', PASSWORD)).statusCode).toBe(200);
      });

      it('with the default 5 s clock tolerance, is accepted until +3604 s and refused from +3605 s', async () => {
        const { gw } = await open();
        const used = await login(gw);
        const fresh = await login(gw);
        expect((await getWhoami(gw, used.accessToken)).statusCode).toBe(200);

        at(gw, 3604 * SECOND + 999);
        expect((await getWhoami(gw, used.accessToken)).statusCode).toBe(200);
        at(gw, 3605 * SECOND);
        expectUnauthorized(await getWhoami(gw, used.accessToken), 'Access token is expired');
        expectUnauthorized(await getWhoami(gw, fresh.accessToken), 'Access token is expired');
      });
    });

    describe('refresh token expiry (spec 3: 24 hours from its own issuance)', () => {
      it('refreshes at +86399 s and is refused as expired at +86400 s', async () => {
        const { gw } = await open({ tolerance: 0 });
        const first = await login(gw);
        const second = await login(gw);

        at(gw, (DAY_SECONDS - 1) * SECOND);
        // The login's access token died long ago: a new login of the same credential bears the refresh.
        const bearer = await login(gw);
        const rotated = await refreshOk(gw, bearer.accessToken, first.refreshToken);
        expect(rotated.refreshTokenExpiresAt).toBe(T0_SECONDS + DAY_SECONDS - 1 + DAY_SECONDS);

        at(gw, DAY_SECONDS * SECOND);
        expectUnauthorized(await postRefresh(gw, bearer.accessToken, second.refreshToken), 'Refresh token is expired');
        // The token issued by the rotation lives 24 h from its own issuance.
        await refreshOk(gw, bearer.accessToken, rotated.refreshToken);
      });
    });

    describe('rotation (D4, D5)', () => {
      it('answers the four D4 fields, expiring 3600 s and 86400 s from the refresh, and the new tokens work', async () => {
        const { gw } = await open({ tolerance: 0 });
        const session = await login(gw);
        at(gw, 123 * SECOND);
        const response = await postRefresh(gw, session.accessToken, session.refreshToken);
        expect(response.statusCode).toBe(200);
        expect(response.headers['cache-control']).toBe('no-store');
        const body = response.json<Record<string, unknown>>();
        expect(Object.keys(body).sort()).toEqual(['accessToken', 'accessTokenExpiresAt', 'refreshToken', 'refreshTokenExpiresAt']);
        expect(body['accessTokenExpiresAt']).toBe(T0_SECONDS + 123 + 3600);
        expect(body['refreshTokenExpiresAt']).toBe(T0_SECONDS + 123 + DAY_SECONDS);
        expect(body['refreshToken']).not.toBe(session.refreshToken);
        expect(String(body['refreshToken']).split('.')[0]).toBe(session.refreshToken.split('.')[0]);
        expect(decodeJwt(String(body['accessToken']))).toMatchObject({ sub: 'cred-full', iat: T0_SECONDS + 123, exp: T0_SECONDS + 123 + 3600 });

        const next = response.json<{ accessToken: string; refreshToken: string }>();
        expect((await getWhoami(gw, next.accessToken)).json()).toEqual({ credential: 'cred-full' });
        // the new access token outlives the login's: at +1 h it still bears a refresh of the new token
        at(gw, HOUR);
        expectUnauthorized(await getWhoami(gw, session.accessToken), 'Access token is expired');
        await refreshOk(gw, next.accessToken, next.refreshToken);
      });

      it('lets the old token refresh for 60 s from its FIRST rotation (at +59 s too), then treats it as reuse', async () => {
        const { gw } = await open({ tolerance: 0 });
        const session = await login(gw);
        const rotatedAt = 10 * SECOND;
        at(gw, rotatedAt);
        const first = await refreshOk(gw, session.accessToken, session.refreshToken);
        at(gw, rotatedAt + 30 * SECOND);
        const second = await refreshOk(gw, session.accessToken, session.refreshToken);
        at(gw, rotatedAt + 59 * SECOND);
        const third = await refreshOk(gw, session.accessToken, session.refreshToken);
        at(gw, rotatedAt + 59_999);
        const fourth = await refreshOk(gw, session.accessToken, session.refreshToken);
        // Each use within the grace is answered the token the first rotation issued (and a new
        // access token): the family has one current token, whichever request got there first.
        expect(new Set([first, second, third, fourth].map((r) => r.refreshToken))).toEqual(new Set([first.refreshToken]));
        expect(new Set([first, second, third, fourth].map((r) => r.refreshTokenExpiresAt))).toEqual(new Set([T0_SECONDS + 10 + DAY_SECONDS]));
        expect(new Set([first, second, third, fourth].map((r) => r.accessToken)).size).toBe(4);
        expect(first.refreshToken.split('.').slice(0, 2)).toEqual([session.refreshToken.split('.')[0], '1']);

        // The grace ran from the first rotation (+10 s), not from the later uses.
        at(gw, rotatedAt + 60 * SECOND);
        expectUnauthorized(await postRefresh(gw, session.accessToken, session.refreshToken), 'Refresh token is revoked');
        // Reuse revoked the whole family: the newest token and every sibling are dead too.
        for (const sibling of [fourth, third, second, first]) {
          expectUnauthorized(await postRefresh(gw, fourth.accessToken, sibling.refreshToken), 'Refresh token is revoked');
        }
      });

      it("revokes only the family of the reused token, not the credential's other sessions", async () => {
        const { gw } = await open({ tolerance: 0 });
        const victim = await login(gw);
        const other = await login(gw);
        await refreshOk(gw, victim.accessToken, victim.refreshToken);
        at(gw, 60 * SECOND);
        expectUnauthorized(await postRefresh(gw, victim.accessToken, victim.refreshToken), 'Refresh token is revoked');
        await refreshOk(gw, other.accessToken, other.refreshToken);
      });

      it('refuses a refresh token of another credential with 401 and leaves it untouched (D4)', async () => {
        const { gw } = await open({ tolerance: 0 });
        const owner = await login(gw, 'full');
        const intruder = await login(gw, 'create-only');
        expectUnauthorized(await postRefresh(gw, intruder.accessToken, owner.refreshToken), 'Refresh token is invalid');
        expectUnauthorized(await postLogout(gw, intruder.accessToken, owner.refreshToken), LOGOUT_REFUSED);
        // Had the refused attempt rotated the token, using it 61 s later would be reuse; had the
        // logout revoked it, it would be revoked. It still refreshes for its owner:
        at(gw, 61 * SECOND);
        await refreshOk(gw, owner.accessToken, owner.refreshToken);
      });

      it('refuses unknown and malformed refresh tokens with 401', async () => {
        const { gw } = await open({ tolerance: 0 });
        const session = await login(gw);
        const [family] = session.refreshToken.split('.');
        const forged = `${family}.${'A'.repeat(43)}`;
        expectUnauthorized(await postRefresh(gw, session.accessToken, forged), 'Refresh token is invalid');
        // the family's generations, with a secret it never issued: unknown, and nothing is revoked
        for (const generation of [0, 1, 7])
          expectUnauthorized(await postRefresh(gw, session.accessToken, `${family}.${generation}.${'A'.repeat(43)}`), 'Refresh token is invalid');
        await refreshOk(gw, session.accessToken, session.refreshToken);
        expectUnauthorized(await postRefresh(gw, session.accessToken, 'not-a-refresh-token'), 'Refresh token is invalid');
        expectUnauthorized(await postRefresh(gw, session.accessToken, session.accessToken), 'Refresh token is invalid');
      });
    });

    describe('logout (spec 3, D6)', () => {
      it('revokes the refresh token at once; the access token stays accepted until its own expiry', async () => {
        const { gw } = await open({ tolerance: 0 });
        const session = await login(gw);
        at(gw, 5 * MINUTE);
        const response = await postLogout(gw, session.accessToken, session.refreshToken);
        expect(response.statusCode).toBe(200);
        expect(response.json()).toEqual({ message: 'Logged out: the refresh token and its session are revoked' });

        expectUnauthorized(await postRefresh(gw, session.accessToken, session.refreshToken), 'Refresh token is revoked');
        expect((await getWhoami(gw, session.accessToken)).statusCode).toBe(200);
        at(gw, 3599 * SECOND);
        expect((await getWhoami(gw, session.accessToken)).statusCode).toBe(200);
        at(gw, 3600 * SECOND);
        expectUnauthorized(await getWhoami(gw, session.accessToken), 'Access token is expired');
      });

      it('refuses an unknown, a malformed, an already revoked and an expired refresh token with 401, as refresh does', async () => {
        const { gw } = await open({ tolerance: 0 });
        const session = await login(gw);
        const stale = await login(gw);
        const [family] = session.refreshToken.split('.');
        expectUnauthorized(await postLogout(gw, session.accessToken, `${family}.${'B'.repeat(43)}`), LOGOUT_REFUSED);
        expectUnauthorized(await postLogout(gw, session.accessToken, 'garbage'), LOGOUT_REFUSED);

        expect((await postLogout(gw, session.accessToken, session.refreshToken)).statusCode).toBe(200);
        // a session revoked already: what refresh answers for its tokens too
        expectUnauthorized(await postLogout(gw, session.accessToken, session.refreshToken), 'Refresh token is revoked');
        expectUnauthorized(await postRefresh(gw, session.accessToken, session.refreshToken), 'Refresh token is revoked');

        at(gw, DAY_SECONDS * SECOND);
        const bearer = await login(gw);
        expectUnauthorized(await postLogout(gw, bearer.accessToken, stale.refreshToken), 'Refresh token is expired');
      });

      it('revokes the grace siblings too, whichever token of the family is presented', async () => {
        const { gw } = await open({ tolerance: 0 });
        const a = await login(gw);
        const aNext = await refreshOk(gw, a.accessToken, a.refreshToken);
        at(gw, 30 * SECOND);
        // the older token, inside its grace, logs out the family: its newer sibling dies with it
        expect((await postLogout(gw, a.accessToken, a.refreshToken)).statusCode).toBe(200);
        expectUnauthorized(await postRefresh(gw, aNext.accessToken, aNext.refreshToken), 'Refresh token is revoked');

        const b = await login(gw);
        const bNext = await refreshOk(gw, b.accessToken, b.refreshToken);
        // the newest token logs out the family: the older one, still inside its grace, dies too
        expect((await postLogout(gw, bNext.accessToken, bNext.refreshToken)).statusCode).toBe(200);
        expectUnauthorized(await postRefresh(gw, bNext.accessToken, b.refreshToken), 'Refresh token is revoked');
      });

      it('treats a token presented at logout after its grace as reuse (D5): 401, and the whole family dies', async () => {
        const { gw } = await open({ tolerance: 0 });
        const session = await login(gw);
        const next = await refreshOk(gw, session.accessToken, session.refreshToken);
        at(gw, 60 * SECOND);
        // the answer refresh gives for it (issue 35: it was refresh_token_invalid here)
        expectUnauthorized(await postLogout(gw, next.accessToken, session.refreshToken), 'Refresh token is revoked');
        expectUnauthorized(await postRefresh(gw, next.accessToken, next.refreshToken), 'Refresh token is revoked');
        expect(gw.audit.events().map((event) => event.event)).toContain('refresh.reuse_detected');
      });
    });

    describe('deactivation (spec 5.6, D7)', () => {
      it('cuts off an issued access token, its refresh token and new logins at once, without a restart', async () => {
        const { gw, overrides } = await open({ tolerance: 0 });
        const session = await login(gw, 'full');
        const bystander = await login(gw, 'create-only');
        expect((await getWhoami(gw, session.accessToken)).statusCode).toBe(200);

        const deactivated: TestCredential[] = DEFAULT_CREDENTIALS.map((c) => (c.id === 'cred-full' ? { ...c, active: false } : c));
        gw.gateway.reload(await testConfig(overrides, deactivated));

        expectUnauthorized(await getWhoami(gw, session.accessToken), 'Credential is inactive');
        expectUnauthorized(await postRefresh(gw, session.accessToken, session.refreshToken), 'Credential is inactive');
        expectUnauthorized(await postLogin(gw, 'full', PASSWORD), 'Authentication failed');
        // another credential's session is not affected
        expect((await getWhoami(gw, bystander.accessToken)).statusCode).toBe(200);
        await refreshOk(gw, bystander.accessToken, bystander.refreshToken);

        gw.gateway.reload(await testConfig(overrides, DEFAULT_CREDENTIALS));
        expect((await postLogin(gw, 'full', PASSWORD)).statusCode).toBe(200);
      });
    });
  });
}
