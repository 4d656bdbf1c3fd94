import { afterEach, describe, expect, it } from 'vitest';
import { SessionEndedError, type SessionTokens } from '../src/index.js';
import { PASSWORD, rejectionOf, startRealGateway, type RealGateway } from './support/real-gateway.js';

/**
 * logout against a real gateway: it revokes with a fresh access token, counts only a 401 that
 * says the session is already over as done, and reports plainly when the gateway refused the
 * access token and therefore revoked nothing (the refresh tokens then live on for 24 h).
 */

describe('client logout against a real gateway', () => {
  let g: RealGateway | undefined;
  afterEach(async () => {
    await g?.close();
    g = undefined;
  });

  /** Whether `refreshToken` still refreshes at the gateway, presented with another login's valid access token. */
  async function stillRefreshes(gateway: RealGateway, refreshToken: string): Promise<boolean> {
    const other = await gateway.client().login('full', PASSWORD);
    const holder = gateway.client({ session: { ...other, refreshToken } });
    try {
      await holder.refresh();
      return true;
    } catch {
      return false;
    }
  }

  const logoutSuccesses = (gateway: RealGateway) => gateway.auditEvents('logout').filter((event) => event.outcome === 'success');

  it('an expired access token revokes nothing: logout says so instead of reporting success', async () => {
    g = await startRealGateway();
    const client = g.client();
    const session = await client.login('full', PASSWORD);
    // Idle past the hour (and the gateway's 5 s tolerance): the access token can neither refresh nor revoke.
    g.gw.clock.set(session.accessTokenExpiresAt * 1000 + 10_000);

    const error = await rejectionOf(client.logout());

    expect(error).toBeInstanceOf(SessionEndedError);
    expect(error).toMatchObject({ reason: 'revoke_failed', gatewayCode: 'token_expired', status: 401, retryable: false });
    expect((error as SessionEndedError).message).toMatch(/not revoked/);
    expect(client.session).toBeUndefined();
    expect(logoutSuccesses(g)).toHaveLength(0);
    // Indeed: the session's refresh token still works with any valid access token of the credential.
    expect(await stillRefreshes(g, session.refreshToken)).toBe(true);
  });

  it('an access token the gateway does not accept revokes nothing: logout says so', async () => {
    g = await startRealGateway();
    const session = await g.client().login('full', PASSWORD);
    const forged = g.client({ session: { ...session, accessToken: `${session.accessToken.slice(0, -4)}AAAA` } });

    const error = await rejectionOf(forged.logout());

    expect(error).toBeInstanceOf(SessionEndedError);
    expect(error).toMatchObject({ reason: 'revoke_failed', gatewayCode: 'token_invalid', status: 401, retryable: false });
    expect(forged.session).toBeUndefined();
    expect(logoutSuccesses(g)).toHaveLength(0);
    expect(await stillRefreshes(g, session.refreshToken)).toBe(true);
  });

  it('refreshes a token that is due before revoking with it, then revokes the rotated family', async () => {
    g = await startRealGateway();
    const changes: (SessionTokens | undefined)[] = [];
    const client = g.client({ onSessionChange: (tokens) => changes.push(tokens) });
    const session = await client.login('full', PASSWORD);
    g.gw.clock.set(session.accessTokenExpiresAt * 1000 - 200_000);

    await client.logout();

    expect(g.auditEvents('refresh.succeeded')).toHaveLength(1);
    expect(logoutSuccesses(g)).toHaveLength(1);
    expect(client.session).toBeUndefined();
    expect(changes).toHaveLength(3);
    const rotated = changes[1]!;
    expect(rotated.refreshToken).not.toBe(session.refreshToken);
    expect(await stillRefreshes(g, rotated.refreshToken)).toBe(false);
    expect(await stillRefreshes(g, session.refreshToken)).toBe(false);
  });

  it('a session that is already over at the gateway counts as logged out', async () => {
    g = await startRealGateway();
    const client = g.client();
    const session = await client.login('full', PASSWORD);
    await g.client({ session }).logout();

    // The family is revoked already: the gateway answers 401 refresh_token_invalid.
    await client.logout();

    expect(client.session).toBeUndefined();
    expect(g.auditEvents('logout').filter((event) => event.outcome === 'failure')).toHaveLength(1);
    await expect(client.accessToken()).rejects.toMatchObject({ name: 'SessionEndedError', reason: 'logged_out' });
  });
});
