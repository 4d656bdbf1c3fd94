import { expect } from 'vitest';
import type { ReceivedRequest } from '../../src/connector/sandbox/sandbox-connector.js';

/**
 * What a card creation may look like when it reaches the connector (D12, D30): exactly
 * `POST /v1/cards`, no query string, only the contract's headers with the gateway's own values.
 * Shared by the least-privilege test of the connector request and the bad-input properties,
 * which read the request from the sandbox connector's record (`GET /__control/stats`, `received`).
 */

/** The only headers the connector may see (contract-8-9.md, "Connector"). */
export const CONTRACT_HEADERS: readonly string[] = [
  'host',
  'connection',
  'content-type',
  'content-length',
  'accept',
  'idempotency-key',
  'x-correlation-id',
  'x-gateway-secret',
];
export const REQUIRED_HEADERS: readonly string[] = ['host', 'content-type', 'content-length', 'idempotency-key', 'x-correlation-id'];

/**
 * Asserts `received` is exactly the contract's request: method and path without a query string,
 * no header outside the contract, the required ones present with the expected values, and none of
 * `clientValues` anywhere in it.
 */
export function expectOnlyContractRequest(
  received: ReceivedRequest,
  expected: { idempotencyKey: string; correlationId: string; host: string; secret?: string },
  clientValues: string[],
): void {
  expect({ method: received.method, url: received.url }).toEqual({ method: 'POST', url: '/v1/cards' });
  const names = Object.keys(received.headers).map((name) => name.toLowerCase());
  expect(
    names.filter((name) => !CONTRACT_HEADERS.includes(name)),
    `headers outside the contract: ${JSON.stringify(received.headers)}`,
  ).toEqual([]);
  for (const name of REQUIRED_HEADERS) expect(names, `${name} is part of the connector contract`).toContain(name);
  if (expected.secret === undefined) expect(received.headers['x-gateway-secret']).toBeUndefined();
  else expect(received.headers['x-gateway-secret']).toBe(expected.secret);
  expect(received.headers['idempotency-key']).toBe(expected.idempotencyKey);
  expect(received.headers['x-correlation-id']).toBe(expected.correlationId);
  expect(received.headers['host']).toBe(expected.host);
  expect(String(received.headers['content-type'])).toMatch(/^application\/json/);
  const text = JSON.stringify(received);
  for (const value of clientValues) expect(text, `the client's "${value}" reached the connector`).not.toContain(value);
}
