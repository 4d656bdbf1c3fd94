import { RateLimiterMemory } from 'rate-limiter-flexible';
import { limiterResult } from '../limiter-result.js';
import {
  noFailedOperations,
  StoreUnavailableError,
  type ClaimAttempt,
  type GatewayStore,
  type IdempotencyStore,
  type Limiter,
  type LimiterOptions,
  type LockoutStore,
  type NotBeforeStore,
  type Reservation,
  type RevokeOutcome,
  type RotateResult,
  type SessionBinding,
  type SessionStore,
  type StoreDescription,
  type StoredCard,
  type StoreEvent,
} from '../store-types.js';

/**
 * Single-process store: the embedded local default and the fast half of the contract tests.
 * The decisions mirror the Redis Lua scripts line for line; one contract suite checks both.
 * Expiry instants live in the records and are compared with the caller's `now`; a periodic
 * sweep only frees memory.
 */
interface FamilyRecord {
  credentialId: string;
  revoked: boolean;
  /** Latest expiry of any token of the family; the family is garbage after it. */
  expiresAt: number;
  /** D41: the credential's secret fingerprint at login, the login instant and the session's absolute end. */
  fingerprint: string;
  loginAt: number;
  endsAt: number;
}

/** D41: a family made under another secret, or logged in before the credential's not-before instant, has ended. */
const hasEnded = (family: FamilyRecord, binding: SessionBinding): boolean => family.fingerprint !== binding.fingerprint || family.loginAt < binding.notBefore;
interface TokenRecord {
  expiresAt: number;
  rotatedAt: number | undefined;
}
type IdempotencyRecord =
  | { state: 'pending'; owner: string; leaseExpiresAt: number; first: ClaimAttempt; hadPrevious: boolean }
  | { state: 'released'; first: ClaimAttempt; expiresAt: number }
  | { state: 'completed'; record: StoredCard; expiresAt: number };

/** How long the memory store keeps an expired session record (the Redis store's TTLs add the same). */
const EXPIRED_KEPT_MS = 60_000;

class MemorySessions implements SessionStore {
  readonly families = new Map<string, FamilyRecord>();
  readonly tokens = new Map<string, TokenRecord>();

  async createFamily({ token, credentialId, fingerprint, expiresAt, endsAt, now }: Parameters<SessionStore['createFamily']>[0]): Promise<void> {
    this.families.set(token.familyId, { credentialId, revoked: false, expiresAt, fingerprint, loginAt: now, endsAt });
    this.tokens.set(`${token.familyId}:${token.tokenHash}`, { expiresAt, rotatedAt: undefined });
  }

  async rotate(input: Parameters<SessionStore['rotate']>[0]): Promise<RotateResult> {
    const { token, credentialId, newTokenHash, newExpiresAt, now, graceMs } = input;
    const family = this.families.get(token.familyId);
    const record = this.tokens.get(`${token.familyId}:${token.tokenHash}`);
    if (!family || !record) return { outcome: 'unknown' };
    if (family.credentialId !== credentialId) return { outcome: 'mismatch' };
    if (family.revoked) return { outcome: 'revoked' };
    if (hasEnded(family, input)) {
      family.revoked = true;
      return { outcome: 'ended' };
    }
    if (record.expiresAt <= now || family.endsAt <= now) return { outcome: 'expired' };
    if (record.rotatedAt !== undefined && now >= record.rotatedAt + graceMs) {
      family.revoked = true;
      return { outcome: 'reuse' };
    }
    if (record.rotatedAt === undefined) record.rotatedAt = now;
    const expiresAt = Math.min(newExpiresAt, family.endsAt);
    this.tokens.set(`${token.familyId}:${newTokenHash}`, { expiresAt, rotatedAt: undefined });
    family.expiresAt = Math.max(family.expiresAt, expiresAt);
    return { outcome: 'rotated', expiresAt };
  }

  async revokeFamily(input: Parameters<SessionStore['revokeFamily']>[0]): Promise<RevokeOutcome> {
    const { token, credentialId, now, graceMs } = input;
    const family = this.families.get(token.familyId);
    const record = this.tokens.get(`${token.familyId}:${token.tokenHash}`);
    if (!family || !record) return 'unknown';
    if (family.credentialId !== credentialId) return 'mismatch';
    if (family.revoked) return 'already-revoked';
    if (hasEnded(family, input)) {
      family.revoked = true;
      return 'ended';
    }
    if (record.expiresAt <= now) return 'expired';
    family.revoked = true;
    return record.rotatedAt !== undefined && now >= record.rotatedAt + graceMs ? 'rotated-out' : 'revoked';
  }

  sweep(now: number): void {
    // Kept a minute past expiry, as the Redis store's TTLs keep them: an expired token is
    // answered refresh_token_expired, on both stores, rather than invalid once swept.
    const cutoff = now - EXPIRED_KEPT_MS;
    for (const [id, family] of this.families) if (family.expiresAt <= cutoff) this.families.delete(id);
    for (const [key, token] of this.tokens) if (token.expiresAt <= cutoff) this.tokens.delete(key);
  }
}

class MemoryIdempotency implements IdempotencyStore {
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

class MemoryLockouts implements LockoutStore {
  readonly records = new Map<string, { failures: number; lastFailureAt: number; lockedUntil: number; forgetAt: number }>();

  async recordFailure(key: string, { now, maxFailures, lockoutMs }: { now: number; maxFailures: number; lockoutMs: number }): Promise<number> {
    const record = this.records.get(key) ?? { failures: 0, lastFailureAt: now, lockedUntil: 0, forgetAt: 0 };
    if (record.lockedUntil > now) return 0;
    // As the Redis record's TTL does: a count left alone for a lock-out period starts over.
    if (now - record.lastFailureAt >= lockoutMs) record.failures = 0;
    record.failures += 1;
    record.lastFailureAt = now;
    if (record.failures >= maxFailures) {
      record.failures = 0;
      record.lockedUntil = now + lockoutMs;
    }
    // Failures are counted for any submitted username, known or not: a count nobody adds to for
    // a lock-out period means nothing any more, and goes (D27: bounded by live data).
    record.forgetAt = Math.max(record.lockedUntil, now + lockoutMs);
    this.records.set(key, record);
    return record.lockedUntil > now ? record.lockedUntil : 0;
  }

  async lockedUntil(key: string, now: number): Promise<number> {
    const until = this.records.get(key)?.lockedUntil ?? 0;
    return until > now ? until : 0;
  }

  async reset(key: string): Promise<void> {
    this.records.delete(key);
  }

  sweep(now: number): void {
    for (const [key, record] of this.records) if (record.forgetAt <= now) this.records.delete(key);
  }
}

class MemoryNotBefore implements NotBeforeStore {
  readonly instants = new Map<string, number>();

  async raise(credentialId: string, at: number): Promise<number> {
    const stored = Math.max(at, this.instants.get(credentialId) ?? 0);
    this.instants.set(credentialId, stored);
    return stored;
  }

  async read(credentialIds: readonly string[]): Promise<Map<string, number>> {
    const found = new Map<string, number>();
    for (const id of credentialIds) {
      const at = this.instants.get(id);
      if (at !== undefined) found.set(id, at);
    }
    return found;
  }
}

export class MemoryStore implements GatewayStore {
  readonly sessions = new MemorySessions();
  readonly idempotency = new MemoryIdempotency();
  readonly lockouts = new MemoryLockouts();
  readonly notBefore = new MemoryNotBefore();
  readonly #sweeper: NodeJS.Timeout;

  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
    this.#sweeper = setInterval(() => this.sweep(), 60_000);
    this.#sweeper.unref();
  }

  /** Drops every record that is dead at `now` (the injected clock's); runs every minute by itself. */
  sweep(now = this.#now()): void {
    this.sessions.sweep(now);
    this.idempotency.sweep(now);
    this.lockouts.sweep(now);
  }

  /** How many records each part holds: what a sweep keeps bounded by live data. */
  size(): { families: number; tokens: number; idempotency: number; lockouts: number } {
    return {
      families: this.sessions.families.size,
      tokens: this.sessions.tokens.size,
      idempotency: this.idempotency.records.size,
      lockouts: this.lockouts.records.size,
    };
  }

  createRateLimiter({ keyPrefix, points, durationSeconds }: LimiterOptions): Limiter {
    const limiter = new RateLimiterMemory({ keyPrefix, points, duration: durationSeconds });
    // Any failure of the counter is the store's (D23: never a 429).
    return {
      consume: (key) =>
        limiterResult(limiter.consume(key)).catch((error: unknown) => {
          throw new StoreUnavailableError(error);
        }),
    };
  }

  async ping(): Promise<void> {}

  /** In the process itself: always up, no master, nothing to acknowledge or repair. */
  describe(): StoreDescription {
    return {
      topology: 'memory',
      up: true,
      masters: [],
      masterChanges: 0,
      unacknowledgedRecords: 0,
      pendingRepairs: 0,
      failure: undefined,
      evictingPolicy: undefined,
      memoryUsedRatio: undefined,
      failedOperations: noFailedOperations(),
    };
  }

  /** Nothing ever changes state: no events. */
  subscribe(_listener: (event: StoreEvent) => void): () => void {
    return () => undefined;
  }

  async close(): Promise<void> {
    clearInterval(this.#sweeper);
  }
}
