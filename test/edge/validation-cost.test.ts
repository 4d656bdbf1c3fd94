import { Ajv, type ErrorObject } from 'ajv';
import { describe, expect, it } from 'vitest';
import { BODY_SHAPES, FAILING_SHAPES, hostileBody } from '../../bench/hostile-bodies.js';
import { CardRequestSchema } from '../../src/cards/card-schemas.js';
import { validationProblems } from '../../src/edge/error-handler.js';
import { LoginBodySchema } from '../../src/edge/routes/login-route.js';
import { scanStrictJson, tooManyItems, tooManyMembers, UNKNOWN_MEMBER, type SchemaNode } from '../../src/edge/strict-json.js';

/**
 * Issue 31, finding 2 (D42 for every shape): a 16 KiB card body whose allowedCategories held
 * ~7,900 numbers cost 4-5x a flat body, because validation (Ajv, allErrors) built a problem and a
 * field path for every item, and the error handler a field path for each again. Counted here,
 * never timed: what the strict reader refuses before validation runs, how many problems
 * validation can still build for what the reader lets through, and how many problems the error
 * handler builds from any number of validation errors.
 */

const SIZES = [16 * 1024, 1024 * 1024];
const CARD = CardRequestSchema as SchemaNode;
const LOGIN = LoginBodySchema as SchemaNode;
/** Validation as the app compiles it (app.ts): every problem of a body. */
const ajv = new Ajv({ allErrors: true, removeAdditional: false, coerceTypes: false, useDefaults: false, strict: false });
const validators = { card: ajv.compile(CardRequestSchema), login: ajv.compile(LoginBodySchema) };
const schemas = { card: CARD, login: LOGIN };

/**
 * The most problems validation can build for a card body the reader lets through: each container
 * holds at most 20 children past its schema's bound (100 categories + 20, 50 metadata members + 20
 * with a key and a value problem each, 5 top-level and 6 config members + 20 unknown ones each), and
 * a few for the rest. Fixed by the schema, whatever the body's size.
 */
const MOST_VALIDATION_PROBLEMS = { card: 121 + 2 * 70 + 2 * 26 + 10, login: 23 };

describe('what validation can cost is fixed by the schema, not by the body (D42, issue 31)', () => {
  for (const bytes of SIZES) {
    for (const shape of BODY_SHAPES) {
      for (const route of ['login', 'card'] as const) {
        it(`${shape}, ${bytes} bytes, ${route}: refused by the reader, or validation builds at most ${MOST_VALIDATION_PROBLEMS[route]} problems`, () => {
          const text = hostileBody(shape, bytes);
          const report = scanStrictJson(text, schemas[route]);
          expect(report.problems.length).toBeLessThanOrEqual(20);
          if (report.problems.length > 0) return;
          const validate = validators[route];
          validate(JSON.parse(text));
          expect(validate.errors?.length ?? 0, `${shape}: ${validate.errors?.length} problems`).toBeLessThanOrEqual(MOST_VALIDATION_PROBLEMS[route]);
        });
      }
    }
  }

  it.each(FAILING_SHAPES)('%s: the reader refuses it, each of its values a problem validation would have built', (shape) => {
    const text = hostileBody(shape, 16 * 1024);
    const report = scanStrictJson(text, CARD);
    expect(report.problems.length).toBeGreaterThan(0);
    // What validation would have built from the same body, had the reader let it through.
    validators.card(JSON.parse(text));
    expect(validators.card.errors?.length).toBeGreaterThan(1000);
  });

  it('refuses an array past maxItems + 20 with one problem for the array; at maxItems + 20 leaves it to validation', () => {
    const body = (items: number) => `{"config":{"allowedCategories":[${Array.from({ length: items }, () => '1').join(',')}]}}`;
    expect(scanStrictJson(body(120), CARD).problems).toEqual([]);
    expect(scanStrictJson(body(121), CARD).problems).toEqual([{ path: 'config.allowedCategories', message: tooManyItems(100) }]);
    expect(scanStrictJson(body(5000), CARD).problems).toEqual([{ path: 'config.allowedCategories', message: tooManyItems(100) }]);
  });

  it('refuses an object past maxProperties + 20 with one problem for the object; at maxProperties + 20 leaves it to validation', () => {
    const body = (members: number) => `{"metadata":{${Array.from({ length: members }, (_, i) => `"k${i}":"v"`).join(',')}}}`;
    expect(scanStrictJson(body(70), CARD).problems).toEqual([]);
    expect(scanStrictJson(body(71), CARD).problems).toEqual([{ path: 'metadata', message: tooManyMembers(50) }]);
  });

  it('refuses a closed object with more than 20 unknown members, naming 20 and counting the rest; 20 unknown members are left to validation', () => {
    const body = (unknown: number) => `{"username":"u","password":"p",${Array.from({ length: unknown }, (_, i) => `"x${i}":0`).join(',')}}`;
    expect(scanStrictJson(body(20), LOGIN).problems).toEqual([]);
    const refused = scanStrictJson(body(21), LOGIN);
    expect(refused.problems).toHaveLength(20);
    expect(refused.problems[0]).toEqual({ path: 'x0', message: UNKNOWN_MEMBER });
    expect(refused.omitted).toBe(1);
    const flood = scanStrictJson(body(3000), LOGIN);
    expect([flood.problems.length, flood.omitted]).toEqual([20, 2980]);
  });
});

describe('the error handler builds at most 21 problems from any number of validation errors (D29, issue 31)', () => {
  it('lists from 10,000 errors the first 20 and one more, and counts the rest without building them', () => {
    const many: ErrorObject[] = Array.from({ length: 10_000 }, (_, i) => ({
      instancePath: `/config/allowedCategories/${i}`,
      schemaPath: '#/properties/config/properties/allowedCategories/items/type',
      keyword: 'type',
      params: { type: 'string' },
      message: 'must be string',
    }));
    const { fields, omitted } = validationProblems(many, 'body');
    expect(fields).toHaveLength(21);
    expect(fields[0]).toEqual({ path: 'config.allowedCategories[0]', message: 'must be string' });
    expect(omitted).toBe(10_000 - 21);
  });

  it('builds every problem of 20 errors, and none more', () => {
    const few: ErrorObject[] = Array.from({ length: 20 }, (_, i) => ({
      instancePath: '',
      schemaPath: '#/additionalProperties',
      keyword: 'additionalProperties',
      params: { additionalProperty: `x${i}` },
      message: 'must NOT have additional properties',
    }));
    const { fields, omitted } = validationProblems(few, 'body');
    expect(fields.map((field) => field.path)).toEqual(Array.from({ length: 20 }, (_, i) => `x${i}`));
    expect(omitted).toBe(0);
  });
});
