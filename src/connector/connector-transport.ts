import type { Readable } from 'node:stream';
import { Pool } from 'undici';
import type { GatewayConfig } from '../config/config-types.js';
import { deadlineSignal } from '../foundation/deadline.js';
import { ConnectorError } from './connector-port.js';

export type ConnectorSettings = GatewayConfig['connector'];

/** A connector answer read to its end: the status and the body text (at most `maxAnswerBytes`). */
export interface ConnectorAnswer {
  status: number;
  text: string;
}

/** One request as the client builds it from the contract's fields: nothing of the client's request. */
export interface ConnectorRequest {
  method: 'GET' | 'POST';
  path: string;
  headers: Record<string, string>;
  body?: string;
}

function classify(error: unknown): ConnectorError {
  if (error instanceof ConnectorError) return error;
  const { code, name } = error as { code?: string; name?: string };
  if (
    name === 'TimeoutError' ||
    name === 'AbortError' ||
    code === 'UND_ERR_ABORTED' ||
    code === 'UND_ERR_CONNECT_TIMEOUT' ||
    code === 'UND_ERR_HEADERS_TIMEOUT' ||
    code === 'UND_ERR_BODY_TIMEOUT'
  ) {
    return new ConnectorError('timeout', { cause: error });
  }
  if (code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'EAI_AGAIN') return new ConnectorError('refused', { cause: error });
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET' || code === 'UND_ERR_CLOSED' || code === 'EPIPE') return new ConnectorError('reset', { cause: error });
  return new ConnectorError('error', { cause: error });
}

/**
 * Reads a body to its end, refusing more than `limit` bytes (the connector is not trusted to be
 * small). Event-based rather than an async iterator: one allocation fewer per chunk on the
 * path every card takes.
 */
function readCapped(body: Readable, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    body.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        body.destroy();
        reject(new ConnectorError('invalid_answer'));
        return;
      }
      chunks.push(chunk);
    });
    body.once('end', () => resolve(chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks, size).toString('utf8')));
    body.once('error', reject);
  });
}

/** The pool every connector call shares; its own timeouts are backstops behind each call's deadline. */
export function createConnectorPool(settings: ConnectorSettings): Pool {
  return new Pool(settings.url, {
    connections: settings.connections,
    pipelining: 1,
    keepAliveTimeout: 30_000,
    headersTimeout: settings.timeoutMs + 1000,
    bodyTimeout: settings.timeoutMs + 1000,
    connect: {
      // Always verify the connector's certificate (against connector.tls.ca or the system CAs).
      rejectUnauthorized: true,
      timeout: Math.min(settings.timeoutMs, 5000),
      ...(settings.tls?.ca && { ca: settings.tls.ca }),
      ...(settings.tls?.cert && { cert: settings.tls.cert }),
      ...(settings.tls?.key && { key: settings.tls.key }),
    },
  });
}

/**
 * Sends one request with one total deadline, `connector.timeoutMs`, from the moment the gateway
 * decides to call (waiting for a pooled connection included) to the last byte of the answer.
 * When it passes, the request is aborted, which destroys its socket: a connector that answers a
 * byte at a time cannot keep the pool's connections after the gateway gave up (they would
 * otherwise turn every later call into a 504). Every failure is a ConnectorError.
 */
export async function sendToConnector(pool: Pool, settings: ConnectorSettings, request: ConnectorRequest): Promise<ConnectorAnswer> {
  const deadline = deadlineSignal(settings.timeoutMs);
  try {
    const response = await pool.request({ ...request, signal: deadline.signal });
    const text = await readCapped(response.body, settings.maxAnswerBytes);
    return { status: response.statusCode, text };
  } catch (error) {
    throw classify(deadline.signal.aborted ? Object.assign(new Error('connector deadline passed'), { name: 'TimeoutError', cause: error }) : error);
  } finally {
    deadline.clear();
  }
}
