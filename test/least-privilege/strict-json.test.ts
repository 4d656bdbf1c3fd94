import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { LOGIN, LOGOUT, REFRESH } from '../support/auth-requests.js';
import { connectorStats, createCard } from '../support/card-fixture.js';
import { PASSWORD, login } from '../support/gateway-fixture.js';
import { auditRecords, cardFixtureForSuite, expectContractFieldError } from './contract-helpers.js';

/**
 * Issue 9 rows 5 and 6 (D29), with raw JSON text as a client writes it: integer fields written
 * with a fraction or an exponent, or beyond 2^53-1, are 400 naming the field (never silently
 * rounded); a duplicate member name at any depth is 400 naming its path, on every JSON route.
 * Nothing of a refused card request reaches the connector.
 */

const NOT_INTEGER = 'must be a JSON integer (no fraction or exponent)';
const NOT_SAFE = 'must be a safe integer';
const DUPLICATE = 'appears more than once';

describe('strict JSON (D29)', () => {
  const suite = cardFixtureForSuite();

  /** `{"requestId":..., <members>}`: members are raw JSON text. */
  const card = (members: string) => `{"requestId":"${randomUUID()}",${members}}`;

  async function expectRefusedCard(text: string, path: string, message: string): Promise<void> {
    const before = await connectorStats(suite.f.connector);
    const response = await createCard(suite.f.gw, suite.token, text);
    expect(response.statusCode, `${text} -> ${response.body}`).toBe(400);
    const fields = response.json<{ details?: { fields?: unknown[] } }>().details?.fields ?? [];
    expect(fields, `${text} -> ${response.body}`).toContainEqual({ path, message });
    expectContractFieldError(response, path, message);
    const after = await connectorStats(suite.f.connector);
    expect(after.requestsReceived, text).toBe(before.requestsReceived);
  }

  it('refuses integers written with a fraction or an exponent, naming the field (row 5)', async () => {
    const cases: [string, string][] = [
      [card('"cardLimit":1000.0,"currency":"EUR"'), 'cardLimit'],
      [card('"cardLimit":1e3,"currency":"EUR"'), 'cardLimit'],
      [card('"cardLimit":1E3,"currency":"EUR"'), 'cardLimit'],
      [card('"cardLimit":4503599627370497.5,"currency":"EUR"'), 'cardLimit'],
      [card('"cardLimit":100,"currency":"EUR","config":{"tolerance":{"percentage":99.99999999999999999}}'), 'config.tolerance.percentage'],
      [card('"cardLimit":100,"currency":"EUR","config":{"maxTransactions":2.0}'), 'config.maxTransactions'],
      [card('"cardLimit":100,"currency":"EUR","config":{"expiryDuration":1E1}'), 'config.expiryDuration'],
      [card('"cardLimit":100,"currency":"EUR","config":{"expiryDuration":12.000}'), 'config.expiryDuration'],
    ];
    for (const [text, path] of cases) await expectRefusedCard(text, path, NOT_INTEGER);
  });

  it('refuses integer literals beyond 2^53-1 as not safe, naming the field (row 5)', async () => {
    await expectRefusedCard(card('"cardLimit":9007199254740993,"currency":"EUR"'), 'cardLimit', NOT_SAFE);
    await expectRefusedCard(card('"cardLimit":100,"currency":"EUR","config":{"maxTransactions":9007199254740993}'), 'config.maxTransactions', NOT_SAFE);
  });

  it('refuses a duplicate member in a card body at any depth, naming its path (row 6)', async () => {
    const a = randomUUID();
    const b = randomUUID();
    const cases: [string, string][] = [
      [`{"requestId":"${a}","requestId":"${b}","cardLimit":100,"currency":"EUR"}`, 'requestId'],
      // The same name spelt with a JSON escape is the same member.
      [`{"requestId":"${a}","request\\u0049d":"${b}","cardLimit":100,"currency":"EUR"}`, 'requestId'],
      [`{"requestId":"${a}","cardLimit":100,"currency":"EUR","cardLimit":100}`, 'cardLimit'],
      [card('"cardLimit":100,"currency":"EUR","config":{"expiryDuration":12,"expiryDuration":24}'), 'config.expiryDuration'],
      [card('"cardLimit":100,"currency":"EUR","config":{"tolerance":{"percentage":1,"percentage":2}}'), 'config.tolerance.percentage'],
      [card('"cardLimit":100,"currency":"EUR","config":{"tolerance":{"percentage":1},"tolerance":{"percentage":1}}'), 'config.tolerance'],
      [card('"cardLimit":100,"currency":"EUR","metadata":{"cost_center":"A","file_ref":"F","cost_center":"B"}'), 'metadata.cost_center'],
    ];
    for (const [text, path] of cases) await expectRefusedCard(text, path, DUPLICATE);
  });

  it('refuses a duplicate member in login, refresh and logout bodies (row 6)', async () => {
    const session = await login(suite.f.gw);
    const loginResponse = await suite.f.gw.inject({
      method: 'POST',
      url: LOGIN,
      headers: { 'content-type': 'application/json' },
      payload: `{"username":"nobody","username":"full","password":${JSON.stringify(PASSWORD)}}`,
    });
    expect(loginResponse.statusCode, loginResponse.body).toBe(400);
    expectContractFieldError(loginResponse, 'username', DUPLICATE);
    const loginAudit = auditRecords(suite.f.gw).filter((record) => record['correlationId'] === loginResponse.headers['x-correlation-id']);
    expect(loginAudit.filter((record) => record['event'] === 'login.succeeded')).toEqual([]);

    for (const url of [REFRESH, LOGOUT]) {
      const response = await suite.f.gw.inject({
        method: 'POST',
        url,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${session.accessToken}` },
        payload: `{"refreshToken":"not-the-token","refreshToken":"${session.refreshToken}"}`,
      });
      expect(response.statusCode, `${url}: ${response.body}`).toBe(400);
      expectContractFieldError(response, 'refreshToken', DUPLICATE);
    }
    // Neither the refresh nor the logout happened: the session still refreshes.
    const refreshed = await suite.f.gw.inject({
      method: 'POST',
      url: REFRESH,
      headers: { authorization: `Bearer ${session.accessToken}` },
      payload: { refreshToken: session.refreshToken },
    });
    expect(refreshed.statusCode, refreshed.body).toBe(200);
  });
});
