import type { Readable } from 'node:stream';
import { Pool } from 'undici';
import { deadlineSignal } from '../foundation/deadline.js';
import type { GatewayConfig } from '../config/config-types.js';
import { CONNECTOR_HEADERS, CONNECTOR_PATHS, parseConnectorCard } from './connector-contract.js';
import { ConnectorError, type ConnectorClient } from './connector-port.js';

type ConnectorSettings = GatewayConfig['connector'];

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

/**
 * The connector port (connector-port.ts) on an undici pool, the one module that knows undici (a
 * forward whose answer must be checked, stored and masked is an HTTP client call, not a proxy). Every request has one total deadline,
 * `connector.timeoutMs`, covering connect, headers and the whole body: when it passes the
 * request is aborted, which destroys its socket, so a connector that answers a byte at a time
 * cannot keep the pool's connections after the gateway gave up (they would otherwise turn every
 * later card into a 504). The request is built only from the contract: the path `/v1/cards`,
 * never the client's URL or query, and the contract's headers, never the client's.
 */
export function createConnectorClient(settings: ConnectorSettings): ConnectorClient {
  const pool = new Pool(settings.url, {
    connections: settings.connections,
    pipelining: 1,
    keepAliveTimeout: 30_000,
    // Backstops: each request's own deadline (below) decides first.
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
  const headersFor = (body: string, meta: { idempotencyKey: string; correlationId: string }): Record<string, string> => ({
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(body)),
    accept: 'application/json',
    [CONNECTOR_HEADERS.idempotencyKey]: meta.idempotencyKey,
    [CONNECTOR_HEADERS.correlationId]: meta.correlationId,
    ...(settings.sharedSecret !== undefined && { [CONNECTOR_HEADERS.gatewaySecret]: settings.sharedSecret }),
  });

  return {
    async createCard(payload, meta) {
      const body = JSON.stringify(payload);
      // One total deadline from the moment the gateway decides to forward (queueing included).
      const deadline = deadlineSignal(settings.timeoutMs);
      let text: string;
      let status: number;
      try {
        const response = await pool.request({
          method: 'POST',
          path: CONNECTOR_PATHS.createCard,
          headers: headersFor(body, meta),
          body,
          signal: deadline.signal,
        });
        status = response.statusCode;
        text = await readCapped(response.body, settings.maxAnswerBytes);
      } catch (error) {
        throw classify(deadline.signal.aborted ? Object.assign(new Error('connector deadline passed'), { name: 'TimeoutError', cause: error }) : error);
      } finally {
        deadline.clear();
      }
      if (status !== 200 && status !== 201) throw new ConnectorError('status', { status });
      const replayed = status === 200;
      // A replay (200) is the card the connector made for this key earlier, possibly from a
      // different payload (D31): its shape is checked, not that it matches this request.
      const card = parseConnectorCard(text, replayed ? undefined : { cardLimit: payload.cardLimit, currency: payload.currency });
      if (!card) throw new ConnectorError('invalid_answer', { status });
      return { card, replayed };
    },
    // The lifecycle calls (D43-D45) land with issue 19; until then they fail as an unusable connector would.
    async getCard() {
      throw new ConnectorError('error', { cause: new Error('lifecycle calls not implemented') });
    },
    async listCards() {
      throw new ConnectorError('error', { cause: new Error('lifecycle calls not implemented') });
    },
    async setCardStatus() {
      throw new ConnectorError('error', { cause: new Error('lifecycle calls not implemented') });
    },
    async health() {
      const stats = pool.stats;
      // Every connection busy and requests queued: new cards would only wait (readiness says so).
      if (stats.queued > 0) throw Object.assign(new Error('connector pool saturated'), { state: 'saturated' });
      const deadline = deadlineSignal(1000);
      try {
        const response = await pool.request({ method: 'GET', path: CONNECTOR_PATHS.health, signal: deadline.signal });
        await response.body.dump();
        if (response.statusCode !== 200) throw new Error(`connector health ${response.statusCode}`);
      } finally {
        deadline.clear();
      }
    },
    poolLoad() {
      const stats = pool.stats;
      // undici's `pending` already counts the pool's queue: in flight is what is being sent or answered.
      return { inFlight: stats.running, queued: stats.queued };
    },
    close: () => pool.close(),
  };
}
