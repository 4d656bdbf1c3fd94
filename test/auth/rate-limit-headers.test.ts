import type { LightMyRequestResponse } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/foundation/clock.js';
import { PASSWORD, createTestGateway, login, type RawConfig, type TestGateway } from '../support/gateway-fixture.js';
import { SECOND, T0, expectRateLimited, postLogin, postRefresh, rateLimitHeaders } from '../support/auth-requests.js';
import { parseList, type Item } from '../support/structured-fields.js';

/**
 * D49: answers of rate-limited operations carry `RateLimit-Policy` and `RateLimit` as
 * draft-ietf-httpapi-ratelimit-headers revision 11 defines them, beside D11's legacy three.
 * Each header is parsed as an RFC 8941 List (a strict parser), on passing and refused requests,
 * at the boundary: the 5th request of a window is answered with r=0, the 6th is refused.
 */

/** A policy item as `name;q=..;w=..` or a service-limit item as `name;r=..;t=..`, checked for exactly those parameters. */
function simplify(item: Item, keys: readonly [string, string]): { name: string } & Record<string, number | string> {
  expect(item.bare.type, 'a policy name is an sf-string').toBe('string');
  expect([...item.parameters.keys()]).toEqual(keys);
  const out: { name: string } & Record<string, number | string> = { name: String(item.bare.value) };
  for (const [key, value] of item.parameters) {
    expect(value.type, `${key} is an sf-integer`).toBe('integer');
    out[key] = value.value as number;
  }
  return out;
}

/** The two D49 headers of an answer, parsed. */
function draftHeaders(response: LightMyRequestResponse) {
  const policy = response.headers['ratelimit-policy'];
  const limit = response.headers['ratelimit'];
  expect(typeof policy, 'RateLimit-Policy').toBe('string');
  expect(typeof limit, 'RateLimit').toBe('string');
  return {
    policies: parseList(policy as string).map((item) => simplify(item, ['q', 'w'])),
    limits: parseList(limit as string).map((item) => simplify(item, ['r', 't'])),
  };
}

describe('RateLimit-Policy and RateLimit (D49)', () => {
  const opened: TestGateway[] = [];
  afterEach(async () => {
    for (const gw of opened.splice(0)) await gw.close();
  });
  async function open(overrides: RawConfig = {}): Promise<TestGateway> {
    const gw = await createTestGateway({ clock: new ManualClock(T0), overrides });
    opened.push(gw);
    return gw;
  }

  it('login: one item per limit counted (address, then username); the 5th login has r=0, the 6th is refused', async () => {
    const gw = await open();
    gw.clock.set(T0 + 18 * SECOND);
    const policies = [
      { name: 'login_address', q: 30, w: 60 },
      { name: 'login', q: 5, w: 60 },
    ];
    for (let attempt = 1; attempt <= 5; attempt += 1) {
      // four wrong passwords, then the right one: failures and successes count alike
      const response = await postLogin(gw, 'full', attempt < 5 ? 'wrong password' : PASSWORD);
      expect(response.statusCode).toBe(attempt < 5 ? 401 : 200);
      expect(draftHeaders(response)).toEqual({
        policies,
        limits: [
          { name: 'login_address', r: 30 - attempt, t: 42 },
          { name: 'login', r: 5 - attempt, t: 42 },
        ],
      });
      expect(rateLimitHeaders(response)).toEqual({ limit: 5, remaining: 5 - attempt, reset: 42 });
    }

    const refused = await postLogin(gw, 'full', PASSWORD);
    expect(expectRateLimited(refused)).toBe(42);
    expect(draftHeaders(refused)).toEqual({
      policies,
      limits: [
        { name: 'login_address', r: 24, t: 42 },
        { name: 'login', r: 0, t: 42 },
      ],
    });
    // The legacy three speak for the limit that refused.
    expect(rateLimitHeaders(refused)).toEqual({ limit: 5, remaining: 0, reset: 42 });
  });

  it('login: a refusal by the address limit, before the body is read, names that limit alone', async () => {
    const gw = await open({ rateLimits: { loginPerAddress: { points: 3, windowSeconds: 60 } } });
    gw.clock.set(T0 + 50 * SECOND);
    for (let attempt = 1; attempt <= 3; attempt += 1) {
      const response = await postLogin(gw, `someone-${attempt}`, 'whatever');
      expect(response.statusCode).toBe(401);
      expect(draftHeaders(response).limits).toEqual([
        { name: 'login_address', r: 3 - attempt, t: 10 },
        { name: 'login', r: 4, t: 10 },
      ]);
    }
    const refused = await postLogin(gw, 'someone-4', 'whatever');
    expect(expectRateLimited(refused)).toBe(10);
    expect(draftHeaders(refused)).toEqual({ policies: [{ name: 'login_address', q: 3, w: 60 }], limits: [{ name: 'login_address', r: 0, t: 10 }] });
    expect(rateLimitHeaders(refused)).toEqual({ limit: 3, remaining: 0, reset: 10 });
  });

  it('refresh: one item per credential limit; the 5th refresh has r=0, the 6th is refused, a new window starts again', async () => {
    const gw = await open({ rateLimits: { login: { points: 100, windowSeconds: 60 } } });
    const session = await login(gw, 'full');
    gw.clock.set(T0 + 20 * SECOND);
    let refreshToken = session.refreshToken;
    for (let attempt = 1; attempt <= 5; attempt += 1) {
      const response = await postRefresh(gw, session.accessToken, refreshToken);
      expect(response.statusCode, response.body).toBe(200);
      refreshToken = response.json<{ refreshToken: string }>().refreshToken;
      expect(draftHeaders(response)).toEqual({ policies: [{ name: 'refresh', q: 5, w: 60 }], limits: [{ name: 'refresh', r: 5 - attempt, t: 40 }] });
    }
    const refused = await postRefresh(gw, session.accessToken, refreshToken);
    expect(expectRateLimited(refused)).toBe(40);
    expect(draftHeaders(refused)).toEqual({ policies: [{ name: 'refresh', q: 5, w: 60 }], limits: [{ name: 'refresh', r: 0, t: 40 }] });
    expect(rateLimitHeaders(refused)).toEqual({ limit: 5, remaining: 0, reset: 40 });

    gw.clock.set(T0 + 60 * SECOND);
    const again = await postRefresh(gw, session.accessToken, refreshToken);
    expect(again.statusCode, again.body).toBe(200);
    expect(draftHeaders(again).limits).toEqual([{ name: 'refresh', r: 4, t: 60 }]);
  });

  it('are absent where no limit counted the request (card creation, the public keys)', async () => {
    const gw = await open();
    const session = await login(gw, 'full');
    const jwks = await gw.inject({ method: 'GET', url: '/.well-known/jwks.json' });
    const card = await gw.inject({ method: 'POST', url: '/api/v1/issuing/cards', headers: { authorization: `Bearer ${session.accessToken}` }, payload: {} });
    for (const response of [jwks, card]) {
      expect(response.headers['ratelimit-policy']).toBeUndefined();
      expect(response.headers['ratelimit']).toBeUndefined();
    }
  });
});

describe('the structured-field parser (guards the test itself)', () => {
  it("parses the draft's examples and RFC 8941's optional whitespace", () => {
    const items = parseList('"burst";q=100;w=60,"daily";q=1000;w=86400');
    expect(items.map((item) => simplify(item, ['q', 'w']))).toEqual([
      { name: 'burst', q: 100, w: 60 },
      { name: 'daily', q: 1000, w: 86400 },
    ]);
    expect(parseList('  "a";r=0;t=1 ,\t"b\\"c";r=2;t=3').map((item) => simplify(item, ['r', 't']))).toEqual([
      { name: 'a', r: 0, t: 1 },
      { name: 'b"c', r: 2, t: 3 },
    ]);
    expect(parseList('login;q=5, *x;flag')).toEqual([
      { bare: { type: 'token', value: 'login' }, parameters: new Map([['q', { type: 'integer', value: 5 }]]) },
      { bare: { type: 'token', value: '*x' }, parameters: new Map([['flag', { type: 'boolean', value: true }]]) },
    ]);
  });

  it('refuses what RFC 8941 refuses, and what lies outside the subset', () => {
    for (const bad of [
      '"login";q=5,',
      ',"login"',
      '"login" "refresh"',
      '"login";Q=5',
      '"login";q=5.0',
      '"login";q=1234567890123456',
      '"login";q=',
      '"log\\in"',
      '"login',
      '"lögin"',
      '("a" "b")',
      ':aGk=:',
      '"login";q=5 ;w=60',
    ]) {
      expect(() => parseList(bad), bad).toThrow(SyntaxError);
    }
  });
});
