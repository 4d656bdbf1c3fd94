import { createHash, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import Fastify, { LogController } from 'fastify';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest, FastifyServerOptions } from 'fastify';
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

/** The card record the connector contract answers with. */
export interface SandboxCard {
  cardId: string;
  pan: string;
  cvc: string;
  expMonth: number;
  expYear: number;
  status: 'active';
  cardLimit: number;
  currency: string;
  createdAt: string;
}

/** Fault and behaviour modes of `POST /__control/mode`. */
export type SandboxMode = 'normal' | 'fail' | 'delay' | 'reset' | 'partial' | 'garbage' | 'wrong-shape' | 'unhealthy';

/** Answer of `GET /__control/stats`. */
export interface SandboxStats {
  cardsCreated: number;
  requestsReceived: number;
  lastHeaders: Record<string, string | string[] | undefined> | null;
  lastBody: unknown;
  keys: string[];
}

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
const MODES: readonly SandboxMode[] = ['normal', 'fail', 'delay', 'reset', 'partial', 'garbage', 'wrong-shape', 'unhealthy'];
const NORMAL: ModeState = { mode: 'normal', delayMs: 0, status: DEFAULT_FAIL_STATUS, remaining: undefined };

class BadRequest extends Error {
  readonly statusCode = 400;
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const digest = (value: string): Buffer => createHash('sha256').update(value).digest();

interface CardRequest {
  requestId: string;
  issuingAccount: string;
  cardLimit: number;
  currency: string;
  expiryMonths: number;
}

function parseCardRequest(body: unknown, key: string): CardRequest {
  if (!isRecord(body)) throw new BadRequest('body must be a JSON object');
  const { requestId, issuingAccount, cardLimit, currency, config, metadata } = body;
  if (typeof requestId !== 'string' || requestId === '') throw new BadRequest('requestId must be a non-empty string');
  if (typeof issuingAccount !== 'string' || issuingAccount === '') throw new BadRequest('issuingAccount must be a non-empty string');
  if (typeof cardLimit !== 'number' || !Number.isSafeInteger(cardLimit) || cardLimit <= 0) {
    throw new BadRequest('cardLimit must be a positive integer');
  }
  if (typeof currency !== 'string' || !/^[A-Z]{3}$/.test(currency)) throw new BadRequest('currency must be three uppercase letters');
  if (config !== undefined && !isRecord(config)) throw new BadRequest('config must be an object');
  if (metadata !== undefined && !isRecord(metadata)) throw new BadRequest('metadata must be an object');
  const expiry = config?.['expiryDuration'] ?? DEFAULT_EXPIRY_MONTHS;
  if (typeof expiry !== 'number' || !Number.isInteger(expiry) || expiry < 1 || expiry > 60) {
    throw new BadRequest('config.expiryDuration must be an integer 1..60');
  }
  // A gateway that builds the key from anything else would break D17's retry guarantee.
  if (key !== `${issuingAccount}:${requestId}`) throw new BadRequest('Idempotency-Key must be issuingAccount:requestId');
  return { requestId, issuingAccount, cardLimit, currency, expiryMonths: expiry };
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
    const presented = request.headers['x-gateway-secret'];
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

  app.get('/health', async (_request, reply) =>
    state.mode === 'unhealthy' ? reply.code(503).send({ status: 'unavailable' }) : { status: 'ok' },
  );

  app.post('/v1/cards', {
    onRequest: async (request, reply) => {
      requestsReceived += 1;
      lastHeaders = { ...request.headers };
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
      const key = request.headers['idempotency-key'];
      if (typeof key !== 'string' || key === '') throw new BadRequest('Idempotency-Key header is required');
      const input = parseCardRequest(request.body, key);
      const existing = cards.get(key);
      const card = existing ?? createCard(input);
      if (existing === undefined) cards.set(key, card);
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
        state = mode === 'normal'
          ? NORMAL
          : { mode, delayMs: delayMs ?? DEFAULT_DELAY_MS, status: status ?? DEFAULT_FAIL_STATUS, remaining: count };
        return { ok: true };
      },
    });

    app.get('/__control/stats', async (): Promise<SandboxStats> => ({
      cardsCreated: cards.size,
      requestsReceived,
      lastHeaders,
      lastBody,
      keys: [...cards.keys()],
    }));

    app.post('/__control/reset', async () => {
      cards.clear();
      issuedPans.clear();
      state = NORMAL;
      requestsReceived = 0;
      lastHeaders = null;
      lastBody = null;
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
export async function startSandboxConnector(
  options: SandboxConnectorOptions & { host?: string; port?: number } = {},
): Promise<RunningSandboxConnector> {
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
