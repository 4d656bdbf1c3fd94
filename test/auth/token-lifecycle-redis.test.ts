import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { hashRefreshToken } from '../../src/auth/refresh-token.js';
import { ManualClock } from '../../src/foundation/clock.js';
import { RELAXED_LIMITS, SECOND, T0, expectUnauthorized, postLogout, postRefresh, refreshOk } from '../support/auth-requests.js';
import { createTestGateway, login, type TestGateway } from '../support/gateway-fixture.js';
import { createTestRedisStore, keysWithPrefix, type TestRedisStore } from '../support/redis.js';
import { tokenLifecycleSuite } from './token-lifecycle.js';

tokenLifecycleSuite('redis', async () => {
  const { store, cleanup } = await createTestRedisStore('auth-lifecycle');
  return { store, cleanup };
});

/**
 * Issue 35's upgrade path: a session started by a version before it (refresh tokens
 * `<family>.<secret>`, a family hash and one hash per token) keeps working through this version
 * until it ends: it rotates (into tokens of its own format), its siblings and reuse are judged
 * as that version judged them, and logout revokes it.
 */
describe('a session of the format before issue 35, through the gateway on Redis', () => {
  const opened: { gw: TestGateway; redis: TestRedisStore }[] = [];
  afterEach(async () => {
    for (const { gw, redis } of opened.splice(0)) {
      await gw.close();
      await redis.cleanup();
    }
  });

  /** A gateway, and a session written as the earlier version wrote it for `cred-full`. */
  async function open() {
    const redis = await createTestRedisStore('auth-legacy');
    const gw = await createTestGateway({ clock: new ManualClock(T0), store: redis.store, overrides: { rateLimits: RELAXED_LIMITS } });
    opened.push({ gw, redis });
    const familyId = randomBytes(16).toString('base64url');
    const refreshToken = `${familyId}.${randomBytes(32).toString('base64url')}`;
    const { client, prefix } = redis;
    const fingerprint = gw.config.credentials.byId('cred-full')!.secretFingerprint;
    await client.hset(
      `${prefix}fam:{${familyId}}`,
      'cred',
      'cred-full',
      'revoked',
      '0',
      'fp',
      fingerprint,
      'login',
      String(T0),
      'end',
      String(T0 + 168 * 3600 * SECOND),
    );
    await client.hset(`${prefix}rt:{${familyId}}:${hashRefreshToken(refreshToken)}`, 'exp', String(T0 + 24 * 3600 * SECOND));
    // Any access token of the credential bears the refresh (D4): one from a new login.
    const { accessToken } = await login(gw);
    return { gw, redis, familyId, accessToken, refreshToken };
  }

  it('refreshes into tokens of its own format, lets the old token refresh within its grace, and calls it reuse after', async () => {
    const { gw, redis, familyId, accessToken, refreshToken } = await open();
    const first = await refreshOk(gw, accessToken, refreshToken);
    expect(first.refreshToken).toMatch(new RegExp(`^${familyId}\\.[A-Za-z0-9_-]{43}$`));
    gw.clock.set(T0 + 30 * SECOND);
    const second = await refreshOk(gw, accessToken, refreshToken);
    expect(second.refreshToken).not.toBe(first.refreshToken);
    await refreshOk(gw, accessToken, first.refreshToken);
    expect((await keysWithPrefix(redis.client, redis.prefix)).filter((key) => key.includes(familyId) && key.includes('ses:'))).toEqual([]);
    gw.clock.set(T0 + 60 * SECOND);
    expectUnauthorized(await postRefresh(gw, accessToken, refreshToken), 'Refresh token is revoked');
    expectUnauthorized(await postRefresh(gw, accessToken, second.refreshToken), 'Refresh token is revoked');
    expect(gw.audit.events().map((event) => event.event)).toContain('refresh.reuse_detected');
  });

  it('logs out, and the session is revoked', async () => {
    const { gw, accessToken, refreshToken } = await open();
    const next = await refreshOk(gw, accessToken, refreshToken);
    expect((await postLogout(gw, accessToken, next.refreshToken)).statusCode).toBe(200);
    expectUnauthorized(await postRefresh(gw, accessToken, next.refreshToken), 'Refresh token is revoked');
    expectUnauthorized(await postLogout(gw, accessToken, refreshToken), 'Refresh token is revoked');
    // a new login is a session of this version's format, beside it
    expect((await login(gw)).refreshToken).toMatch(/^[A-Za-z0-9_-]{22}\.0\.[A-Za-z0-9_-]{43}$/);
  });
});
