import { createHash, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import Fastify, { LogController } from 'fastify';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest, FastifyServerOptions } from 'fastify';
import {
  CONNECTOR_HEADERS,
  CONNECTOR_PATHS,
  connectorIdempotencyKey,
  describeContractError,
  isConnectorCardRequest,
  type ConnectorCard,
  type ConnectorCardRequest,
} from '../connector-contract.js';
import { luhnCheckDigit } from './luhn.js';

/** Options of the sandbox processor-connector. */
export interface SandboxConnectorOptions {
  /**
   * Fastify/pino logger options; default false. Request logging is always off and bodies are
   * never logged, because answers carry full PANs and CVCs.
   */
  logger?: FastifyServerOptions['logger'];
  /** Serve the `/__control` endpoints (tests, benchmarks); default false. */
  controls?: boolean;
  /** When set, every `/v1/cards` request must carry it in `x-gateway-secret`, else 401. */
  sharedSecret?: string;
  /** Test BIN that starts every 16-digit PAN; default `400000`. */
  binPrefix?: string;
  /** Epoch milliseconds for `createdAt` and the expiry; default `Date.now`. */
  now?: () => number;
  /**
   * Serve HTTPS with this certificate. With `ca`, clients must present a certificate signed by
   * it (mutual TLS, the way a real connector trusts the gateway).
   */
  tls?: { cert: string | Buffer; key: string | Buffer; ca?: string | Buffer };
}

/** The card record the connector contract answers with; the sandbox makes only active ones. */
export type SandboxCard = ConnectorCard & { status: 'active' };

/** Fault and behaviour modes of `POST /__control/mode`. */
export type SandboxMode = 'normal' | 'fail' | 'delay' | 'drip' | 'reset' | 'partial' | 'garbage' | 'wrong-shape' | 'unhealthy';

/** One request as it reached the connector: what a test checks to prove nothing else leaks upstream. */
export interface ReceivedRequest {
  method: string;
  /** The request target exactly as sent (path and any query string). */
  url: string;
  headers: Record<string, string | string[] | undefined>;
}

/** Answer of `GET /__control/stats`. */
export interface SandboxStats {
  cardsCreated: number;
  requestsReceived: number;
  lastHeaders: Record<string, string | string[] | undefined> | null;
  lastBody: unknown;
  keys: string[];
  /** The last {@link RECEIVED_LOG_SIZE} requests to `/v1/cards`, oldest first. */
  received: ReceivedRequest[];
}

/** How many requests `received` keeps. */
export const RECEIVED_LOG_SIZE = 200;

interface ModeState {
  mode: SandboxMode;
  delayMs: number;
  status: number;
  /** Requests left before falling back to `normal`; undefined = until changed. */
  remaining: number | undefined;
}

interface ModeBody {
  mode: SandboxMode;
  delayMs?: number;
  status?: number;
  count?: number;
}

const PAN_LENGTH = 16;
const DEFAULT_EXPIRY_MONTHS = 36;
const DEFAULT_DELAY_MS = 1000;
const DEFAULT_FAIL_STATUS = 500;
const MODES: readonly SandboxMode[] = ['normal', 'fail', 'delay', 'drip', 'reset', 'partial', 'garbage', 'wrong-shape', 'unhealthy'];
const NORMAL: ModeState = { mode: 'normal', delayMs: 0, status: DEFAULT_FAIL_STATUS, remaining: undefined };

class BadRequest extends Error {
  readonly statusCode = 400;
}

const digest = (value: string): Buffer => createHash('sha256').update(value).digest();

interface CardRequest {
  requestId: string;
  issuingAccount: string;
  cardLimit: number;
  currency: string;
  expiryMonths: number;
}

function parseCardRequest(body: unknown, key: string): CardRequest {
  if (!isConnectorCardRequest(body)) throw new BadRequest(describeContractError(isConnectorCardRequest.errors));
  const request: ConnectorCardRequest = body;
  // A gateway that builds the key from anything else would break D17's retry guarantee.
  if (key !== connectorIdempotencyKey(request.issuingAccount, request.requestId)) throw new BadRequest('Idempotency-Key must be issuingAccount:requestId');
  return {
    requestId: request.requestId,
    issuingAccount: request.issuingAccount,
    cardLimit: request.cardLimit,
    currency: request.currency,
    expiryMonths: request.config?.expiryDuration ?? DEFAULT_EXPIRY_MONTHS,
  };
}

/**
 * Builds the sandbox processor-connector (the contract in decisions.md, "The processor-connector
 * contract"). Never listens; see {@link startSandboxConnector}.
 * @throws TypeError when `binPrefix` is not 1..15 digits.
 */
export function buildSandboxConnector(opts: SandboxConnectorOptions = {}): FastifyInstance {
  const binPrefix = opts.binPrefix ?? '400000';
  if (!/^\d{1,15}$/.test(binPrefix)) throw new TypeError('binPrefix must be 1..15 digits');
  const now = opts.now ?? Date.now;
  const secretDigest = opts.sharedSecret === undefined ? undefined : digest(opts.sharedSecret);

  // One synchronous lookup-and-insert per request: no await separates them, so concurrent
  // requests with one key can never both create a card.
  const cards = new Map<string, SandboxCard>();
  const issuedPans = new Set<string>();
  let state: ModeState = NORMAL;
  let requestsReceived = 0;
  let lastHeaders: SandboxStats['lastHeaders'] = null;
  let lastBody: unknown = null;
  const received: ReceivedRequest[] = [];
  // Resolvers of pending `delay` answers, released on close so shutdown never waits them out.
  const pendingDelays = new Set<() => void>();

  const app = Fastify({
    logger: opts.logger ?? false,
    logController: new LogController({ disableRequestLogging: true }),
    ...(opts.tls && {
      https: { cert: opts.tls.cert, key: opts.tls.key, ...(opts.tls.ca && { ca: opts.tls.ca, requestCert: true, rejectUnauthorized: true }) },
    }),
  }) as unknown as FastifyInstance;

  app.setErrorHandler((error: FastifyError, request, reply) => {
    const status = typeof error.statusCode === 'number' && error.statusCode >= 400 ? error.statusCode : 500;
    if (status >= 500) request.log.error({ err: { message: error.message } }, 'sandbox connector error');
    return reply.code(status).send({ message: status < 500 ? error.message : 'internal error' });
  });
  // The contract speaks JSON only; Fastify would otherwise accept text/plain bodies too.
  app.removeContentTypeParser('text/plain');
  app.setNotFoundHandler((_request, reply) => reply.code(404).send({ message: 'not found' }));

  // Node's server.close() waits for every socket, including ones a pooling client opened but
  // never used, until the client's keep-alive timer fires (seconds). Tests and benchmarks close
  // sandboxes often, so close ends idle sockets at once and busy ones after their answer.
  const activeRequests = new Map<Socket, number>();
  let closing = false;
  // Requests see the TLS socket, not the TCP one 'connection' reports.
  app.server.on(opts.tls ? 'secureConnection' : 'connection', (socket: Socket) => {
    activeRequests.set(socket, 0);
    socket.once('close', () => activeRequests.delete(socket));
  });
  app.server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const socket = request.socket;
    activeRequests.set(socket, (activeRequests.get(socket) ?? 0) + 1);
    response.once('close', () => {
      const left = (activeRequests.get(socket) ?? 1) - 1;
      activeRequests.set(socket, left);
      if (closing && left === 0) socket.end();
    });
  });

  app.addHook('preClose', (done) => {
    closing = true;
    for (const release of pendingDelays) release();
    for (const [socket, active] of activeRequests) if (active === 0) socket.destroy();
    done();
  });

  const wait = (ms: number): Promise<void> =>
    new Promise((resolve) => {
      const release = (): void => {
        clearTimeout(timer);
        pendingDelays.delete(release);
        resolve();
      };
      const timer = setTimeout(release, ms);
      pendingDelays.add(release);
    });

  const takeMode = (): ModeState => {
    const current = state;
    if (current.remaining !== undefined) {
      const remaining = current.remaining - 1;
      state = remaining > 0 ? { ...current, remaining } : NORMAL;
    }
    return current;
  };

  const newPan = (): string => {
    for (;;) {
      let payload = binPrefix;
      while (payload.length < PAN_LENGTH - 1) payload += String(randomInt(10));
      const pan = payload + luhnCheckDigit(payload);
      if (!issuedPans.has(pan)) {
        issuedPans.add(pan);
        return pan;
      }
    }
  };

  const createCard = (input: CardRequest): SandboxCard => {
    const createdMs = now();
    const created = new Date(createdMs);
    const expiryIndex = created.getUTCFullYear() * 12 + created.getUTCMonth() + input.expiryMonths;
    return {
      cardId: `card_${randomBytes(12).toString('hex')}`,
      pan: newPan(),
      cvc: String(randomInt(1000)).padStart(3, '0'),
      expMonth: (expiryIndex % 12) + 1,
      expYear: Math.floor(expiryIndex / 12),
      status: 'active',
      cardLimit: input.cardLimit,
      currency: input.currency,
      createdAt: created.toISOString(),
    };
  };

  const secretMatches = (request: FastifyRequest): boolean => {
    if (secretDigest === undefined) return true;
    const presented = request.headers[CONNECTOR_HEADERS.gatewaySecret];
    return typeof presented === 'string' && timingSafeEqual(digest(presented), secretDigest);
  };

  const abortConnection = (request: FastifyRequest, reply: FastifyReply): void => {
    reply.hijack();
    request.raw.socket.destroy();
  };

  const sendPartial = (reply: FastifyReply): void => {
    reply.hijack();
    const raw = reply.raw;
    const whole = '{"cardId":"card_000000000000000000000000","pan":"4000000000000002"}';
    raw.writeHead(201, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(whole)) });
    // Destroy only once the fragment is flushed, so the client sees headers and a cut body.
    raw.write(whole.slice(0, 20), () => raw.socket?.destroy());
  };

  // A connector that answers a byte at a time (a slow or congested processor): the status and
  // headers at once, then one byte of the card every `delayMs`, until the client gives up.
  const sendDrip = (reply: FastifyReply, card: SandboxCard, status: number, everyMs: number): void => {
    reply.hijack();
    const raw = reply.raw;
    const whole = Buffer.from(JSON.stringify(card));
    raw.writeHead(status, { 'content-type': 'application/json', 'content-length': String(whole.length) });
    let sent = 0;
    const next = (): void => {
      if (raw.destroyed || sent >= whole.length) {
        pendingDelays.delete(stop);
        if (!raw.destroyed) raw.end();
        return;
      }
      raw.write(whole.subarray(sent, sent + 1));
      sent += 1;
      timer = setTimeout(next, everyMs);
    };
    let timer = setTimeout(next, 0);
    const stop = (): void => {
      clearTimeout(timer);
      pendingDelays.delete(stop);
      raw.destroy();
    };
    pendingDelays.add(stop);
    raw.once('close', () => {
      clearTimeout(timer);
      pendingDelays.delete(stop);
    });
  };

  app.get(CONNECTOR_PATHS.health, async (_request, reply) => (state.mode === 'unhealthy' ? reply.code(503).send({ status: 'unavailable' }) : { status: 'ok' }));

  app.post(CONNECTOR_PATHS.createCard, {
    onRequest: async (request, reply) => {
      requestsReceived += 1;
      lastHeaders = { ...request.headers };
      received.push({ method: request.method, url: request.raw.url ?? '', headers: { ...request.headers } });
      if (received.length > RECEIVED_LOG_SIZE) received.shift();
      lastBody = null;
      if (!secretMatches(request)) return reply.code(401).send({ message: 'gateway secret missing or wrong' });
      return undefined;
    },
    handler: async (request, reply) => {
      lastBody = request.body ?? null;
      const mode = takeMode();
      switch (mode.mode) {
        case 'fail':
          return reply.code(mode.status).send({ message: 'sandbox failure' });
        case 'reset':
          return abortConnection(request, reply);
        case 'partial':
          return sendPartial(reply);
        case 'garbage':
          return reply.code(201).header('content-type', 'application/json; charset=utf-8').send('<<not json>>');
        case 'wrong-shape':
          return reply.code(201).send({ cardId: 42 });
        default:
          break;
      }
      const key = request.headers[CONNECTOR_HEADERS.idempotencyKey];
      if (typeof key !== 'string' || key === '') throw new BadRequest('Idempotency-Key header is required');
      const input = parseCardRequest(request.body, key);
      const existing = cards.get(key);
      const card = existing ?? createCard(input);
      if (existing === undefined) cards.set(key, card);
      if (mode.mode === 'drip') return sendDrip(reply, card, existing === undefined ? 201 : 200, mode.delayMs);
      if (mode.mode === 'delay') await wait(mode.delayMs);
      if (existing !== undefined) reply.code(200).header('idempotent-replayed', 'true');
      else reply.code(201);
      return reply.send(card);
    },
  });

  if (opts.controls === true) {
    app.post<{ Body: ModeBody }>('/__control/mode', {
      schema: {
        body: {
          type: 'object',
          required: ['mode'],
          additionalProperties: false,
          properties: {
            mode: { type: 'string', enum: [...MODES] },
            delayMs: { type: 'integer', minimum: 0, maximum: 600_000 },
            status: { type: 'integer', minimum: 400, maximum: 599 },
            count: { type: 'integer', minimum: 1 },
          },
        },
      },
      handler: async (request) => {
        const { mode, delayMs, status, count } = request.body;
        state = mode === 'normal' ? NORMAL : { mode, delayMs: delayMs ?? DEFAULT_DELAY_MS, status: status ?? DEFAULT_FAIL_STATUS, remaining: count };
        return { ok: true };
      },
    });

    app.get('/__control/stats', async (): Promise<SandboxStats> => ({
      cardsCreated: cards.size,
      requestsReceived,
      lastHeaders,
      lastBody,
      keys: [...cards.keys()],
      received: [...received],
    }));

    app.post('/__control/reset', async () => {
      cards.clear();
      issuedPans.clear();
      state = NORMAL;
      requestsReceived = 0;
      lastHeaders = null;
      lastBody = null;
      received.length = 0;
      return { ok: true };
    });
  }

  return app;
}

/** A listening sandbox connector. */
export interface RunningSandboxConnector {
  /** Base URL built from the bound address, e.g. `http://127.0.0.1:41234`. */
  url: string;
  close(): Promise<void>;
  app: FastifyInstance;
}

/** Builds and starts a sandbox connector; `port: 0` picks a free port. */
export async function startSandboxConnector(options: SandboxConnectorOptions & { host?: string; port?: number } = {}): Promise<RunningSandboxConnector> {
  const { host = '127.0.0.1', port = 0, ...rest } = options;
  const app = buildSandboxConnector(rest);
  await app.listen({ host, port });
  const address = app.server.address() as AddressInfo;
  const hostPart = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `${rest.tls ? 'https' : 'http'}://${hostPart}:${address.port}`,
    close: () => app.close(),
    app,
  };
}
