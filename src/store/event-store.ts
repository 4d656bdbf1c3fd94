import type { EventType } from '../foundation/event-types.js';

/**
 * One event to record (D63, D66). The stored JSON is `head + sequence + tail`: the store assigns
 * the sequence (one more than the issuing account's last) in the same atomic step that records
 * the event, so the gateway writes the envelope once and never reads it back.
 */
export interface NewEvent {
  /** `evt_` and 26 characters, increasing with time (foundation/event-ids.ts). */
  readonly id: string;
  readonly type: EventType;
  readonly cardId: string;
  /** Epoch ms, the injected clock's; the envelope's createdAt. */
  readonly createdAt: number;
  readonly head: string;
  readonly tail: string;
  /**
   * The connector's own event id, hashed (SHA-256, base64url): a second event with the same one
   * is a repeat, answered with the first one's id and sequence and recorded nothing (D64).
   * Absent for the gateway's own events.
   */
  readonly dedupe?: string;
  /** Endpoint ids (of this issuing account) that get a delivery, due at once. */
  readonly endpoints: readonly string[];
}

export type RecordedEvent = { readonly state: 'recorded' | 'repeat'; readonly id: string; readonly sequence: number };

/** One stored event: its sequence and its JSON exactly as recorded. */
export interface StoredEvent {
  readonly id: string;
  readonly sequence: number;
  readonly json: string;
}

/** Where a delivery stands (D65). */
export type DeliveryState = 'pending' | 'failed';

/** A delivery claimed by one replica until `leaseUntil`: it sends, then settles. */
export interface ClaimedDelivery {
  readonly eventId: string;
  readonly json: string;
  /** Attempts made before this one (0: the first). */
  readonly attempts: number;
  /** The claim's owner token: settle() is refused for any other (the lease ran out and another replica took it). */
  readonly owner: string;
}

export type DeliverySettlement =
  | { readonly kind: 'delivered' }
  | { readonly kind: 'retry'; readonly dueAt: number; readonly error: string }
  | { readonly kind: 'failed'; readonly error: string };

/** What the admin listener shows of one delivery. */
export interface DeliveryRecord {
  readonly eventId: string;
  readonly state: DeliveryState;
  readonly attempts: number;
  /** Epoch ms: when it is due next (pending) or when it failed (failed). */
  readonly at: number;
  /** The last attempt's error in a few words (`status 500`, `timeout`, `connection refused`); no body, no secret. */
  readonly lastError?: string;
}

export interface EndpointRef {
  readonly issuingAccount: string;
  readonly endpointId: string;
}

export interface DeliveryBacklog {
  readonly pending: number;
  readonly failed: number;
  /** Epoch ms of the earliest due pending delivery, undefined when none. */
  readonly oldestDueAt: number | undefined;
}

/**
 * The event log and the delivery queues (D66), shared by every replica. Every key of one issuing
 * account shares one hash tag, so each step is one atomic script on one Cluster slot. Instants are
 * epoch ms from the injected clock; TTLs only clean up.
 */
export interface EventStore {
  /**
   * Records an event and its deliveries in one atomic step; with `store.redis.replicasToAck` it
   * waits for the replicas like a card record (D35). `expiresAt` ends the event (retention).
   */
  record(issuingAccount: string, event: NewEvent, times: { now: number; expiresAt: number }): Promise<RecordedEvent>;
  /** Events of the account, newest first, with a sequence below `beforeSequence` (all when absent); at most `limit`. */
  scan(issuingAccount: string, options: { beforeSequence?: number; limit: number }): Promise<StoredEvent[]>;
  /** One event of the account by id, or undefined. */
  get(issuingAccount: string, eventId: string): Promise<StoredEvent | undefined>;
  /**
   * Claims up to `limit` pending deliveries of the endpoint due at `now` for `leaseMs`: no other
   * replica claims them until the lease ends (then they are due again: a killed replica's
   * deliveries are taken over).
   */
  claimDue(endpoint: EndpointRef, options: { now: number; leaseMs: number; limit: number; owner: string }): Promise<ClaimedDelivery[]>;
  /** Settles a claimed delivery; false (and nothing changed) when `owner` no longer holds it. */
  settle(endpoint: EndpointRef, eventId: string, owner: string, settlement: DeliverySettlement, times: { now: number; keepUntil: number }): Promise<boolean>;
  /** Deliveries of the endpoint in one state, oldest first, at most `limit`. */
  deliveries(endpoint: EndpointRef, options: { state: DeliveryState; limit: number }): Promise<DeliveryRecord[]>;
  delivery(endpoint: EndpointRef, eventId: string): Promise<DeliveryRecord | undefined>;
  /** Makes these failed (or pending) deliveries due at `now` again, attempts reset; answers how many it found. */
  redeliver(endpoint: EndpointRef, eventIds: readonly string[] | 'all-failed', now: number): Promise<number>;
  backlog(endpoint: EndpointRef): Promise<DeliveryBacklog>;
}
