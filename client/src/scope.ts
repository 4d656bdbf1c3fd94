import type { CardGatewayError } from './errors.js';

/** What the client does for its caller; each is one declaration on the request pipeline. */
export type Operation = 'login' | 'refresh' | 'logout' | 'createCard' | 'getCard' | 'listCards' | 'freezeCard' | 'unfreezeCard' | 'cancelCard';

export interface RetryEvent {
  operation: Operation;
  /** The attempt that failed, 1-based. */
  attempt: number;
  error: CardGatewayError;
  /** How long the client waits before the next attempt. */
  delayMs: number;
  /** createCard's requestId, the same on every attempt. */
  requestId: string | undefined;
}

/** One caller's bounds: its deadline and signal, and createCard's requestId for the errors. */
export interface CallScope {
  operation: Operation;
  deadlineAt: number;
  signal?: AbortSignal | undefined;
  requestId?: string | undefined;
}
