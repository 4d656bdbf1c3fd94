import { randomUUID } from 'node:crypto';
import {
  createServer as createHttpServer,
  STATUS_CODES,
  type IncomingMessage,
  type RequestListener,
  type Server as HttpServer,
  type ServerResponse,
} from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import type { Duplex } from 'node:stream';
import type { Socket } from 'node:net';
import type { Clock } from '../foundation/clock.js';
import type { AddressRanges } from '../foundation/address-ranges.js';
import { normaliseAddress } from '../foundation/address-ranges.js';
import type { AddressBudgets, BudgetRefusal, PerAddressLimits } from './address-budgets.js';
import { AcceptRefusalLog, type AcceptRefusal, type WarningLogger } from './accept-refusals.js';
import { classifyPeer } from './client-origin.js';
import { FirstRequestDeadline, unrefTimer, type DeadlineTimer } from './first-request-deadline.js';
import { budgetRequests, type RefusalHold } from './request-budget.js';
import { errors, toEnvelope, type GatewayError } from '../foundation/errors.js';

/** Deadlines and budgets of the public listeners (D25). */
export interface EdgeLimits {
  readonly handshakeTimeoutMs: number;
  readonly headersTimeoutMs: number;
  readonly requestTimeoutMs: number;
  readonly keepAliveTimeoutMs: number;
  /** D59: a connection's first request must have arrived within this of its accept. */
  readonly firstRequestTimeoutMs: number;
  readonly maxConnections: number;
  readonly maxOutsiderConnections: number;
}

/**
 * TLS 1.2 offers only ECDHE key exchange with AEAD ciphers (D33); TLS 1.3 suites are all AEAD.
 * No CBC, no SHA-1 MACs, no static RSA key exchange.
 */
export const TLS_CIPHERS = [
  'TLS_AES_128_GCM_SHA256',
  'TLS_AES_256_GCM_SHA384',
  'TLS_CHACHA20_POLY1305_SHA256',
  'ECDHE-ECDSA-AES128-GCM-SHA256',
  'ECDHE-RSA-AES128-GCM-SHA256',
  'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-CHACHA20-POLY1305',
  'ECDHE-RSA-CHACHA20-POLY1305',
].join(':');

/** What the listeners report, for metrics. */
export interface ListenerEvents {
  connectionOpened(): void;
  connectionClosed(): void;
  connectionRefused(reason: 'connection_cap' | 'outsider_cap'): void;
  /** D53, D59: a request answered 429 or a connection closed at accept, over its address's budget. */
  budgetRefused(reason: BudgetRefusal): void;
  /** D62: a per-address 429 was written, before any routing (so the request metrics never saw it). */
  budgetAnswered(method: string): void;
  clientError(kind: string): void;
}

export interface HardeningDeps {
  limits: EdgeLimits;
  clock: Clock;
  /** The live allowlist and trusted proxies (reload may change them). */
  ranges(): { allowlist: AddressRanges; trustedProxies: AddressRanges };
  events: ListenerEvents;
  /** D53: per-address budgets, and their limits now. */
  budgets: AddressBudgets;
  perAddress(): PerAddressLimits;
  /** How a refusal past the first on a connection is held (request-budget.ts); tests replace the timer. */
  holdRefusal: RefusalHold;
  /** D59: where refusals at accept are said (at a bounded rate). */
  logger: WarningLogger;
  /** D59: the first-request deadline's timer; by default a real one. Tests fire it themselves. */
  firstRequestTimer?: DeadlineTimer;
}

/**
 * Counts connections across both public listeners. A direct peer that is neither allowlisted
 * nor a trusted proxy can only ever be told 403, so such peers share a small budget of their
 * own and are closed at accept beyond it, before any TLS work: they cannot crowd out allowlisted
 * clients. Every other direct peer has its address's budgets (D53, D59): new connections a
 * second, and connections open at once. Behind a trusted proxy the client address is only known
 * from headers, so there the proxy's own limits have to do this job (docs/operations.md,
 * "Hostile traffic"). Every refusal is counted and logged at a bounded rate (D59).
 */
class ConnectionBudget {
  #open = 0;
  #outsiders = 0;
  readonly #refusals: AcceptRefusalLog;

  constructor(
    private readonly deps: HardeningDeps,
    private readonly deadline: FirstRequestDeadline,
  ) {
    this.#refusals = new AcceptRefusalLog(deps.logger, deps.clock);
  }

  admit(socket: Socket, plain: boolean): void {
    const { limits, events } = this.deps;
    if (this.#open >= limits.maxConnections) return this.#refuse(socket, 'connection_cap');
    const peer = classifyPeer(socket.remoteAddress, this.deps.ranges());
    const outsider = peer === 'outsider';
    if (outsider && this.#outsiders >= limits.maxOutsiderConnections) return this.#refuse(socket, 'outsider_cap');
    // D53: a trusted proxy carries many clients, known only from headers: its connections are
    // not budgeted per address (the requests it forwards are, by their client's address).
    const address = peer === 'proxy' || socket.remoteAddress === undefined ? undefined : normaliseAddress(socket.remoteAddress);
    const admission = address === undefined ? undefined : this.deps.budgets.admitConnection(address);
    if (admission?.refused !== undefined) return this.#refuse(socket, admission.refused);
    this.#open += 1;
    if (outsider) this.#outsiders += 1;
    events.connectionOpened();
    socket.once('close', () => {
      this.#open -= 1;
      if (outsider) this.#outsiders -= 1;
      admission?.closed();
      events.connectionClosed();
    });
    this.deadline.accepted(socket, plain);
  }

  #refuse(socket: Socket, reason: AcceptRefusal): void {
    if (reason === 'connection_cap' || reason === 'outsider_cap') this.deps.events.connectionRefused(reason);
    else this.deps.events.budgetRefused(reason);
    this.#refusals.refused(reason);
    socket.destroy();
  }
}

function clientErrorKind(code: string | undefined): { kind: string; error: () => GatewayError } {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return { kind: 'headers_too_large', error: errors.headersTooLarge };
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { kind: 'request_timeout', error: errors.requestTimeout };
    default:
      return { kind: 'malformed_request', error: () => errors.malformedRequest() };
  }
}

/**
 * Node's answer to a request its parser refuses (bad framing, oversized headers, timeouts) is a
 * bare status line; this writes the envelope with a correlation id instead, wherever a response
 * can still be written (D34), and closes the connection. A direct peer outside the allowlist is
 * told 403, as for any other request (D10).
 */
export function createClientErrorHandler(deps: HardeningDeps) {
  return function onClientError(error: NodeJS.ErrnoException, socket: Duplex): void {
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    // TLS failures (handshake timeout, bad handshake) arrive here too: no HTTP can be spoken on
    // such a socket, and a write would wait for a handshake that never comes.
    const httpLevel = error.code !== undefined && (error.code.startsWith('HPE_') || error.code === 'ERR_HTTP_REQUEST_TIMEOUT');
    if (!httpLevel) {
      deps.events.clientError('tls');
      socket.destroy();
      return;
    }
    const { kind, error: make } = clientErrorKind(error.code);
    deps.events.clientError(kind);
    // A response already under way on this socket cannot be followed by another one.
    if (!socket.writable || (socket as Duplex & { _httpMessage?: unknown })._httpMessage) {
      socket.destroy();
      return;
    }
    const refused = classifyPeer((socket as Socket).remoteAddress, deps.ranges()) === 'outsider';
    socket.end(envelopeResponse(refused ? errors.addressNotAllowed() : make(), deps.clock));
  };
}

/** A whole HTTP/1.1 answer with the envelope (D34), closing the connection. */
function envelopeResponse(gatewayError: GatewayError, clock: Clock): string {
  const correlationId = randomUUID();
  const body = JSON.stringify(toEnvelope(gatewayError, correlationId, clock.now()));
  return (
    `HTTP/1.1 ${gatewayError.status} ${STATUS_CODES[gatewayError.status] ?? ''}\r\n` +
    'content-type: application/json; charset=utf-8\r\n' +
    `content-length: ${Buffer.byteLength(body)}\r\n` +
    `x-correlation-id: ${correlationId}\r\n` +
    'connection: close\r\n\r\n' +
    body
  );
}

/**
 * D59: a connection whose first request is late is told 408 (the envelope, D34) where it can
 * still be written, and closed once that is flushed: not left half-open for a peer that never
 * closes its side.
 */
function closeLate(deps: HardeningDeps): (socket: Socket) => void {
  return (socket) => {
    deps.events.clientError('first_request_timeout');
    if (!socket.writable || (socket as Socket & { _httpMessage?: unknown })._httpMessage) {
      socket.destroy();
      return;
    }
    socket.end(envelopeResponse(errors.requestTimeout(), deps.clock), () => socket.destroy());
  };
}

type Handler = RequestListener<typeof IncomingMessage, typeof ServerResponse>;

/**
 * `plain`: the plain-HTTP server, which gets the envelope handler here; Fastify attaches its
 * `clientErrorHandler` option (the same handler) to the TLS server it was given.
 */
function harden<T extends HttpServer | HttpsServer>(
  server: T,
  deps: HardeningDeps,
  budget: ConnectionBudget,
  deadline: FirstRequestDeadline,
  plain: boolean,
): T {
  const { limits } = deps;
  server.headersTimeout = limits.headersTimeoutMs;
  server.requestTimeout = limits.requestTimeoutMs;
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
  // Raw TCP, on the TLS listener before the handshake starts: admitted or refused at once.
  // Prepended, so that it runs before Node's TLS listener wraps the socket: destroying a socket
  // that TLS already reads from can crash the process (SIGSEGV in SSL_read, seen on Node 20
  // when a refused client's ClientHello arrives in the same turn).
  server.prependListener('connection', (socket: Socket) => budget.admit(socket, plain));
  if (!plain) server.prependListener('secureConnection', (socket: Socket) => deadline.secured(socket));
  server.prependListener('request', (request: IncomingMessage) => deadline.requestArrived(request.socket));
  if (plain) server.on('clientError', createClientErrorHandler(deps));
  return server;
}

/** Node checks header and request deadlines on this interval; the default (30 s) is too coarse. */
const checkingInterval = (limits: EdgeLimits) => Math.max(50, Math.min(1000, Math.floor(limits.headersTimeoutMs / 4)));

export interface PublicServers {
  /** Fastify's serverFactory: builds the TLS listener around Fastify's handler. */
  tlsFactory(tls: { cert: Buffer; key: Buffer }): (handler: Handler) => HttpsServer;
  /** The optional plain listener (D9), feeding the same handler. */
  plain(handler: Handler): HttpServer;
}

export function publicServers(deps: HardeningDeps): PublicServers {
  const { limits } = deps;
  const deadline = new FirstRequestDeadline(limits.firstRequestTimeoutMs, deps.firstRequestTimer ?? unrefTimer, closeLate(deps));
  const budget = new ConnectionBudget(deps, deadline);
  const budgeted = (handler: Handler) =>
    budgetRequests(handler, {
      budgets: deps.budgets,
      ranges: deps.ranges,
      clock: deps.clock,
      requestsPerSecond: () => deps.perAddress().requestsPerSecond,
      refused: (reason) => deps.events.budgetRefused(reason),
      answered: (method) => deps.events.budgetAnswered(method),
      holdRefusal: deps.holdRefusal,
    });
  const httpOptions = {
    connectionsCheckingInterval: checkingInterval(limits),
    // A missing Host is answered by the edge guard with the envelope, not by Node's bare 400.
    requireHostHeader: false,
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
  };
  return {
    tlsFactory: (tls) => (handler) =>
      harden(
        createHttpsServer(
          {
            ...httpOptions,
            cert: tls.cert,
            key: tls.key,
            minVersion: 'TLSv1.2',
            ciphers: TLS_CIPHERS,
            honorCipherOrder: true,
            // A handshake longer than the first-request deadline (D59) could never be followed by
            // a request in time: the handshake deadline closes such a connection, with TLS's own
            // error path, where the first-request deadline has no TLS socket to close yet.
            handshakeTimeout: Math.min(limits.handshakeTimeoutMs, limits.firstRequestTimeoutMs),
          },
          budgeted(handler),
        ),
        deps,
        budget,
        deadline,
        false,
      ),
    plain: (handler) => harden(createHttpServer(httpOptions, budgeted(handler)), deps, budget, deadline, true),
  };
}
