import { randomBytes, randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { request as httpRequest, type Server } from 'node:http';
import { Agent } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandboxConnector, type RunningSandboxConnector } from '../../src/connector/sandbox/sandbox-connector.js';
import { ManualClock } from '../../src/foundation/clock.js';
import { CLOSING_CODES } from '../../src/edge/openapi/error-responses.js';
import { ERROR_CODES, type ErrorCode } from '../../src/foundation/errors.js';
import { listenGateway, type RunningGateway } from '../../src/server.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { call } from '../hostile/support.js';
import { parseHttpAnswer, rawExchange } from '../transport/real-clients.js';
import { HOUR, RELAXED_LIMITS, T0 } from '../support/auth-requests.js';
import { mintToken, setConnectorMode, validCardBody } from '../support/card-fixture.js';
import { FaultyStore } from '../support/faulty-store.js';
import { MemoryConnector } from '../support/memory-connector.js';
import {
  createTestGateway,
  DEFAULT_CREDENTIALS,
  login,
  PASSWORD,
  testCertificatePem,
  testConfig,
  testKeys,
  type TestGateway,
} from '../support/gateway-fixture.js';
import { OpenApiResponses, readCommittedDocument, type ObservedAnswer, type Target } from '../support/openapi-responses.js';

/**
 * Issue 13: every operation of the committed OpenAPI description (docs/openapi.json), and every
 * error code each of its responses lists, is provoked on real gateways (inject, raw TLS for what
 * only a socket can show, a plain listener for shutdown) and the answer is validated against
 * the document: status, body schema, headers, and the code being one its response lists. For
 * every error the envelope's `code`, the status the catalogue gives it, `Retry-After`, and the
 * `WWW-Authenticate` challenge of each 401 are checked. The last test checks the coverage: every
 * (operation, code) the document lists and every code of ERROR_CODES was seen.
 */

const LOGIN = '/api/v1/auth/login';
const REFRESH = '/api/v1/auth/refresh';
const LOGOUT = '/api/v1/auth/logout';
const CARDS = '/api/v1/issuing/cards';
const EVENTS = '/api/v1/issuing/events';
const JWKS = '/.well-known/jwks.json';
const DAY = 24 * HOUR;

/** The RFC 6750 challenge each 401 code carries (docs/api-guide.md, "WWW-Authenticate on 401 answers"). */
const CHALLENGES: Record<string, string> = {
  authentication_failed: 'Bearer',
  token_missing: 'Bearer',
  token_malformed: 'Bearer error="invalid_request"',
  token_in_url: 'Bearer error="invalid_request"',
  token_invalid: 'Bearer error="invalid_token"',
  token_expired: 'Bearer error="invalid_token"',
  token_revoked: 'Bearer error="invalid_token"',
  credential_inactive: 'Bearer error="invalid_token"',
  refresh_token_invalid: 'Bearer',
  refresh_token_expired: 'Bearer',
  refresh_token_revoked: 'Bearer',
};

type Op = 'login' | 'getJwks' | 'refresh' | 'logout' | 'createCard' | 'getCard' | 'listCards' | 'changeCardStatus' | 'listEvents' | 'getEvent';
/** The card operations after creation, served by a gateway of their own on the in-memory connector port (`life`). */
type LifeOp = 'getCard' | 'listCards' | 'changeCardStatus';
const LIFE_OPS: LifeOp[] = ['getCard', 'listCards', 'changeCardStatus'];
/** Reading events back (D66), on `life` too: its cred-full holds events:read, main's does not. */
type EventOp = 'listEvents' | 'getEvent';
const EVENT_OPS: EventOp[] = ['listEvents', 'getEvent'];
const OPS: Op[] = ['login', 'getJwks', 'refresh', 'logout', 'createCard', ...LIFE_OPS, ...EVENT_OPS];
const BODY_OPS: Op[] = ['login', 'refresh', 'logout', 'createCard', 'changeCardStatus'];
const PROTECTED_OPS: Op[] = ['refresh', 'logout', 'createCard', ...LIFE_OPS, ...EVENT_OPS];
const CARD_ID = 'card_docs_0001';
const ONE_CARD = `${CARDS}/${CARD_ID}`;
/** A well-formed event id that no event has: getEvent's valid request reaches the event store and finds nothing. */
const ONE_EVENT = `${EVENTS}/evt_01JDQ4S2X8N3V5K7M9P1R3T5W7`;
const PATHS: Record<Op, string> = {
  login: LOGIN,
  getJwks: JWKS,
  refresh: REFRESH,
  logout: LOGOUT,
  createCard: CARDS,
  getCard: ONE_CARD,
  listCards: CARDS,
  changeCardStatus: ONE_CARD,
  listEvents: EVENTS,
  getEvent: ONE_EVENT,
};
const METHODS: Record<Op, Call['method']> = {
  login: 'POST',
  getJwks: 'GET',
  refresh: 'POST',
  logout: 'POST',
  createCard: 'POST',
  getCard: 'GET',
  listCards: 'GET',
  changeCardStatus: 'PATCH',
  listEvents: 'GET',
  getEvent: 'GET',
};
const isLifeOp = (op: Op): op is LifeOp => (LIFE_OPS as Op[]).includes(op);
const isEventOp = (op: Op): op is EventOp => (EVENT_OPS as Op[]).includes(op);

interface Call {
  method: 'GET' | 'POST' | 'PATCH';
  url: string;
  headers: Record<string, string>;
  payload?: string;
}

interface Session {
  accessToken: string;
  refreshToken: string;
}

const spec = new OpenApiResponses(readCommittedDocument());
const covered = new Set<string>();
const seenCodes = new Set<ErrorCode>();

const headerOf = (answer: ObservedAnswer, name: string): string | undefined => {
  const value = answer.headers[name];
  return value === undefined ? undefined : Array.isArray(value) ? value.join(', ') : String(value);
};

/** Validates an answer against the document and, for an error, its code and headers; records the coverage. */
function observe(target: Target, answer: ObservedAnswer, expected?: ErrorCode): void {
  const name = 'component' in target ? target.component : target.operationId;
  expect(spec.problems(target, answer), `${name} ${answer.statusCode} ${answer.body.slice(0, 300)}`).toEqual([]);
  if (answer.statusCode < 400) {
    covered.add(`${name}:${answer.statusCode}`);
    return;
  }
  const body = JSON.parse(answer.body) as { code: ErrorCode; retryAfter?: number };
  if (expected !== undefined) expect(body.code, answer.body).toBe(expected);
  expect(answer.statusCode, body.code).toBe(ERROR_CODES[body.code]);
  expect(headerOf(answer, 'www-authenticate'), body.code).toBe(answer.statusCode === 401 ? CHALLENGES[body.code] : undefined);
  // 409, 429 and 503 carry a wait, except card_canceled (409), which is final.
  if ([409, 429, 503].includes(answer.statusCode) && body.code !== 'card_canceled') {
    expect(body.retryAfter, body.code).toBeGreaterThanOrEqual(1);
    expect(headerOf(answer, 'retry-after'), body.code).toBe(String(body.retryAfter));
  } else {
    expect(body.retryAfter, body.code).toBeUndefined();
    expect(headerOf(answer, 'retry-after'), body.code).toBeUndefined();
  }
  // The documented list of connection-closing answers is what the answers do: the codes the
  // document (and the API guide) name close it, every other answer leaves it open. A per-address
  // rate_limited closes only as the third on one connection, which none here is.
  expect(headerOf(answer, 'connection') === 'close', `${body.code}: Connection: close`).toBe(CLOSING_CODES.has(body.code));
  covered.add(`${name}:${body.code}`);
  seenCodes.add(body.code);
}

async function send(gw: TestGateway, call: Call): Promise<ObservedAnswer> {
  const response = await gw.inject({ method: call.method, url: call.url, headers: call.headers, ...(call.payload !== undefined && { payload: call.payload }) });
  return { statusCode: response.statusCode, headers: response.headers, body: response.body };
}

/** A valid request of the operation (with `session` where it needs one). */
function valid(op: Op, session?: Session): Call {
  const json: Record<string, string> = { 'content-type': 'application/json' };
  const bearer: Record<string, string> = session ? { authorization: `Bearer ${session.accessToken}` } : {};
  switch (op) {
    case 'login':
      return { method: 'POST', url: LOGIN, headers: json, payload: JSON.stringify({ username: 'full', password: PASSWORD }) };
    case 'getJwks':
      return { method: 'GET', url: JWKS, headers: {} };
    case 'refresh':
    case 'logout':
      return { method: 'POST', url: PATHS[op], headers: { ...json, ...bearer }, payload: JSON.stringify({ refreshToken: session?.refreshToken ?? 'x' }) };
    case 'createCard':
      return { method: 'POST', url: CARDS, headers: { ...json, ...bearer }, payload: JSON.stringify(validCardBody()) };
    case 'getCard':
      return { method: 'GET', url: ONE_CARD, headers: bearer };
    case 'listCards':
      return { method: 'GET', url: CARDS, headers: bearer };
    case 'changeCardStatus':
      return { method: 'PATCH', url: ONE_CARD, headers: { ...json, ...bearer }, payload: JSON.stringify({ status: 'inactive' }) };
    case 'listEvents':
      return { method: 'GET', url: EVENTS, headers: bearer };
    case 'getEvent':
      return { method: 'GET', url: ONE_EVENT, headers: bearer };
  }
}

const withHeaders = (call: Call, headers: Record<string, string>): Call => ({ ...call, headers: { ...call.headers, ...headers } });
const withoutAuthorization = (call: Call): Call => ({
  ...call,
  headers: Object.fromEntries(Object.entries(call.headers).filter(([name]) => name !== 'authorization')),
});

describe('the response validator (guards the test itself)', () => {
  const correlationId = '4c9f06f3-54e0-49af-9550-1b5de006fa75';
  const envelope = (code: string, status: number) =>
    JSON.stringify({ correlationId, status, code, message: 'm', details: {}, timestamp: '2026-11-23T21:13:33.542Z' });
  const answer = (statusCode: number, headers: Record<string, string>, body: string): ObservedAnswer => ({
    statusCode,
    headers: { 'content-type': 'application/json; charset=utf-8', 'x-correlation-id': correlationId, ...headers },
    body,
  });

  it('accepts a conforming answer and names each way another one departs from the document', () => {
    const challenge = { 'www-authenticate': 'Bearer' };
    expect(spec.problems({ operationId: 'refresh' }, answer(401, challenge, envelope('token_missing', 401)))).toEqual([]);
    expect(spec.problems({ operationId: 'refresh' }, answer(401, {}, envelope('token_missing', 401)))).toEqual([
      'refresh 401: required header WWW-Authenticate is missing',
    ]);
    expect(spec.problems({ operationId: 'refresh' }, answer(401, { 'www-authenticate': 'Basic' }, envelope('token_missing', 401)))[0]).toMatch(
      /header WWW-Authenticate: "Basic" data must be equal to one of the allowed values/,
    );
    expect(spec.problems({ operationId: 'refresh' }, answer(401, { ...challenge, 'x-powered-by': 'x' }, envelope('token_missing', 401)))).toEqual([
      'refresh 401: header x-powered-by: x is not documented',
    ]);
    expect(spec.problems({ operationId: 'login' }, answer(401, challenge, envelope('token_missing', 401)))[0]).toMatch(
      /code token_missing is not one the response lists/,
    );
    expect(spec.problems({ operationId: 'getJwks' }, answer(409, {}, envelope('idempotency_in_progress', 409)))).toEqual([
      'getJwks 409: status 409 is not documented',
    ]);
    expect(spec.problems({ operationId: 'refresh' }, answer(401, challenge, JSON.stringify({ status: 401, code: 'token_missing' })))[0]).toMatch(
      /body data must have required property/,
    );
    expect(spec.problems({ operationId: 'getJwks' }, answer(200, { 'cache-control': 'no-store' }, JSON.stringify({ keys: [{ kty: 'OKP' }] })))[0]).toMatch(
      /body data\/keys\/0 must have required property .kid./,
    );
  });
});

describe('real answers against docs/openapi.json', () => {
  let clock: ManualClock;
  let store: FaultyStore;
  let connector: RunningSandboxConnector;
  let main: TestGateway;
  let rotated: TestGateway;
  /** The card lifecycle's gateway: same clock and store, the in-memory connector, cred-full also holding cards:read, cards:update and events:read. */
  let life: TestGateway;
  let lifeConnector: MemoryConnector;
  const gatewayFor = (op: Op): TestGateway => (isLifeOp(op) || isEventOp(op) ? life : main);
  let staleToken: string;
  const tokens: Record<'full' | 'ranged' | 'inactive' | 'noPerms' | 'createOnly' | 'revoked', string> = {
    full: '',
    ranged: '',
    inactive: '',
    noPerms: '',
    createOnly: '',
    revoked: '',
  };
  const session = async (gw: TestGateway = main): Promise<Session> => login(gw);

  beforeAll(async () => {
    clock = new ManualClock(T0);
    store = new FaultyStore(new MemoryStore(() => clock.now()));
    connector = await startSandboxConnector({ host: '127.0.0.1', port: 0, controls: true });
    const overrides = {
      rateLimits: {
        login: { points: 1000, windowSeconds: 60 },
        refresh: { points: 1000, windowSeconds: 60 },
        loginPerAddress: { points: 1000, windowSeconds: 60 },
      },
      connector: { url: connector.url, timeoutMs: 500 },
    };
    main = await createTestGateway({ clock, store, overrides });
    // The same store and connector under another card-record key: the records the first one
    // sealed cannot be opened (an operator dropped the key that sealed them).
    const otherKey = join((await testKeys()).dir, 'other-card.key');
    writeFileSync(otherKey, randomBytes(32).toString('base64'), { mode: 0o600 });
    rotated = await createTestGateway({ clock, store, overrides: { ...overrides, cards: { encryptionKey: { kid: 'card-other', key: { file: otherKey } } } } });
    lifeConnector = new MemoryConnector(() => clock.now());
    lifeConnector.add('acct-eu', { cardId: CARD_ID });
    life = await createTestGateway({
      clock,
      store,
      connector: lifeConnector,
      credentials: DEFAULT_CREDENTIALS.map((credential) =>
        credential.id === 'cred-full' ? { ...credential, permissions: [...credential.permissions, 'cards:read', 'cards:update', 'events:read'] } : credential,
      ),
      overrides: {
        ...overrides,
        rateLimits: { ...overrides.rateLimits, cardReads: { points: 1000, windowSeconds: 60 }, cardStatusChanges: { points: 1000, windowSeconds: 60 } },
      },
    });
    staleToken = await mintToken(main, 'full');
    clock.advance(2 * HOUR);
    tokens.full = await mintToken(main, 'full');
    tokens.ranged = await mintToken(main, 'ranged');
    tokens.inactive = await mintToken(main, 'inactive');
    tokens.noPerms = await mintToken(main, 'no-perms');
    tokens.createOnly = await mintToken(main, 'create-only');
    // Issued under another password hash than the credential's now (D41).
    const full = main.config.credentials.byUsername('full')!;
    tokens.revoked = (await main.gateway.tokens.issueAccessToken({ ...full, secretFingerprint: 'AAAAAAAAAAAAAAAAAAAAAA' })).token;
  });
  afterAll(async () => {
    await rotated?.close();
    await life?.close();
    await main?.close();
    await store?.close();
    await connector?.close();
  });

  describe('successes', () => {
    it('login, the public keys, refresh and logout', async () => {
      observe({ operationId: 'login' }, await send(main, valid('login')));
      observe({ operationId: 'getJwks' }, await send(main, valid('getJwks')));
      const first = await session();
      const refreshed = await send(main, valid('refresh', first));
      observe({ operationId: 'refresh' }, refreshed);
      const rotatedSession = { accessToken: first.accessToken, refreshToken: (JSON.parse(refreshed.body) as Session).refreshToken };
      observe({ operationId: 'logout' }, await send(main, valid('logout', rotatedSession)));
    });

    it('card creation: created, revealed, replayed with a different payload', async () => {
      const created = await send(main, valid('createCard', { accessToken: tokens.full, refreshToken: '' }));
      observe({ operationId: 'createCard' }, created);
      expect(headerOf(created, 'idempotent-replayed')).toBeUndefined();

      const body = validCardBody();
      const call = { ...valid('createCard', { accessToken: tokens.full, refreshToken: '' }), payload: JSON.stringify(body) };
      const revealed = await send(main, { ...call, url: `${CARDS}?revealDetails=true` });
      observe({ operationId: 'createCard' }, revealed);
      expect((JSON.parse(revealed.body) as { pan: string }).pan).toMatch(/^\d{16}$/);

      const replay = await send(main, { ...call, payload: JSON.stringify({ ...body, cardLimit: 20_000 }) });
      observe({ operationId: 'createCard' }, replay);
      expect(headerOf(replay, 'idempotent-replayed')).toBe('true');
      expect(headerOf(replay, 'idempotency-payload-mismatch')).toBe('true');
    });
  });

  describe('refusals at the edge, for every operation', () => {
    it.each(OPS)('%s: token in the URL, plain HTTP, an address outside the allowlist, an over-long URL', async (op) => {
      const call = valid(op, { accessToken: tokens.full, refreshToken: 'x' });
      const gw = gatewayFor(op);
      observe({ operationId: op }, await send(gw, { ...call, url: `${call.url}?access_token=abc` }), 'token_in_url');
      observe({ operationId: op }, await send(gw, withHeaders(call, { 'x-forwarded-proto': 'http' })), 'https_required');
      observe({ operationId: op }, await send(gw, withHeaders(call, { 'x-forwarded-for': '192.0.2.10' })), 'address_not_allowed');
      observe({ operationId: op }, await send(gw, { ...call, url: `${call.url}?q=${'a'.repeat(9000)}` }), 'url_too_long');
    });
  });

  describe('body refusals, for every operation with a body', () => {
    it.each(BODY_OPS)('%s: not JSON, empty, invalid, too large, another media type', async (op) => {
      const call = valid(op, { accessToken: tokens.full, refreshToken: 'x' });
      const gw = gatewayFor(op);
      observe({ operationId: op }, await send(gw, { ...call, payload: '{"a":' }), 'malformed_json');
      observe({ operationId: op }, await send(gw, { ...call, payload: '' }), 'empty_body');
      observe({ operationId: op }, await send(gw, { ...call, payload: '{"unknownMember":1}' }), 'validation_failed');
      observe({ operationId: op }, await send(gw, { ...call, payload: JSON.stringify({ padding: 'x'.repeat(17 * 1024) }) }), 'body_too_large');
      observe({ operationId: op }, await send(gw, withHeaders(call, { 'content-type': 'text/plain' })), 'unsupported_media_type');
    });

    it('createCard: a query parameter it does not know', async () => {
      const call = valid('createCard', { accessToken: tokens.full, refreshToken: '' });
      observe({ operationId: 'createCard' }, await send(main, { ...call, url: `${CARDS}?revealDetails=yes` }), 'validation_failed');
    });
  });

  describe('bearer refusals, for every protected operation', () => {
    it.each(PROTECTED_OPS)('%s: missing, malformed, invalid, expired, revoked, deactivated, outside the address ranges', async (op) => {
      const call = valid(op, { accessToken: tokens.full, refreshToken: 'x' });
      const gw = gatewayFor(op);
      observe({ operationId: op }, await send(gw, withoutAuthorization(call)), 'token_missing');
      observe({ operationId: op }, await send(gw, withHeaders(call, { authorization: 'Basic ZnVsbDpwYXNzd29yZA==' })), 'token_malformed');
      observe({ operationId: op }, await send(gw, withHeaders(call, { authorization: 'Bearer aaaa.bbbb.cccc' })), 'token_invalid');
      observe({ operationId: op }, await send(gw, withHeaders(call, { authorization: `Bearer ${staleToken}` })), 'token_expired');
      observe({ operationId: op }, await send(gw, withHeaders(call, { authorization: `Bearer ${tokens.revoked}` })), 'token_revoked');
      observe({ operationId: op }, await send(gw, withHeaders(call, { authorization: `Bearer ${tokens.inactive}` })), 'credential_inactive');
      observe({ operationId: op }, await send(gw, withHeaders(call, { authorization: `Bearer ${tokens.ranged}` })), 'permission_denied');
    });

    it.each(EVENT_OPS)('%s: without events:read, which no card permission implies', async (op) => {
      // main's cred-full holds every card permission it has, but not events:read.
      const denied = await send(main, valid(op, { accessToken: tokens.full, refreshToken: '' }));
      observe({ operationId: op }, denied, 'permission_denied');
      expect((JSON.parse(denied.body) as { message: string }).message).toBe('Permission events:read is required');
    });

    it('createCard: without cards:create, and revealDetails without cards:reveal', async () => {
      const call = valid('createCard', { accessToken: tokens.noPerms, refreshToken: '' });
      observe({ operationId: 'createCard' }, await send(main, call), 'permission_denied');
      observe(
        { operationId: 'createCard' },
        await send(main, { ...withHeaders(call, { authorization: `Bearer ${tokens.createOnly}` }), url: `${CARDS}?revealDetails=true` }),
        'permission_denied',
      );
    });
  });

  describe('outages', () => {
    it.each(BODY_OPS)('%s: the audit trail cannot be written', async (op) => {
      const call = valid(op, op === 'refresh' || op === 'logout' ? await session() : { accessToken: tokens.full, refreshToken: '' });
      const gw = gatewayFor(op);
      gw.audit.setWritable(false);
      try {
        observe({ operationId: op }, await send(gw, call), 'audit_unavailable');
        if (op === 'changeCardStatus')
          observe(
            { operationId: 'getCard' },
            await send(gw, { ...valid('getCard', { accessToken: tokens.full, refreshToken: '' }), url: `${ONE_CARD}?revealDetails=true` }),
            'audit_unavailable',
          );
      } finally {
        gw.audit.setWritable(true);
      }
    });

    const faults: Record<Exclude<Op, 'getJwks'>, { outage: Parameters<FaultyStore['with']>[0]; bug: Parameters<FaultyStore['with']>[0] }> = {
      login: { outage: 'limiter', bug: 'lockouts' },
      refresh: { outage: 'limiter', bug: 'sessions' },
      logout: { outage: 'sessions', bug: 'sessions' },
      createCard: { outage: 'idempotency', bug: 'idempotency' },
      getCard: { outage: 'limiter', bug: 'limiter' },
      listCards: { outage: 'limiter', bug: 'limiter' },
      changeCardStatus: { outage: 'limiter', bug: 'limiter' },
      // Past the limiter: the event log itself (events.scan, events.get) fails.
      listEvents: { outage: 'events', bug: 'events' },
      getEvent: { outage: 'events', bug: 'events' },
    };
    it.each([...BODY_OPS, 'getCard', 'listCards', ...EVENT_OPS] as Op[])('%s: the shared store is down (503), or fails unexpectedly (500)', async (op) => {
      const parts = faults[op as Exclude<Op, 'getJwks'>];
      const call = async () => valid(op, op === 'refresh' || op === 'logout' ? await session() : { accessToken: tokens.full, refreshToken: '' });
      const outage = await call();
      observe({ operationId: op }, await store.with(parts.outage, 'unavailable', () => send(gatewayFor(op), outage)), 'store_unavailable');
      const bug = await call();
      observe({ operationId: op }, await store.with(parts.bug, 'broken', () => send(gatewayFor(op), bug)), 'internal_error');
    });
  });

  describe('refusals of the operations themselves', () => {
    it('login: wrong password', async () => {
      observe(
        { operationId: 'login' },
        await send(main, { ...valid('login'), payload: JSON.stringify({ username: 'full', password: 'wrong password' }) }),
        'authentication_failed',
      );
    });

    it('login and refresh: rate limited; login: too many password checks at once', async () => {
      const limited = await createTestGateway({
        overrides: { rateLimits: { login: { points: 1, windowSeconds: 60 }, refresh: { points: 1, windowSeconds: 60 } } },
      });
      const busy = await createTestGateway({ overrides: { passwordHashing: { maxConcurrent: 1, maxConcurrentPerAddress: 1 } } });
      try {
        const first = await login(limited);
        const refreshed = await send(limited, valid('refresh', first));
        observe({ operationId: 'refresh' }, refreshed);
        observe(
          { operationId: 'refresh' },
          await send(limited, valid('refresh', { accessToken: first.accessToken, refreshToken: (JSON.parse(refreshed.body) as Session).refreshToken })),
          'rate_limited',
        );
        observe({ operationId: 'login' }, await send(limited, valid('login')), 'rate_limited');

        const answers = await Promise.all(Array.from({ length: 4 }, () => send(busy, valid('login'))));
        for (const answer of answers) observe({ operationId: 'login' }, answer);
        expect(answers.map((answer) => answer.statusCode)).toContain(503);
        expect(answers.map((answer) => (JSON.parse(answer.body) as { code?: string }).code)).toContain('server_busy');
      } finally {
        await limited.close();
        await busy.close();
      }
    });

    it('refresh and logout: unknown refresh token; refresh: a logged-out session', async () => {
      observe(
        { operationId: 'refresh' },
        await send(main, valid('refresh', { accessToken: tokens.full, refreshToken: 'not-a-refresh-token' })),
        'refresh_token_invalid',
      );
      observe(
        { operationId: 'logout' },
        await send(main, valid('logout', { accessToken: tokens.full, refreshToken: 'not-a-refresh-token' })),
        'refresh_token_invalid',
      );
      const ended = await session();
      observe({ operationId: 'logout' }, await send(main, valid('logout', ended)));
      observe({ operationId: 'refresh' }, await send(main, valid('refresh', ended)), 'refresh_token_revoked');
    });

    it('logout: a session that ended with its credential (D41)', async () => {
      // A gateway of its own (its own store): the password change must not reach the others' credentials.
      const own = await createTestGateway({ clock, overrides: { rateLimits: RELAXED_LIMITS } });
      try {
        const before = await login(own);
        const changed = DEFAULT_CREDENTIALS.map((credential) => (credential.id === 'cred-full' ? { ...credential, password: 'a new password' } : credential));
        await own.gateway.reload(await testConfig({}, changed));
        const after = await login(own, 'full', 'a new password');
        observe(
          { operationId: 'logout' },
          await send(own, valid('logout', { accessToken: after.accessToken, refreshToken: before.refreshToken })),
          'refresh_token_revoked',
        );
      } finally {
        await own.close();
      }
    });

    it('createCard: the processor fails, answers nonsense, or does not answer in time', async () => {
      const call = () => valid('createCard', { accessToken: tokens.full, refreshToken: '' });
      await setConnectorMode(connector, { mode: 'fail', status: 500, count: 1 });
      observe({ operationId: 'createCard' }, await send(main, call()), 'connector_unavailable');
      await setConnectorMode(connector, { mode: 'garbage', count: 1 });
      observe({ operationId: 'createCard' }, await send(main, call()), 'connector_invalid_answer');
      // Held far past the 500 ms deadline (closing the sandbox releases it): only the deadline can end the call.
      await setConnectorMode(connector, { mode: 'delay', delayMs: 600_000, count: 1 });
      observe({ operationId: 'createCard' }, await send(main, call()), 'connector_timeout');
      await setConnectorMode(connector, { mode: 'normal' });
    });

    it('createCard: the requestId is held by another instance still in progress (409)', async () => {
      const body = validCardBody();
      // Another gateway instance holds the claim (its lease is a minute): this one waits, then gives up.
      await store.inner.idempotency.reserve(`acct-eu:${String(body['requestId'])}`, {
        owner: randomUUID(),
        now: clock.now(),
        leaseMs: 60_000,
        attempt: { fingerprint: 'other-instance', requestedCardLimit: 10_000, credentialId: 'cred-full' },
      });
      const call = { ...valid('createCard', { accessToken: tokens.full, refreshToken: '' }), payload: JSON.stringify(body) };
      observe({ operationId: 'createCard' }, await send(main, call), 'idempotency_in_progress');
    });

    it('createCard: a stored card sealed under a key no longer configured', async () => {
      const body = validCardBody();
      const call = { ...valid('createCard', { accessToken: tokens.full, refreshToken: '' }), payload: JSON.stringify(body) };
      observe({ operationId: 'createCard' }, await send(main, call));
      const token = await mintToken(rotated, 'full');
      observe(
        { operationId: 'createCard' },
        await send(rotated, { ...withHeaders(call, { authorization: `Bearer ${token}` }), url: `${CARDS}?revealDetails=true` }),
        'record_unreadable',
      );
    });

    it('the card lifecycle: read, listed, changed; refused as not found, canceled, bad cursor, bad query, limited, or failed by the processor', async () => {
      const call = (op: LifeOp) => valid(op, { accessToken: tokens.full, refreshToken: '' });
      for (const op of LIFE_OPS) observe({ operationId: op }, await send(life, call(op)));
      observe({ operationId: 'getCard' }, await send(life, { ...call('getCard'), url: `${CARDS}/card_unknown` }), 'card_not_found');
      observe({ operationId: 'changeCardStatus' }, await send(life, { ...call('changeCardStatus'), url: `${CARDS}/card_unknown` }), 'card_not_found');
      observe({ operationId: 'getCard' }, await send(life, { ...call('getCard'), url: `${ONE_CARD}?revealDetails=yes` }), 'validation_failed');
      // A card created on the connector, not through this gateway: nobody is known to have created it.
      observe({ operationId: 'getCard' }, await send(life, { ...call('getCard'), url: `${ONE_CARD}?revealDetails=true` }), 'permission_denied');
      observe({ operationId: 'listCards' }, await send(life, { ...call('listCards'), url: `${CARDS}?limit=0` }), 'validation_failed');
      observe({ operationId: 'listCards' }, await send(life, { ...call('listCards'), url: `${CARDS}?cursor=c1.forged` }), 'invalid_cursor');
      const canceled = lifeConnector.add('acct-eu', { status: 'canceled' });
      observe({ operationId: 'changeCardStatus' }, await send(life, { ...call('changeCardStatus'), url: `${CARDS}/${canceled.cardId}` }), 'card_canceled');
      for (const [kind, code] of [
        ['refused', 'connector_unavailable'],
        ['invalid_answer', 'connector_invalid_answer'],
        ['timeout', 'connector_timeout'],
      ] as const) {
        for (const op of LIFE_OPS) {
          lifeConnector.failNext(kind);
          observe({ operationId: op }, await send(life, call(op)), code);
        }
      }
      const limited = await createTestGateway({
        clock,
        connector: lifeConnector,
        credentials: DEFAULT_CREDENTIALS.map((credential) =>
          credential.id === 'cred-full' ? { ...credential, permissions: [...credential.permissions, 'cards:read', 'cards:update'] } : credential,
        ),
        overrides: { rateLimits: { cardReads: { points: 1, windowSeconds: 60 }, cardStatusChanges: { points: 1, windowSeconds: 60 } } },
      });
      try {
        const token = await mintToken(limited, 'full');
        const limitedCall = (op: LifeOp) => valid(op, { accessToken: token, refreshToken: '' });
        observe({ operationId: 'getCard' }, await send(limited, limitedCall('getCard')));
        observe({ operationId: 'getCard' }, await send(limited, limitedCall('getCard')), 'rate_limited');
        observe({ operationId: 'listCards' }, await send(limited, limitedCall('listCards')), 'rate_limited');
        observe({ operationId: 'changeCardStatus' }, await send(limited, limitedCall('changeCardStatus')));
        observe({ operationId: 'changeCardStatus' }, await send(limited, limitedCall('changeCardStatus')), 'rate_limited');
      } finally {
        await limited.close();
      }
    });

    it('the events: listed and read; refused as not found, bad query, bad cursor, or limited', async () => {
      const bearer = { accessToken: tokens.full, refreshToken: '' };
      // Events of its own: a card created and frozen through the lifecycle gateway records card.created and card.status_changed.
      const created = await send(life, valid('createCard', bearer));
      expect(created.statusCode, created.body).toBe(201);
      const { cardId } = JSON.parse(created.body) as { cardId: string };
      const frozen = await send(life, { ...valid('changeCardStatus', bearer), url: `${CARDS}/${cardId}` });
      expect(frozen.statusCode, frozen.body).toBe(200);

      const listed = await send(life, { ...valid('listEvents', bearer), url: `${EVENTS}?cardId=${cardId}` });
      observe({ operationId: 'listEvents' }, listed);
      const page = JSON.parse(listed.body) as { data: { id: string; type: string }[]; nextCursor: string | null };
      expect(page.data.map((event) => event.type)).toEqual(['card.status_changed', 'card.created']);
      for (const event of page.data) {
        const one = await send(life, { ...valid('getEvent', bearer), url: `${EVENTS}/${event.id}` });
        observe({ operationId: 'getEvent' }, one);
        expect(JSON.parse(one.body)).toEqual(event);
      }
      const firstPage = await send(life, { ...valid('listEvents', bearer), url: `${EVENTS}?cardId=${cardId}&limit=1` });
      observe({ operationId: 'listEvents' }, firstPage);
      const { nextCursor } = JSON.parse(firstPage.body) as { nextCursor: string | null };
      expect(nextCursor).toEqual(expect.any(String));
      observe(
        { operationId: 'listEvents' },
        await send(life, { ...valid('listEvents', bearer), url: `${EVENTS}?cardId=${cardId}&limit=1&cursor=${encodeURIComponent(nextCursor!)}` }),
      );

      observe({ operationId: 'getEvent' }, await send(life, valid('getEvent', bearer)), 'event_not_found');
      observe({ operationId: 'getEvent' }, await send(life, { ...valid('getEvent', bearer), url: `${EVENTS}/not-an-event-id` }), 'event_not_found');
      observe({ operationId: 'listEvents' }, await send(life, { ...valid('listEvents', bearer), url: `${EVENTS}?limit=0` }), 'validation_failed');
      observe({ operationId: 'listEvents' }, await send(life, { ...valid('listEvents', bearer), url: `${EVENTS}?type=card.frozen` }), 'validation_failed');
      observe(
        { operationId: 'listEvents' },
        await send(life, { ...valid('listEvents', bearer), url: `${EVENTS}?createdAfter=2026-11-23T00:00:00Z&createdBefore=2026-11-22T00:00:00Z` }),
        'validation_failed',
      );
      observe({ operationId: 'listEvents' }, await send(life, { ...valid('listEvents', bearer), url: `${EVENTS}?cursor=c1.forged` }), 'invalid_cursor');
      // A cursor opens only with the filters it was sealed for.
      observe(
        { operationId: 'listEvents' },
        await send(life, { ...valid('listEvents', bearer), url: `${EVENTS}?limit=1&cursor=${encodeURIComponent(nextCursor!)}` }),
        'invalid_cursor',
      );

      const limited = await createTestGateway({
        clock,
        credentials: DEFAULT_CREDENTIALS.map((credential) =>
          credential.id === 'cred-full' ? { ...credential, permissions: [...credential.permissions, 'events:read'] } : credential,
        ),
        overrides: { rateLimits: { cardReads: { points: 1, windowSeconds: 60 } } },
      });
      try {
        const token = await mintToken(limited, 'full');
        const limitedCall = (op: EventOp) => valid(op, { accessToken: token, refreshToken: '' });
        observe({ operationId: 'listEvents' }, await send(limited, limitedCall('listEvents')));
        observe({ operationId: 'listEvents' }, await send(limited, limitedCall('listEvents')), 'rate_limited');
        observe({ operationId: 'getEvent' }, await send(limited, limitedCall('getEvent')), 'rate_limited');
      } finally {
        await limited.close();
      }
    });

    it('refresh and logout: a refresh token past its 24 hours', async () => {
      const [forRefresh, forLogout] = [await session(), await session()];
      clock.advance(DAY);
      const bearer = await session();
      observe(
        { operationId: 'refresh' },
        await send(main, valid('refresh', { accessToken: bearer.accessToken, refreshToken: forRefresh.refreshToken })),
        'refresh_token_expired',
      );
      observe(
        { operationId: 'logout' },
        await send(main, valid('logout', { accessToken: bearer.accessToken, refreshToken: forLogout.refreshToken })),
        'refresh_token_expired',
      );
      tokens.full = await mintToken(main, 'full');
    });
  });

  describe('answers that belong to no operation', () => {
    it('an unknown path (404) and another method on a known path (405, with Allow)', async () => {
      observe({ component: 'NotFound' }, await send(main, { method: 'GET', url: '/api/v1/nothing-here', headers: {} }), 'not_found');
      observe({ component: 'NotFound' }, await send(main, { method: 'POST', url: '/api/v2/issuing/cards', headers: {} }), 'not_found');
      const wrongMethod = await send(main, { method: 'PATCH', url: CARDS, headers: {} });
      observe({ component: 'MethodNotAllowed' }, wrongMethod, 'method_not_allowed');
      expect(headerOf(wrongMethod, 'allow')).toBe('GET, HEAD, POST');
      const wrongMethodOnACard = await send(main, { method: 'POST', url: `${CARDS}/card_1`, headers: {} });
      observe({ component: 'MethodNotAllowed' }, wrongMethodOnACard, 'method_not_allowed');
      expect(headerOf(wrongMethodOnACard, 'allow')).toBe('GET, HEAD, PATCH');
    });
  });

  describe('over a real TLS listener: broken HTTP', () => {
    let tls: TestGateway;
    let running: RunningGateway;
    let ca: string;
    beforeAll(async () => {
      ca = await testCertificatePem();
      tls = await createTestGateway({ overrides: { trustedProxies: [], edge: { headersTimeoutMs: 200, requestTimeoutMs: 400 } } });
      running = await listenGateway(tls.gateway, { https: { host: '127.0.0.1', port: 0 }, admin: { host: '127.0.0.1', port: 0 } });
    });
    afterAll(async () => {
      await running?.close();
      await tls?.close();
    });

    const exchange = async (bytes: string): Promise<ObservedAnswer> => {
      const { received, closedByServer } = await rawExchange(running.httpsUrl, bytes, { tls: { ca } });
      expect(closedByServer, 'the server closes the connection').toBe(true);
      const answer = parseHttpAnswer(received);
      return { statusCode: answer.statusCode, headers: answer.headers, body: answer.body };
    };

    it.each(OPS)('%s: no Host header (400), headers too large (431), headers too slow (408)', async (op) => {
      const method = METHODS[op];
      const [noHost, tooLarge, tooSlow] = await Promise.all([
        exchange(`${method} ${PATHS[op]} HTTP/1.1\r\nContent-Length: 0\r\n\r\n`),
        exchange(`${method} ${PATHS[op]} HTTP/1.1\r\nHost: localhost\r\nX-Filler: ${'a'.repeat(20_000)}\r\n\r\n`),
        exchange(`${method} ${PATHS[op]} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n`),
      ]);
      observe({ operationId: op }, noHost, 'malformed_request');
      observe({ operationId: op }, tooLarge, 'headers_too_large');
      observe({ operationId: op }, tooSlow, 'request_timeout');
    });
  });

  describe('over a real TLS listener: the per-address budget (D53), before any route', () => {
    let budgeted: TestGateway;
    let running: RunningGateway;
    let ca: string;
    beforeAll(async () => {
      ca = await testCertificatePem();
      // One request a second per address, on a clock that stands still: every request after the first is refused.
      budgeted = await createTestGateway({ overrides: { trustedProxies: [], limits: { perAddress: { requestsPerSecond: 1 } } } });
      running = await listenGateway(budgeted.gateway, { https: { host: '127.0.0.1', port: 0 }, admin: { host: '127.0.0.1', port: 0 } });
      await call(`${running.httpsUrl}${JWKS}`, { ca });
    });
    afterAll(async () => {
      await running?.close();
      await budgeted?.close();
    });

    it.each(OPS)('%s: 429 rate_limited with the address policy', async (op) => {
      const request = valid(op, { accessToken: tokens.full, refreshToken: 'x' });
      // Keep-alive, so that the answer's Connection header is the gateway's choice, not an echo of the client's.
      const agent = new Agent({ keepAlive: true, ca });
      const answer = await call(`${running.httpsUrl}${request.url}`, {
        agent,
        method: request.method,
        headers: request.headers,
        ...(request.payload !== undefined && { body: request.payload }),
      }).finally(() => agent.destroy());
      const observed = { statusCode: answer.status, headers: answer.headers, body: answer.body };
      observe({ operationId: op }, observed, 'rate_limited');
      expect(headerOf(observed, 'ratelimit-policy')).toBe('"address";q=1;w=1');
    });
  });

  describe('while shutting down', () => {
    it.each(OPS)('%s: a request that still reaches the gateway once close() has begun gets 503 shutting_down', async (op) => {
      const draining = await createTestGateway();
      // A listener the gateway does not close itself, feeding its routing, stands for a
      // connection that is still open while the gateway drains.
      const server: Server = draining.gateway.servers.plain(draining.gateway.app.routing);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      try {
        await draining.gateway.app.close();
        const call = valid(op, { accessToken: 'a.b.c', refreshToken: 'x' });
        const answer = await plainRequest((server.address() as AddressInfo).port, call);
        observe({ operationId: op }, answer, 'shutting_down');
        expect(headerOf(answer, 'connection')).toBe('close');
      } finally {
        server.closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
        await draining.close();
      }
    });
  });

  it('covered every code of every response the document lists, and every code of the catalogue', () => {
    const missing: string[] = [];
    for (const { operation } of spec.operations.values()) {
      const id = operation.operationId ?? '';
      for (const [status, response] of Object.entries(operation.responses)) {
        if (Number(status) < 400) {
          if (!covered.has(`${id}:${status}`)) missing.push(`${id} ${status}`);
          continue;
        }
        for (const code of Object.keys(response.content?.['application/json']?.examples ?? {})) {
          if (!covered.has(`${id}:${code}`)) missing.push(`${id} ${status} ${code}`);
        }
      }
    }
    for (const name of Object.keys(spec.document.components.responses ?? {})) {
      const codes = Object.keys(spec.document.components.responses?.[name]?.content?.['application/json']?.examples ?? {});
      for (const code of codes) if (!covered.has(`${name}:${code}`)) missing.push(`${name} ${code}`);
    }
    expect(missing).toEqual([]);
    expect([...seenCodes].sort()).toEqual(Object.keys(ERROR_CODES).sort());
  });
});

/** One request over plain HTTP from a trusted proxy that says the client spoke HTTPS. */
function plainRequest(port: number, call: Call): Promise<ObservedAnswer> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(
      { host: '127.0.0.1', port, method: call.method, path: call.url, headers: { ...call.headers, 'x-forwarded-proto': 'https' } },
      (response) => {
        let body = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (body += chunk));
        response.on('end', () => resolve({ statusCode: response.statusCode ?? 0, headers: response.headers, body }));
      },
    );
    request.on('error', reject);
    request.end(call.payload);
  });
}
