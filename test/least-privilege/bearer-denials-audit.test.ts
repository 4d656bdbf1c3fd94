import { generateKeyPairSync, randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/foundation/clock.js';
import { RELAXED_LIMITS, SECOND, T0, WHOAMI, whoamiRoute } from '../support/auth-requests.js';
import { createTestGateway, login, type TestGateway } from '../support/gateway-fixture.js';
import { aggregatedDenials, auditRecords, expectContractError, flushAudit, UUID } from './contract-helpers.js';

/**
 * Issue 9 row 7 (D34): forged and expired tokens, a missing or malformed Authorization header and
 * a token in the URL are 401 with their own code, and are audited as `access.denied` with a
 * reason, aggregated: one line per (reason, client address) per window with a `count` and the
 * first request's correlation id, written when the window closes (`gateway.flushAudit()` here).
 */

const A = '10.7.0.1';
const B = '10.7.0.2';
const REASONS = ['token_missing', 'token_malformed', 'token_invalid', 'token_expired', 'token_in_url'];

interface Sent {
  reason: string;
  address: string;
  response: LightMyRequestResponse;
}

describe('failed bearer authentication is audited, aggregated (D34)', () => {
  let gw: TestGateway;
  const clock = new ManualClock(T0);

  beforeAll(async () => {
    gw = await createTestGateway({ clock, extend: whoamiRoute, overrides: { rateLimits: RELAXED_LIMITS } });
  });
  afterAll(async () => {
    await gw?.close();
  });

  /** A token of the right shape, kid and claims, signed by a key the gateway does not know. */
  async function forgedToken(): Promise<string> {
    const { privateKey } = generateKeyPairSync('ed25519');
    const now = Math.floor(clock.now() / 1000);
    return new SignJWT({})
      .setProtectedHeader({ alg: 'EdDSA', kid: gw.config.tokens.signingKey.kid, typ: 'at+jwt' })
      .setSubject('cred-full')
      .setIssuer(gw.config.tokens.issuer)
      .setAudience(gw.config.tokens.audience)
      .setIssuedAt(now)
      .setExpirationTime(now + 600)
      .setJti(randomUUID())
      .sign(privateKey);
  }

  const whoami = (address: string, headers: Record<string, string> = {}, query = '') =>
    gw.inject({ method: 'GET', url: `${WHOAMI}${query}`, headers: { 'x-forwarded-for': address, ...headers } });

  it('answers each failure with its 401 and writes one aggregated access.denied line per reason and address, with a count', async () => {
    const expiring = (await login(gw, 'full')).accessToken;
    // Past the lifetime (3600 s) and the clock tolerance (5 s).
    clock.advance(3600 * SECOND + 6 * SECOND);
    const valid = (await login(gw, 'full')).accessToken;
    const forged = await forgedToken();
    const linesBefore = gw.audit.lines.length;

    const sent: Sent[] = [];
    const send = async (reason: string, address: string, headers: Record<string, string> = {}, query = '') =>
      sent.push({ reason, address, response: await whoami(address, headers, query) });
    await send('token_invalid', A, { authorization: `Bearer ${forged}` });
    await send('token_invalid', A, { authorization: `Bearer ${forged}` });
    await send('token_expired', A, { authorization: `Bearer ${expiring}` });
    for (let i = 0; i < 3; i += 1) await send('token_missing', A);
    await send('token_missing', B);
    await send('token_malformed', A, { authorization: `Basic ${Buffer.from('full:x').toString('base64')}` });
    await send('token_malformed', A, { authorization: `Bearer  ${valid}` });
    await send('token_in_url', A, { authorization: `Bearer ${valid}` }, '?Access_Token=abc');
    await send('token_in_url', A, { authorization: `Bearer ${valid}` }, `?x=${valid.replaceAll('.', '%2E')}`);

    const messages: Record<string, string | undefined> = {
      token_invalid: 'Access token is invalid',
      token_expired: 'Access token is expired',
      token_missing: 'Authorization header is missing',
      token_in_url: 'Tokens are not accepted in the URL',
      token_malformed: undefined, // not fixed by the contract
    };
    for (const { reason, response } of sent) {
      expect(response.statusCode, `${reason}: ${response.body}`).toBe(401);
      const message = messages[reason];
      if (message) expect(response.json<{ message: string }>().message, reason).toBe(message);
    }

    // Aggregated: nothing per request while the window is open (the manual clock stands still).
    const perRequest = auditRecords(gw)
      .slice(linesBefore)
      .filter((record) => record['event'] === 'access.denied' && REASONS.includes(String(record['reason'])) && record['count'] === undefined);
    expect(perRequest).toEqual([]);

    await flushAudit(gw.gateway);
    const lines = aggregatedDenials(gw).filter((record) => REASONS.includes(String(record['reason'])));
    const groups = new Map<string, Sent[]>();
    for (const item of sent) groups.set(`${item.reason}|${item.address}`, [...(groups.get(`${item.reason}|${item.address}`) ?? []), item]);
    expect(lines).toHaveLength(groups.size);
    for (const [key, items] of groups) {
      const [reason, address] = key.split('|');
      const matching = lines.filter((line) => line['reason'] === reason && line['clientAddress'] === address);
      expect(matching, key).toHaveLength(1);
      const line = matching[0]!;
      expect(line, key).toMatchObject({ event: 'access.denied', outcome: 'denied', reason, clientAddress: address, count: items.length });
      expect(line['correlationId'], key).toBe(items[0]!.response.headers['x-correlation-id']);
      expect(String(line['correlationId'])).toMatch(UUID);
      const start = Date.parse(String(line['windowStart']));
      const end = Date.parse(String(line['windowEnd']));
      expect(new Date(start).toISOString(), key).toBe(line['windowStart']);
      expect(new Date(end).toISOString(), key).toBe(line['windowEnd']);
      expect(start, key).toBeLessThanOrEqual(clock.now());
      expect(end, key).toBeGreaterThanOrEqual(clock.now());
      expect(end, key).toBeGreaterThan(start);
      // Never a token in the audit trail.
      expect(JSON.stringify(line)).not.toContain(valid.split('.')[2]);
    }
    // A flushed window is closed: a second flush writes nothing more.
    const afterFlush = gw.audit.lines.length;
    await flushAudit(gw.gateway);
    expect(gw.audit.lines.length).toBe(afterFlush);

    // The envelope's `code` (new in the contract; the old envelope has none).
    for (const { reason, response } of sent) {
      const message = messages[reason];
      if (message) expectContractError(response, 401, reason, message);
      else expect(response.json<{ code?: unknown }>().code, reason).toMatch(/^[a-z]+(_[a-z]+)*$/);
    }
  });
});
