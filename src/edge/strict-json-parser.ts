import type { FastifyInstance } from 'fastify';
import { errors } from '../foundation/errors.js';
import { integerFields, parseStrictJson, StrictJsonError, type IntegerFieldTest } from './strict-json.js';

/**
 * Replaces Fastify's JSON body parser (D29): duplicate member names and integers written as
 * fractions are refused, which JSON.parse alone cannot see. Which fields are integers comes from
 * the route's own body schema, worked out once per route.
 */
export function installStrictJson(app: FastifyInstance): void {
  const integerFieldTests = new WeakMap<object, IntegerFieldTest>();
  app.removeContentTypeParser('application/json');
  // Bodies are JSON only (D14: 415 otherwise); Fastify would also take text/plain.
  app.removeContentTypeParser('text/plain');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (body === '') return done(errors.emptyBody(), undefined);
    const schema = request.routeOptions.schema?.body;
    let isIntegerField: IntegerFieldTest | undefined;
    if (schema && typeof schema === 'object') {
      isIntegerField = integerFieldTests.get(schema);
      if (!isIntegerField) integerFieldTests.set(schema, (isIntegerField = integerFields(schema)));
    }
    try {
      done(null, parseStrictJson(body as string, isIntegerField));
    } catch (error) {
      done(error instanceof StrictJsonError ? error : errors.malformedJson(), undefined);
    }
  });
}
