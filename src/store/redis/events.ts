import { withDeadline } from '../../foundation/deadline.js';
import type { ClaimedDelivery, DeliveryRecord, DeliveryState, EventStore, NewEvent, RecordedEvent, StoredEvent } from '../event-store.js';
import { decodeEventText, encodeEventText } from './event-codec.js';
import { ttlFor, type RecordContext } from './record-context.js';
import { REPAIR_HORIZON_MS, type RepairQueue } from './repair-queue.js';
import type { ReplicaAcks } from './replica-acks.js';
import type { ScriptedPipeline } from './scripts.js';
import { storeLate } from './server-state.js';

/** `attempts|owner|failedAt|lastError` (event-scripts.ts): the owner is the one field that must hold no `|`. */
function checkOwner(owner: string): void {
  if (owner === '' || owner.includes('|')) throw new TypeError('a delivery owner is a non-empty token without "|"');
}

function deliveryRecord(eventId: string, state: DeliveryState, score: string, stateValue: string): DeliveryRecord {
  // attempts|owner|failedAt|lastError; empty for a delivery never attempted
  const [attempts = '0', , failedAt = '', ...error] = stateValue === '' ? [] : stateValue.split('|');
  const lastError = error.join('|');
  return {
    eventId,
    state,
    attempts: Number(attempts),
    at: state === 'failed' && failedAt !== '' ? Number(failedAt) : Number(score),
    ...(lastError === '' ? {} : { lastError }),
  };
}

/**
 * The event log and the delivery queues on Redis (D66): one script per operation
 * (event-scripts.ts), every key of an issuing account in its slot. A record whose reply never
 * came is sent again once the store answers (the script finds its own event: nothing twice), and
 * so is a settlement (owner-guarded); with `acks.wanted` the record waits for the replicas (D35).
 */
export function redisEvents(context: RecordContext, repairs: RepairQueue, acks: ReplicaAcks): EventStore {
  const { redis, prefix, commandTimeoutMs, guarded } = context;
  const logKey = (issuingAccount: string) => `${prefix}{ev:${issuingAccount}}log`;

  /** A write the gateway must not lose with a reply: on failure it is repaired (sent again) for as long as it matters. */
  async function writeOrRepair<T>(id: string, write: () => Promise<T>, resend: () => Promise<unknown>, validMs: number): Promise<T> {
    try {
      const result = await write();
      context.succeeded(true);
      return result;
    } catch (error) {
      repairs.add(id, { settle: resend, notBefore: Date.now(), giveUpAt: Date.now() + Math.min(validMs, REPAIR_HORIZON_MS) });
      throw context.failed(error);
    }
  }

  /** D35, as the card record does (idempotency.ts): WAIT in the record's pipeline, so it covers this write and goes to its shard. */
  async function recordAcknowledged(key: string, args: string[]): Promise<unknown> {
    const pipeline = (redis.pipeline() as ScriptedPipeline).recordEvent(key, ...args);
    pipeline.call('WAIT', String(acks.wanted), String(commandTimeoutMs));
    const results = await withDeadline(pipeline.exec(), commandTimeoutMs * 2, storeLate);
    const [written, waited] = results ?? [];
    if (!written || written[0]) throw written?.[0] ?? new Error('pipeline discarded');
    acks.note(waited && !waited[0] ? Number(waited[1]) : 0);
    return written[1];
  }

  return {
    record: async (issuingAccount, event: NewEvent, { now, expiresAt }) => {
      const key = logKey(issuingAccount);
      const args = [
        event.id,
        encodeEventText(event.head),
        encodeEventText(event.tail),
        event.dedupe ?? '',
        String(ttlFor(expiresAt, now)),
        String(event.createdAt),
        ...event.endpoints,
      ];
      const send = () => redis.recordEvent(key, ...args);
      const write = () => (acks.wanted === 0 ? withDeadline(send(), commandTimeoutMs, storeLate) : recordAcknowledged(key, args));
      const [state, id, sequence] = (await writeOrRepair(`${key}\u0000${event.id}`, write, send, expiresAt - now)) as [RecordedEvent['state'], string, string];
      return { state, id, sequence: Number(sequence) };
    },
    scan: (issuingAccount, { beforeSequence, limit }) =>
      guarded(false, async () => {
        if (limit <= 0) return [];
        const found = (await redis.scanEvents(logKey(issuingAccount), beforeSequence === undefined ? '+inf' : `(${beforeSequence}`, String(limit))) as string[];
        const events: StoredEvent[] = [];
        for (let index = 0; index + 2 < found.length; index += 3)
          events.push({ id: found[index] as string, sequence: Number(found[index + 1]), json: decodeEventText(found[index + 2] as string) });
        return events;
      }),
    get: (issuingAccount, eventId) =>
      guarded(false, async () => {
        const [sequence, stored] = (await redis.getEvent(logKey(issuingAccount), eventId)) as string[];
        return sequence === undefined || stored === undefined ? undefined : { id: eventId, sequence: Number(sequence), json: decodeEventText(stored) };
      }),
    claimDue: async ({ issuingAccount, endpointId }, { now, leaseMs, limit, owner }) => {
      checkOwner(owner);
      if (!(leaseMs > 0)) throw new TypeError('a delivery lease lasts at least 1 ms');
      return guarded(true, async () => {
        if (limit <= 0) return [];
        const found = (await redis.claimDeliveries(logKey(issuingAccount), endpointId, String(now), String(leaseMs), String(limit), owner)) as string[];
        const claimed: ClaimedDelivery[] = [];
        for (let index = 0; index + 2 < found.length; index += 3)
          claimed.push({ eventId: found[index] as string, attempts: Number(found[index + 1]), json: decodeEventText(found[index + 2] as string), owner });
        return claimed;
      });
    },
    settle: async ({ issuingAccount, endpointId }, eventId, owner, settlement, { now, keepUntil }) => {
      checkOwner(owner);
      const key = logKey(issuingAccount);
      const [at, error] =
        settlement.kind === 'delivered'
          ? ['', '']
          : settlement.kind === 'retry'
            ? [String(settlement.dueAt), settlement.error]
            : [String(keepUntil), settlement.error];
      const args = [endpointId, eventId, owner, settlement.kind, String(now), at, error, String(ttlFor(keepUntil, now))];
      const send = () => redis.settleDelivery(key, ...args);
      // A settlement lost with its reply would leave the delivery claimed until its lease ends,
      // and then sent again: sent once more itself, it stays owner-guarded.
      const settled = await writeOrRepair(
        `${key}\u0000${endpointId}\u0000${eventId}`,
        () => withDeadline(send(), commandTimeoutMs, storeLate),
        send,
        keepUntil - now,
      );
      return Number(settled) === 1;
    },
    deliveries: ({ issuingAccount, endpointId }, { state, limit }) =>
      guarded(false, async () => {
        if (limit <= 0) return [];
        const found = (await redis.listDeliveries(logKey(issuingAccount), endpointId, state, String(limit))) as string[];
        const records: DeliveryRecord[] = [];
        for (let index = 0; index + 2 < found.length; index += 3)
          records.push(deliveryRecord(found[index] as string, state, found[index + 1] as string, found[index + 2] as string));
        return records;
      }),
    delivery: ({ issuingAccount, endpointId }, eventId) =>
      guarded(false, async () => {
        const [state, score, stateValue] = (await redis.readDelivery(logKey(issuingAccount), endpointId, eventId)) as [DeliveryState?, string?, string?];
        return state === undefined ? undefined : deliveryRecord(eventId, state, score ?? '0', stateValue ?? '');
      }),
    redeliver: ({ issuingAccount, endpointId }, eventIds, now) =>
      guarded(true, async () => {
        const which = eventIds === 'all-failed' ? ['all-failed'] : ['ids', ...eventIds];
        return Number(await redis.redeliver(logKey(issuingAccount), endpointId, String(now), ...which));
      }),
    backlog: ({ issuingAccount, endpointId }) =>
      guarded(false, async () => {
        const [pending, failed, oldest] = (await redis.deliveryBacklog(logKey(issuingAccount), endpointId)) as [number, number, string];
        return { pending: Number(pending), failed: Number(failed), oldestDueAt: oldest === '' ? undefined : Number(oldest) };
      }),
  };
}
