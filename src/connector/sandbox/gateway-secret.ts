import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { CONNECTOR_HEADERS } from '../connector-contract.js';

const digest = (value: string): Buffer => createHash('sha256').update(value).digest();

/**
 * The shared-secret check of every `/v1/cards` request: true when no secret is configured, or
 * the request carries it. Digests first, so the comparison takes the same time whatever the
 * length of what was presented.
 */
export function gatewaySecretCheck(secret: string | undefined): (request: FastifyRequest) => boolean {
  if (secret === undefined) return () => true;
  const expected = digest(secret);
  return (request) => {
    const presented = request.headers[CONNECTOR_HEADERS.gatewaySecret];
    return typeof presented === 'string' && timingSafeEqual(digest(presented), expected);
  };
}
