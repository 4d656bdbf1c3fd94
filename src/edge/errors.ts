/**
 * The gateway's error catalogue. Every error a client can see is a GatewayError with a public
 * message; anything else is rendered as a 500 without its text (D20).
 */
export interface FieldProblem {
  path: string;
  message: string;
}

export interface ErrorDetails {
  fields?: FieldProblem[];
  [key: string]: unknown;
}

export class GatewayError extends Error {
  readonly status: number;
  readonly code: string;
  readonly details: ErrorDetails;
  /** Seconds; rendered as `retryAfter` and the `Retry-After` header (D11, D17, D23). */
  readonly retryAfter: number | undefined;
  readonly headers: Record<string, string>;

  constructor(
    status: number,
    code: string,
    message: string,
    options: { details?: ErrorDetails; retryAfter?: number; headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    super(message, { cause: options.cause });
    this.name = 'GatewayError';
    this.status = status;
    this.code = code;
    this.details = options.details ?? {};
    this.retryAfter = options.retryAfter === undefined ? undefined : Math.max(1, Math.ceil(options.retryAfter));
    this.headers = options.headers ?? {};
  }
}

export const errors = {
  httpsRequired: () => new GatewayError(403, 'HTTPS_REQUIRED', 'HTTPS is required'),
  addressNotAllowed: () => new GatewayError(403, 'ADDRESS_NOT_ALLOWED', 'Client address is not allowed'),
  notFound: () => new GatewayError(404, 'NOT_FOUND', 'Resource not found'),
  methodNotAllowed: (allow: string) =>
    new GatewayError(405, 'METHOD_NOT_ALLOWED', 'Method not allowed', { headers: { allow } }),
  badRequest: (message: string, fields?: FieldProblem[]) =>
    new GatewayError(400, 'BAD_REQUEST', message, fields ? { details: { fields } } : {}),
  validation: (fields: FieldProblem[]) =>
    new GatewayError(400, 'VALIDATION_FAILED', 'Request validation failed', { details: { fields } }),
  malformedJson: () => new GatewayError(400, 'MALFORMED_JSON', 'Request body is not valid JSON'),
  emptyBody: () => new GatewayError(400, 'EMPTY_BODY', 'Request body is empty'),
  bodyTooLarge: () => new GatewayError(413, 'BODY_TOO_LARGE', 'Request body is too large'),
  unsupportedMediaType: () =>
    new GatewayError(415, 'UNSUPPORTED_MEDIA_TYPE', 'Content-Type must be application/json'),
  authenticationFailed: (message = 'Authentication failed') => new GatewayError(401, 'AUTHENTICATION_FAILED', message),
  forbidden: (message = 'Permission denied') => new GatewayError(403, 'FORBIDDEN', message),
  rateLimited: (retryAfter: number, headers: Record<string, string> = {}) =>
    new GatewayError(429, 'RATE_LIMITED', 'Rate limit exceeded, retry later', { retryAfter, headers }),
  idempotencyInProgress: (retryAfter: number) =>
    new GatewayError(409, 'IDEMPOTENCY_IN_PROGRESS', 'A request with this requestId is still being processed', { retryAfter }),
  shuttingDown: () => new GatewayError(503, 'SHUTTING_DOWN', 'Service is shutting down, retry on another connection', { retryAfter: 1 }),
  storeUnavailable: (cause?: unknown) =>
    new GatewayError(503, 'STORE_UNAVAILABLE', 'Service temporarily unavailable', { retryAfter: 1, cause }),
  badGateway: (cause?: unknown) => new GatewayError(502, 'BAD_GATEWAY', 'Card processor error', { cause }),
  gatewayTimeout: (cause?: unknown) => new GatewayError(504, 'GATEWAY_TIMEOUT', 'Card processor did not answer in time', { cause }),
  internal: (cause?: unknown) => new GatewayError(500, 'INTERNAL', 'Internal error', { cause }),
} as const;

/** The D20 envelope (and the spec 7 rate-limit shape, which adds `retryAfter`). */
export interface ErrorEnvelope {
  correlationId: string;
  status: number;
  message: string;
  details: ErrorDetails;
  timestamp: string;
  retryAfter?: number;
}

export function toEnvelope(error: GatewayError, correlationId: string, nowMs: number): ErrorEnvelope {
  const envelope: ErrorEnvelope = {
    correlationId,
    status: error.status,
    message: error.message,
    details: error.details,
    timestamp: new Date(nowMs).toISOString(),
  };
  if (error.retryAfter !== undefined) envelope.retryAfter = error.retryAfter;
  return envelope;
}
