import { Pool, type Dispatcher } from 'undici';
import type { GatewayConfig } from '../config/config-types.js';
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
 * One call's answer, read as undici's dispatcher delivers it: the status, the body chunks up to
 * `limit` bytes (the connector is not trusted to be small), and the deadline. A handler of its
 * own rather than `pool.request`: no response stream, no header object (nothing here reads the
 * headers) and no AbortController per call; the profile of the card path showed them as about
 * a third of the client's CPU per call. The deadline aborts through the handle undici gives
 * once the request is dispatched; a request still queued for a connection when it passes is
 * aborted the moment it is dispatched, as an aborted signal would have it.
 */
class CappedAnswer implements Dispatcher.DispatchHandler {
  readonly #chunks: Buffer[] = [];
  #size = 0;
  #status = 0;
  #abort: ((error?: Error) => void) | undefined;
  /** Set when the deadline passed: the reason the call failed, whatever undici reports. */
  #late: Error | undefined;
  readonly #timer: NodeJS.Timeout;
  #grace: NodeJS.Immediate | undefined;

  constructor(
    private readonly limit: number,
    timeoutMs: number,
    private readonly settle: { resolve(answer: ConnectorAnswer): void; reject(error: unknown): void },
  ) {
    // The deadline's one-turn grace (foundation/deadline.ts): an answer already read when the timer fires still counts.
    this.#timer = setTimeout(() => {
      this.#grace = setImmediate(() => {
        this.#late = Object.assign(new Error('connector deadline passed'), { name: 'TimeoutError' });
        this.#abort?.(this.#late);
      });
    }, timeoutMs);
  }

  onConnect(abort: (error?: Error) => void): void {
    this.#abort = abort;
    if (this.#late) abort(this.#late);
  }

  onHeaders(statusCode: number): boolean {
    // 1xx answers are informational: the final status follows.
    if (statusCode >= 200) this.#status = statusCode;
    return true;
  }

  onData(chunk: Buffer): boolean {
    this.#size += chunk.length;
    if (this.#size > this.limit) {
      this.#abort?.(new ConnectorError('invalid_answer'));
      return false;
    }
    this.#chunks.push(chunk);
    return true;
  }

  onComplete(): void {
    this.#done();
    const chunks = this.#chunks;
    const text = chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks, this.#size).toString('utf8');
    this.settle.resolve({ status: this.#status, text });
  }

  onError(error: Error): void {
    this.#done();
    const late = this.#late;
    this.settle.reject(classify(late ? Object.assign(new Error('connector deadline passed'), { name: 'TimeoutError', cause: error }) : error));
  }

  #done(): void {
    clearTimeout(this.#timer);
    if (this.#grace) clearImmediate(this.#grace);
  }
}

/**
 * Sends one request with one total deadline, `connector.timeoutMs`, from the moment the gateway
 * decides to call (waiting for a pooled connection included) to the last byte of the answer.
 * When it passes, the request is aborted, which destroys its socket: a connector that answers a
 * byte at a time cannot keep the pool's connections after the gateway gave up (they would
 * otherwise turn every later call into a 504). Every failure is a ConnectorError.
 */
export function sendToConnector(pool: Pool, settings: ConnectorSettings, request: ConnectorRequest): Promise<ConnectorAnswer> {
  return new Promise((resolve, reject) => {
    const handler = new CappedAnswer(settings.maxAnswerBytes, settings.timeoutMs, { resolve, reject });
    try {
      pool.dispatch(request, handler);
    } catch (error) {
      handler.onError(error as Error);
    }
  });
}
