import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/config-error.js';
import { loadConfig } from '../../src/config/load-config.js';
import { ManualClock } from '../../src/foundation/clock.js';
import { passwordHashFingerprint } from '../../src/foundation/password-hash.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import {
  HOUR,
  MINUTE,
  RELAXED_LIMITS,
  T0,
  T0_SECONDS,
  getWhoami,
  metricValue,
  postRefresh,
  refreshOk,
  whoamiRoute,
  type RefreshAnswer,
} from '../support/auth-requests.js';
import { FaultyStore } from '../support/faulty-store.js';
import {
  DEFAULT_CREDENTIALS,
  PASSWORD,
  assertNoSecrets,
  createTestGateway,
  credentialsYaml,
  login,
  rawTestConfig,
  testConfig,
  writeTestConfig,
  type TestCredential,
  type TestGateway,
} from '../support/gateway-fixture.js';
import { waitFor } from '../support/wait.js';

/**
 * D41 on one gateway (memory store, inject): the session's absolute end with the default
 * `sessionMaxAgeHours` (168), the setting's bounds, the audit line of sessions ended, a password
 * hash changed and changed back, the fingerprint never being the hash, and a replica that could
 * not read the not-before instants refusing tokens with 503 rather than accepting them.
 */

const credentials = (active: boolean, password = PASSWORD): TestCredential[] =>
  DEFAULT_CREDENTIALS.map((credential) => (credential.id === 'cred-full' ? { ...credential, active, password } : credential));

describe('session end and age (D41)', () => {
  const opened: TestGateway[] = [];
  afterEach(async () => {
    for (const gw of opened.splice(0)) await gw.close();
  });
  const open = async (options: Parameters<typeof createTestGateway>[0] = {}) => {
    const gw = await createTestGateway({ clock: new ManualClock(T0), overrides: { rateLimits: RELAXED_LIMITS }, extend: whoamiRoute, ...options });
    opened.push(gw);
    return gw;
  };

  it('by default ends a session 168 h after its login, however often it is refreshed; refreshTokenExpiresAt tells the truth', async () => {
    const gw = await open();
    const end = T0_SECONDS + 168 * 3600;
    let session: RefreshAnswer = await login(gw);
    expect(session.refreshTokenExpiresAt).toBe(T0_SECONDS + 24 * 3600);
    for (let at = 55 * MINUTE; at < 168 * HOUR; at += 55 * MINUTE) {
      gw.clock.set(T0 + at);
      session = await refreshOk(gw, session.accessToken, session.refreshToken);
      expect(session.refreshTokenExpiresAt).toBe(Math.min(T0_SECONDS + at / 1000 + 24 * 3600, end));
    }
    // The last day's refreshes were capped at the end: the 24 h of the token no longer counted.
    expect(session.refreshTokenExpiresAt).toBe(end);
    gw.clock.set(T0 + 168 * HOUR);
    const over = await postRefresh(gw, session.accessToken, session.refreshToken);
    expect(over.statusCode, over.body).toBe(401);
    expect(over.json<{ code: string }>().code).toBe('refresh_token_expired');
  }, 60_000);

  it('takes sessionMaxAgeHours from 1 to 720, and refuses 0 and 721 naming the field', async () => {
    for (const hours of [1, 720]) {
      const config = await testConfig({ tokens: { sessionMaxAgeHours: hours } });
      expect(config.tokens.sessionMaxAgeHours).toBe(hours);
    }
    expect((await testConfig()).tokens.sessionMaxAgeHours).toBe(168);
    for (const hours of [0, 721, 1.5]) {
      const written = await writeTestConfig(await rawTestConfig({ tokens: { sessionMaxAgeHours: hours } }));
      const error = await loadConfig(written.file, {}).catch((thrown: unknown) => thrown);
      expect(error, String(hours)).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).problems.join('\n')).toContain(`${written.file}: tokens.sessionMaxAgeHours: `);
    }
  });

  it('audits credential.sessions_ended with its cause, refuses the old token with a clean 401, and counts it', async () => {
    const gw = await open();
    const session = await login(gw);
    gw.clock.advance(MINUTE);
    await gw.gateway.reload(await testConfig({}, credentials(false)));
    gw.clock.advance(MINUTE);
    await gw.gateway.reload(await testConfig({}, credentials(true, 'another password entirely')));
    const ended = gw.audit.events().filter((event) => event.event === 'credential.sessions_ended');
    expect(ended.map(({ credential, reason, outcome }) => ({ credential, reason, outcome }))).toEqual([
      { credential: 'cred-full', reason: 'deactivated', outcome: 'success' },
      { credential: 'cred-full', reason: 'password_changed', outcome: 'success' },
    ]);
    const refused = await getWhoami(gw, session.accessToken);
    expect(refused.statusCode).toBe(401);
    expect(refused.json()).toMatchObject({ status: 401, code: 'token_revoked', details: {} });
    expect(gw.audit.events().filter((event) => event.correlationId === refused.headers['x-correlation-id'])).toEqual([
      expect.objectContaining({ event: 'access.denied', credential: 'cred-full', reason: 'token_revoked' }),
    ]);
    expect(await metricValue(gw, 'gateway_access_denied_total', { reason: 'token_revoked' })).toBe(1);
    // A reload that changes nothing of a credential ends nothing.
    await gw.gateway.reload(await testConfig({}, credentials(true, 'another password entirely')));
    expect(gw.audit.events().filter((event) => event.event === 'credential.sessions_ended')).toHaveLength(2);
  });

  it('tells apart, to the millisecond, a token issued just before the deactivation from one issued at the reactivation, within one second', async () => {
    const gw = await open();
    gw.clock.set(T0 + 500);
    const before = await login(gw);
    gw.clock.set(T0 + 501);
    await gw.gateway.reload(await testConfig({}, credentials(false)));
    await gw.gateway.reload(await testConfig({}, credentials(true)));
    const after = await login(gw);
    expect((await getWhoami(gw, before.accessToken)).json()).toMatchObject({ code: 'token_revoked' });
    expect((await getWhoami(gw, after.accessToken)).json()).toEqual({ credential: 'cred-full' });
    expect((await postRefresh(gw, after.accessToken, before.refreshToken)).json()).toMatchObject({ code: 'refresh_token_revoked' });
    await refreshOk(gw, after.accessToken, after.refreshToken);
  });

  it('keeps sessions from before a password change dead when the old hash comes back', async () => {
    const gw = await open();
    const before = await login(gw);
    gw.clock.advance(MINUTE);
    await gw.gateway.reload(await testConfig({}, credentials(true, 'an interim password')));
    gw.clock.advance(MINUTE);
    // The same password: the credentials helper writes the very same hash line again.
    await gw.gateway.reload(await testConfig({}, credentials(true)));
    expect((await getWhoami(gw, before.accessToken)).json()).toMatchObject({ code: 'token_revoked' });
    const refreshed = await postRefresh(gw, (await login(gw)).accessToken, before.refreshToken);
    expect(refreshed.json()).toMatchObject({ code: 'refresh_token_revoked' });
  });

  it('puts a fingerprint of the hash in the token, never the hash, and the same one for the same hash line', async () => {
    const gw = await open();
    const session = await login(gw);
    const claims = JSON.parse(Buffer.from(session.accessToken.split('.')[1] ?? '', 'base64url').toString('utf8')) as Record<string, unknown>;
    const line = /passwordHash: (\S+)/.exec(await credentialsYaml(credentials(true)))?.[1] ?? '';
    expect(claims['csf']).toBe(passwordHashFingerprint(line));
    expect(String(claims['csf'])).toMatch(/^[A-Za-z0-9_-]{22}$/);
    const [, , , , salt = '', hash = ''] = line.split('$');
    assertNoSecrets(session.accessToken + JSON.stringify(claims), [line, salt, hash, Buffer.from(hash, 'base64').toString('base64url')]);
    expect(passwordHashFingerprint(line)).not.toBe(passwordHashFingerprint(line.replace(/.$/, (c) => (c === 'A' ? 'B' : 'A'))));
  });

  it('answers 503 store_unavailable to every bearer request until the not-before instants could be read, then serves', async () => {
    const inner = new MemoryStore();
    const store = new FaultyStore(inner);
    store.faults.sessions = 'unavailable';
    const gw = await open({ store });
    const token = (await gw.gateway.tokens.issueAccessToken(gw.config.credentials.byId('cred-full')!)).token;
    const refused = await getWhoami(gw, token);
    expect(refused.statusCode, refused.body).toBe(503);
    expect(refused.json()).toMatchObject({ code: 'store_unavailable', retryAfter: 1 });
    delete store.faults.sessions;
    // The gateway retries by itself (about once a second); only a hang fails this.
    await waitFor('the not-before instants to be read', async () => (await getWhoami(gw, token)).statusCode === 200);
    await inner.close();
  });
});
