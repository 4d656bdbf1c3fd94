import type { CardCursorSealer } from '../cards/card-cursor.js';
import { filterProblems } from '../cards/list-cards.js';
import type { EventSettings } from '../config/sections/events.js';
import type { Clock } from '../foundation/clock.js';
import { errors } from '../foundation/errors.js';
import type { EventStore, StoredEvent } from '../store/event-store.js';
import { EVENT_LIST_LIMIT, type EventListQuery } from './event-schemas.js';

const DAY_MS = 24 * 3600 * 1000;
/** Events one listing reads at most before it answers what it found (with a cursor to go on). */
export const EVENT_SCAN_LIMIT = 1000;
const BATCH = 100;
const EVENT_ID = /^evt_[0-9A-HJKMNP-TV-Z]{26}$/;

/** A page of events, already JSON: the stored events as they were recorded, never re-serialized. */
export interface EventPageText {
  readonly json: string;
}

/** What the listing reads of each stored event without parsing it whole. */
interface Summary {
  readonly type: string;
  readonly createdAt: number;
  readonly cardId: string | undefined;
}

function summaryOf(event: StoredEvent): Summary {
  const parsed = JSON.parse(event.json) as { type: string; createdAt: string; data: { cardId?: string; card?: { cardId?: string } } };
  return { type: parsed.type, createdAt: Date.parse(parsed.createdAt), cardId: parsed.data.card?.cardId ?? parsed.data.cardId };
}

export interface EventReading {
  list(issuingAccount: string, query: EventListQuery): Promise<EventPageText>;
  /** The event's JSON, or 404 event_not_found (unknown, malformed, expired, another account's). */
  get(issuingAccount: string, eventId: string): Promise<string>;
}

/**
 * Reading events back (D66): newest first, by the store's sequence; filters applied to what the
 * store holds; an event past its retention (by the injected clock) is gone even while its key
 * waits for Redis to expire it. A listing reads at most EVENT_SCAN_LIMIT events: a rare filter
 * over a long history answers a short (even empty) page with a cursor to continue.
 */
export function eventReading(deps: { store: EventStore; clock: Clock; cursors: CardCursorSealer; settings: () => EventSettings }): EventReading {
  const { store, clock, cursors, settings } = deps;
  const oldest = () => clock.now() - settings().retentionDays * DAY_MS;

  return {
    async list(issuingAccount, query) {
      const problems = filterProblems(query);
      if (problems.length > 0) throw errors.validation(problems);
      const after = query.createdAfter === undefined ? undefined : Date.parse(query.createdAfter);
      const before = query.createdBefore === undefined ? undefined : Date.parse(query.createdBefore);
      const binding = [
        'events',
        issuingAccount,
        query.type ?? null,
        query.cardId ?? null,
        after === undefined ? null : String(after),
        before === undefined ? null : String(before),
      ];
      let position: number | undefined;
      if (query.cursor !== undefined) {
        const opened = cursors.openBound(query.cursor, binding);
        if (opened === undefined || !/^[0-9]{1,15}$/.test(opened)) throw errors.invalidCursor();
        position = Number(opened);
      }
      const limit = query.limit ?? EVENT_LIST_LIMIT.default;
      const floor = Math.max(oldest(), after ?? -Infinity);
      const found: StoredEvent[] = [];
      let scanned = 0;
      // Whether events older than `last` may remain: the store had more, or this page stopped short of a batch's end.
      let more = true;
      let last = position;
      scanning: while (found.length < limit && scanned < EVENT_SCAN_LIMIT && more) {
        const batch = await store.scan(issuingAccount, { ...(last !== undefined && { beforeSequence: last }), limit: BATCH });
        more = batch.length === BATCH;
        for (const [index, event] of batch.entries()) {
          scanned += 1;
          last = event.sequence;
          const summary = summaryOf(event);
          if (summary.createdAt < floor) {
            // Newest first: everything after this is older still.
            more = false;
            break scanning;
          }
          const matches =
            (before === undefined || summary.createdAt <= before) &&
            (query.type === undefined || summary.type === query.type) &&
            (query.cardId === undefined || summary.cardId === query.cardId);
          if (matches) found.push(event);
          if (found.length === limit || scanned === EVENT_SCAN_LIMIT) {
            more ||= index < batch.length - 1;
            break scanning;
          }
        }
      }
      const nextCursor = more && last !== undefined ? JSON.stringify(cursors.sealBound(String(last), binding)) : 'null';
      return { json: `{"data":[${found.map((event) => event.json).join(',')}],"nextCursor":${nextCursor}}` };
    },

    async get(issuingAccount, eventId) {
      if (!EVENT_ID.test(eventId)) throw errors.eventNotFound();
      const event = await store.get(issuingAccount, eventId);
      if (!event || summaryOf(event).createdAt < oldest()) throw errors.eventNotFound();
      return event.json;
    },
  };
}
