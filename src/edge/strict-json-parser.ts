import type { FastifyInstance } from 'fastify';
import { errors } from '../foundation/errors.js';
import { parseStrictJson, StrictJsonError, type SchemaNode } from './strict-json.js';
import { routeOf } from './request-context.js';

/**
 * Replaces Fastify's JSON body parser (D29, D42): nesting past 32 levels, duplicate member names
 * and integers written as fractions are refused, which JSON.parse alone cannot see. Which fields
 * are integers comes from the route's own body schema, walked alongside the text.
 */
export function installStrictJson(app: FastifyInstance): void {
  app.removeContentTypeParser('application/json');
  // Bodies are JSON only (D14: 415 otherwise); Fastify would also take text/plain.
  app.removeContentTypeParser('text/plain');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (body === '') return done(errors.emptyBody(), undefined);
    const schema = routeOf(request).bodySchema;
    try {
      done(null, parseStrictJson(body as string, schema !== null && typeof schema === 'object' ? (schema as SchemaNode) : undefined));
    } catch (error) {
      done(error instanceof StrictJsonError ? error : errors.malformedJson(), undefined);
    }
  });
}
