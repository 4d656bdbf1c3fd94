import type { LightMyRequestResponse } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/foundation/clock.js';
import {
  HOUR,
  MINUTE,
  RELAXED_LIMITS,
  SECOND,
  T0,
  T0_SECONDS,
  getWhoami,
  postLogin,
  postLogout,
  postRefresh,
  refreshOk,
  whoamiRoute,
  type RefreshAnswer,
} from '../support/auth-requests.js';
import { expectContractError } from '../support/envelope.js';
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
import { createTestRedisStore, openReplicaStore } from '../support/redis.js';

/**
 * Issue 16, finding 2 (D41), on real replicas: two gateways, each with its own Redis client (as
 * two processes), one Redis namespace, one injected clock. A credential deactivated and then
 * reactivated, with the same password hash or a new one, never revives a token or session from
 * before: every earlier access token gets 401 `token_revoked`, every earlier refresh token 401
 * `refresh_token_revoked`, on both replicas, including one that was down during the change and
 * one restarted while the credential was inactive. Before the fix the old access token still
 * created cards and the old refresh token still refreshed. And every session ends at login +
 * `tokens.sessionMaxAgeHours`, however often it is refreshed.
 */

const REVOKED_ACCESS = 'Access token is revoked: log in again';
const NEW_PASSWORD = 'a new password for full, after its reactivation';

function expectCoded(response: LightMyRequestResponse, status: number, code: string, message: string): void {
  expectContractError({ statusCode: response.statusCode, headers: response.headers, body: response.body }, status, code, message);
}

const expectTokenRevoked = (response: LightMyRequestResponse) => {
  expectCoded(response, 401, 'token_revoked', REVOKED_ACCESS);
  expect(response.headers['www-authenticate']).toBe('Bearer error="invalid_token"');
};
const expectRefreshRevoked = (response: LightMyRequestResponse) => expectCoded(response, 401, 'refresh_token_revoked', 'Refresh token is revoked');

/** `cred-full` as the operator set it: active or not, and its password. */
const credentials = (active: boolean, password = PASSWORD): TestCredential[] =>
  DEFAULT_CREDENTIALS.map((credential) => (credential.id === 'cred-full' ? { ...credential, active, password } : credential));

describe('sessions end with their credential, on every replica (D41)', () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });

  async function replicas(extra: RawConfig = {}) {
    const overrides: RawConfig = { rateLimits: RELAXED_LIMITS, ...extra };
    const shared = await createTestRedisStore('sessions-end');
    closers.push(() => shared.cleanup());
    /** Loses the stored not-before instants, as a restore from an older backup or a failover would. */
    const loseNotBefore = async () => expect(await shared.client.del(`${shared.prefix}cred-not-before`)).toBe(1);
    const clock = new ManualClock(T0);
    /** A replica as a process would be: its own Redis client, the config of its start. */
    const start = async (credentialsNow: TestCredential[]) => {
      const store = await openReplicaStore(shared.prefix);
      const gw = await createTestGateway({ config: await testConfig(overrides, credentialsNow), clock, store, extend: whoamiRoute });
      let closed = false;
      const stop = async () => {
        if (closed) return;
        closed = true;
        await gw.close();
        await store.close();
      };
      closers.push(stop);
      return { gw, stop };
    };
    const reload = async (gw: TestGateway, credentialsNow: TestCredential[]) => gw.gateway.reload(await testConfig(overrides, credentialsNow));
    return { clock, start, reload, loseNotBefore };
  }

  /** Every earlier session is dead on `gw`: its access token, and its refresh token presented with a fresh bearer. */
  async function expectEnded(gw: TestGateway, sessions: { accessToken: string; refreshToken: string }[], bearer: string): Promise<void> {
    for (const session of sessions) {
      expectTokenRevoked(await getWhoami(gw, session.accessToken));
      expectTokenRevoked(await postRefresh(gw, session.accessToken, session.refreshToken));
      expectRefreshRevoked(await postRefresh(gw, bearer, session.refreshToken));
    }
  }

  it('deactivate, then reactivate with the same hash: earlier tokens are dead on both, the replica down meanwhile included', async () => {
    const { clock, start, reload } = await replicas();
    const a = await start(credentials(true));
    let b = await start(credentials(true));
    const onA = await login(a.gw);
    const onB = await login(b.gw);
    const kept = await login(a.gw);
    expect((await getWhoami(b.gw, onA.accessToken)).statusCode).toBe(200);

    clock.advance(MINUTE);
    // B is down while A sees the credential deactivated, then active again.
    await b.stop();
    await reload(a.gw, credentials(false));
    expectCoded(await getWhoami(a.gw, onA.accessToken), 401, 'credential_inactive', 'Credential is inactive');
    clock.advance(MINUTE);
    await reload(a.gw, credentials(true));
    clock.advance(MINUTE);
    // B comes back with the active config: it never saw the deactivation, and reads the instant at start.
    b = await start(credentials(true));

    const fresh = await login(b.gw);
    for (const gw of [a.gw, b.gw]) {
      expect((await getWhoami(gw, fresh.accessToken)).json()).toEqual({ credential: 'cred-full' });
      await expectEnded(gw, [onA, onB], fresh.accessToken);
    }
    // Logout of an ended session that nothing else touched: refresh_token_revoked too, once; the family is then revoked.
    expectRefreshRevoked(await postLogout(b.gw, fresh.accessToken, kept.refreshToken));
    expectRefreshRevoked(await postRefresh(a.gw, fresh.accessToken, kept.refreshToken));
    // The new session lives on both.
    const rotated = await refreshOk(a.gw, fresh.accessToken, fresh.refreshToken);
    expect((await getWhoami(b.gw, rotated.accessToken)).statusCode).toBe(200);
  });

  it('deactivate, then reactivate with a new hash: earlier tokens are dead on both, the replica restarted while inactive included', async () => {
    const { clock, start, reload } = await replicas();
    const a = await start(credentials(true));
    let b = await start(credentials(true));
    const onA = await login(a.gw);
    const onB = await login(b.gw);

    clock.advance(MINUTE);
    await reload(a.gw, credentials(false));
    await reload(b.gw, credentials(false));
    // B restarts while the credential is inactive.
    await b.stop();
    clock.advance(MINUTE);
    b = await start(credentials(false));
    clock.advance(MINUTE);
    await reload(a.gw, credentials(true, NEW_PASSWORD));
    await reload(b.gw, credentials(true, NEW_PASSWORD));

    expectCoded(await postLogin(a.gw, 'full', PASSWORD), 401, 'authentication_failed', 'Authentication failed');
    const fresh = await login(b.gw, 'full', NEW_PASSWORD);
    for (const gw of [a.gw, b.gw]) {
      expect((await getWhoami(gw, fresh.accessToken)).statusCode).toBe(200);
      await expectEnded(gw, [onA, onB], fresh.accessToken);
    }
  });

  it('a new hash alone (no deactivation) ends earlier sessions on both, also on a replica started after the change', async () => {
    const { clock, start, reload } = await replicas();
    const a = await start(credentials(true));
    const b = await start(credentials(true));
    const before = await login(a.gw);
    clock.advance(MINUTE);
    await reload(a.gw, credentials(true, NEW_PASSWORD));
    // B has not reloaded yet: the fingerprint already tells the old session apart (D41).
    const fresh = await login(a.gw, 'full', NEW_PASSWORD);
    expectTokenRevoked(await getWhoami(b.gw, fresh.accessToken));
    await reload(b.gw, credentials(true, NEW_PASSWORD));
    const c = await start(credentials(true, NEW_PASSWORD));
    for (const gw of [a.gw, b.gw, c.gw]) {
      expect((await getWhoami(gw, fresh.accessToken)).statusCode).toBe(200);
      await expectEnded(gw, [before], fresh.accessToken);
    }
  });

  it('a lost not-before record is written back by a replica that holds it at its next sync, before a restarted replica accepts revoked tokens (D61)', async () => {
    const { clock, start, reload, loseNotBefore } = await replicas();
    const a = await start(credentials(true));
    const b = await start(credentials(true));
    const revoked = await login(a.gw);
    clock.advance(MINUTE);
    await reload(a.gw, credentials(false));
    await reload(b.gw, credentials(false));
    clock.advance(MINUTE);
    await reload(a.gw, credentials(true));
    await reload(b.gw, credentials(true));
    const fresh = await login(b.gw);
    await expectEnded(b.gw, [revoked], fresh.accessToken);

    // The store loses the record; A is restarted and reads nothing.
    await loseNotBefore();
    await a.stop();
    const c = await start(credentials(true));
    // What the review found: a replica started after the loss takes the revoked token back.
    expect((await getWhoami(c.gw, revoked.accessToken)).statusCode).toBe(200);

    // B's next sync (the one its timer runs; a reload runs the same) writes back what it holds...
    await reload(b.gw, credentials(true));
    // ...and C's next sync reads it: the revoked sessions are dead there too, the new one lives.
    await reload(c.gw, credentials(true));
    await expectEnded(c.gw, [revoked], fresh.accessToken);
    expect((await getWhoami(c.gw, fresh.accessToken)).statusCode).toBe(200);
    const lines = b.gw.logs.lines.filter((line) => line.includes('written back from this replica'));
    expect(lines.map((line) => (JSON.parse(line) as { credential: string }).credential)).toEqual(['cred-full']);
    // Raise only: a sync with nothing lost writes nothing back.
    await reload(b.gw, credentials(true));
    expect(b.gw.logs.lines.filter((line) => line.includes('written back from this replica'))).toHaveLength(1);
  });

  it('ends a session refreshed every 4 minutes at login + sessionMaxAgeHours, across both replicas; refreshTokenExpiresAt never passes it', async () => {
    const { clock, start } = await replicas({ tokens: { sessionMaxAgeHours: 2 } });
    const a = await start(credentials(true));
    const b = await start(credentials(true));
    const end = T0_SECONDS + 2 * 3600;
    const first = await login(a.gw);
    expect(first.refreshTokenExpiresAt).toBe(end);
    let session: RefreshAnswer = { ...first };
    let refreshes = 0;
    for (let at = 4 * MINUTE; at < 2 * HOUR; at += 4 * MINUTE) {
      clock.set(T0 + at);
      session = await refreshOk(refreshes % 2 === 0 ? b.gw : a.gw, session.accessToken, session.refreshToken);
      refreshes += 1;
      // The earlier of the token's 24 h and the session's end: the end, every time.
      expect(session.refreshTokenExpiresAt).toBe(end);
      expect(session.accessTokenExpiresAt).toBe(T0_SECONDS + at / SECOND + 3600);
    }
    expect(refreshes).toBe(29);
    // Just inside the end the session still refreshes; at the end it is over, on both replicas.
    clock.set(T0 + 2 * HOUR - 1);
    session = await refreshOk(a.gw, session.accessToken, session.refreshToken);
    expect(session.refreshTokenExpiresAt).toBe(end);
    clock.set(T0 + 2 * HOUR);
    for (const gw of [b.gw, a.gw])
      expectCoded(await postRefresh(gw, session.accessToken, session.refreshToken), 401, 'refresh_token_expired', 'Refresh token is expired');
    // A new login starts a new session, with an end of its own.
    expect((await login(b.gw)).refreshTokenExpiresAt).toBe(end + 2 * 3600);
  }, 60_000);
});
