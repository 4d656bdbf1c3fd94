import replyFrom from '@fastify/reply-from';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { Pool } from 'undici';
import type { GatewayConfig } from '../config/load-config.js';
import type { ReadinessProbe } from '../observability/admin-server.js';

/** How a forward failed; D19 maps `timeout` to 504 and every other kind to 502. */
export type ConnectorFailureKind = 'refused' | 'reset' | 'timeout' | 'status' | 'invalid_answer' | 'error';

export class ConnectorError extends Error {
  constructor(
    readonly kind: ConnectorFailureKind,
    options: { cause?: unknown; status?: number } = {},
  ) {
    super(`connector ${kind}${options.status ? ` ${options.status}` : ''}`, { cause: options.cause });
    this.name = 'ConnectorError';
  }
}

/** The body sent to `POST {connectorUrl}/v1/cards` (the connector contract). */
export interface ConnectorCardRequest {
  requestId: string;
  issuingAccount: string;
  requestedCardLimit: number;
  cardLimit: number;
  currency: string;
  config: Record<string, unknown>;
  metadata: Record<string, string>;
}

export interface ConnectorAnswer {
  status: number;
  body: string;
}

type ConnectorSettings = GatewayConfig['connector'];

function undiciOptions(settings: ConnectorSettings) {
  return {
    connections: settings.connections,
    pipelining: 1,
    keepAliveTimeout: 30_000,
    headersTimeout: settings.timeoutMs,
    bodyTimeout: settings.timeoutMs,
    connect: {
      // reply-from's defaults set tls.rejectUnauthorized = false (getUndiciOptions), which
      // would trust any connector certificate; undici lets `connect` override `tls`.
      rejectUnauthorized: true,
      timeout: Math.min(settings.timeoutMs, 5000),
      ...(settings.tls?.ca && { ca: settings.tls.ca }),
      ...(settings.tls?.cert && { cert: settings.tls.cert }),
      ...(settings.tls?.key && { key: settings.tls.key }),
    },
  };
}

/**
 * Registers @fastify/reply-from for the connector in `scope`: keep-alive pool, explicit
 * timeout, optional mutual TLS, and no retries (a POST is never retried; the idempotency key
 * makes the client's own retry safe instead).
 */
export async function registerConnectorForwarding(scope: FastifyInstance, settings: ConnectorSettings): Promise<void> {
  await scope.register(replyFrom, {
    base: settings.url,
    undici: undiciOptions(settings),
    disableRequestLogging: true,
    retryMethods: [],
    maxRetriesOn503: 0,
  });
}

function classify(error: unknown): ConnectorError {
  const code = (error as { code?: string }).code;
  const causeCode = ((error as { cause?: { code?: string } }).cause ?? {}).code;
  if (code === 'FST_REPLY_FROM_GATEWAY_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT' || causeCode === 'UND_ERR_HEADERS_TIMEOUT' || causeCode === 'UND_ERR_BODY_TIMEOUT') {
    return new ConnectorError('timeout', { cause: error });
  }
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET' || causeCode === 'ECONNRESET' || causeCode === 'UND_ERR_SOCKET') return new ConnectorError('reset', { cause: error });
  if (causeCode === 'ECONNREFUSED' || code === 'FST_REPLY_FROM_SERVICE_UNAVAILABLE' || causeCode === 'ENOTFOUND') return new ConnectorError('refused', { cause: error });
  return new ConnectorError('error', { cause: error });
}

/**
 * Sends one card creation to the connector through reply-from and resolves with its status and
 * body, without sending anything to the client: the route validates, stores and masks first.
 * Only the contract's headers go upstream; the client's Authorization never does.
 */
export function forwardToConnector(
  reply: FastifyReply,
  input: { payload: ConnectorCardRequest; idempotencyKey: string; correlationId: string; timeoutMs: number; sharedSecret: string | undefined },
): Promise<ConnectorAnswer> {
  return new Promise<ConnectorAnswer>((resolve, reject) => {
    let settled = false;
    const settle = (outcome: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(guard);
      outcome();
    };
    // reply-from drops the answer silently if the client went away meanwhile; never wait forever.
    const guard = setTimeout(() => settle(() => reject(new ConnectorError('timeout'))), input.timeoutMs + 1000);
    reply.from('/v1/cards', {
      method: 'POST',
      body: JSON.stringify(input.payload),
      contentType: 'application/json',
      timeout: input.timeoutMs,
      rewriteRequestHeaders: (_request, headers) => ({
        host: headers['host'],
        'content-type': 'application/json',
        'content-length': headers['content-length'],
        accept: 'application/json',
        'idempotency-key': input.idempotencyKey,
        'x-correlation-id': input.correlationId,
        ...(input.sharedSecret !== undefined && { 'x-gateway-secret': input.sharedSecret }),
      }),
      // Nothing of the connector's answer reaches the client as is.
      rewriteHeaders: () => ({}),
      onError: (_reply, { error }) => settle(() => reject(classify(error))),
      onResponse: (_request, _reply, res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.stream.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > 64 * 1024) {
            res.stream.destroy();
            settle(() => reject(new ConnectorError('invalid_answer')));
            return;
          }
          chunks.push(chunk);
        });
        res.stream.on('error', (error: Error) => settle(() => reject(classify(error))));
        res.stream.on('end', () => settle(() => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString('utf8') })));
      },
    });
  });
}

/** Readiness (D22): the connector's `GET /health` answers 200 within a second. */
export function connectorHealthProbe(settings: ConnectorSettings): ReadinessProbe & { close(): Promise<void> } {
  const pool = new Pool(settings.url, { ...undiciOptions(settings), connections: 1, headersTimeout: 1000, bodyTimeout: 1000 });
  return {
    name: 'connector',
    async check() {
      const response = await pool.request({ method: 'GET', path: '/health', headersTimeout: 1000, bodyTimeout: 1000 });
      await response.body.dump();
      if (response.statusCode !== 200) throw new Error(`connector health ${response.statusCode}`);
    },
    close: () => pool.close(),
  };
}
