import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RELAXED_LIMITS } from '../support/auth-requests.js';
import { testCertificatePem } from '../support/gateway-fixture.js';
import { call, CARDS_PATH, expectCodedError, listenTestGateway, loginOverTls, type Envelope, type HttpAnswer, type ListeningGateway } from './support.js';

/**
 * Issue 8, attack 8 (D29): a card body with thousands of unknown members, or thousands of
 * invalid items in config.allowedCategories. The 400 lists at most 20 field problems and counts
 * the rest in details.fieldsOmitted, so an error body never grows with the request. Old code:
 * every problem was listed (Ajv allErrors), 400 bodies of 97 KB and 544 KB, 6-34x the request.
 * Bodies stay under the 16 KiB body limit (else 413).
 */

const MAX_FIELDS = 20;
const BODY_LIMIT = 16 * 1024;

describe('validation error bodies are capped (D29)', () => {
  let ca: string;
  let listening: ListeningGateway;
  let token: string;

  beforeAll(async () => {
    ca = await testCertificatePem();
    listening = await listenTestGateway({ overrides: { rateLimits: RELAXED_LIMITS } });
    token = await loginOverTls(listening.httpsUrl, ca);
  });
  afterAll(async () => {
    await listening?.close();
  });

  async function post(body: string): Promise<HttpAnswer> {
    expect(Buffer.byteLength(body), 'the request stays under the body limit').toBeLessThan(BODY_LIMIT);
    return call(`${listening.httpsUrl}${CARDS_PATH}`, { ca, headers: { authorization: `Bearer ${token}` }, body, timeoutMs: 10_000 });
  }

  /** A valid card body plus `unknown` members `u0`, `u1`, ... at the top level. */
  function withUnknownMembers(unknown: number): string {
    const body: Record<string, unknown> = { requestId: randomUUID(), cardLimit: 10_000, currency: 'EUR' };
    for (let i = 0; i < unknown; i += 1) body[`u${i}`] = 0;
    return JSON.stringify(body);
  }

  function validationError(answer: HttpAnswer): Envelope {
    const envelope = expectCodedError(answer, 400, 'validation_failed', 'Request validation failed');
    expect(Array.isArray(envelope.details.fields)).toBe(true);
    return envelope;
  }

  it('lists 20 problems in full, and past 20 lists 20 and counts the rest', async () => {
    // Just inside: exactly 20 problems, all listed, no count.
    const twenty = validationError(await post(withUnknownMembers(MAX_FIELDS)));
    expect(twenty.details.fields).toHaveLength(MAX_FIELDS);
    expect(twenty.details.fieldsOmitted).toBeUndefined();
    for (const field of twenty.details.fields ?? []) expect(field.path).toMatch(/^u\d+$/);

    // Just outside: 21 problems, 20 listed, 1 counted.
    const twentyOne = validationError(await post(withUnknownMembers(MAX_FIELDS + 1)));
    expect(twentyOne.details.fields).toHaveLength(MAX_FIELDS);
    expect(twentyOne.details.fieldsOmitted).toBe(1);
  });

  it('answers thousands of unknown members with a body smaller than the request', async () => {
    const unknown = 1500;
    const request = withUnknownMembers(unknown);
    const answer = await post(request);
    const envelope = validationError(answer);
    expect(envelope.details.fields).toHaveLength(MAX_FIELDS);
    expect(envelope.details.fieldsOmitted).toBe(unknown - MAX_FIELDS);
    expect(Buffer.byteLength(answer.body), `error body ${Buffer.byteLength(answer.body)} B for a ${Buffer.byteLength(request)} B request`).toBeLessThan(
      Buffer.byteLength(request),
    );
  });

  it('answers thousands of invalid allowedCategories items with the one problem of the array, a body smaller than the request', async () => {
    const items = 7000;
    // Each item is invalid (not a string); the array is also longer than the 100 items D14 allows.
    const request = JSON.stringify({
      requestId: randomUUID(),
      cardLimit: 10_000,
      currency: 'EUR',
      config: { allowedCategories: Array.from({ length: items }, () => 0) },
    });
    const answer = await post(request);
    const envelope = validationError(answer);
    // Issue 31: the reader refuses the array itself; validation never builds 7,000 problems.
    expect(envelope.details.fields).toEqual([{ path: 'config.allowedCategories', message: 'must NOT have more than 100 items' }]);
    expect(envelope.details.fieldsOmitted).toBeUndefined();
    expect(Buffer.byteLength(answer.body), `error body ${Buffer.byteLength(answer.body)} B for a ${Buffer.byteLength(request)} B request`).toBeLessThan(
      Buffer.byteLength(request),
    );
  });

  it('leaves an array up to 20 items past maxItems to validation, which lists its items too; one item more is the reader’s', async () => {
    const body = (items: number) =>
      JSON.stringify({ requestId: randomUUID(), cardLimit: 10_000, currency: 'EUR', config: { allowedCategories: Array.from({ length: items }, () => 0) } });
    const inside = validationError(await post(body(120)));
    // 120 items, every one a number: the array's length and 120 items, 20 listed.
    expect(inside.details.fields).toHaveLength(MAX_FIELDS);
    expect(inside.details.fields).toContainEqual({ path: 'config.allowedCategories', message: 'must NOT have more than 100 items' });
    expect(inside.details.fields).toContainEqual({ path: 'config.allowedCategories[0]', message: 'must be string' });
    expect(inside.details.fieldsOmitted).toBe(121 - MAX_FIELDS);
    const outside = validationError(await post(body(121)));
    expect(outside.details.fields).toEqual([{ path: 'config.allowedCategories', message: 'must NOT have more than 100 items' }]);
  });
});
