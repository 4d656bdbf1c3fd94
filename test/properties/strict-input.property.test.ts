import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { describe, expect, it } from 'vitest';
import { PASSWORD } from '../support/gateway-fixture.js';
import { CARDS, JWKS, LOGIN, LOGOUT, REFRESH, UUID, propertyGatewayForSuite } from './property-gateway.js';

/**
 * Issue 9 properties (D12, D29, D30), inject-level so each runs many cases:
 * - integer fields written with a fraction or an exponent, or beyond 2^53-1 -> 400 naming the field;
 * - a duplicate member name at a random depth, on every JSON route -> 400 naming its path;
 * - a token-bearing query parameter whose name is randomly percent-encoded and re-cased, or a JWT
 *   with encoded dots anywhere in the query, on every route -> 401 token_in_url.
 * Always the contract's envelope with its `code`; never a 2xx, never a 5xx; nothing reaches the connector.
 */

const RUNS = 100;
const NOT_INTEGER = 'must be a JSON integer (no fraction or exponent)';
const NOT_SAFE = 'must be a safe integer';
const DUPLICATE = 'appears more than once';
const TOKEN_NAMES = ['access_token', 'accesstoken', 'token', 'id_token', 'idtoken', 'refresh_token', 'refreshtoken'] as const;

interface Envelope {
  correlationId: string;
  status: number;
  code: string;
  message: string;
  details: { fields?: { path: string; message: string }[] };
  timestamp: string;
}

// --- a JSON body as an ordered member list, so that members can be duplicated ----------------

type Node = { kind: 'raw'; text: string } | { kind: 'object'; members: [string, Node][] };
const raw = (text: string): Node => ({ kind: 'raw', text });
const object = (members: [string, Node][]): Node => ({ kind: 'object', members });

/** Writes a member name, optionally spelling one character as a JSON \u escape (the same name). */
function writeName(name: string, escapeAt: number | undefined): string {
  if (escapeAt === undefined || name.length === 0) return JSON.stringify(name);
  const index = escapeAt % name.length;
  const escaped = `\\u${name.charCodeAt(index).toString(16).padStart(4, '0')}`;
  return `"${JSON.stringify(name.slice(0, index)).slice(1, -1)}${escaped}${JSON.stringify(name.slice(index + 1)).slice(1, -1)}"`;
}

function serialise(node: Node, escapes: Map<Node, Set<number>> = new Map()): string {
  if (node.kind === 'raw') return node.text;
  const escaped = escapes.get(node);
  return `{${node.members.map(([name, value], index) => `${writeName(name, escaped?.has(index) ? index + 1 : undefined)}:${serialise(value, escapes)}`).join(',')}}`;
}

function cardBody(metadataKeys: string[]): Node {
  return object([
    ['requestId', raw(JSON.stringify(randomUUID()))],
    ['cardLimit', raw('5000')],
    ['currency', raw('"EUR"')],
    [
      'config',
      object([
        ['expiryDuration', raw('12')],
        [
          'authorizationWindow',
          object([
            ['startDate', raw('"2026-12-01T00:00:00Z"')],
            ['endDate', raw('"2026-12-31T00:00:00Z"')],
          ]),
        ],
        ['tolerance', object([['percentage', raw('5')]])],
        ['cardType', raw('"virtual"')],
        ['maxTransactions', raw('3')],
        ['allowedCategories', raw('["airline"]')],
      ]),
    ],
    ['metadata', object(metadataKeys.map((key, index) => [key, raw(JSON.stringify(`value-${index}`))]))],
  ]);
}

/** The object at a dotted location of a body ('' = top level). */
function objectAt(root: Node, location: string): Extract<Node, { kind: 'object' }> {
  let node = root;
  for (const part of location.split('.').filter(Boolean)) {
    if (node.kind !== 'object') throw new Error(`no object at ${location}`);
    const next = node.members.find(([name]) => name === part)?.[1];
    if (!next) throw new Error(`no ${part} in ${location}`);
    node = next;
  }
  if (node.kind !== 'object') throw new Error(`${location} is not an object`);
  return node;
}

describe('strict input (properties, issue 9)', () => {
  const setup = propertyGatewayForSuite();

  const received = (): Promise<number> => setup.received();

  /** A fresh 10/8 client address per request, so no per-address limit ever cuts a case short. */
  const clientAddress = fc
    .tuple(fc.integer({ min: 0, max: 255 }), fc.integer({ min: 0, max: 255 }), fc.integer({ min: 1, max: 254 }))
    .map(([a, b, c]) => `10.${a}.${b}.${c}`);

  /** Sends one request; checks the envelope, its code and message, and that the connector saw nothing. */
  async function refused(options: InjectOptions, status: number, code: string, message: string): Promise<Envelope> {
    const before = await received();
    const response: LightMyRequestResponse = await setup.gw.inject(options);
    const after = await received();
    const context = `${String(options.method)} ${String(options.url)} ${typeof options.payload === 'string' ? options.payload.slice(0, 400) : ''} -> ${response.statusCode} ${response.body.slice(0, 400)}`;
    expect(response.statusCode, context).not.toBeGreaterThanOrEqual(500);
    expect(response.statusCode, context).toBe(status);
    const body = response.json<Envelope>();
    expect({ status: body.status, code: body.code, message: body.message }, context).toEqual({ status, code, message });
    expect(body.correlationId, context).toMatch(UUID);
    expect(response.headers['x-correlation-id'], context).toBe(body.correlationId);
    expect(after, `${context}: the connector was reached`).toBe(before);
    return body;
  }

  const postJson = (url: string, payload: string, address: string, bearer = url !== LOGIN): InjectOptions => ({
    method: 'POST',
    url,
    payload,
    headers: { 'content-type': 'application/json', 'x-forwarded-for': address, ...(bearer && { authorization: `Bearer ${setup.accessToken}` }) },
  });

  // --- non-integer numbers in integer fields ---------------------------------------------------

  const digits = (min: number, max: number) => fc.stringMatching(new RegExp(`^[0-9]{${min},${max}}$`));
  const integerPart = fc.oneof(fc.integer({ min: 0, max: 1_000_000 }).map(String), fc.constantFrom('1', '5', '12', '100'));
  const sign = fc.constantFrom('', '', '-');
  const exponent = fc.tuple(fc.constantFrom('e', 'E'), fc.constantFrom('', '+', '-'), fc.integer({ min: 0, max: 30 })).map(([e, s, n]) => `${e}${s}${n}`);
  /** Fractions (`.0` included), exponents, and both: never a JSON integer. */
  const notInteger = fc.oneof(
    fc.tuple(sign, integerPart, digits(1, 22)).map(([s, i, f]) => `${s}${i}.${f}`),
    fc.tuple(sign, integerPart, exponent).map(([s, i, e]) => `${s}${i}${e}`),
    fc.tuple(sign, integerPart, digits(1, 6), exponent).map(([s, i, f, e]) => `${s}${i}.${f}${e}`),
    fc.constantFrom('1000.0', '1e3', '4503599627370497.5', '99.99999999999999999', '2.0', '1E1', '0.0', '-0.0', '1e-400', '1e400'),
  );
  /** Integer literals beyond 2^53-1. */
  const unsafeInteger = fc.bigInt({ min: 2n ** 53n, max: 10n ** 40n }).map((n) => n.toString());
  const INTEGER_FIELDS = ['cardLimit', 'config.expiryDuration', 'config.tolerance.percentage', 'config.maxTransactions'] as const;

  function setAt(body: Node, path: string, text: string): void {
    const parts = path.split('.');
    const name = parts.pop()!;
    const holder = objectAt(body, parts.join('.'));
    const member = holder.members.find(([key]) => key === name);
    if (!member) throw new Error(`no ${path}`);
    member[1] = raw(text);
  }

  it('integer fields written with a fraction, an exponent or beyond 2^53-1 -> 400 naming each field', async () => {
    const mutation = fc.tuple(
      fc.constantFrom(...INTEGER_FIELDS),
      fc.oneof(
        { weight: 3, arbitrary: notInteger.map((text) => ({ text, message: NOT_INTEGER })) },
        { weight: 1, arbitrary: unsafeInteger.map((text) => ({ text, message: NOT_SAFE })) },
      ),
    );
    await fc.assert(
      fc.asyncProperty(fc.uniqueArray(mutation, { minLength: 1, maxLength: 2, selector: ([field]) => field }), clientAddress, async (mutations, address) => {
        const body = cardBody(['cost_center']);
        for (const [field, { text }] of mutations) setAt(body, field, text);
        const envelope = await refused(postJson(CARDS, serialise(body), address), 400, 'validation_failed', 'Request validation failed');
        for (const [field, { message }] of mutations) expect(envelope.details.fields ?? [], `${field}`).toContainEqual({ path: field, message });
      }),
      { numRuns: RUNS },
    );
  }, 120_000);

  // --- duplicate members at random depths --------------------------------------------------------

  const CARD_LOCATIONS = ['', 'config', 'config.tolerance', 'config.authorizationWindow', 'metadata'] as const;
  const metadataKey = fc.stringMatching(/^[a-z][a-z_]{0,11}$/);

  it('a duplicate member at any depth, on every JSON route -> 400 naming its path', async () => {
    const duplicateCase = fc.record({
      route: fc.constantFrom(CARDS, CARDS, CARDS, CARDS, LOGIN, REFRESH, LOGOUT),
      location: fc.constantFrom(...CARD_LOCATIONS),
      memberIndex: fc.nat(),
      copies: fc.integer({ min: 1, max: 3 }),
      positions: fc.array(fc.nat(), { minLength: 3, maxLength: 3 }),
      sameValue: fc.boolean(),
      escapeCopy: fc.boolean(),
      metadataKeys: fc.uniqueArray(metadataKey, { minLength: 1, maxLength: 5 }),
    });
    await fc.assert(
      fc.asyncProperty(duplicateCase, clientAddress, async (c, address) => {
        let body: Node;
        let location: string;
        if (c.route === CARDS) {
          body = cardBody(c.metadataKeys);
          location = c.location;
        } else if (c.route === LOGIN) {
          body = object([
            ['username', raw('"full"')],
            ['password', raw(JSON.stringify(PASSWORD))],
          ]);
          location = '';
        } else {
          body = object([['refreshToken', raw(JSON.stringify(setup.refreshToken))]]);
          location = '';
        }
        const holder = objectAt(body, location);
        const [name, value] = holder.members[c.memberIndex % holder.members.length]!;
        const escapes = new Map<Node, Set<number>>();
        for (let copy = 0; copy < c.copies; copy += 1) {
          const duplicate: Node = c.sameValue || value.kind === 'object' ? value : raw(value.text.startsWith('"') ? '"other"' : '7');
          const at = (c.positions[copy] ?? 0) % (holder.members.length + 1);
          holder.members.splice(at, 0, [name, duplicate]);
          if (c.escapeCopy) escapes.set(holder, new Set([...(escapes.get(holder) ?? []), at]));
        }
        const text = serialise(body, escapes);
        const path = location === '' ? name : `${location}.${name}`;
        const envelope = await refused(postJson(c.route, text, address), 400, 'validation_failed', 'Request validation failed');
        expect(envelope.details.fields ?? [], text).toContainEqual({ path, message: DUPLICATE });
        expect(setup.gw.audit.events().filter((event) => event.correlationId === envelope.correlationId && event.event === 'login.succeeded')).toEqual([]);
      }),
      { numRuns: RUNS * 2 },
    );
  }, 120_000);

  // --- encoded token parameter names -----------------------------------------------------------

  const hex = (code: number, upper: boolean) => `%${code.toString(16).padStart(2, '0')[upper ? 'toUpperCase' : 'toLowerCase']()}`;
  /** Each character kept, re-cased, or percent-encoded (upper- or lower-case hex). */
  const disguise = (name: string) =>
    fc.array(fc.constantFrom('keep', 'upper', 'lower', 'pct', 'pct-lower'), { minLength: name.length, maxLength: name.length }).map((choices) =>
      [...name]
        .map((char, index) => {
          switch (choices[index]) {
            case 'upper':
              return char.toUpperCase();
            case 'lower':
              return char.toLowerCase();
            case 'pct':
              return hex(char.charCodeAt(0), true);
            case 'pct-lower':
              return hex(char.charCodeAt(0), false);
            default:
              return char;
          }
        })
        .join(''),
    );
  const tokenName = fc.constantFrom(...TOKEN_NAMES).chain((name) =>
    fc
      .constantFrom(
        name,
        name.toUpperCase(),
        name.replace(/(^|_)([a-z])/g, (_m, sep: string, ch: string) => `${sep}${ch.toUpperCase()}`),
      )
      .chain(disguise),
  );
  const plainValue = fc.stringMatching(/^[A-Za-z0-9_-]{0,24}$/);
  /** A real access token with its dots percent-encoded (and sometimes more of it). */
  const encodedJwt = fc.tuple(fc.constantFrom('%2E', '%2e'), fc.boolean()).map(([dot, encodeHead]) => {
    const encoded = setup.accessToken.replaceAll('.', dot);
    return encodeHead ? `%65${encoded.slice(1)}` : encoded;
  });
  const innocentName = fc.stringMatching(/^[a-z]{1,8}$/).filter((name) => !(TOKEN_NAMES as readonly string[]).includes(name));
  const otherParams = fc.subarray(['revealDetails=true', 'revealDetails=false', 'x=1', 'page=2']);

  it('a token-bearing query parameter, however encoded or cased, or an encoded JWT anywhere in the query, on every route -> 401 token_in_url', async () => {
    const tokenParam = fc.oneof(
      { weight: 3, arbitrary: fc.tuple(tokenName, fc.oneof(plainValue, encodedJwt)).map(([name, value]) => `${name}=${value}`) },
      { weight: 1, arbitrary: fc.tuple(innocentName, encodedJwt).map(([name, value]) => `${name}=${value}`) },
    );
    const route = fc.constantFrom(CARDS, CARDS, LOGIN, REFRESH, LOGOUT, JWKS);
    await fc.assert(
      fc.asyncProperty(route, tokenParam, otherParams, fc.nat(), fc.boolean(), clientAddress, async (path, param, others, at, withBearer, address) => {
        const params = [...others];
        params.splice(at % (params.length + 1), 0, param);
        const url = `${path}?${params.join('&')}`;
        const headers: Record<string, string> = { 'x-forwarded-for': address, ...(withBearer && { authorization: `Bearer ${setup.accessToken}` }) };
        const options: InjectOptions =
          path === JWKS
            ? { method: 'GET', url, headers }
            : {
                method: 'POST',
                url,
                headers: { ...headers, 'content-type': 'application/json' },
                payload:
                  path === LOGIN
                    ? JSON.stringify({ username: 'full', password: PASSWORD })
                    : path === CARDS
                      ? JSON.stringify({ requestId: randomUUID(), cardLimit: 100, currency: 'EUR' })
                      : JSON.stringify({ refreshToken: setup.refreshToken }),
              };
        const envelope = await refused(options, 401, 'token_in_url', 'Tokens are not accepted in the URL');
        expect(envelope.details).toEqual({});
      }),
      { numRuns: RUNS * 2 },
    );
    // The session used throughout is untouched: no refresh or logout went through.
    const still = await setup.gw.inject({
      method: 'POST',
      url: REFRESH,
      headers: { authorization: `Bearer ${setup.accessToken}` },
      payload: { refreshToken: setup.refreshToken },
    });
    expect(still.statusCode, still.body).toBe(200);
  }, 120_000);
});
