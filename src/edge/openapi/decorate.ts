import type { ErrorCode } from '../../foundation/error-catalogue.js';
import { codesByStatus, RESPONSE_DOCS_KEY, type ResponseDocs } from './documented-responses.js';
import { errorExamples } from './error-examples.js';
import { ENVELOPE_REF, errorResponse, type MediaObject, type ResponseObject } from './error-responses.js';
import { header, RATE_LIMIT_HEADERS, type HeaderName, type HeaderObject } from './headers.js';

interface OperationObject {
  operationId?: string;
  requestBody?: { content?: Record<string, MediaObject> };
  responses?: Record<string, ResponseObject>;
  [RESPONSE_DOCS_KEY]?: ResponseDocs;
}
export interface Document {
  paths?: Record<string, Record<string, OperationObject>>;
  components?: { schemas?: Record<string, Record<string, unknown>>; responses?: Record<string, ResponseObject> };
}

/**
 * Moves a titled inline schema into components.schemas and answers a reference to it; the titled
 * alternatives of a union (a status change's two answers) are named too.
 */
function named(document: Document, given: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  const name = given?.['title'];
  if (given === undefined || typeof name !== 'string') return given;
  let schema = given;
  for (const key of ['anyOf', 'oneOf'] as const) {
    const alternatives: unknown = schema[key];
    if (Array.isArray(alternatives)) schema = { ...schema, [key]: alternatives.map((alternative) => named(document, alternative as Record<string, unknown>)) };
  }
  const schemas = (document.components ??= {}).schemas ?? (document.components.schemas = {});
  const existing = schemas[name];
  if (existing !== undefined && JSON.stringify(existing) !== JSON.stringify(schema)) throw new Error(`OpenAPI: two different schemas are titled ${name}`);
  schemas[name] = schema;
  return { $ref: `#/components/schemas/${name}` };
}

/** A shared response for answers that belong to no operation. */
function sharedResponse(description: string, code: ErrorCode, extraHeaders: Record<string, HeaderObject> = {}): ResponseObject {
  return {
    description,
    headers: { 'X-Correlation-Id': header('X-Correlation-Id', true), ...extraHeaders },
    content: { 'application/json': { schema: { ...ENVELOPE_REF }, examples: errorExamples([code]) } },
  };
}

/**
 * The swagger plugin's transformObject: decorates every operation from its declaration
 * (headers, examples and codes of each response), names the titled body schemas, and adds the
 * answers that belong to no operation (404 for unknown paths, 405 for other methods).
 */
export function decorateOpenApi(document: Document): Document {
  for (const [path, item] of Object.entries(document.paths ?? {})) {
    for (const [method, operation] of Object.entries(item)) {
      const docs = operation[RESPONSE_DOCS_KEY];
      if (docs === undefined) throw new Error(`OpenAPI: ${method.toUpperCase()} ${path} has no ${RESPONSE_DOCS_KEY} declaration (use documentedResponses)`);
      delete operation[RESPONSE_DOCS_KEY];
      const responses = operation.responses ?? {};
      const media = operation.requestBody?.content?.['application/json'];
      if (media) media.schema = named(document, media.schema);

      const success = responses[String(docs.success.status)];
      if (!success) throw new Error(`OpenAPI: ${method.toUpperCase()} ${path} declares ${docs.success.status} without a schema`);
      const successHeaders: Record<string, HeaderObject> = { 'X-Correlation-Id': header('X-Correlation-Id', true) };
      for (const [name, required] of Object.entries(docs.success.headers) as [HeaderName, boolean][]) successHeaders[name] = header(name, required);
      if (docs.rateLimited) for (const name of RATE_LIMIT_HEADERS) successHeaders[name] = header(name, true);
      const successMedia = success.content?.['application/json'] ?? {};
      responses[String(docs.success.status)] = {
        description: docs.success.description,
        headers: successHeaders,
        content: { 'application/json': { schema: named(document, successMedia.schema) ?? {}, examples: docs.success.examples } },
        ...(docs.links && { links: docs.links }),
      };
      for (const [status, codes] of codesByStatus(docs.errors)) {
        responses[String(status)] = errorResponse(status, codes, docs.rateLimited === true, docs.errorExamples ?? {}, docs.afterLimiter ?? []);
      }
      operation.responses = responses;
    }
  }
  const components = (document.components ??= {});
  components.responses = {
    NotFound: sharedResponse('No operation has this path: `not_found`, the answer to any request for an unknown path, whatever its method.', 'not_found'),
    MethodNotAllowed: sharedResponse(
      "The path exists, the method does not (for example GET on a POST operation's path): `method_not_allowed`. `Allow` lists the methods the path accepts.",
      'method_not_allowed',
      { Allow: header('Allow', true) },
    ),
  };
  return document;
}
