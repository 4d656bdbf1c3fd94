import { ERROR_CATALOGUE, type ErrorCode } from '../../foundation/error-catalogue.js';
import { errors, GatewayError, toEnvelope } from '../../foundation/errors.js';

export interface ExampleObject {
  summary: string;
  value: unknown;
}

const EXAMPLE_CORRELATION_ID = '4c9f06f3-54e0-49af-9550-1b5de006fa75';
const EXAMPLE_INSTANT = Date.UTC(2026, 10, 23, 21, 13, 33, 542);

/** The codes whose example needs more than the catalogue gives: details, a specific message, a computed wait. */
const OVERRIDES: Partial<Record<ErrorCode, GatewayError>> = {
  validation_failed: errors.validation([{ path: 'cardLimit', message: 'must be >= 1' }]),
  permission_denied: errors.permissionDenied('Permission cards:create is required'),
  idempotency_in_progress: errors.idempotencyInProgress(3),
  rate_limited: errors.rateLimited(42),
};

/**
 * An example envelope per code, worded as the catalogue words it (or as OVERRIDES or the
 * operation's own `overrides` do) and summarised by the code's catalogue description.
 */
export function errorExamples(codes: readonly ErrorCode[], overrides: Partial<Record<ErrorCode, GatewayError>> = {}): Record<string, ExampleObject> {
  return Object.fromEntries(
    codes.map((code) => {
      const error = overrides[code] ?? OVERRIDES[code] ?? new GatewayError(code);
      return [code, { summary: ERROR_CATALOGUE[code].description, value: toEnvelope(error, EXAMPLE_CORRELATION_ID, EXAMPLE_INSTANT) }];
    }),
  );
}
