import type { LightMyRequestResponse } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/foundation/clock.js';
import type { AuditEvent } from '../../src/observability/audit.js';
import { DEFAULT_CREDENTIALS, PASSWORD, assertNoSecrets, createTestGateway, login, testConfig, type TestGateway } from '../support/gateway-fixture.js';
import { LOGIN, MINUTE, REFRESH, SECOND, T0, getWhoami, metricValue, postLogin, postLogout, postRefresh, whoamiRoute } from '../support/auth-requests.js';

const WRONG_PASSWORD = 'Tr0ub4dor&3-not-it';

/** D21 (audit trail), D22 (metrics) and the no-secrets rule, for the authentication events. */
describe('audit trail and metrics of authentication', () => {
  const opened: TestGateway[] = [];
  afterEach(async () => {
    for (const gw of opened.splice(0)) await gw.close();
  });

  async function open(): Promise<TestGateway> {
    const gw = await createTestGateway({ clock: new ManualClock(T0), extend: whoamiRoute });
    opened.push(gw);
    return gw;
  }

  /** The audit events of one request, found by the X-Correlation-Id it answered with. */
  function auditOf(gw: TestGateway, response: LightMyRequestResponse): (AuditEvent & { time: string })[] {
    const correlationId = response.headers['x-correlation-id'];
    expect(typeof correlationId).toBe('string');
    return gw.audit.events().filter((event) => event.correlationId === correlationId);
  }

  it("audits login succeeded, failed and rate-limited with the response's correlation id", async () => {
    const gw = await open();
    const succeeded = await postLogin(gw, 'full', PASSWORD);
    expect(succeeded.statusCode).toBe(200);
    expect(auditOf(gw, succeeded)).toEqual([
      {
        time: new Date(T0).toISOString(),
        event: 'login.succeeded',
        correlationId: succeeded.headers['x-correlation-id'],
        credential: 'cred-full',
        clientAddress: '127.0.0.1',
        outcome: 'success',
      },
    ]);

    const wrongPassword = await postLogin(gw, 'full', WRONG_PASSWORD);
    expect(auditOf(gw, wrongPassword)).toEqual([
      expect.objectContaining({ event: 'login.failed', credential: 'cred-full', outcome: 'failure', reason: 'wrong_password' }),
    ]);
    const unknownUser = await postLogin(gw, 'nobody', WRONG_PASSWORD);
    expect(auditOf(gw, unknownUser)).toEqual([expect.objectContaining({ event: 'login.failed', outcome: 'failure', reason: 'unknown_username' })]);
    expect(auditOf(gw, unknownUser)[0]?.credential).toBeUndefined();

    for (let attempt = 0; attempt < 3; attempt += 1) expect((await postLogin(gw, 'full', WRONG_PASSWORD)).statusCode).toBe(401);
    const limited = await postLogin(gw, 'full', PASSWORD);
    expect(limited.statusCode).toBe(429);
    expect(auditOf(gw, limited)).toEqual([
      expect.objectContaining({ event: 'login.rate_limited', outcome: 'denied', reason: 'rate_limit', clientAddress: '127.0.0.1' }),
    ]);

    expect(await metricValue(gw, 'gateway_logins_total', { outcome: 'succeeded' })).toBe(1);
    expect(await metricValue(gw, 'gateway_logins_total', { outcome: 'failed' })).toBe(5);
    expect(await metricValue(gw, 'gateway_logins_total', { outcome: 'rate_limited' })).toBe(1);
    expect(await metricValue(gw, 'gateway_rate_limited_total', { limiter: 'login' })).toBe(1);
  });

  it("audits refresh succeeded, failed and reuse detected, and logout, with the response's correlation id", async () => {
    const gw = await open();
    const session = await login(gw);
    const refreshed = await postRefresh(gw, session.accessToken, session.refreshToken);
    expect(refreshed.statusCode).toBe(200);
    expect(auditOf(gw, refreshed)).toEqual([expect.objectContaining({ event: 'refresh.succeeded', credential: 'cred-full', outcome: 'success' })]);

    const failed = await postRefresh(gw, session.accessToken, 'not-a-refresh-token');
    expect(failed.statusCode).toBe(401);
    expect(auditOf(gw, failed)).toEqual([expect.objectContaining({ event: 'refresh.failed', credential: 'cred-full', outcome: 'failure', reason: 'unknown' })]);

    expect(await metricValue(gw, 'gateway_refresh_reuse_detected_total')).toBe(0);
    gw.clock.advance(MINUTE);
    const reuse = await postRefresh(gw, session.accessToken, session.refreshToken);
    expect(reuse.statusCode).toBe(401);
    expect(auditOf(gw, reuse)).toEqual([
      expect.objectContaining({ event: 'refresh.reuse_detected', credential: 'cred-full', outcome: 'denied', reason: 'family_revoked' }),
    ]);
    expect(await metricValue(gw, 'gateway_refresh_reuse_detected_total')).toBe(1);

    const other = await login(gw);
    const loggedOut = await postLogout(gw, other.accessToken, other.refreshToken);
    expect(loggedOut.statusCode).toBe(200);
    expect(auditOf(gw, loggedOut)).toEqual([expect.objectContaining({ event: 'logout', credential: 'cred-full', outcome: 'success' })]);
    const again = await postLogout(gw, other.accessToken, other.refreshToken);
    expect(again.statusCode).toBe(401);
    expect(auditOf(gw, again)).toEqual([expect.objectContaining({ event: 'logout', credential: 'cred-full', outcome: 'failure', reason: 'already-revoked' })]);

    expect(await metricValue(gw, 'gateway_refreshes_total', { outcome: 'succeeded' })).toBe(1);
    expect(await metricValue(gw, 'gateway_refreshes_total', { outcome: 'unknown' })).toBe(1);
    expect(await metricValue(gw, 'gateway_refreshes_total', { outcome: 'reuse' })).toBe(1);
    expect(await metricValue(gw, 'gateway_logouts_total', { outcome: 'succeeded' })).toBe(1);
    expect(await metricValue(gw, 'gateway_logouts_total', { outcome: 'failed' })).toBe(1);
  });

  it("audits access denied to an inactive credential with the response's correlation id", async () => {
    const gw = await open();
    const session = await login(gw);
    gw.gateway.reload(
      await testConfig(
        {},
        DEFAULT_CREDENTIALS.map((c) => (c.id === 'cred-full' ? { ...c, active: false } : c)),
      ),
    );
    const denied = await getWhoami(gw, session.accessToken);
    expect(denied.statusCode).toBe(401);
    expect(auditOf(gw, denied)).toEqual([
      expect.objectContaining({ event: 'access.denied', credential: 'cred-full', outcome: 'denied', reason: 'credential_inactive' }),
    ]);
    const refused = await postLogin(gw, 'full', PASSWORD);
    expect(auditOf(gw, refused)).toEqual([expect.objectContaining({ event: 'login.failed', credential: 'cred-full', reason: 'inactive' })]);
    expect(await metricValue(gw, 'gateway_access_denied_total', { reason: 'credential_inactive' })).toBe(1);
  });

  it('writes no token or password to the logs or the audit trail', async () => {
    const gw = await open();
    const secrets: string[] = [PASSWORD, WRONG_PASSWORD];
    const session = await login(gw);
    secrets.push(session.accessToken, session.idToken, session.refreshToken);
    const rotated = await postRefresh(gw, session.accessToken, session.refreshToken);
    secrets.push(rotated.json<{ accessToken: string }>().accessToken, rotated.json<{ refreshToken: string }>().refreshToken);
    // signature parts alone would be secrets too
    for (const token of [...secrets]) if (token.split('.').length === 3) secrets.push(token.split('.')[2] ?? '');

    await postLogin(gw, 'full', WRONG_PASSWORD);
    await postLogin(gw, WRONG_PASSWORD, PASSWORD);
    await gw.inject({
      method: 'POST',
      url: LOGIN,
      payload: `{"username":"full","password":"${WRONG_PASSWORD}"`,
      headers: { 'content-type': 'application/json' },
    });
    await gw.inject({ method: 'POST', url: LOGIN, payload: { username: 'full', password: PASSWORD, extra: session.refreshToken } });
    await gw.inject({ method: 'POST', url: `${REFRESH}?access_token=${session.accessToken}`, payload: { refreshToken: session.refreshToken } });
    await gw.inject({
      method: 'POST',
      url: REFRESH,
      payload: { refreshToken: session.refreshToken },
      headers: { authorization: `Basic ${session.accessToken}` },
    });
    await postRefresh(gw, `${session.accessToken}x`, session.refreshToken);
    gw.clock.advance(2 * MINUTE);
    await postRefresh(gw, session.accessToken, session.refreshToken); // reuse
    await postLogout(gw, session.accessToken, session.refreshToken);
    gw.clock.advance(2 * 3600 * SECOND);
    await postRefresh(gw, session.accessToken, session.refreshToken); // expired access token

    const logText = gw.logs.text();
    const auditText = gw.audit.lines.join('');
    expect(logText.length).toBeGreaterThan(0);
    expect(gw.audit.lines.length).toBeGreaterThan(5);
    expect(() => assertNoSecrets(logText, secrets)).not.toThrow();
    expect(() => assertNoSecrets(auditText, secrets)).not.toThrow();
    // the harness would notice a leak
    expect(() => assertNoSecrets(`${logText} ${session.refreshToken}`, secrets)).toThrow(/secret/);
  });
});
