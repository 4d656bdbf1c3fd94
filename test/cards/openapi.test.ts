import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../../src/foundation/errors.js';
import { createTestGateway, type TestGateway } from '../support/gateway-fixture.js';
import { OpenApiResponses, type OpenApiDocument } from '../support/openapi-responses.js';

/** D22, issue 13: the admin listener publishes a strictly valid OpenAPI 3.1 description of the public API. */

interface Schema {
  type?: string;
  required?: string[];
  properties?: Record<string, Schema>;
  additionalProperties?: boolean | Schema;
  $ref?: string;
}

let gw: TestGateway;
let doc: OpenApiDocument;

/** A schema of the document, its `$ref` to components.schemas followed. */
const resolve = (schema: Record<string, unknown> | undefined): Schema | undefined => {
  const ref = schema?.['$ref'];
  if (typeof ref !== 'string') return schema as Schema | undefined;
  return doc.components.schemas[ref.replace('#/components/schemas/', '')] as Schema | undefined;
};

const operations = () => Object.entries(doc.paths).flatMap(([path, item]) => Object.entries(item).map(([method, operation]) => ({ path, method, operation })));

beforeAll(async () => {
  gw = await createTestGateway();
  const response = await gw.gateway.admin.inject({ method: 'GET', url: '/openapi.json' });
  expect(response.statusCode).toBe(200);
  expect(response.headers['content-type']).toMatch(/^application\/json/);
  doc = response.json<OpenApiDocument>();
});
afterAll(async () => {
  await gw.close();
});

describe('OpenAPI description (admin /openapi.json)', () => {
  it('is an OpenAPI 3.1 document with a title, a version and servers', () => {
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
    expect(doc.info.title).toBe('Card issuing gateway');
    expect(doc.info.version).toMatch(/^\d+\.\d+\.\d+$/);
    expect(doc.servers?.length).toBeGreaterThan(0);
    for (const server of doc.servers ?? []) expect(server.url).toMatch(/^https:\/\//);
  });

  it('is accepted by a strict validator of the OpenAPI specification', async () => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(doc) as unknown as Record<string, unknown>);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
  });

  it('has schemas that compile as strict JSON Schema 2020-12, every one named', () => {
    const responses = new OpenApiResponses(doc);
    for (const schema of Object.values(doc.components.schemas)) expect(() => responses.validator(schema)).not.toThrow();
    expect(Object.keys(doc.components.schemas).sort()).toEqual([
      'Card',
      'CardCreatedEvent',
      'CardPage',
      'CardRecord',
      'CardRequest',
      'CardStatusAnswer',
      'CardStatusChange',
      'CardStatusChanged',
      'CardStatusChangedEvent',
      'CardStatusSummary',
      'ErrorEnvelope',
      'Event',
      'EventPage',
      'JsonWebKeySet',
      'LoggedOut',
      'LoginRequest',
      'RefreshTokenRequest',
      'RefreshedTokens',
      'SessionTokens',
      'TransactionAuthorizedEvent',
      'TransactionClearedEvent',
      'TransactionDeclinedEvent',
      'TransactionReversedEvent',
    ]);
    // Request and response bodies are references to named schemas, not anonymous inline ones.
    for (const { operation } of operations()) {
      const body = operation.requestBody?.content['application/json']?.schema;
      if (body) expect(body['$ref']).toMatch(/^#\/components\/schemas\/[A-Z]/);
      for (const response of Object.values(operation.responses))
        expect(response.content?.['application/json']?.schema?.['$ref']).toMatch(/^#\/components\/schemas\/[A-Z]/);
    }
  });

  it('gives every operation a unique operationId, a description, tags and its own security (public ones [])', () => {
    const ids = operations().map(({ operation }) => operation.operationId);
    expect(ids.sort()).toEqual(['changeCardStatus', 'createCard', 'getCard', 'getEvent', 'getJwks', 'listCards', 'listEvents', 'login', 'logout', 'refresh']);
    for (const { path, operation } of operations()) {
      expect(operation.description, path).toBeTruthy();
      expect(operation.tags?.length, path).toBeGreaterThan(0);
      const expected = operation.operationId === 'login' || operation.operationId === 'getJwks' ? [] : [{ bearerAuth: [] }];
      expect(operation.security, path).toEqual(expected);
    }
    expect(doc.components.securitySchemes?.['bearerAuth']).toMatchObject({ type: 'http', scheme: 'bearer' });
  });

  it('describes the three auth endpoints and card creation as POST', () => {
    for (const path of ['/api/v1/auth/login', '/api/v1/auth/refresh', '/api/v1/auth/logout', '/api/v1/issuing/cards']) {
      expect(doc.paths[path]?.['post'], `${path} post`).toBeDefined();
    }
  });

  it('gives card creation a JSON body schema with the three required members and the optional ones', () => {
    const post = doc.paths['/api/v1/issuing/cards']?.['post'];
    const schema = resolve(post?.requestBody?.content['application/json']?.schema);
    expect(post?.requestBody?.required).toBe(true);
    expect(schema?.type).toBe('object');
    expect(schema?.required?.sort()).toEqual(['cardLimit', 'currency', 'requestId']);
    expect(Object.keys(schema?.properties ?? {}).sort()).toEqual(['cardLimit', 'config', 'currency', 'metadata', 'requestId']);
    expect(schema?.properties?.['cardLimit']?.type).toBe('integer');
    expect(schema?.additionalProperties).toBe(false);
    expect(Object.keys(schema?.properties?.['config']?.properties ?? {}).sort()).toEqual([
      'allowedCategories',
      'authorizationWindow',
      'cardType',
      'expiryDuration',
      'maxTransactions',
      'tolerance',
    ]);
  });

  it('documents the 201 card record, the revealDetails query and the card headers', () => {
    const post = doc.paths['/api/v1/issuing/cards']?.['post'];
    const card = resolve(post?.responses['201']?.content?.['application/json']?.schema);
    expect(card?.required?.sort()).toEqual(
      ['cardId', 'cardLimit', 'createdAt', 'currency', 'cvc', 'expMonth', 'expYear', 'pan', 'requestedCardLimit', 'status'].sort(),
    );
    expect(post?.responses['200']).toBeUndefined();
    expect(Object.keys(post?.responses ?? {}).sort()).toEqual([
      '201',
      '400',
      '401',
      '403',
      '408',
      '409',
      '413',
      '414',
      '415',
      '429',
      '431',
      '500',
      '502',
      '503',
      '504',
    ]);
    expect(post?.parameters).toEqual([expect.objectContaining({ in: 'query', name: 'revealDetails', required: false })]);
    expect(Object.keys(post?.responses['201']?.headers ?? {}).sort()).toEqual([
      'Cache-Control',
      'Idempotency-Payload-Mismatch',
      'Idempotent-Replayed',
      'X-Correlation-Id',
    ]);
  });

  it('documents the response headers: X-Correlation-Id everywhere, WWW-Authenticate on 401, Retry-After on 409/429/503, RateLimit-Policy, RateLimit and the legacy RateLimit-* on login and refresh', () => {
    for (const { operation } of operations()) {
      for (const [status, response] of Object.entries(operation.responses)) {
        const headers = response.headers ?? {};
        const where = `${operation.operationId} ${status}`;
        expect(headers['X-Correlation-Id']?.required, where).toBe(true);
        expect(headers['WWW-Authenticate']?.required, where).toBe(status === '401' ? true : undefined);
        // A status change's 409 is card_canceled, final: no Retry-After.
        const waits = ['409', '429', '503'].includes(status) && !(operation.operationId === 'changeCardStatus' && status === '409');
        expect(headers['Retry-After']?.required, where).toBe(waits ? true : undefined);
        // Successes and the refusals that come after the limiter (the route's own logic, outages),
        // and every operation's 429: the per-address budget (D53) answers any of them.
        const afterLimiter: Record<string, string[]> = {
          login: ['200', '401', '500', '503'],
          refresh: ['200', '401', '500', '503'],
          getCard: ['200', '403', '404', '500', '502', '503', '504'],
          listCards: ['200', '400', '500', '502', '503', '504'],
          changeCardStatus: ['200', '400', '404', '409', '500', '502', '503', '504'],
          listEvents: ['200', '400', '500', '503'],
          getEvent: ['200', '404', '500', '503'],
        };
        const rateLimitHeaders = status === '429' || (afterLimiter[operation.operationId ?? ''] ?? []).includes(status);
        for (const name of ['RateLimit-Policy', 'RateLimit', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'])
          expect(headers[name] !== undefined, `${where} ${name}`).toBe(rateLimitHeaders);
        // Required on a success; on a 429 absent for a per-address refusal of requests in flight.
        if (rateLimitHeaders) expect(headers['RateLimit-Policy']?.required, `${where} RateLimit-Policy required`).toBe(status === '200');
      }
    }
    expect(doc.components.responses?.['MethodNotAllowed']?.headers?.['Allow']?.required).toBe(true);
  });

  it('lists 429 rate_limited, with Retry-After and an example, on every operation: the per-address budget (D53) can answer any', () => {
    for (const { operation } of operations()) {
      const refused = operation.responses['429'];
      expect(refused?.content?.['application/json']?.examples?.['rate_limited'], operation.operationId).toBeDefined();
      expect(refused?.headers?.['Retry-After']?.required, operation.operationId).toBe(true);
      expect(refused?.headers?.['Connection']?.description, operation.operationId).toContain('per-address `rate_limited`');
    }
  });

  it('lists every code of the catalogue, each under its own status, with an example envelope', () => {
    const listed = new Set<string>();
    const responses = [...operations().flatMap(({ operation }) => Object.entries(operation.responses)), ...Object.entries(doc.components.responses ?? {})];
    for (const [status, response] of responses) {
      for (const [code, example] of Object.entries(response.content?.['application/json']?.examples ?? {})) {
        if (!(code in ERROR_CODES)) continue;
        listed.add(code);
        const value = example.value as { code: string; status: number };
        expect(value.code).toBe(code);
        expect(value.status).toBe(ERROR_CODES[code as keyof typeof ERROR_CODES]);
        if (/^\d+$/.test(status)) expect(Number(status)).toBe(value.status);
        expect(response.description).toContain(`\`${code}\``);
      }
    }
    expect([...listed].sort()).toEqual(Object.keys(ERROR_CODES).sort());
    const envelope = doc.components.schemas['ErrorEnvelope'] as { properties: { code: { enum: string[]; description: string } } };
    expect(envelope.properties.code.enum.sort()).toEqual(Object.keys(ERROR_CODES).sort());
    for (const code of Object.keys(ERROR_CODES)) expect(envelope.properties.code.description).toContain(`\`${code}\``);
  });

  it('describes reading, listing and changing a card, with links from the creation answer to the read and the status change', () => {
    const one = doc.paths['/api/v1/issuing/cards/{cardId}'];
    expect(Object.keys(one ?? {}).sort()).toEqual(['get', 'patch']);
    expect(one?.['get']?.operationId).toBe('getCard');
    expect(one?.['patch']?.operationId).toBe('changeCardStatus');
    expect(doc.paths['/api/v1/issuing/cards']?.['get']?.operationId).toBe('listCards');
    const links = (doc.paths['/api/v1/issuing/cards']?.['post']?.responses['201'] as { links?: Record<string, { operationId: string; parameters: unknown }> })
      .links;
    expect(links).toEqual({
      getCard: expect.objectContaining({ operationId: 'getCard', parameters: { cardId: '$response.body#/cardId' } }),
      changeCardStatus: expect.objectContaining({ operationId: 'changeCardStatus', parameters: { cardId: '$response.body#/cardId' } }),
    });
    const list = doc.paths['/api/v1/issuing/cards']?.['get'];
    expect((list?.parameters ?? []).map((parameter) => (parameter as { name: string }).name).sort()).toEqual([
      'createdAfter',
      'createdBefore',
      'cursor',
      'limit',
      'status',
    ]);
    const limit = (list?.parameters ?? []).find((parameter) => (parameter as { name: string }).name === 'limit') as { schema: Record<string, unknown> };
    expect(limit.schema).toMatchObject({ type: 'integer', minimum: 1, maximum: 100 });
    const change = resolve(one?.['patch']?.requestBody?.content['application/json']?.schema);
    expect(Object.keys(change?.properties ?? {}).sort()).toEqual(['reason', 'status']);
    expect(change?.additionalProperties).toBe(false);
  });

  it('says nothing of the connector', () => {
    const text = JSON.stringify(doc);
    expect(text).not.toContain(gw.config.connector.url);
    expect(text).not.toContain('/v1/cards"');
  });
});
