import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BODY_SHAPES, hostileBody, type BodyShape } from '../../bench/hostile-bodies.js';
import { startSandboxConnector, type RunningSandboxConnector } from '../../src/connector/sandbox/sandbox-connector.js';
import { TOO_DEEP } from '../../src/edge/strict-json.js';
import { LOGIN, RELAXED_LIMITS } from '../support/auth-requests.js';
import { createTestGateway, testCertificatePem, type TestGateway } from '../support/gateway-fixture.js';
import {
  call,
  CARDS_PATH,
  expectCodedError,
  JWKS_PATH,
  listenTestGateway,
  LOGIN_PATH,
  loginOverTls,
  type HttpAnswer,
  type ListeningGateway,
} from './support.js';

/**
 * Issue 16, finding 1 (D42): each body shape that once stalled the event loop (a 16 KiB login of
 * 4,096 nested arrays cost 0.34-2.8 s of CPU before the fix), sent over real TLS at 16 KiB and at
 * the configured bodyLimit (1 MiB here, the largest allowed), to login (no token needed) and to
 * card creation. Each gets its precise answer, and a JWKS request sent beside every one of them is
 * answered. The reading cost itself is asserted as a count in test/edge/strict-json-cost.test.ts.
 * And the per-address login limit runs before the body is read: a flood of hostile bodies from
 * one address is refused (429) without parsing, where the old code answered each after parsing.
 */

const BODY_LIMIT = 1024 * 1024;
const SIZES = [16 * 1024, BODY_LIMIT];
const DUPLICATE = 'appears more than once';
/** Per request; only a guard against a hang, named in the failure. */
const GUARD_MS = 30_000;

/** The field problem each shape must be refused with, where the shape decides it (else any validation problem). */
const expected = (shape: BodyShape, bytes: number): { path: string; message: string } | undefined =>
  ({
    'deep-arrays': { path: '(body)', message: TOO_DEEP },
    'deep-objects': { path: '(body)', message: TOO_DEEP },
    'duplicate-names': { path: 'cardLimit', message: DUPLICATE },
    'deep-duplicate-names': { path: `${'a.'.repeat(31)}a`, message: DUPLICATE },
    // The name is written in \u escapes; the path names it decoded, cut at 256 characters (issue 31).
    'escaped-names': { path: `${'n'.repeat(Math.min(256, Math.floor((bytes - 8) / 2 / 6)))}…`, message: DUPLICATE },
  })[shape as string];

describe('hostile JSON bodies at 16 KiB and at bodyLimit (D42)', () => {
  let ca: string;
  let connector: RunningSandboxConnector;
  let listening: ListeningGateway;
  let token: string;

  beforeAll(async () => {
    ca = await testCertificatePem();
    connector = await startSandboxConnector({ host: '127.0.0.1', port: 0 });
    listening = await listenTestGateway({
      overrides: {
        rateLimits: { ...RELAXED_LIMITS, loginPerAddress: { points: 1000, windowSeconds: 60 } },
        connector: { url: connector.url, timeoutMs: 5000 },
        cards: { bodyLimitBytes: BODY_LIMIT },
      },
    });
    token = await loginOverTls(listening.httpsUrl, ca);
  }, 60_000);
  afterAll(async () => {
    await listening?.close();
    await connector?.close();
  });

  const post = (path: string, body: string, auth: boolean): Promise<HttpAnswer> =>
    call(`${listening.httpsUrl}${path}`, { ca, body, timeoutMs: GUARD_MS, ...(auth && { headers: { authorization: `Bearer ${token}` } }) });
  const jwks = (): Promise<HttpAnswer> => call(`${listening.httpsUrl}${JWKS_PATH}`, { ca, timeoutMs: GUARD_MS });

  for (const bytes of SIZES) {
    for (const shape of BODY_SHAPES) {
      it(`${shape}, ${bytes} bytes: 400 with its problem on login and on card creation, and a JWKS request beside each is answered`, async () => {
        const text = hostileBody(shape, bytes);
        expect(Buffer.byteLength(text)).toBeLessThanOrEqual(BODY_LIMIT);
        const [loginAnswer, loginJwks, cardAnswer, cardJwks] = await Promise.all([
          post(LOGIN_PATH, text, false).catch((error: Error) => `login: ${error.message}`),
          jwks().catch((error: Error) => `JWKS beside login: ${error.message}`),
          post(CARDS_PATH, text, true).catch((error: Error) => `card: ${error.message}`),
          jwks().catch((error: Error) => `JWKS beside card: ${error.message}`),
        ]);
        for (const answer of [loginAnswer, loginJwks, cardAnswer, cardJwks]) expect(typeof answer, String(answer)).toBe('object');
        for (const answer of [loginJwks, cardJwks] as HttpAnswer[]) {
          expect(answer.status).toBe(200);
          expect((JSON.parse(answer.body) as { keys: unknown[] }).keys.length).toBeGreaterThan(0);
        }
        for (const answer of [loginAnswer, cardAnswer] as HttpAnswer[]) {
          const envelope = expectCodedError(answer, 400, 'validation_failed', 'Request validation failed');
          expect(envelope.details.fields?.length).toBeGreaterThan(0);
          expect(envelope.details.fields?.length).toBeLessThanOrEqual(20);
          const problem = expected(shape, bytes);
          if (problem) expect(envelope.details.fields).toContainEqual(problem);
        }
      });
    }
  }

  it('answers a well-formed card body of 16 KiB normally (201), and one over bodyLimit with 413', async () => {
    const metadata: Record<string, string> = {};
    for (let i = 0; i < 30; i += 1) metadata[`key_${i}`] = 'm'.repeat(500);
    const body = JSON.stringify({ requestId: randomUUID(), cardLimit: 10_000, currency: 'EUR', metadata });
    expect(Buffer.byteLength(body)).toBeGreaterThan(15 * 1024);
    const [created, keys] = await Promise.all([post(CARDS_PATH, body, true), jwks()]);
    expect(created.status, created.body).toBe(201);
    expect(keys.status).toBe(200);
    const over = await post(LOGIN_PATH, hostileBody('flat', BODY_LIMIT).padEnd(BODY_LIMIT + 1), false).catch((error: Error) => error.message);
    expect(typeof over === 'object' ? over.status : over).toBe(413);
  });
});

describe('the per-address login limit runs before the body is read (D27, D42)', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await createTestGateway({ overrides: { rateLimits: { loginPerAddress: { points: 3, windowSeconds: 60 } } } });
  });
  afterAll(async () => {
    await gw?.close();
  });

  it('refuses the 4th hostile body from one address with 429 instead of parsing it; another address is still read', async () => {
    const deep = hostileBody('deep-arrays', 16 * 1024);
    const from = (address: string) =>
      gw.inject({
        method: 'POST',
        url: LOGIN,
        remoteAddress: '127.0.0.1',
        headers: { 'content-type': 'application/json', 'x-forwarded-for': address },
        payload: deep,
      });
    const answers = [];
    for (let i = 0; i < 4; i += 1) answers.push(await from('10.1.2.3'));
    // The first three are read and refused for their nesting: 400 naming the depth.
    for (const answer of answers.slice(0, 3)) {
      expect(answer.statusCode, answer.body).toBe(400);
      expect(answer.json<{ details: { fields: unknown[] } }>().details.fields).toEqual([{ path: '(body)', message: TOO_DEEP }]);
    }
    // Had the body been parsed first, the 4th would be a 400 too.
    expect(answers[3]!.statusCode, answers[3]!.body).toBe(429);
    expect(answers[3]!.json<{ code: string }>().code).toBe('rate_limited');
    expect(answers[3]!.headers['ratelimit-remaining']).toBe('0');
    const other = await from('10.9.8.7');
    expect(other.statusCode, other.body).toBe(400);
  });

  it('still answers a passing login with the headers of the limit closest to refusing', async () => {
    const answer = await gw.inject({
      method: 'POST',
      url: LOGIN,
      headers: { 'content-type': 'application/json', 'x-forwarded-for': '10.5.5.5' },
      payload: { username: 'full', password: 'wrong password' },
    });
    expect(answer.statusCode).toBe(401);
    // per address: 3 - 1 = 2 left; per username: 5 - 1 = 4 left: the address limit speaks.
    expect([answer.headers['ratelimit-limit'], answer.headers['ratelimit-remaining']]).toEqual(['3', '2']);
  });
});
