import type { IncomingHttpHeaders } from 'node:http';
import { expect } from 'vitest';

/**
 * The error envelope of the contract (D20 + `code`, D36, contract-8-9.md) and the one strict
 * assertion on it; the suites' own envelope helpers (hostile, auth, cards) delegate here.
 */

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Anything with a status, headers and a text body: inject() answers and real-socket answers. */
export interface AnyResponse {
  statusCode: number;
  headers: IncomingHttpHeaders | Record<string, string | string[] | number | undefined>;
  body: string;
}

export interface Envelope {
  correlationId: string;
  status: number;
  code: string;
  message: string;
  details: { fields?: { path: string; message: string }[]; fieldsOmitted?: number; [key: string]: unknown };
  timestamp: string;
  retryAfter?: number;
}

/** The context every envelope assertion prints: the status and the start of the body. */
const contextOf = (response: AnyResponse): string => `${response.statusCode} ${response.body.slice(0, 400)}`;

/**
 * What every envelope assertion of the suites checks: this status on the answer and in the body,
 * this `message`, a JSON body, and the X-Correlation-Id header equal to `correlationId`. The
 * suites that predate `code` (test/support/auth-requests.ts, card-fixture.ts) add their own
 * checks to it; new tests use the strict `expectContractError`.
 */
export function expectEnvelopeBasics(response: AnyResponse, status: number, message: string): Envelope {
  const context = contextOf(response);
  expect(response.statusCode, context).toBe(status);
  let body: Envelope;
  try {
    body = JSON.parse(response.body) as Envelope;
  } catch {
    throw new Error(`the answer is not a JSON envelope: ${context}`);
  }
  expect({ status: body.status, message: body.message }, context).toEqual({ status, message });
  expect(response.headers['x-correlation-id'], context).toBe(body.correlationId);
  return body;
}

/**
 * The contract's envelope: `{ correlationId, status, code, message, details, timestamp }`, the
 * X-Correlation-Id header equal to `correlationId`, a JSON content type.
 */
export function expectContractError(response: AnyResponse, status: number, code: string, message: string): Envelope {
  const body = expectEnvelopeBasics(response, status, message);
  const context = contextOf(response);
  expect(String(response.headers['content-type']), context).toMatch(/^application\/json/);
  expect(body.code, context).toBe(code);
  expect(body.correlationId, context).toMatch(UUID);
  expect(typeof body.details === 'object' && body.details !== null && !Array.isArray(body.details), context).toBe(true);
  expect(new Date(String(body.timestamp)).toISOString(), context).toBe(body.timestamp);
  return body;
}

/** 400 validation_failed naming `path` with exactly `message`. */
export function expectContractFieldError(response: AnyResponse, path: string, message: string): Envelope {
  const body = expectContractError(response, 400, 'validation_failed', 'Request validation failed');
  const fields = body.details.fields ?? [];
  expect(fields, `expected ${path}: ${message}`).toContainEqual({ path, message });
  return body;
}
