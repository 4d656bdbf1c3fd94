import type {
  ClaimedDelivery,
  DeliveryBacklog,
  DeliveryRecord,
  DeliverySettlement,
  DeliveryState,
  EndpointRef,
  EventStore,
  NewEvent,
  RecordedEvent,
  StoredEvent,
} from '../event-store.js';

/** How long an event outlives its retention, like the Redis key's TTL (expiresAt − now + 60 s, record-context.ts). */
const EXPIRED_KEPT_MS = 60_000;

interface EventEntry extends StoredEvent {
  readonly endsAt: number;
}

interface DeliveryEntry {
  state: DeliveryState;
  /** Pending: when it is due (a claimed one: its lease end). Failed: when it failed. */
  at: number;
  /** Failed: when it is dropped. */
  keepUntil: number;
  attempts: number;
  owner: string | undefined;
  lastError: string | undefined;
}

interface AccountEvents {
  /** Never reset, not even when every event has expired: a receiver orders by it (D63). */
  sequence: number;
  /** In sequence order: each event is appended with the next sequence. */
  readonly log: EventEntry[];
  readonly byId: Map<string, EventEntry>;
  readonly dedupe: Map<string, { id: string; sequence: number; endsAt: number }>;
  readonly endpoints: Map<string, Map<string, DeliveryEntry>>;
}

const byDueThenId = (a: [string, DeliveryEntry], b: [string, DeliveryEntry]): number => a[1].at - b[1].at || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0);
const byKeepUntilThenId = (a: [string, DeliveryEntry], b: [string, DeliveryEntry]): number =>
  a[1].keepUntil - b[1].keepUntil || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0);

const recordOf = (eventId: string, entry: DeliveryEntry): DeliveryRecord => ({
  eventId,
  state: entry.state,
  attempts: entry.attempts,
  at: entry.at,
  ...(entry.lastError === undefined ? {} : { lastError: entry.lastError }),
});

/**
 * The event log and delivery queues in the process (D66): the decisions of the Redis scripts in
 * redis/events.ts. Pending deliveries are ordered by due instant (a claim moves it to its lease
 * end), failed ones by the instant they are dropped (keepUntil), as the Redis sorted sets are.
 * A claim counts the attempt, so a delivery whose replica died mid-send counts it too.
 */
export class MemoryEvents implements EventStore {
  readonly accounts = new Map<string, AccountEvents>();
  readonly #now: () => number;

  constructor(now: () => number) {
    this.#now = now;
  }

  async record(issuingAccount: string, event: NewEvent, { now, expiresAt }: { now: number; expiresAt: number }): Promise<RecordedEvent> {
    const account = this.#account(issuingAccount);
    // Like the Redis key's TTL: a lifetime from now, on the store's own clock.
    const endsAt = this.#now() + Math.max(1000, expiresAt - now + EXPIRED_KEPT_MS);
    const alive = (id: string) => (account.byId.get(id)?.endsAt ?? 0) > this.#now();
    // Recorded already (a record sent again): the same answer, nothing twice.
    const seen = account.byId.get(event.id);
    if (seen && alive(event.id)) return { state: 'recorded', id: seen.id, sequence: seen.sequence };
    if (event.dedupe !== undefined) {
      const first = account.dedupe.get(event.dedupe);
      if (first && alive(first.id)) return { state: 'repeat', id: first.id, sequence: first.sequence };
    }
    const sequence = ++account.sequence;
    const entry: EventEntry = { id: event.id, sequence, json: `${event.head}${sequence}${event.tail}`, endsAt };
    account.log.push(entry);
    account.byId.set(event.id, entry);
    if (event.dedupe !== undefined) account.dedupe.set(event.dedupe, { id: event.id, sequence, endsAt });
    for (const endpointId of event.endpoints) {
      this.#deliveries(account, endpointId).set(event.id, {
        state: 'pending',
        at: event.createdAt,
        keepUntil: 0,
        attempts: 0,
        owner: undefined,
        lastError: undefined,
      });
    }
    return { state: 'recorded', id: event.id, sequence };
  }

  async scan(issuingAccount: string, { beforeSequence, limit }: { beforeSequence?: number; limit: number }): Promise<StoredEvent[]> {
    const account = this.accounts.get(issuingAccount);
    if (!account || limit <= 0) return [];
    const now = this.#now();
    const found: StoredEvent[] = [];
    for (let index = account.log.length - 1; index >= 0 && found.length < limit; index--) {
      const entry = account.log[index] as EventEntry;
      if (beforeSequence !== undefined && entry.sequence >= beforeSequence) continue;
      if (entry.endsAt > now) found.push({ id: entry.id, sequence: entry.sequence, json: entry.json });
    }
    return found;
  }

  async get(issuingAccount: string, eventId: string): Promise<StoredEvent | undefined> {
    const entry = this.accounts.get(issuingAccount)?.byId.get(eventId);
    if (!entry || entry.endsAt <= this.#now()) return undefined;
    return { id: entry.id, sequence: entry.sequence, json: entry.json };
  }

  async claimDue(
    endpoint: EndpointRef,
    { now, leaseMs, limit, owner }: { now: number; leaseMs: number; limit: number; owner: string },
  ): Promise<ClaimedDelivery[]> {
    checkClaim(owner, leaseMs);
    const account = this.accounts.get(endpoint.issuingAccount);
    const deliveries = account?.endpoints.get(endpoint.endpointId);
    if (!account || !deliveries) return [];
    dropFailedBefore(deliveries, now);
    const due = [...deliveries].filter(([, entry]) => entry.state === 'pending' && entry.at <= now).sort(byDueThenId);
    const claimed: ClaimedDelivery[] = [];
    for (const [eventId, entry] of due) {
      if (claimed.length >= limit) break;
      const event = account.byId.get(eventId);
      // Its event expired (retention): nothing left to send.
      if (!event || event.endsAt <= this.#now()) {
        deliveries.delete(eventId);
        continue;
      }
      claimed.push({ eventId, json: event.json, attempts: entry.attempts, owner });
      entry.attempts += 1;
      entry.owner = owner;
      entry.at = now + leaseMs;
    }
    return claimed;
  }

  async settle(
    endpoint: EndpointRef,
    eventId: string,
    owner: string,
    settlement: DeliverySettlement,
    { now, keepUntil }: { now: number; keepUntil: number },
  ): Promise<boolean> {
    checkClaim(owner, 1);
    const deliveries = this.accounts.get(endpoint.issuingAccount)?.endpoints.get(endpoint.endpointId);
    const entry = deliveries?.get(eventId);
    if (!deliveries || !entry || entry.state !== 'pending' || entry.owner !== owner) return false;
    dropFailedBefore(deliveries, now);
    entry.owner = undefined;
    if (settlement.kind === 'delivered') {
      deliveries.delete(eventId);
    } else if (settlement.kind === 'retry') {
      entry.at = settlement.dueAt;
      entry.lastError = settlement.error;
    } else {
      Object.assign(entry, { state: 'failed', at: now, keepUntil, lastError: settlement.error });
    }
    return true;
  }

  async deliveries(endpoint: EndpointRef, { state, limit }: { state: DeliveryState; limit: number }): Promise<DeliveryRecord[]> {
    const deliveries = this.accounts.get(endpoint.issuingAccount)?.endpoints.get(endpoint.endpointId);
    if (!deliveries || limit <= 0) return [];
    return [...deliveries]
      .filter(([, entry]) => entry.state === state)
      .sort(state === 'pending' ? byDueThenId : byKeepUntilThenId)
      .slice(0, limit)
      .map(([eventId, entry]) => recordOf(eventId, entry));
  }

  async delivery(endpoint: EndpointRef, eventId: string): Promise<DeliveryRecord | undefined> {
    const entry = this.accounts.get(endpoint.issuingAccount)?.endpoints.get(endpoint.endpointId)?.get(eventId);
    return entry && recordOf(eventId, entry);
  }

  async redeliver(endpoint: EndpointRef, eventIds: readonly string[] | 'all-failed', now: number): Promise<number> {
    const account = this.accounts.get(endpoint.issuingAccount);
    const deliveries = account?.endpoints.get(endpoint.endpointId);
    if (!account || !deliveries) return 0;
    dropFailedBefore(deliveries, now);
    const ids = new Set(eventIds === 'all-failed' ? [...deliveries].filter(([, entry]) => entry.state === 'failed').map(([id]) => id) : eventIds);
    let found = 0;
    for (const id of ids) {
      const entry = deliveries.get(id);
      if (!entry) continue;
      // Its event has expired: nothing left to send.
      if ((account.byId.get(id)?.endsAt ?? 0) <= this.#now()) {
        deliveries.delete(id);
        continue;
      }
      Object.assign(entry, { state: 'pending', at: now, keepUntil: 0, attempts: 0, owner: undefined });
      found += 1;
    }
    return found;
  }

  async backlog(endpoint: EndpointRef): Promise<DeliveryBacklog> {
    const deliveries = this.accounts.get(endpoint.issuingAccount)?.endpoints.get(endpoint.endpointId);
    let pending = 0;
    let failed = 0;
    let oldestDueAt: number | undefined;
    for (const entry of deliveries?.values() ?? []) {
      if (entry.state === 'failed') {
        failed++;
        continue;
      }
      pending++;
      if (oldestDueAt === undefined || entry.at < oldestDueAt) oldestDueAt = entry.at;
    }
    return { pending, failed, oldestDueAt };
  }

  /** Drops the events past their end, their log entries and dedupe marks; deliveries go at their next claim. */
  sweep(now: number): void {
    for (const account of this.accounts.values()) {
      const live = account.log.filter((entry) => entry.endsAt > now);
      if (live.length < account.log.length) {
        for (const entry of account.log) if (entry.endsAt <= now) account.byId.delete(entry.id);
        account.log.splice(0, account.log.length, ...live);
      }
      for (const [key, mark] of account.dedupe) if (mark.endsAt <= now) account.dedupe.delete(key);
      for (const deliveries of account.endpoints.values()) dropFailedBefore(deliveries, now);
    }
  }

  #account(issuingAccount: string): AccountEvents {
    let account = this.accounts.get(issuingAccount);
    if (!account) {
      account = { sequence: 0, log: [], byId: new Map(), dedupe: new Map(), endpoints: new Map() };
      this.accounts.set(issuingAccount, account);
    }
    return account;
  }

  #deliveries(account: AccountEvents, endpointId: string): Map<string, DeliveryEntry> {
    let deliveries = account.endpoints.get(endpointId);
    if (!deliveries) account.endpoints.set(endpointId, (deliveries = new Map()));
    return deliveries;
  }
}

/** The Redis store keeps a claim's owner in a `|`-separated record, and a lease of 0 would claim forever. */
function checkClaim(owner: string, leaseMs: number): void {
  if (owner === '' || owner.includes('|')) throw new TypeError('a delivery owner is a non-empty token without "|"');
  if (!(leaseMs > 0)) throw new TypeError('a delivery lease lasts at least 1 ms');
}

/** Failed deliveries are kept for redelivery until their keepUntil, then dropped. */
function dropFailedBefore(deliveries: Map<string, DeliveryEntry>, now: number): void {
  for (const [eventId, entry] of deliveries) if (entry.state === 'failed' && entry.keepUntil <= now) deliveries.delete(eventId);
}
