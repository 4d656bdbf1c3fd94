import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { describe, expect, it } from 'vitest';
import { expectOnlyContractRequest } from '../least-privilege/connector-request-contract.js';
import { CARDS, JWKS, LOGIN, LOGOUT, REFRESH, UUID, propertyGatewayForSuite } from './property-gateway.js';

/**
 * Whatever a client sends, on every public route: never a 5xx, always the D20 envelope on a
 * non-2xx (correlationId = X-Correlation-Id, status = HTTP status, message, details, timestamp),
 * nothing but a valid card body reaches the connector, and what does reach it is exactly the
 * contract's request (no query string, no header outside the contract, whatever the client
 * sent: D12, D30), and no PAN is ever echoed (a 16-digit
 * run appears only in a revealed card). Inject-level, so that each property runs ~150 cases fast.
 */

const RUNS = 150;
const POST_ROUTES = [LOGIN, REFRESH, LOGOUT, CARDS] as const;
/** A PAN-length digit run standing on its own (not inside a hex card id or a base64 token). */
const PAN_LIKE = /(?<![0-9A-Za-z_-])\d{13,19}(?![0-9A-Za-z_-])/;
const TEST_PAN = '4111111111111111';

interface Sent extends InjectOptions {
  /** The request asked for revealed card details (a 201 may then carry the PAN). */
  reveal?: boolean;
}

describe('bad input on every public route (properties)', () => {
  const setup = propertyGatewayForSuite();

  /** How many answers of each kind the properties got, to check the generators reach both sides. */
  const statuses = new Map<string, number>();
  /** Requests that reached the connector and were checked against the contract, by what the client added. */
  const upstreamChecked = { withQuery: 0, withClientHeaders: 0 };

  const connectorStats = () => setup.connectorStats();
  const received = (): Promise<number> => setup.received();

  /** Sends one request and checks every invariant; returns the response for extra checks. */
  async function exercise(sent: Sent): Promise<LightMyRequestResponse> {
    const { reveal = false, ...options } = sent;
    const before = await received();
    const response = await setup.gw.inject(options);
    const after = await received();
    const { statusCode, headers, body } = response;
    const tally = `${String(options.method)} ${String(options.url).split('?')[0]} ${statusCode}`;
    statuses.set(tally, (statuses.get(tally) ?? 0) + 1);
    const context = `${String(options.method)} ${String(options.url)} -> ${statusCode} ${body.slice(0, 300)}`;

    expect(statusCode, context).toBeGreaterThanOrEqual(200);
    expect(statusCode, context).toBeLessThan(500);
    const correlationId = headers['x-correlation-id'];
    expect(correlationId, context).toMatch(UUID);

    if (statusCode >= 300 && options.method !== 'HEAD') {
      expect(String(headers['content-type']), context).toMatch(/^application\/json/);
      const envelope = JSON.parse(body) as Record<string, unknown>;
      expect(envelope['correlationId'], context).toBe(correlationId);
      expect(envelope['status'], context).toBe(statusCode);
      expect(typeof envelope['message'], context).toBe('string');
      expect(envelope['message'], context).not.toMatch(/FST_|node_modules|\n\s+at |Unexpected token|JSON at position/);
      const details = envelope['details'];
      expect(typeof details === 'object' && details !== null && !Array.isArray(details), context).toBe(true);
      expect(new Date(String(envelope['timestamp'])).toISOString(), context).toBe(envelope['timestamp']);
    }

    // Only a created (or replayed) card can have gone upstream; a refusal reached nothing.
    if (statusCode === 201 && options.url?.toString().startsWith(CARDS)) expect(after - before, context).toBeLessThanOrEqual(1);
    else expect(after, context).toBe(before);
    // And what went upstream is the contract's request, built from the valid body alone.
    if (after > before) {
      const upstream = (await connectorStats()).received.at(-1);
      expect(upstream, context).toBeDefined();
      const requestId = String((JSON.parse(String(options.payload)) as { requestId: unknown }).requestId).toLowerCase();
      expectOnlyContractRequest(
        upstream!,
        { idempotencyKey: `acct-eu:${requestId}`, correlationId: String(correlationId), host: new URL(setup.connector.url).host },
        [setup.accessToken, 'Bearer'],
      );
      if (String(options.url).includes('?')) upstreamChecked.withQuery += 1;
      if (Object.keys(options.headers ?? {}).some((header) => !['content-type', 'authorization'].includes(header.toLowerCase())))
        upstreamChecked.withClientHeaders += 1;
    }

    if (!(reveal && statusCode === 201)) {
      // the schema's own bound (Number.MAX_SAFE_INTEGER) may be quoted in a validation message
      expect(body.replaceAll(String(Number.MAX_SAFE_INTEGER), '<max>'), context).not.toMatch(PAN_LIKE);
      expect(body, context).not.toContain(TEST_PAN);
    }
    if (statusCode === 201 && !reveal) {
      const card = JSON.parse(body) as { pan: string; cvc: string };
      expect(card.pan, context).toMatch(/^\*+\d{4}$/);
      expect(card.cvc, context).toMatch(/^\*+$/);
    }
    return response;
  }

  const bearer = (route: string): Record<string, string> => (route === LOGIN ? {} : { authorization: `Bearer ${setup.accessToken}` });

  const postJson = (url: string, payload: string | Buffer, extra: Record<string, string> = {}, reveal = false): Sent => ({
    method: 'POST',
    url,
    payload,
    headers: { 'content-type': 'application/json', ...bearer(url.split('?')[0] ?? url), ...extra },
    reveal,
  });

  // --- generators -------------------------------------------------------------------------

  const hugeString = fc
    .tuple(fc.string({ minLength: 1, maxLength: 4, unit: 'grapheme' }), fc.integer({ min: 1_000, max: 20_480 }))
    .map(([unit, length]) => unit.repeat(Math.ceil(length / unit.length)).slice(0, length));
  const oddString = fc.constantFrom(
    '',
    ' ',
    '\u0000',
    '\ud800',
    '\uffff',
    '\u202e',
    'null',
    '1e400',
    '-0',
    TEST_PAN,
    '4111 1111 1111 1111',
    '123',
    '<script>',
    '${jndi:x}',
    '../../etc/passwd',
  );
  const wild: fc.Arbitrary<unknown> = fc.oneof(
    { weight: 4, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
    { weight: 2, arbitrary: oddString },
    { weight: 1, arbitrary: hugeString },
    { weight: 1, arbitrary: fc.constantFrom(0, -1, 1.5, 2 ** 53, -(2 ** 53), 1e308, Number.MIN_VALUE, true, false, null, [], {}) },
  );
  /** Mostly the valid value, so that whole bodies are often valid except for one member. */
  const maybe = <T>(valid: fc.Arbitrary<T>): fc.Arbitrary<unknown> => fc.oneof({ weight: 4, arbitrary: valid }, { weight: 1, arbitrary: wild });

  const timestamp = fc.date({ min: new Date('2000-01-01T00:00:00Z'), max: new Date('2100-01-01T00:00:00Z'), noInvalidDate: true }).map((d) => d.toISOString());
  const configBody = fc.record(
    {
      expiryDuration: maybe(fc.integer({ min: 1, max: 60 })),
      authorizationWindow: maybe(fc.record({ startDate: maybe(timestamp), endDate: maybe(timestamp) })),
      tolerance: maybe(fc.record({ percentage: maybe(fc.integer({ min: 0, max: 100 })) })),
      cardType: maybe(fc.string({ maxLength: 40 })),
      maxTransactions: maybe(fc.integer({ min: 1, max: 1000 })),
      allowedCategories: maybe(fc.array(fc.string({ minLength: 1, maxLength: 10 }), { maxLength: 102 })),
    },
    { requiredKeys: [] },
  );
  const cardBody = fc
    .record(
      {
        requestId: maybe(fc.uuid()),
        cardLimit: maybe(fc.integer({ min: 1, max: 1_000_000_000 })),
        currency: maybe(fc.constantFrom('EUR', 'EUR', 'USD', 'GBP', 'XXX', 'eur')),
        config: maybe(configBody),
        metadata: maybe(fc.dictionary(fc.oneof(fc.string({ maxLength: 45 }), fc.constant(TEST_PAN)), maybe(fc.string({ maxLength: 510 })), { maxKeys: 55 })),
      },
      // a missing required member now and then; optional ones come and go
      { requiredKeys: ['requestId', 'cardLimit', 'currency'] },
    )
    .chain((body) =>
      fc.subarray(['requestId', 'cardLimit', 'currency'], { maxLength: 1 }).map((drop) => {
        const copy: Record<string, unknown> = { ...body };
        for (const key of drop) delete copy[key];
        return copy;
      }),
    );
  const loginBody = fc.record({ username: maybe(fc.string({ maxLength: 300 })), password: maybe(fc.string({ maxLength: 50 })) }, { requiredKeys: [] });
  const tokenBody = fc.record({ refreshToken: maybe(fc.oneof(fc.string({ maxLength: 600 }), fc.constant(refreshTokenPlaceholder()))) }, { requiredKeys: [] });
  /** An unknown member added to a body of the right shape. */
  const withExtra = (body: fc.Arbitrary<Record<string, unknown>>) =>
    fc
      .tuple(
        body,
        fc.oneof(
          { weight: 3, arbitrary: fc.constant(null) },
          { weight: 1, arbitrary: fc.tuple(fc.oneof(fc.string({ maxLength: 20 }), fc.constant(TEST_PAN)), wild) },
        ),
      )
      .map(([value, extra]) => (extra ? { ...value, [extra[0]]: extra[1] } : value));
  function refreshTokenPlaceholder(): string {
    // A well-formed token of no family: parsed, looked up, unknown.
    return `${'A'.repeat(22)}.${'B'.repeat(43)}`;
  }

  const routeBody = (route: (typeof POST_ROUTES)[number]): fc.Arbitrary<unknown> =>
    route === LOGIN ? withExtra(loginBody) : route === CARDS ? withExtra(cardBody) : withExtra(tokenBody);

  // --- properties ---------------------------------------------------------------------------

  it('arbitrary JSON to every POST route', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...POST_ROUTES), fc.jsonValue(), async (route, value) => {
        await exercise(postJson(route, JSON.stringify(value) ?? 'null'));
      }),
      { numRuns: RUNS * 2 },
    );
  }, 60_000);

  it('the right keys with wrong types, odd values and unknown members', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...POST_ROUTES).chain((route) => fc.tuple(fc.constant(route), routeBody(route))),
        fc.constantFrom('', '?revealDetails=true', '?revealDetails=false', '?revealDetails=1', '?revealDetails=true&revealDetails=false'),
        async ([route, body], query) => {
          const response = await exercise(
            postJson(`${route}${route === CARDS ? query : ''}`, JSON.stringify(body), {}, route === CARDS && query === '?revealDetails=true'),
          );
          if (route === CARDS && response.statusCode === 201) {
            // only a body that is valid end to end can have made a card
            expect(body).toMatchObject({ requestId: expect.stringMatching(UUID) as unknown, currency: expect.stringMatching(/^(EUR|USD)$/) as unknown });
          }
        },
      ),
      {
        numRuns: RUNS * 2,
        // one valid body and one valid reveal first, so the property always sees both sides
        examples: [
          [[CARDS, { requestId: randomUUID(), cardLimit: 100, currency: 'EUR', metadata: { [TEST_PAN]: TEST_PAN } }], ''],
          [[CARDS, { requestId: randomUUID(), cardLimit: 100, currency: 'USD' }], '?revealDetails=true'],
        ],
      },
    );
    expect(statuses.get(`POST ${CARDS} 201`)).toBeGreaterThanOrEqual(2);
    expect(statuses.get(`POST ${CARDS} 400`)).toBeGreaterThan(0);
    // The reveal example at least went upstream with a query string on the client's URL.
    expect(upstreamChecked.withQuery).toBeGreaterThanOrEqual(1);
  }, 60_000);

  it('huge strings (up to 20 KB) in every member', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...POST_ROUTES),
        fc.constantFrom('username', 'password', 'refreshToken', 'requestId', 'currency', 'cardType', 'metadataValue', 'metadataKey', 'unknownKey'),
        hugeString,
        async (route, where, huge) => {
          const base: Record<string, unknown> =
            route === LOGIN
              ? { username: 'full', password: 'wrong' }
              : route === CARDS
                ? { requestId: randomUUID(), cardLimit: 100, currency: 'EUR' }
                : { refreshToken: setup.refreshToken };
          if (where === 'cardType') base['config'] = { cardType: huge };
          else if (where === 'metadataValue') base['metadata'] = { note: huge };
          else if (where === 'metadataKey') base['metadata'] = { [huge]: 'x' };
          else if (where === 'unknownKey') base[huge] = 1;
          else base[where] = huge;
          const response = await exercise(postJson(route, JSON.stringify(base)));
          // every member has a bound far below 1000 characters
          expect(response.statusCode, response.body.slice(0, 200)).toBeGreaterThanOrEqual(400);
        },
      ),
      { numRuns: RUNS },
    );
  }, 60_000);

  it('deep nesting (depth 50 to 500), at the top and inside members', async () => {
    const nested = fc.tuple(fc.integer({ min: 50, max: 500 }), fc.constantFrom('array', 'object', 'mixed')).map(([depth, kind]) => {
      let text = '1';
      for (let level = 0; level < depth; level += 1) {
        const asArray = kind === 'array' || (kind === 'mixed' && level % 2 === 0);
        text = asArray ? `[${text}]` : `{"a":${text}}`;
      }
      return text;
    });
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...POST_ROUTES),
        fc.constantFrom('top', 'username', 'refreshToken', 'config', 'tolerance', 'metadata', 'allowedCategories', 'unknownKey'),
        nested,
        async (route, where, deep) => {
          const payload =
            where === 'top'
              ? deep
              : where === 'config'
                ? `{"requestId":"${randomUUID()}","cardLimit":1,"currency":"EUR","config":${deep}}`
                : where === 'tolerance'
                  ? `{"requestId":"${randomUUID()}","cardLimit":1,"currency":"EUR","config":{"tolerance":${deep}}}`
                  : where === 'metadata'
                    ? `{"requestId":"${randomUUID()}","cardLimit":1,"currency":"EUR","metadata":{"k":${deep}}}`
                    : where === 'allowedCategories'
                      ? `{"requestId":"${randomUUID()}","cardLimit":1,"currency":"EUR","config":{"allowedCategories":${deep}}}`
                      : `{"${where}":${deep},"password":"x"}`;
          const response = await exercise(postJson(route, payload));
          expect(response.statusCode).toBeGreaterThanOrEqual(400);
        },
      ),
      { numRuns: RUNS },
    );
  }, 60_000);

  it('prototype keys (__proto__, constructor, prototype) as raw JSON text never pollute and never pass unnoticed', async () => {
    const protoMember = fc.constantFrom(
      '"__proto__":{"polluted":"yes"}',
      '"__proto__":{"isAdmin":true,"permissions":["cards:reveal"]}',
      '"constructor":{"prototype":{"polluted":"yes"}}',
      '"prototype":{"polluted":"yes"}',
      '"__proto__":null',
      '"constructor":"x"',
      '"\\u005f_proto__":{"polluted":"yes"}',
    );
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...POST_ROUTES),
        protoMember,
        fc.constantFrom('top', 'config', 'metadata', 'tolerance'),
        async (route, member, where) => {
          const card = `"requestId":"${randomUUID()}","cardLimit":5,"currency":"EUR"`;
          const payload =
            where === 'top'
              ? route === LOGIN
                ? `{"username":"full","password":"x",${member}}`
                : route === CARDS
                  ? `{${card},${member}}`
                  : `{"refreshToken":"${setup.refreshToken}",${member}}`
              : where === 'config'
                ? `{${card},"config":{${member}}}`
                : where === 'tolerance'
                  ? `{${card},"config":{"tolerance":{"percentage":1,${member}}}}`
                  : `{${card},"metadata":{${member}}}`;
          const response = await exercise(postJson(route, payload));
          // "constructor":"x" as a metadata key is a plain string member; anything else is refused
          if (!(member === '"constructor":"x"' && where === 'metadata' && route === CARDS)) expect(response.statusCode, payload).toBeGreaterThanOrEqual(400);
          expect(({} as Record<string, unknown>)['polluted']).toBeUndefined();
          expect(({} as Record<string, unknown>)['isAdmin']).toBeUndefined();
        },
      ),
      { numRuns: RUNS },
    );
  }, 60_000);

  it('wrong or odd content types', async () => {
    const contentType = fc.oneof(
      fc.constantFrom(
        'text/plain',
        'text/json',
        'application/x-www-form-urlencoded',
        'multipart/form-data; boundary=x',
        'application/xml',
        'application/octet-stream',
        'application/jsonx',
        'application/json-patch+json',
        'application/problem+json',
        'application/json; charset=latin1',
        'application/json; charset=utf-16',
        'application/json;;;',
        'APPLICATION/JSON',
        'application/json ; charset=UTF-8',
        '*/*',
        '',
        ';',
      ),
      fc.stringMatching(/^[\x20-\x7e]{0,40}$/),
    );
    const payload = fc.oneof(
      fc.jsonValue().map((value) => JSON.stringify(value) ?? 'null'),
      fc.constant('username=full&password=x'),
      fc.constant('<xml/>'),
      fc.string({ maxLength: 200 }),
    );
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...POST_ROUTES), contentType, payload, async (route, type, body) => {
        await exercise(postJson(route, body, { 'content-type': type }));
      }),
      { numRuns: RUNS },
    );
  }, 60_000);

  it('invalid UTF-8 bytes, alone and inside JSON strings', async () => {
    const badBytes = fc.oneof(
      fc.uint8Array({ minLength: 1, maxLength: 200 }),
      fc
        .constantFrom([0xff], [0xfe, 0xff], [0xc0, 0x80], [0xed, 0xa0, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80], [0xe2, 0x82], [0xef, 0xbb, 0xbf])
        .map((bytes) => Uint8Array.from(bytes)),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...POST_ROUTES),
        badBytes,
        fc.constantFrom('raw', 'username', 'refreshToken', 'currency', 'metadata'),
        async (route, bytes, where) => {
          const inside = (prefix: string, suffix: string) => Buffer.concat([Buffer.from(prefix), Buffer.from(bytes), Buffer.from(suffix)]);
          const payload =
            where === 'raw'
              ? Buffer.from(bytes)
              : where === 'username'
                ? inside('{"username":"', '","password":"x"}')
                : where === 'refreshToken'
                  ? inside('{"refreshToken":"', '"}')
                  : where === 'currency'
                    ? inside(`{"requestId":"${randomUUID()}","cardLimit":1,"currency":"`, '"}')
                    : inside(`{"requestId":"${randomUUID()}","cardLimit":1,"currency":"EUR","metadata":{"k":"`, '"}}');
          await exercise(postJson(route, payload));
        },
      ),
      { numRuns: RUNS },
    );
  }, 60_000);

  it('random headers on every route, the JWKS included', async () => {
    const name = fc.oneof(
      fc.constantFrom(
        'authorization',
        'content-type',
        'content-length',
        'content-encoding',
        'transfer-encoding',
        'x-forwarded-for',
        'x-forwarded-proto',
        'x-forwarded-host',
        'x-correlation-id',
        'x-request-id',
        'accept',
        'accept-encoding',
        'connection',
        'cookie',
        'expect',
        'idempotency-key',
        'origin',
        'range',
        'if-none-match',
      ),
      fc.stringMatching(/^[a-z][a-z0-9-]{0,24}$/),
    );
    const value = fc.oneof(
      fc.constantFrom(
        'Bearer x',
        'Bearer  x',
        'bearer',
        `Basic ${Buffer.from('full:x').toString('base64')}`,
        'application/json',
        'text/plain',
        '0',
        '-1',
        '99999999',
        'chunked',
        'gzip',
        '100-continue',
        '8.8.8.8',
        '::ffff:8.8.8.8',
        '10.1.2.3, 8.8.8.8',
        'not-an-address',
        'http',
        'https',
        'bytes=0-1',
        '*',
      ),
      fc.stringMatching(/^[\x20-\x7e]{0,80}$/),
    );
    const target = fc.oneof(
      fc.constantFrom(...POST_ROUTES).map((route) => ({ method: 'POST' as const, url: route })),
      fc.constant({ method: 'GET' as const, url: JWKS }),
    );
    const validBody = (url: string): string =>
      url === LOGIN
        ? JSON.stringify({ username: 'create-only', password: 'wrong' })
        : url === CARDS
          ? JSON.stringify({ requestId: randomUUID(), cardLimit: 100, currency: 'EUR' })
          : JSON.stringify({ refreshToken: refreshTokenPlaceholder() });
    await fc.assert(
      fc.asyncProperty(target, fc.dictionary(name, value, { maxKeys: 6 }), async ({ method, url }, headers) => {
        const base: Record<string, string> = method === 'POST' ? { 'content-type': 'application/json', ...bearer(url) } : {};
        await exercise({ method, url, headers: { ...base, ...headers }, ...(method === 'POST' && { payload: validBody(url) }) });
      }),
      {
        numRuns: RUNS * 2,
        // a card that is created whatever the client adds, so the connector's view is always checked
        examples: [
          [
            { method: 'POST', url: CARDS },
            { cookie: 'session=x', 'x-forwarded-host': 'evil.example', 'idempotency-key': 'client-key', 'x-request-id': 'client-request', accept: '*/*' },
          ],
        ],
      },
    );
    expect(upstreamChecked.withClientHeaders).toBeGreaterThanOrEqual(1);
  }, 60_000);

  it('random paths and methods, known paths mangled, and the JWKS with odd queries', async () => {
    const method = fc.constantFrom(
      'GET',
      'HEAD',
      'POST',
      'PUT',
      'DELETE',
      'PATCH',
      'OPTIONS',
      'TRACE',
      'PROPFIND',
      'SEARCH',
      'MKCOL',
      'COPY',
      'MOVE',
      'LOCK',
      'UNLOCK',
      'REPORT',
    );
    const known = fc.constantFrom(LOGIN, REFRESH, LOGOUT, CARDS, JWKS, '/', '/api', '/api/v1', '/api/v1/issuing', '/.well-known');
    const mangled = fc
      .tuple(
        known,
        fc.constantFrom(
          '',
          '/',
          '//',
          '/..',
          '/../..',
          '%2f',
          '%2e%2e',
          '%',
          '%zz',
          '%00',
          '?',
          '?a=1&a=2',
          '#x',
          ';x',
          '.json',
          '\u00e9',
          '%C0%AF',
          '?access_token=x',
          '?token=eyJa.b.c',
        ),
      )
      .map(([path, suffix]) => `${path}${suffix}`);
    const upper = known.map((path) => path.toUpperCase());
    const random = fc.webPath().map((path) => (path.startsWith('/') ? path : `/${path}`));
    await fc.assert(
      fc.asyncProperty(method, fc.oneof(mangled, upper, random, known), fc.option(fc.jsonValue({ maxDepth: 2 }), { freq: 2 }), async (verb, url, body) => {
        await exercise({
          method: verb as InjectOptions['method'],
          url,
          headers: { authorization: `Bearer ${setup.accessToken}`, ...(body !== null && { 'content-type': 'application/json' }) },
          ...(body !== null && verb !== 'GET' && verb !== 'HEAD' && { payload: JSON.stringify(body) ?? 'null' }),
        });
      }),
      { numRuns: RUNS * 2 },
    );
  }, 60_000);
});
