import { createHash } from 'node:crypto';
import type { EventSettings } from '../config/sections/events.js';
import type { Clock } from '../foundation/clock.js';
import { EventIds } from '../foundation/event-ids.js';
import type { EventDataByType, EventSource, EventType } from '../foundation/event-types.js';
import type { EventStore, RecordedEvent } from '../store/event-store.js';

/** An event the gateway is to record: everything but what recording adds (id, createdAt, sequence). */
export type EventDraft = {
  [T in EventType]: {
    readonly type: T;
    readonly issuingAccount: string;
    readonly cardId: string;
    readonly data: EventDataByType[T];
    readonly source: EventSource;
    /**
     * What makes a second draft the same event (the connector's event id; `created:<cardId>` for a
     * card's creation): hashed, kept for the retention period, and a repeat records nothing.
     */
    readonly dedupeKey?: string;
  };
}[EventType];

export interface EventRecorderDeps {
  readonly store: EventStore;
  readonly clock: Clock;
  /** The reloadable events section: endpoints and retention as they are now. */
  readonly settings: () => EventSettings;
  /** Called once per event recorded (not for a repeat): the metric, and the delivery loop's nudge. */
  readonly recorded?: (draft: EventDraft, endpoints: readonly string[], event: RecordedEvent) => void;
}

const DAY_MS = 24 * 3600 * 1000;

/** The dedupe key's stored form: a digest, so that nothing the connector wrote is kept twice. */
export const dedupeDigest = (issuingAccount: string, key: string): string =>
  createHash('sha256').update(issuingAccount).update('\u0000').update(key).digest('base64url');

/**
 * Records events (D63, D64, D66): the envelope written once as JSON (its sequence filled in by
 * the store, in the same atomic step), a delivery to every endpoint of the account that takes
 * the type, and the retention. Resolves undefined when events are disabled.
 */
export class EventRecorder {
  readonly #ids: EventIds;

  constructor(private readonly deps: EventRecorderDeps) {
    this.#ids = new EventIds(() => deps.clock.now());
  }

  async record(draft: EventDraft): Promise<RecordedEvent | undefined> {
    const { store, clock, settings } = this.deps;
    const current = settings();
    if (!current.enabled) return undefined;
    const now = clock.now();
    const id = this.#ids.next();
    const endpoints = current.endpoints
      .filter((endpoint) => endpoint.issuingAccount === draft.issuingAccount && (endpoint.types === undefined || endpoint.types.includes(draft.type)))
      .map((endpoint) => endpoint.id);
    const head = `{"id":"${id}","type":"${draft.type}","createdAt":"${new Date(now).toISOString()}","issuingAccount":${JSON.stringify(draft.issuingAccount)},"sequence":`;
    const tail = `,"data":${JSON.stringify(draft.data)}}`;
    const recorded = await store.record(
      draft.issuingAccount,
      {
        id,
        type: draft.type,
        cardId: draft.cardId,
        createdAt: now,
        head,
        tail,
        endpoints,
        ...(draft.dedupeKey !== undefined && { dedupe: dedupeDigest(draft.issuingAccount, draft.dedupeKey) }),
      },
      { now, expiresAt: now + current.retentionDays * DAY_MS },
    );
    if (recorded.state === 'recorded') this.deps.recorded?.(draft, endpoints, recorded);
    return recorded;
  }
}
