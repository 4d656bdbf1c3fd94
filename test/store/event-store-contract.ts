import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { EventStore, NewEvent } from '../../src/store/event-store.js';
import type { GatewayStore, StoreTopology } from '../../src/store/store-types.js';
import type { StoreInspector } from './store-contract.js';

/** Instants are explicit: no sleeps, no fake timers. */
const T0 = 1_700_000_000_000;
const DAY = 24 * 60 * 60 * 1000;
const WEEK = 7 * DAY;
const LEASE = 15_000;
const ACCOUNT = 'acct-a';
const OTHER_ACCOUNT = 'acct-b';
const EP1 = { issuingAccount: ACCOUNT, endpointId: 'ep-1' };
const EP2 = { issuingAccount: ACCOUNT, endpointId: 'ep-2' };

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
let lastId = 0;
/** `evt_` and 26 Crockford characters, increasing (as foundation/event-ids.ts makes them). */
function eventId(): string {
  lastId += 1;
  const time = (T0 + lastId).toString(32).toUpperCase().padStart(10, '0');
  const random = [...randomBytes(16)].map((byte) => CROCKFORD[byte % 32]).join('');
  return `evt_${time}${random}`;
}

/** A card.status_changed event of `account`, as the recorder hands it to the store. */
function statusChanged(
  account: string,
  options: { id?: string; dedupe?: string; endpoints?: string[]; createdAt?: number; data?: Record<string, unknown> } = {},
): NewEvent {
  const id = options.id ?? eventId();
  const createdAt = options.createdAt ?? T0;
  const data = options.data ?? { card: { cardId: 'card_1', status: 'frozen' }, previousStatus: 'active', status: 'frozen', source: 'api' };
  return {
    id,
    type: 'card.status_changed',
    cardId: 'card_1',
    createdAt,
    head: `{"id":"${id}","type":"card.status_changed","createdAt":"${new Date(createdAt).toISOString()}","issuingAccount":"${account}","sequence":`,
    tail: `,"data":${JSON.stringify(data)}}`,
    ...(options.dedupe === undefined ? {} : { dedupe: options.dedupe }),
    endpoints: options.endpoints ?? [EP1.endpointId],
  };
}

/** A production-like key prefix (`cig:production:`): the sizes below are quoted for keys this long. */
const PRODUCTION_PREFIX_LENGTH = 'cig:production:'.length;

/**
 * A card.status_changed event as the gateway records it (D63): the masked card as the API
 * answers it, with three metadata entries, a reason and the credential.
 */
function typicalStatusChange(account: string, id: string, createdAt: number, endpointId: string, dedupe: string): NewEvent {
  const data = {
    card: {
      cardId: 'card_0f3c5e7a9b1d2f4a6c8e0b2d',
      maskedPan: '************4242',
      expMonth: 7,
      expYear: 2031,
      status: 'frozen',
      cardLimit: 131250,
      requestedCardLimit: 125000,
      currency: 'EUR',
      createdAt: '2026-11-28T10:15:30.123Z',
      issuingAccount: account,
      metadata: { employeeId: 'E-104422', costCenter: 'marketing-emea-events', purpose: 'Conference travel and accommodation' },
    },
    previousStatus: 'active',
    status: 'frozen',
    reason: 'Reported lost by the cardholder on the phone, card frozen',
    source: 'api',
    credentialId: 'cred-travel-eu-ops',
  };
  return {
    id,
    type: 'card.status_changed',
    cardId: data.card.cardId,
    createdAt,
    head: `{"id":"${id}","type":"card.status_changed","createdAt":"${new Date(createdAt).toISOString()}","issuingAccount":"${account}","sequence":`,
    tail: `,"data":${JSON.stringify(data)}}`,
    dedupe,
    endpoints: [endpointId],
  };
}

const jsonOf = (event: NewEvent, sequence: number) => `${event.head}${sequence}${event.tail}`;
const times = (now = T0) => ({ now, expiresAt: now + WEEK });
const settleTimes = (now: number) => ({ now, keepUntil: now + WEEK });

/** One call of every event store operation, by name (store-contract.ts: everyStoreOperation). */
export function everyEventOperation(events: () => EventStore): [string, () => Promise<unknown>][] {
  const event = statusChanged(ACCOUNT, { dedupe: 'connector-event' });
  return [
    ['events.record', () => events().record(ACCOUNT, event, times())],
    ['events.scan', () => events().scan(ACCOUNT, { limit: 10 })],
    ['events.get', () => events().get(ACCOUNT, event.id)],
    ['events.claimDue', () => events().claimDue(EP1, { now: T0, leaseMs: LEASE, limit: 10, owner: 'gw-1' })],
    ['events.settle', () => events().settle(EP1, event.id, 'gw-1', { kind: 'delivered' }, settleTimes(T0))],
    ['events.deliveries', () => events().deliveries(EP1, { state: 'failed', limit: 10 })],
    ['events.delivery', () => events().delivery(EP1, event.id)],
    ['events.redeliver', () => events().redeliver(EP1, 'all-failed', T0)],
    ['events.backlog', () => events().backlog(EP1)],
  ];
}

/**
 * The event log and the delivery queues (D63-D66), part of the store contract: run on every
 * store (memory, standalone, Sentinel, Cluster). `inspect` is the look inside Redis, absent for
 * the memory store.
 */
export function eventStoreContract(current: () => GatewayStore, inspect: () => StoreInspector | undefined, topology: StoreTopology | undefined): void {
  const events = (): EventStore => current().events;
  const record = (account: string, event: NewEvent, now = T0) => events().record(account, event, times(now));
  const claim = (owner: string, now: number, limit = 10, endpoint = EP1) => events().claimDue(endpoint, { now, leaseMs: LEASE, limit, owner });

  describe('events: the log (D63, D66)', () => {
    it('records an event with the next sequence and reads back its JSON exactly, the sequence written in', async () => {
      const event = statusChanged(ACCOUNT);
      expect(await record(ACCOUNT, event)).toEqual({ state: 'recorded', id: event.id, sequence: 1 });
      const stored = await events().get(ACCOUNT, event.id);
      expect(stored).toEqual({ id: event.id, sequence: 1, json: jsonOf(event, 1) });
      expect(JSON.parse(stored?.json ?? '')).toMatchObject({ id: event.id, sequence: 1, data: { status: 'frozen' } });
    });

    it('answers a repeated dedupe with the first event, records nothing and gives no sequence away (D64)', async () => {
      const first = statusChanged(ACCOUNT, { dedupe: 'sha-of-connector-event-1' });
      const again = statusChanged(ACCOUNT, { dedupe: 'sha-of-connector-event-1' });
      expect(await record(ACCOUNT, first)).toEqual({ state: 'recorded', id: first.id, sequence: 1 });
      expect(await record(ACCOUNT, again, T0 + 1)).toEqual({ state: 'repeat', id: first.id, sequence: 1 });
      expect(await events().get(ACCOUNT, again.id)).toBeUndefined();
      expect(await events().backlog(EP1)).toMatchObject({ pending: 1 });
      // another dedupe is another event, and takes the next sequence
      const other = statusChanged(ACCOUNT, { dedupe: 'sha-of-connector-event-2' });
      expect(await record(ACCOUNT, other, T0 + 2)).toEqual({ state: 'recorded', id: other.id, sequence: 2 });
      // a dedupe is per issuing account
      expect(await record(OTHER_ACCOUNT, statusChanged(OTHER_ACCOUNT, { dedupe: 'sha-of-connector-event-1' }))).toMatchObject({
        state: 'recorded',
        sequence: 1,
      });
    });

    it('answers an event recorded again under its own id (a record sent twice) as recorded, once', async () => {
      const event = statusChanged(ACCOUNT);
      expect(await record(ACCOUNT, event)).toEqual({ state: 'recorded', id: event.id, sequence: 1 });
      expect(await record(ACCOUNT, event, T0 + 1)).toEqual({ state: 'recorded', id: event.id, sequence: 1 });
      expect(await events().scan(ACCOUNT, { limit: 10 })).toHaveLength(1);
      expect(await events().backlog(EP1)).toMatchObject({ pending: 1 });
    });

    it('grows the sequence by one per event of the account; each account counts its own', async () => {
      const sequences: number[] = [];
      for (let i = 0; i < 3; i += 1) sequences.push((await record(ACCOUNT, statusChanged(ACCOUNT), T0 + i)).sequence);
      expect(sequences).toEqual([1, 2, 3]);
      expect((await record(OTHER_ACCOUNT, statusChanged(OTHER_ACCOUNT))).sequence).toBe(1);
      expect((await record(ACCOUNT, statusChanged(ACCOUNT), T0 + 9)).sequence).toBe(4);
    });

    it('scans newest first, below beforeSequence (not at it), at most limit', async () => {
      const recorded: NewEvent[] = [];
      for (let i = 0; i < 5; i += 1) {
        const event = statusChanged(ACCOUNT, { createdAt: T0 + i });
        recorded.push(event);
        await record(ACCOUNT, event, T0 + i);
      }
      const sequencesOf = async (options: { beforeSequence?: number; limit: number }) => (await events().scan(ACCOUNT, options)).map((event) => event.sequence);
      expect(await sequencesOf({ limit: 2 })).toEqual([5, 4]);
      expect(await sequencesOf({ beforeSequence: 4, limit: 2 })).toEqual([3, 2]);
      expect(await sequencesOf({ beforeSequence: 2, limit: 2 })).toEqual([1]);
      expect(await sequencesOf({ beforeSequence: 1, limit: 2 })).toEqual([]);
      expect(await sequencesOf({ limit: 10 })).toEqual([5, 4, 3, 2, 1]);
      expect(await sequencesOf({ limit: 0 })).toEqual([]);
      const [newest] = await events().scan(ACCOUNT, { limit: 1 });
      expect(newest).toEqual({ id: recorded[4]?.id, sequence: 5, json: jsonOf(recorded[4] as NewEvent, 5) });
      expect(await events().scan(OTHER_ACCOUNT, { limit: 10 })).toEqual([]);
    });

    it("does not find another account's event, nor an unknown one", async () => {
      const event = statusChanged(ACCOUNT);
      await record(ACCOUNT, event);
      expect(await events().get(OTHER_ACCOUNT, event.id)).toBeUndefined();
      expect(await events().get(ACCOUNT, eventId())).toBeUndefined();
      expect(await events().get(ACCOUNT, event.id)).toMatchObject({ id: event.id });
    });

    it('gives back every character of the JSON: member names inside strings, escapes, other scripts', async () => {
      const data = {
        card: { cardId: 'card_"quoted" \\ {braces}', status: 'frozen', metadata: { status: '"status":"active"', 'createdAt"': 'x', 'ünïcødé 名前': '🙂' } },
        previousStatus: 'active',
        status: 'frozen',
        reason: 'control \u0001\u001f\t\n characters, escaped by JSON.stringify',
        source: 'processor',
      };
      const event = statusChanged(ACCOUNT, { data });
      await record(ACCOUNT, event);
      const stored = await events().get(ACCOUNT, event.id);
      expect(stored?.json).toBe(jsonOf(event, 1));
      expect(JSON.parse(stored?.json ?? '').data).toEqual(data);
      expect((await events().scan(ACCOUNT, { limit: 1 }))[0]?.json).toBe(jsonOf(event, 1));
      const [claimed] = await claim('gw-a', T0);
      expect(claimed?.json).toBe(jsonOf(event, 1));
    });
  });

  describe('events: deliveries (D65)', () => {
    it('claims due deliveries earliest first for a lease: no other claimer sees them until it ends, then one takes them over', async () => {
      const first = statusChanged(ACCOUNT, { createdAt: T0 });
      const second = statusChanged(ACCOUNT, { createdAt: T0 + 1 });
      await record(ACCOUNT, second, T0 + 1);
      await record(ACCOUNT, first, T0 + 1);
      // due at their createdAt, not before
      expect(await claim('gw-a', T0 - 1)).toEqual([]);
      expect(await claim('gw-a', T0)).toEqual([{ eventId: first.id, json: jsonOf(first, 2), attempts: 0, owner: 'gw-a' }]);
      expect(await claim('gw-a', T0 + 1)).toEqual([{ eventId: second.id, json: jsonOf(second, 1), attempts: 0, owner: 'gw-a' }]);
      expect(await claim('gw-b', T0 + LEASE - 1)).toEqual([]);
      const takenOver = await claim('gw-b', T0 + LEASE);
      // the attempt lost with the first claimer counts
      expect(takenOver).toEqual([{ eventId: first.id, json: jsonOf(first, 2), attempts: 1, owner: 'gw-b' }]);
      expect(await claim('gw-b', T0 + 1 + LEASE)).toEqual([{ eventId: second.id, json: jsonOf(second, 1), attempts: 1, owner: 'gw-b' }]);
    });

    it('claims at most limit, the earliest', async () => {
      const recorded: NewEvent[] = [];
      for (let i = 0; i < 3; i += 1) {
        recorded.push(statusChanged(ACCOUNT, { createdAt: T0 + i }));
        await record(ACCOUNT, recorded[i] as NewEvent, T0 + i);
      }
      expect((await claim('gw-a', T0 + 10, 2)).map((delivery) => delivery.eventId)).toEqual([recorded[0]?.id, recorded[1]?.id]);
      expect((await claim('gw-a', T0 + 10, 2)).map((delivery) => delivery.eventId)).toEqual([recorded[2]?.id]);
      expect(await claim('gw-a', T0 + 10, 2)).toEqual([]);
    });

    it('settles only for the owner holding the claim: a claimer whose lease was taken over changes nothing', async () => {
      const event = statusChanged(ACCOUNT);
      await record(ACCOUNT, event);
      await claim('gw-a', T0);
      await claim('gw-b', T0 + LEASE);
      expect(await events().settle(EP1, event.id, 'gw-a', { kind: 'delivered' }, settleTimes(T0 + LEASE + 1))).toBe(false);
      expect(await events().delivery(EP1, event.id)).toEqual({ eventId: event.id, state: 'pending', attempts: 2, at: T0 + 2 * LEASE });
      expect(await events().settle(EP1, event.id, 'gw-b', { kind: 'delivered' }, settleTimes(T0 + LEASE + 2))).toBe(true);
      expect(await events().delivery(EP1, event.id)).toBeUndefined();
      expect(await events().backlog(EP1)).toEqual({ pending: 0, failed: 0, oldestDueAt: undefined });
      // settled already, and never claimed: nothing to settle
      expect(await events().settle(EP1, event.id, 'gw-b', { kind: 'delivered' }, settleTimes(T0 + LEASE + 3))).toBe(false);
      const unclaimed = statusChanged(ACCOUNT);
      await record(ACCOUNT, unclaimed);
      expect(await events().settle(EP1, unclaimed.id, 'gw-a', { kind: 'delivered' }, settleTimes(T0 + 1))).toBe(false);
    });

    it('refuses an owner token that the stored claim could not hold, and a lease of no time', async () => {
      await expect(claim('', T0)).rejects.toThrow(TypeError);
      await expect(claim('gw|a', T0)).rejects.toThrow(TypeError);
      await expect(events().claimDue(EP1, { now: T0, leaseMs: 0, limit: 1, owner: 'gw-a' })).rejects.toThrow(TypeError);
      await expect(events().settle(EP1, 'evt_x', 'gw|a', { kind: 'delivered' }, settleTimes(T0))).rejects.toThrow(TypeError);
    });

    it('makes a retried delivery due at its dueAt, not before, with its attempts and last error', async () => {
      const event = statusChanged(ACCOUNT);
      await record(ACCOUNT, event);
      await claim('gw-a', T0);
      expect(await events().settle(EP1, event.id, 'gw-a', { kind: 'retry', dueAt: T0 + 5_000, error: 'status 500' }, settleTimes(T0 + 100))).toBe(true);
      expect(await events().delivery(EP1, event.id)).toEqual({ eventId: event.id, state: 'pending', attempts: 1, at: T0 + 5_000, lastError: 'status 500' });
      expect(await events().backlog(EP1)).toEqual({ pending: 1, failed: 0, oldestDueAt: T0 + 5_000 });
      expect(await claim('gw-b', T0 + 4_999)).toEqual([]);
      expect(await claim('gw-b', T0 + 5_000)).toMatchObject([{ eventId: event.id, attempts: 1, owner: 'gw-b' }]);
      // the owner of the first claim no longer settles it
      expect(await events().settle(EP1, event.id, 'gw-a', { kind: 'delivered' }, settleTimes(T0 + 5_001))).toBe(false);
    });

    it('keeps a failed delivery, listed with its error, until keepUntil; then drops it', async () => {
      const event = statusChanged(ACCOUNT);
      await record(ACCOUNT, event);
      await claim('gw-a', T0);
      const failedAt = T0 + 200;
      const keepUntil = failedAt + DAY;
      expect(await events().settle(EP1, event.id, 'gw-a', { kind: 'failed', error: 'timeout' }, { now: failedAt, keepUntil })).toBe(true);
      const failed = { eventId: event.id, state: 'failed', attempts: 1, at: failedAt, lastError: 'timeout' };
      expect(await events().deliveries(EP1, { state: 'failed', limit: 10 })).toEqual([failed]);
      expect(await events().deliveries(EP1, { state: 'pending', limit: 10 })).toEqual([]);
      expect(await events().delivery(EP1, event.id)).toEqual(failed);
      expect(await events().backlog(EP1)).toEqual({ pending: 0, failed: 1, oldestDueAt: undefined });
      // a failed delivery is never claimed
      expect(await claim('gw-b', keepUntil - 1)).toEqual([]);
      expect(await events().deliveries(EP1, { state: 'failed', limit: 10 })).toEqual([failed]);
      expect(await claim('gw-b', keepUntil)).toEqual([]);
      expect(await events().deliveries(EP1, { state: 'failed', limit: 10 })).toEqual([]);
      expect(await events().delivery(EP1, event.id)).toBeUndefined();
      expect(await events().backlog(EP1)).toEqual({ pending: 0, failed: 0, oldestDueAt: undefined });
    });

    it('lists deliveries oldest first, at most limit', async () => {
      const recorded: NewEvent[] = [];
      for (let i = 0; i < 3; i += 1) {
        recorded.push(statusChanged(ACCOUNT, { createdAt: T0 + 10 - i }));
        await record(ACCOUNT, recorded[i] as NewEvent, T0 + 10);
      }
      expect(await events().deliveries(EP1, { state: 'pending', limit: 2 })).toEqual([
        { eventId: recorded[2]?.id, state: 'pending', attempts: 0, at: T0 + 8 },
        { eventId: recorded[1]?.id, state: 'pending', attempts: 0, at: T0 + 9 },
      ]);
      expect(await events().deliveries(EP1, { state: 'pending', limit: 0 })).toEqual([]);
    });

    it('redelivers one failed delivery: due now, attempts reset; an unknown one is not found', async () => {
      const event = statusChanged(ACCOUNT);
      await record(ACCOUNT, event);
      await claim('gw-a', T0);
      await events().settle(EP1, event.id, 'gw-a', { kind: 'failed', error: 'status 503' }, settleTimes(T0 + 1));
      expect(await events().redeliver(EP1, [eventId()], T0 + 100)).toBe(0);
      expect(await events().redeliver(EP1, [event.id], T0 + 100)).toBe(1);
      expect(await events().delivery(EP1, event.id)).toEqual({ eventId: event.id, state: 'pending', attempts: 0, at: T0 + 100, lastError: 'status 503' });
      expect(await events().backlog(EP1)).toEqual({ pending: 1, failed: 0, oldestDueAt: T0 + 100 });
      expect(await claim('gw-b', T0 + 99)).toEqual([]);
      expect(await claim('gw-b', T0 + 100)).toMatchObject([{ eventId: event.id, attempts: 0 }]);
    });

    it('redelivers every failed delivery at once, and a pending one by its id', async () => {
      const recorded: NewEvent[] = [];
      for (let i = 0; i < 4; i += 1) {
        recorded.push(statusChanged(ACCOUNT, { createdAt: T0 + i }));
        await record(ACCOUNT, recorded[i] as NewEvent, T0 + i);
      }
      await claim('gw-a', T0 + 10);
      for (const event of recorded.slice(0, 3)) await events().settle(EP1, event.id, 'gw-a', { kind: 'failed', error: 'status 404' }, settleTimes(T0 + 20));
      await events().settle(EP1, recorded[3]?.id ?? '', 'gw-a', { kind: 'retry', dueAt: T0 + 60_000, error: 'status 500' }, settleTimes(T0 + 20));
      expect(await events().backlog(EP1)).toEqual({ pending: 1, failed: 3, oldestDueAt: T0 + 60_000 });
      expect(await events().redeliver(EP1, 'all-failed', T0 + 30)).toBe(3);
      expect(await events().backlog(EP1)).toEqual({ pending: 4, failed: 0, oldestDueAt: T0 + 30 });
      expect(await events().redeliver(EP1, 'all-failed', T0 + 31)).toBe(0);
      expect(await events().redeliver(EP1, [recorded[3]?.id ?? ''], T0 + 40)).toBe(1);
      expect(await events().delivery(EP1, recorded[3]?.id ?? '')).toMatchObject({ state: 'pending', attempts: 0, at: T0 + 40 });
    });

    it('counts the backlog: pending (claimed ones included) and failed, the earliest due', async () => {
      expect(await events().backlog(EP1)).toEqual({ pending: 0, failed: 0, oldestDueAt: undefined });
      await record(ACCOUNT, statusChanged(ACCOUNT, { createdAt: T0 + 7 }), T0 + 7);
      await record(ACCOUNT, statusChanged(ACCOUNT, { createdAt: T0 + 3 }), T0 + 7);
      expect(await events().backlog(EP1)).toEqual({ pending: 2, failed: 0, oldestDueAt: T0 + 3 });
      await claim('gw-a', T0 + 3, 1);
      expect(await events().backlog(EP1)).toEqual({ pending: 2, failed: 0, oldestDueAt: T0 + 7 });
      expect(await events().backlog(EP2)).toEqual({ pending: 0, failed: 0, oldestDueAt: undefined });
    });

    it('keeps the deliveries of two endpoints independent', async () => {
      const event = statusChanged(ACCOUNT, { endpoints: [EP1.endpointId, EP2.endpointId] });
      await record(ACCOUNT, event);
      expect(await claim('gw-a', T0, 10, EP1)).toMatchObject([{ eventId: event.id }]);
      expect(await claim('gw-a', T0, 10, EP2)).toMatchObject([{ eventId: event.id, attempts: 0 }]);
      expect(await events().settle(EP1, event.id, 'gw-a', { kind: 'delivered' }, settleTimes(T0 + 1))).toBe(true);
      expect(await events().settle(EP2, event.id, 'gw-a', { kind: 'failed', error: 'status 410' }, settleTimes(T0 + 1))).toBe(true);
      expect(await events().backlog(EP1)).toEqual({ pending: 0, failed: 0, oldestDueAt: undefined });
      expect(await events().backlog(EP2)).toEqual({ pending: 0, failed: 1, oldestDueAt: undefined });
      // an event without endpoints is recorded and read, never delivered
      const quiet = statusChanged(ACCOUNT, { endpoints: [] });
      expect(await record(ACCOUNT, quiet)).toMatchObject({ state: 'recorded', sequence: 2 });
      expect(await claim('gw-a', T0 + 2, 10, EP1)).toEqual([]);
      // another account's endpoint of the same id is another queue
      expect(await events().backlog({ issuingAccount: OTHER_ACCOUNT, endpointId: EP1.endpointId })).toEqual({ pending: 0, failed: 0, oldestDueAt: undefined });
    });
  });

  // Redis only: an event's key expires by its TTL (the memory store's own clock is its test: memory-store.test.ts).
  if (topology !== undefined && topology !== 'memory')
    describe('events: retention on Redis', () => {
      const inspector = (): StoreInspector => {
        const found = inspect();
        if (!found) throw new Error(`the ${topology} store gives no look inside Redis`);
        return found;
      };
      const keyOf = (account: string, rest: string) => `${inspector().prefix}{ev:${account}}${rest}`;

      it('expires an event with its retention (expiresAt - now + 60 s) and skips it in scan, get, claims and redelivery once gone', async () => {
        const now = Date.now();
        const gone = statusChanged(ACCOUNT, { dedupe: 'connector-event-gone' });
        const kept = statusChanged(ACCOUNT);
        await events().record(ACCOUNT, gone, { now, expiresAt: now + DAY });
        await events().record(ACCOUNT, kept, { now, expiresAt: now + WEEK });
        const ttl = await inspector().pttl(keyOf(ACCOUNT, `e:${gone.id}`));
        expect(ttl).toBeGreaterThan(DAY);
        expect(ttl).toBeLessThanOrEqual(DAY + 60_000);
        expect(await inspector().pttl(keyOf(ACCOUNT, 'x:connector-event-gone'))).toBeLessThanOrEqual(DAY + 60_000);
        expect(await inspector().pttl(keyOf(ACCOUNT, `q:${EP1.endpointId}`))).toBeGreaterThan(WEEK);
        // what its TTL does, a day later
        await inspector().remove(keyOf(ACCOUNT, `e:${gone.id}`));
        expect(await events().get(ACCOUNT, gone.id)).toBeUndefined();
        expect((await events().scan(ACCOUNT, { limit: 1 })).map((event) => event.id)).toEqual([kept.id]);
        expect((await events().scan(ACCOUNT, { beforeSequence: 2, limit: 1 })).map((event) => event.id)).toEqual([]);
        // its dedupe no longer answers it: a connector's event sent again is recorded anew
        expect(await record(ACCOUNT, statusChanged(ACCOUNT, { dedupe: 'connector-event-gone' }))).toMatchObject({ state: 'recorded', sequence: 3 });
        expect(await events().redeliver(EP1, [gone.id], T0)).toBe(0);
        expect((await claim('gw-a', T0)).map((delivery) => delivery.eventId)).not.toContain(gone.id);
        expect(await events().delivery(EP1, gone.id)).toBeUndefined();
        // the log is trimmed lazily: the next record drops the entry of the oldest event gone
        await record(ACCOUNT, statusChanged(ACCOUNT));
        expect(await inspector().zrange(keyOf(ACCOUNT, 'log'))).not.toContain(gone.id);
      });

      it('keeps a typical event within 1 KiB of Redis memory and a pending delivery within 200 B (MEMORY USAGE, issue 35)', async () => {
        // A key as long as a production one: `cig:production:{ev:acct-travel-eu}e:evt_...`.
        const account = 'a'.repeat(Math.max(1, PRODUCTION_PREFIX_LENGTH + 'acct-travel-eu'.length - inspector().prefix.length));
        const endpoint = { issuingAccount: account, endpointId: 'ops-webhook' };
        const count = 200; // past 128 entries a sorted set is a skip list: the costlier form
        const now = Date.now();
        const recorded: { event: NewEvent; dedupe: string }[] = [];
        for (let i = 0; i < count; i += 1) {
          const dedupe = randomBytes(32).toString('base64url');
          const event = typicalStatusChange(account, eventId(), now + i, endpoint.endpointId, dedupe);
          recorded.push({ event, dedupe });
          await events().record(account, event, { now: now + i, expiresAt: now + WEEK });
        }
        const sample = recorded[count - 1] as { event: NewEvent; dedupe: string };
        const json = jsonOf(sample.event, count);
        expect(json.length).toBeGreaterThanOrEqual(650);
        expect(json.length).toBeLessThanOrEqual(760);
        const usage = (rest: string) => inspector().memoryUsage(keyOf(account, rest), { allSamples: true });
        const eventKey = await usage(`e:${sample.event.id}`);
        const dedupeKey = await usage(`x:${sample.dedupe}`);
        const logShare = (await usage('log')) / count;
        const perEvent = eventKey + logShare + dedupeKey;
        const perPending = (await usage(`q:${endpoint.endpointId}`)) / count;
        // what a delivery costs once attempted: its state record (attempts, last error)
        const claimed = await events().claimDue(endpoint, { now: now + count, leaseMs: LEASE, limit: count, owner: 'gw-7f3a9c1e-4b2d' });
        for (const delivery of claimed)
          await events().settle(
            endpoint,
            delivery.eventId,
            delivery.owner,
            { kind: 'retry', dueAt: now + 5_000, error: 'status 503' },
            settleTimes(now + count),
          );
        const perRetryState = (await usage(`s:${endpoint.endpointId}`)) / count;
        console.info(
          `[${topology}] event of ${json.length} B of JSON: ${Math.round(perEvent)} B per event (event key ${eventKey}, log share ${Math.round(logShare)}, dedupe key ${dedupeKey}); ` +
            `${Math.round(perPending)} B per pending delivery; ${Math.round(perRetryState)} B more per delivery once retried (its state)`,
        );
        expect(perEvent).toBeLessThanOrEqual(1024);
        expect(perPending).toBeLessThanOrEqual(200);
        // the JSON as it is, under a key as long: it would not fit (the member names are written short, event-codec.ts)
        const plainKey = keyOf(account, `e:${eventId()}`);
        await inspector().setRaw(plainKey, json, WEEK);
        const plainPerEvent = (await inspector().memoryUsage(plainKey)) + logShare + dedupeKey;
        expect(plainPerEvent).toBeGreaterThan(1024);
      });

      it('keeps every key of an account in its hash tag, with a TTL except the sequence', async () => {
        const event = statusChanged(ACCOUNT, { dedupe: 'connector-event-1', endpoints: [EP1.endpointId, EP2.endpointId] });
        await record(ACCOUNT, event);
        await claim('gw-a', T0);
        await events().settle(EP1, event.id, 'gw-a', { kind: 'failed', error: 'timeout' }, settleTimes(T0 + 1));
        const keys = await inspector().keysOf(`ev:${ACCOUNT}`);
        const rest = keys.map((key) => key.slice(keyOf(ACCOUNT, '').length)).sort();
        expect(rest).toEqual([`e:${event.id}`, `f:${EP1.endpointId}`, 'log', `q:${EP2.endpointId}`, `s:${EP1.endpointId}`, 'seq', 'x:connector-event-1']);
        for (const key of keys) {
          const ttl = await inspector().pttl(key);
          if (key.endsWith('}seq')) expect(ttl).toBe(-1);
          else expect({ key, expiring: ttl > 0 }).toEqual({ key, expiring: true });
        }
      });
    });
}
