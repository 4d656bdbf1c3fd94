import type { FastifyServerOptions } from 'fastify';
import type { ConnectorCard } from '../connector-contract.js';
import type { EventsTarget, OutboxRetry } from './event-outbox.js';

/** Options of the sandbox processor-connector. */
export interface SandboxConnectorOptions {
  /**
   * Fastify/pino logger options; default false. Request logging is always off and bodies are
   * never logged, because answers carry full PANs and CVCs.
   */
  logger?: FastifyServerOptions['logger'];
  /** Serve the `/__control` endpoints (tests, benchmarks); default false. */
  controls?: boolean;
  /** When set, every `/v1/cards` request (creation and lifecycle) must carry it in `x-gateway-secret`, else 401. */
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
  /**
   * The gateway's connector listener (D64), where the events the control routes simulate are
   * posted. Without it they wait until one is set (`setEventsTarget` of the running sandbox).
   */
  eventsTarget?: EventsTarget;
  /** Backoff of the events outbox; default 500 ms doubling up to 30 s. */
  eventsRetry?: Partial<OutboxRetry>;
}

/** The creation answer of the connector contract (the lifecycle calls answer the longer record). */
export type SandboxCard = ConnectorCard;

/** Fault and behaviour modes of `POST /__control/mode`. */
export type SandboxMode = 'normal' | 'fail' | 'delay' | 'drip' | 'reset' | 'partial' | 'garbage' | 'wrong-shape' | 'unhealthy' | 'foreign-account';

export const SANDBOX_MODES: readonly SandboxMode[] = [
  'normal',
  'fail',
  'delay',
  'drip',
  'reset',
  'partial',
  'garbage',
  'wrong-shape',
  'unhealthy',
  'foreign-account',
];

/** The account `foreign-account` mode names in a record whose real owner is the caller. */
export const FOREIGN_ACCOUNT = 'foreign-account';

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
  /** The last {@link RECEIVED_LOG_SIZE} requests to `/v1/cards` and below, oldest first. */
  received: ReceivedRequest[];
}

/** How many requests `received` keeps. */
export const RECEIVED_LOG_SIZE = 200;

/** A request the sandbox refuses with 400 and this message. */
export class BadRequest extends Error {
  readonly statusCode = 400;
}
