import type { ConnectorCard, ConnectorCardRequest } from './connector-contract.js';

export type { ConnectorCard, ConnectorCardRequest } from './connector-contract.js';

/** How a call to the connector failed; D19 answers `timeout` with 504 and every other kind with 502. */
export type ConnectorFailureKind = 'refused' | 'reset' | 'timeout' | 'status' | 'invalid_answer' | 'error';

/** The one way a connector call fails: its kind says what the client is answered (cards/card-errors.ts). */
export class ConnectorError extends Error {
  constructor(
    readonly kind: ConnectorFailureKind,
    options: { cause?: unknown; status?: number } = {},
  ) {
    super(`connector ${kind}${options.status ? ` ${options.status}` : ''}`, { cause: options.cause });
    this.name = 'ConnectorError';
  }
}

/** A card the connector answered with: created now (201), or its own replay of the key (200). */
export interface ConnectorReply {
  card: ConnectorCard;
  replayed: boolean;
}

/**
 * The port the card use cases call the processor through, built once per gateway (the undici
 * adapter, connector-client.ts, in production; tests may implement it). Every call rejects
 * with a ConnectorError and nothing else.
 */
export interface ConnectorClient {
  /** Sends one card creation. Never retried (a POST): the retry is the client's, under the same key. */
  createCard(payload: ConnectorCardRequest, meta: { idempotencyKey: string; correlationId: string }): Promise<ConnectorReply>;
  /** Resolves while `GET /health` answers 200 within a second and the pool can take work. */
  health(): Promise<void>;
  /** Requests in progress and requests waiting for a connection. */
  poolLoad(): { inFlight: number; queued: number };
  close(): Promise<void>;
}
