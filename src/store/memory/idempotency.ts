import type { ClaimAttempt, IdempotencyStore, Reservation, StoredCard } from '../store-types.js';

type IdempotencyRecord =
  | { state: 'pending'; owner: string; leaseExpiresAt: number; first: ClaimAttempt; hadPrevious: boolean }
  | { state: 'released'; first: ClaimAttempt; expiresAt: number }
  | { state: 'completed'; record: StoredCard; expiresAt: number };

/** Card-creation idempotency in the process (D16, D17, D31): the decisions of the Redis scripts. */
export class MemoryIdempotency implements IdempotencyStore {
  readonly records = new Map<string, IdempotencyRecord>();

  async reserve(key: string, { owner, now, leaseMs, attempt }: { owner: string; now: number; leaseMs: number; attempt: ClaimAttempt }): Promise<Reservation> {
    // Synchronous from read to write: an await here would let parallel reserves all win.
    const existing = this.records.get(key);
    if (existing?.state === 'completed' && existing.expiresAt > now) return { state: 'completed', record: existing.record };
    if (existing?.state === 'pending' && existing.leaseExpiresAt > now) {
      // Our own claim seen again: still ours.
      if (existing.owner === owner) return { state: 'reserved', previous: existing.hadPrevious ? existing.first : undefined };
      return { state: 'pending', leaseExpiresAt: existing.leaseExpiresAt };
    }
    // A released attempt, or a lease whose gateway died: that attempt may have made the card.
    const previous = (existing?.state === 'released' && existing.expiresAt > now) || existing?.state === 'pending' ? existing.first : undefined;
    this.records.set(key, { state: 'pending', owner, leaseExpiresAt: now + leaseMs, first: previous ?? attempt, hadPrevious: previous !== undefined });
    return { state: 'reserved', previous };
  }

  async peek(key: string, now: number): Promise<Reservation> {
    const record = this.records.get(key);
    if (record?.state === 'completed' && record.expiresAt > now) return { state: 'completed', record: record.record };
    if (record?.state === 'pending' && record.leaseExpiresAt > now) return { state: 'pending', leaseExpiresAt: record.leaseExpiresAt };
    return { state: 'reserved', previous: record?.state === 'released' && record.expiresAt > now ? record.first : undefined };
  }

  async complete(key: string, { owner, record, expiresAt }: { owner: string; record: StoredCard; expiresAt: number }): Promise<void> {
    const current = this.records.get(key);
    // A claim taken over after our lease ran out belongs to someone else now; the card we got
    // is still the connector's answer for this Idempotency-Key, so keeping ours is correct.
    if (current?.state === 'completed') return;
    if (current?.state === 'pending' && current.owner !== owner) return;
    this.records.set(key, { state: 'completed', record, expiresAt });
  }

  async release(key: string, { owner, keepUntil }: { owner: string; now: number; keepUntil: number }): Promise<void> {
    const current = this.records.get(key);
    if (current?.state === 'pending' && current.owner === owner) this.records.set(key, { state: 'released', first: current.first, expiresAt: keepUntil });
  }

  sweep(now: number): void {
    for (const [key, record] of this.records) {
      // A lapsed claim is kept a minute past its lease, like the Redis record's TTL: its first attempt still matters (D31).
      const end = record.state === 'pending' ? record.leaseExpiresAt + 60_000 : record.expiresAt;
      if (end <= now) this.records.delete(key);
    }
  }
}
