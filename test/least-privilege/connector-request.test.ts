import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandboxConnector, type RunningSandboxConnector } from '../../src/connector/sandbox/sandbox-connector.js';
import { RELAXED_LIMITS } from '../support/auth-requests.js';
import { CARDS, connectorStats, createCard, expectCard, startCardFixture, validCardBody, type CardFixture } from '../support/card-fixture.js';
import { cardFixtureForSuite, expectContractError, expectContractFieldError } from './contract-helpers.js';
import { expectOnlyContractRequest } from './connector-request-contract.js';

/**
 * Issue 9 row 1 (D12, D30): a token in the query string is refused (401 token_in_url) however its
 * name is cased or percent-encoded and however the JWT's dots are encoded, before anything reaches
 * the connector; any other unknown query parameter is 400 `query.<name>`; and an accepted card
 * creation reaches the connector as exactly `POST /v1/cards` with only the contract's headers,
 * whatever the client sent.
 */

const TOKEN_IN_URL = 'Tokens are not accepted in the URL';

/** What a hostile or careless client adds to a card creation; none of it may go upstream. */
const CLIENT_EXTRAS: Record<string, string> = {
  cookie: 'session=client-cookie-value',
  'x-forwarded-for': '10.1.2.3',
  'x-forwarded-host': 'evil.example',
  'x-forwarded-port': '8443',
  'x-forwarded-prefix': '/evil',
  forwarded: 'for=10.1.2.3;proto=https;host=evil.example',
  'x-real-ip': '10.99.99.99',
  'x-api-key': 'client-api-key',
  'x-custom-trace': 'client-trace',
  'user-agent': 'attacker-agent/1.0',
  'accept-language': 'de-CH',
  via: '1.1 attacker-proxy',
  origin: 'https://evil.example',
  referer: 'https://evil.example/page',
  traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
  'proxy-authorization': 'Basic Y2xpZW50OnNlY3JldA==',
  'x-http-method-override': 'DELETE',
  'idempotency-key': 'client-chosen-idempotency-key',
  'x-correlation-id': 'client-chosen-correlation-id',
  'x-gateway-secret': 'client-forged-gateway-secret',
};

/** A JWT whose dots are written as %2E (or %2e): the raw URL holds no "eyJ...." pattern. */
const encodeDots = (jwt: string, escape = '%2E') => jwt.replaceAll('.', escape);

describe('nothing of the client URL or headers reaches the connector (D12, D30)', () => {
  const suite = cardFixtureForSuite();

  it('refuses a token query parameter whatever its case or percent-encoding, and a JWT with encoded dots, with 401 token_in_url before the connector', async () => {
    const before = await connectorStats(suite.f.connector);
    const queries = [
      `Access_Token=${encodeDots(suite.token)}&x=1`,
      `access%5Ftoken=${suite.token}`,
      `access%5ftoken=abc`,
      'ACCESS_TOKEN=abc',
      'AccessToken=abc',
      '%61ccess_token=abc',
      '%41%43%43%45%53%53%5F%54%4F%4B%45%4E=abc',
      'Token=abc',
      'revealDetails=false&Id_Token=abc',
      'idtoken=abc',
      'IDTOKEN=abc',
      'REFRESH%5fTOKEN=abc',
      'refreshtoken=abc',
      'RefreshToken=abc',
      `x=${encodeDots(suite.token)}`,
      `revealDetails=false&x=${encodeDots(suite.token, '%2e')}`,
      `x=${encodeURIComponent(suite.token).replaceAll('.', '%2E').replace('eyJ', '%65yJ')}`,
    ];
    for (const query of queries) {
      const response = await createCard(suite.f.gw, suite.token, validCardBody(), query);
      const body = expectContractError(response, 401, 'token_in_url', TOKEN_IN_URL);
      expect(body.details, query).toEqual({});
      expect(response.body, query).not.toContain(suite.token);
    }
    const after = await connectorStats(suite.f.connector);
    expect(after.requestsReceived).toBe(before.requestsReceived);
    expect(after.cardsCreated).toBe(before.cardsCreated);
  });

  it('refuses a token in the URL on every route, before authentication', async () => {
    const cases = [
      { method: 'GET' as const, url: `/.well-known/jwks.json?Access%5FToken=abc` },
      { method: 'GET' as const, url: `/.well-known/jwks.json?x=${encodeDots(suite.token)}` },
      { method: 'POST' as const, url: '/api/v1/auth/login?TOKEN=abc', payload: { username: 'full', password: 'x' } },
      { method: 'POST' as const, url: '/api/v1/auth/refresh?refresh%5Ftoken=abc', payload: { refreshToken: 'x' } },
      { method: 'POST' as const, url: '/api/v1/auth/logout?RefreshToken=abc', payload: { refreshToken: 'x' } },
      // No bearer at all: still token_in_url, not token_missing.
      { method: 'POST' as const, url: `${CARDS}?ID%5FTOKEN=abc`, payload: validCardBody() },
    ];
    for (const { method, url, payload } of cases) {
      const response = await suite.f.gw.inject({ method, url, ...(payload && { payload }) });
      expectContractError(response, 401, 'token_in_url', TOKEN_IN_URL);
    }
  });

  it('answers an unknown query parameter with 400 naming query.<name>, and nothing reaches the connector', async () => {
    const before = await connectorStats(suite.f.connector);
    expectContractFieldError(await createCard(suite.f.gw, suite.token, validCardBody(), 'x=1'), 'query.x', 'is not a known parameter');
    expectContractFieldError(
      await createCard(suite.f.gw, suite.token, validCardBody(), 'revealDetails=false&color=blue'),
      'query.color',
      'is not a known parameter',
    );
    expectContractFieldError(
      await createCard(suite.f.gw, suite.token, validCardBody(), 'callback=https%3A%2F%2Fevil.example'),
      'query.callback',
      'is not a known parameter',
    );
    const after = await connectorStats(suite.f.connector);
    expect(after.requestsReceived).toBe(before.requestsReceived);
  });

  it('forwards an accepted creation as exactly POST /v1/cards with only the contract headers, whatever the client sent', async () => {
    const before = await connectorStats(suite.f.connector);
    const body = validCardBody();
    const response = await createCard(suite.f.gw, suite.token, body, 'revealDetails=false', CLIENT_EXTRAS);
    expectCard(response);
    const after = await connectorStats(suite.f.connector);
    expect(after.requestsReceived).toBe(before.requestsReceived + 1);
    const received = after.received.at(-1);
    expect(received).toBeDefined();
    expectOnlyContractRequest(
      received!,
      {
        idempotencyKey: `acct-eu:${String(body['requestId'])}`,
        correlationId: String(response.headers['x-correlation-id']),
        host: new URL(suite.f.connector.url).host,
      },
      [suite.token, 'Bearer', 'revealDetails', ...Object.values(CLIENT_EXTRAS)],
    );
  });
});

describe('with a gateway secret configured (D30)', () => {
  const SECRET = 'configured-gateway-secret-0123456789';
  let connector: RunningSandboxConnector;
  let f: CardFixture;
  let token: string;

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-secret-'));
    const secretFile = join(dir, 'connector.secret');
    writeFileSync(secretFile, SECRET, { mode: 0o600 });
    connector = await startSandboxConnector({ host: '127.0.0.1', port: 0, controls: true, sharedSecret: SECRET });
    f = await startCardFixture({
      connector,
      overrides: { rateLimits: RELAXED_LIMITS, connector: { url: connector.url, timeoutMs: 30_000, sharedSecret: { file: secretFile } } },
    });
    token = await f.token('full');
  });
  afterAll(async () => {
    await f?.close();
    await connector?.close();
  });

  it("sends the configured x-gateway-secret, never the client's, and nothing else beyond the contract", async () => {
    const body = validCardBody();
    const response = await createCard(f.gw, token, body, 'revealDetails=false', CLIENT_EXTRAS);
    expectCard(response);
    const received = (await connectorStats(connector)).received.at(-1);
    expect(received).toBeDefined();
    expectOnlyContractRequest(
      received!,
      {
        idempotencyKey: `acct-eu:${String(body['requestId'])}`,
        correlationId: String(response.headers['x-correlation-id']),
        host: new URL(connector.url).host,
        secret: SECRET,
      },
      [token, 'Bearer', 'revealDetails', ...Object.values(CLIENT_EXTRAS)],
    );
  });
});
