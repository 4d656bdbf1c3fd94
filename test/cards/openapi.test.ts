import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestGateway, type TestGateway } from '../support/gateway-fixture.js';

/** D22: the admin listener publishes an OpenAPI 3 description of the public API. */

interface Operation {
  requestBody?: { required?: boolean; content?: Record<string, { schema?: Schema }> };
  responses?: Record<string, { content?: Record<string, { schema?: Schema }> }>;
  parameters?: { in: string; name: string; required?: boolean }[];
  security?: Record<string, unknown>[];
}
interface Schema {
  type?: string;
  required?: string[];
  properties?: Record<string, Schema>;
  additionalProperties?: boolean | Schema;
  $ref?: string;
}
interface OpenApiDocument {
  openapi: string;
  info: { title: string; version: string };
  paths: Record<string, Record<string, Operation>>;
  components?: { securitySchemes?: Record<string, Record<string, unknown>>; schemas?: Record<string, Schema> };
}

let gw: TestGateway;
let doc: OpenApiDocument;

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
  it('is an OpenAPI 3 document with a title and version', () => {
    expect(doc.openapi).toMatch(/^3\.\d+\.\d+$/);
    expect(doc.info.title).toBe('Card issuing gateway');
    expect(doc.info.version).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it('describes the three auth endpoints and card creation as POST', () => {
    for (const path of ['/api/v1/auth/login', '/api/v1/auth/refresh', '/api/v1/auth/logout', '/api/v1/issuing/cards']) {
      expect(doc.paths[path], path).toBeDefined();
      expect(doc.paths[path]?.['post'], `${path} post`).toBeDefined();
    }
  });

  it('gives card creation a JSON body schema with the three required members and the optional ones', () => {
    const post = doc.paths['/api/v1/issuing/cards']?.['post'];
    const schema = post?.requestBody?.content?.['application/json']?.schema;
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

  it('documents the 201 card record, the revealDetails query and bearer security', () => {
    const post = doc.paths['/api/v1/issuing/cards']?.['post'];
    const card = post?.responses?.['201']?.content?.['application/json']?.schema;
    expect(card?.required?.sort()).toEqual(['cardId', 'cardLimit', 'createdAt', 'currency', 'cvc', 'expMonth', 'expYear', 'pan', 'requestedCardLimit', 'status'].sort());
    expect(post?.responses?.['200']).toBeUndefined();
    for (const status of ['400', '401', '403', '409', '413', '415', '502', '503', '504']) expect(post?.responses?.[status], status).toBeDefined();
    expect(post?.parameters).toEqual([expect.objectContaining({ in: 'query', name: 'revealDetails', required: false })]);
    expect(post?.security).toEqual([{ bearerAuth: [] }]);
    expect(doc.components?.securitySchemes?.['bearerAuth']).toMatchObject({ type: 'http', scheme: 'bearer' });
  });

  it('says nothing of the connector', () => {
    const text = JSON.stringify(doc);
    expect(text).not.toContain(gw.config.connector.url);
    expect(text).not.toContain('/v1/cards"');
  });
});
