import { readFileSync } from 'node:fs';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

/**
 * Validates real answers against the committed OpenAPI description (docs/openapi.json), as an
 * integrator's tooling would: the status must be documented for the operation, the body must
 * match the response's schema (Ajv, JSON Schema 2020-12 as OpenAPI 3.1 says, strict), every
 * required header must be there, every header the gateway sets must be documented for that
 * response and match its schema, and an error's `code` must be one that response lists.
 */

export interface OpenApiDocument {
  openapi: string;
  info: { title: string; version: string; description?: string };
  servers?: { url: string; variables?: Record<string, { default: string }> }[];
  tags?: { name: string; description?: string }[];
  paths: Record<string, Record<string, Operation>>;
  components: {
    schemas: Record<string, Record<string, unknown>>;
    responses?: Record<string, ResponseObject>;
    securitySchemes?: Record<string, Record<string, unknown>>;
  };
}
export interface Operation {
  operationId?: string;
  summary?: string;
  description?: string;
  tags?: string[];
  security?: Record<string, string[]>[];
  parameters?: { in: string; name: string; required?: boolean; schema?: Record<string, unknown> }[];
  requestBody?: { required?: boolean; content: Record<string, MediaObject> };
  responses: Record<string, ResponseObject>;
}
export interface MediaObject {
  schema?: Record<string, unknown>;
  example?: unknown;
  examples?: Record<string, { summary?: string; value: unknown }>;
}
export interface HeaderObject {
  description?: string;
  required?: boolean;
  schema: Record<string, unknown>;
}
export interface ResponseObject {
  description: string;
  headers?: Record<string, HeaderObject>;
  content?: Record<string, MediaObject>;
}

/** An answer as inject() or a raw socket gives it. */
export interface ObservedAnswer {
  statusCode: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: string;
}

/** What OpenAPI calls a response to an operation, or one of the document's shared responses. */
export type Target = { operationId: string } | { component: string };

/** Transport headers that describe the message, not the API (HTTP/1.1 framing). */
const FRAMING = new Set(['content-type', 'content-length', 'date', 'keep-alive', 'transfer-encoding']);

// ajv-formats is CommonJS: its plugin is the module's `default` member.
const addFormats = addFormatsModule.default;

export function readCommittedDocument(): OpenApiDocument {
  return JSON.parse(readFileSync(new URL('../../docs/openapi.json', import.meta.url), 'utf8')) as OpenApiDocument;
}

/** The document's schema references, rewritten to `$defs` of one Ajv root. */
function rewriteRefs(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(rewriteRefs);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [key, member] of Object.entries(value)) {
    out[key] = key === '$ref' && typeof member === 'string' ? member.replace('#/components/schemas/', 'components#/$defs/') : rewriteRefs(member);
  }
  return out;
}

export class OpenApiResponses {
  readonly ajv: Ajv2020;
  readonly #validators = new Map<object, ValidateFunction>();
  readonly operations = new Map<string, { method: string; path: string; operation: Operation }>();

  constructor(readonly document: OpenApiDocument) {
    // Strict: a keyword that JSON Schema 2020-12 does not define is an error, not ignored.
    this.ajv = new Ajv2020({ strict: true, allErrors: true });
    addFormats(this.ajv);
    this.ajv.addSchema({ $id: 'components', $defs: rewriteRefs(document.components.schemas) as Record<string, unknown> });
    for (const [path, item] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(item)) {
        if (operation.operationId) this.operations.set(operation.operationId, { method: method.toUpperCase(), path, operation });
      }
    }
  }

  /** Compiles a schema of the document (once). */
  validator(schema: Record<string, unknown>): ValidateFunction {
    let validate = this.#validators.get(schema);
    if (!validate) {
      validate = this.ajv.compile(rewriteRefs(schema) as Record<string, unknown>);
      this.#validators.set(schema, validate);
    }
    return validate;
  }

  /** The documented response for this target and status, or undefined. */
  response(target: Target, status: number): ResponseObject | undefined {
    if ('component' in target) return this.document.components.responses?.[target.component];
    return this.operations.get(target.operationId)?.operation.responses[String(status)];
  }

  /** Every way the answer departs from the document (an empty list: it conforms). */
  problems(target: Target, answer: ObservedAnswer): string[] {
    const where = 'component' in target ? `components.responses.${target.component}` : `${target.operationId} ${answer.statusCode}`;
    const problems: string[] = [];
    if ('operationId' in target && !this.operations.has(target.operationId)) return [`no operation ${target.operationId}`];
    const response = this.response(target, answer.statusCode);
    if (!response) return [`${where}: status ${answer.statusCode} is not documented`];

    const headers = new Map<string, string>();
    for (const [name, value] of Object.entries(answer.headers)) {
      if (value !== undefined) headers.set(name.toLowerCase(), Array.isArray(value) ? value.join(', ') : String(value));
    }
    const documented = new Map(Object.entries(response.headers ?? {}).map(([name, object]) => [name.toLowerCase(), { name, object }]));
    for (const [lower, { name, object }] of documented) {
      const value = headers.get(lower);
      if (value === undefined) {
        if (object.required) problems.push(`${where}: required header ${name} is missing`);
        continue;
      }
      const typed = object.schema['type'] === 'integer' && /^-?\d+$/.test(value) ? Number(value) : value;
      const validate = this.validator(object.schema);
      if (!validate(typed)) problems.push(`${where}: header ${name}: ${JSON.stringify(value)} ${this.ajv.errorsText(validate.errors)}`);
    }
    for (const [lower, value] of headers) {
      if (FRAMING.has(lower) || documented.has(lower)) continue;
      // keep-alive is HTTP/1.1's default; only `close` is a statement of the gateway's.
      if (lower === 'connection' && value.toLowerCase() === 'keep-alive') continue;
      problems.push(`${where}: header ${lower}: ${value} is not documented`);
    }

    const media = response.content?.['application/json'];
    if (!media?.schema) return [...problems, `${where}: no application/json schema`];
    const contentType = headers.get('content-type') ?? '';
    if (!/^application\/json(;|$)/.test(contentType)) problems.push(`${where}: content-type ${contentType}`);
    let body: unknown;
    try {
      body = JSON.parse(answer.body);
    } catch {
      return [...problems, `${where}: body is not JSON: ${answer.body.slice(0, 200)}`];
    }
    const validate = this.validator(media.schema);
    if (!validate(body)) problems.push(`${where}: body ${this.ajv.errorsText(validate.errors)}: ${answer.body.slice(0, 300)}`);
    if (answer.statusCode >= 400) {
      const envelope = body as { code?: string; status?: number; correlationId?: string };
      const listed = Object.keys(media.examples ?? {});
      if (!listed.includes(envelope.code ?? '')) problems.push(`${where}: code ${envelope.code} is not one the response lists (${listed.join(', ')})`);
      if (envelope.status !== answer.statusCode) problems.push(`${where}: envelope status ${envelope.status}`);
      if (envelope.correlationId !== headers.get('x-correlation-id')) problems.push(`${where}: correlationId differs from X-Correlation-Id`);
    }
    return problems;
  }
}
