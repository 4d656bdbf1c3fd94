/**
 * One attempt on the wire: the request built from its description, sent through the transport
 * under the attempt's timeout, and the answer read whole, or the reason none came as a typed
 * error (network, timeout, certificate, aborted).
 */
import type { Answer, AttemptLabel } from './answer.js';
import { AbortedError, CertificateError, NetworkError } from './errors.js';
import type { CardGatewayClientOptions, Settings } from './options.js';
import { isRecord } from './shapes.js';
import { createTransport, type HttpRequestInit, type HttpResponseLike, type Transport } from './transport.js';

/** What one attempt sends. The method is the transport's (`HttpRequestInit['method']`, a public type). */
export interface Request {
  method: HttpRequestInit['method'];
  /** Below the base address, without a query. */
  path: string;
  /** Query parameters; undefined values are left out. */
  query?: Readonly<Record<string, string | undefined>> | undefined;
  /** Sent as JSON; none for a GET. */
  body?: unknown;
}

export interface SendContext extends AttemptLabel {
  deadlineAt: number;
  signal?: AbortSignal | undefined;
  /** The access token for the Authorization header; none for login. */
  bearer?: string | undefined;
}

/** OpenSSL's and Node's codes for a server certificate that was not accepted. */
const CERTIFICATE_ERROR_CODES = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_SIGNATURE_FAILURE',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/** fetch reports "fetch failed" with the interesting part (ECONNREFUSED, a TLS error) as its cause. */
function causeCode(error: unknown): string | undefined {
  const cause = isRecord(error) && 'cause' in error ? error.cause : undefined;
  return isRecord(cause) && typeof cause.code === 'string' ? cause.code : undefined;
}

function describeCause(error: unknown): string {
  const cause = isRecord(error) && 'cause' in error ? error.cause : undefined;
  const code = causeCode(error);
  const message = cause instanceof Error ? cause.message : error instanceof Error ? error.message : String(error);
  return code && !message.includes(code) ? `${code}: ${message}` : message;
}

function urlOf(baseUrl: string, request: Request): string {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(request.query ?? {})) if (value !== undefined) query.append(name, value);
  const search = query.toString();
  return `${baseUrl}${request.path}${search === '' ? '' : `?${search}`}`;
}

/** Why no answer arrived, as the error the retry policy and the caller read. */
function noAnswerError(error: unknown, context: SendContext, timeout: { signal: AbortSignal; ms: number }): Error {
  const errorContext = { requestId: context.requestId, attempts: context.attempt };
  if (context.signal?.aborted) return new AbortedError({ ...errorContext, cause: error });
  if (timeout.signal.aborted)
    return new NetworkError(`${context.operation}: no answer within ${timeout.ms} ms`, { ...errorContext, code: 'timeout', cause: error });
  const code = causeCode(error);
  if (code !== undefined && CERTIFICATE_ERROR_CODES.has(code)) {
    return new CertificateError(`${context.operation}: the gateway's TLS certificate was not accepted (${describeCause(error)}); check the ca option`, {
      ...errorContext,
      cause: error,
    });
  }
  return new NetworkError(`${context.operation}: no answer from the gateway (${describeCause(error)})`, {
    ...errorContext,
    code: 'network_error',
    cause: error,
  });
}

export class Sender {
  readonly #settings: Settings;
  /** Read when the transport is first needed. */
  readonly #options: Pick<CardGatewayClientOptions, 'ca' | 'fetch'>;
  #transport: Promise<Transport> | undefined;

  constructor(settings: Settings, options: Pick<CardGatewayClientOptions, 'ca' | 'fetch'>) {
    this.#settings = settings;
    this.#options = options;
  }

  /** One request: JSON in, status and parsed JSON out. Throws only when no answer arrived. */
  async send(request: Request, context: SendContext): Promise<Answer> {
    const transport = await this.#getTransport();
    const timeoutMs = Math.max(1, Math.min(this.#settings.attemptTimeoutMs, context.deadlineAt - this.#settings.now()));
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = context.signal ? AbortSignal.any([context.signal, timeout]) : timeout;
    const headers: Record<string, string> = { accept: 'application/json' };
    if (request.body !== undefined) headers['content-type'] = 'application/json';
    if (context.bearer !== undefined) headers.authorization = `Bearer ${context.bearer}`;
    const body = request.body === undefined ? undefined : JSON.stringify(request.body);
    let response: HttpResponseLike;
    let text: string;
    try {
      response = await transport.fetch(urlOf(this.#settings.baseUrl, request), { method: request.method, headers, body, signal });
      // Read under the same signal: an answer cut off mid-body is a network error too.
      text = await response.text();
    } catch (error) {
      throw noAnswerError(error, context, { signal: timeout, ms: timeoutMs });
    }
    let json: unknown;
    try {
      json = text === '' ? undefined : JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: response.status, headers: response.headers, json, correlationId: response.headers.get('x-correlation-id') ?? undefined };
  }

  /** Closes the connections opened so far; a later send opens new ones. */
  async close(): Promise<void> {
    const transport = this.#transport;
    this.#transport = undefined;
    if (transport) await (await transport).close();
  }

  #getTransport(): Promise<Transport> {
    // A failed setup (undici not installed, a bad `ca`) is not cached: the next call tries again.
    this.#transport ??= createTransport({ ca: this.#options.ca, fetch: this.#options.fetch }).catch((error: unknown) => {
      this.#transport = undefined;
      throw error;
    });
    return this.#transport;
  }
}
