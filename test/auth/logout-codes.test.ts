import type { LightMyRequestResponse } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/foundation/clock.js';
import { createTestGateway, login, type TestGateway } from '../support/gateway-fixture.js';
import { HOUR, RELAXED_LIMITS, SECOND, T0, postLogout, postRefresh, refreshOk } from '../support/auth-requests.js';

/**
 * Issue 21: the codes a logout gets with a token past its time, as docs/api-guide.md ("Log out")
 * names them. An access token past its expiry is refused before the refresh token is looked at
 * (401 `token_expired`, nothing revoked); a refresh token presented after its 60 s grace is
 * reuse (401 `refresh_token_revoked`, what refresh answers for it, and the session is revoked, D5;
 * issue 35: it was `refresh_token_invalid` at logout).
 */

const codeOf = (response: LightMyRequestResponse): string => `${response.statusCode} ${response.json<{ code: string }>().code}`;

describe('logout with a token past its time', () => {
  const opened: TestGateway[] = [];
  afterEach(async () => {
    for (const gw of opened.splice(0)) await gw.close();
  });
  async function open(): Promise<TestGateway> {
    // No clock tolerance: the expiry instant is the boundary itself.
    const gw = await createTestGateway({ clock: new ManualClock(T0), overrides: { rateLimits: RELAXED_LIMITS, tokens: { clockToleranceSeconds: 0 } } });
    opened.push(gw);
    return gw;
  }

  it('an access token past its expiry: 401 token_expired (invalid_token), and the session is not revoked', async () => {
    const gw = await open();
    const session = await login(gw);
    gw.clock.set(T0 + HOUR);
    const refused = await postLogout(gw, session.accessToken, session.refreshToken);
    expect(codeOf(refused)).toBe('401 token_expired');
    expect(refused.headers['www-authenticate']).toBe('Bearer error="invalid_token"');
    expect(gw.audit.events().filter((event) => event.event === 'logout')).toEqual([]);

    // The refresh token still works with any valid access token of the credential: a new login's
    // access token logs the old session out.
    const fresh = await login(gw);
    expect((await postLogout(gw, fresh.accessToken, session.refreshToken)).statusCode).toBe(200);
    expect(codeOf(await postRefresh(gw, fresh.accessToken, session.refreshToken))).toBe('401 refresh_token_revoked');
  });

  it('an access token one second before its expiry logs out', async () => {
    const gw = await open();
    const session = await login(gw);
    gw.clock.set(T0 + HOUR - SECOND);
    expect((await postLogout(gw, session.accessToken, session.refreshToken)).statusCode).toBe(200);
  });

  it('a rotated refresh token within its 60 s grace logs the session out', async () => {
    const gw = await open();
    const session = await login(gw);
    const next = await refreshOk(gw, session.accessToken, session.refreshToken);
    gw.clock.set(T0 + 59 * SECOND);
    expect((await postLogout(gw, next.accessToken, session.refreshToken)).statusCode).toBe(200);
    expect(codeOf(await postRefresh(gw, next.accessToken, next.refreshToken))).toBe('401 refresh_token_revoked');
  });

  it('a rotated refresh token past its 60 s grace: 401 refresh_token_revoked, as at refresh, and the session is revoked as reuse', async () => {
    const gw = await open();
    const session = await login(gw);
    const next = await refreshOk(gw, session.accessToken, session.refreshToken);
    gw.clock.set(T0 + 60 * SECOND);
    const refused = await postLogout(gw, next.accessToken, session.refreshToken);
    expect(codeOf(refused)).toBe('401 refresh_token_revoked');
    expect(refused.headers['www-authenticate']).toBe('Bearer');
    expect(codeOf(await postRefresh(gw, next.accessToken, next.refreshToken))).toBe('401 refresh_token_revoked');
    expect(gw.audit.events().map((event) => event.event)).toContain('refresh.reuse_detected');
  });
});
