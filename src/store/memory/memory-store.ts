import { RateLimiterMemory, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type {
  GatewayStore,
  IdempotencyStore,
  LimiterOptions,
  LockoutStore,
  Reservation,
  RevokeOutcome,
  RotateOutcome,
  SessionStore,
  StoredCard,
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
}
interface TokenRecord {
  expiresAt: number;
  rotatedAt: number | undefined;
}
type IdempotencyRecord =
  | { state: 'pending'; owner: string; leaseExpiresAt: number }
  | { state: 'completed'; record: StoredCard; expiresAt: number };

class MemorySessions implements SessionStore {
  readonly families = new Map<string, FamilyRecord>();
  readonly tokens = new Map<string, TokenRecord>();

  async createFamily({ token, credentialId, expiresAt }: Parameters<SessionStore['createFamily']>[0]): Promise<void> {
    this.families.set(token.familyId, { credentialId, revoked: false, expiresAt });
    this.tokens.set(`${token.familyId}:${token.tokenHash}`, { expiresAt, rotatedAt: undefined });
  }

  async rotate(input: Parameters<SessionStore['rotate']>[0]): Promise<RotateOutcome> {
    const { token, credentialId, newTokenHash, newExpiresAt, now, graceMs } = input;
    const family = this.families.get(token.familyId);
    const record = this.tokens.get(`${token.familyId}:${token.tokenHash}`);
    if (!family || !record) return 'unknown';
    if (family.credentialId !== credentialId) return 'mismatch';
    if (family.revoked) return 'revoked';
    if (record.expiresAt <= now) return 'expired';
    if (record.rotatedAt !== undefined && now >= record.rotatedAt + graceMs) {
      family.revoked = true;
      return 'reuse';
    }
    if (record.rotatedAt === undefined) record.rotatedAt = now;
    this.tokens.set(`${token.familyId}:${newTokenHash}`, { expiresAt: newExpiresAt, rotatedAt: undefined });
    family.expiresAt = Math.max(family.expiresAt, newExpiresAt);
    return 'rotated';
  }

  async revokeFamily({ token, credentialId, now, graceMs }: Parameters<SessionStore['revokeFamily']>[0]): Promise<RevokeOutcome> {
    const family = this.families.get(token.familyId);
    const record = this.tokens.get(`${token.familyId}:${token.tokenHash}`);
    if (!family || !record) return 'unknown';
    if (family.credentialId !== credentialId) return 'mismatch';
    if (family.revoked) return 'already-revoked';
    if (record.expiresAt <= now) return 'expired';
    family.revoked = true;
    return record.rotatedAt !== undefined && now >= record.rotatedAt + graceMs ? 'rotated-out' : 'revoked';
  }

  sweep(now: number): void {
    for (const [id, family] of this.families) if (family.expiresAt <= now) this.families.delete(id);
    for (const [key, token] of this.tokens) if (token.expiresAt <= now) this.tokens.delete(key);
  }
}

class MemoryIdempotency implements IdempotencyStore {
  readonly records = new Map<string, IdempotencyRecord>();

  async reserve(key: string, { owner, now, leaseMs }: { owner: string; now: number; leaseMs: number }): Promise<Reservation> {
    // Synchronous from read to write: an await here would let parallel reserves all win.
    const existing = this.records.get(key);
    if (existing?.state === 'pending' && existing.owner === owner && existing.leaseExpiresAt > now) return { state: 'reserved' };
    const current = this.#peekNow(key, now);
    if (current.state !== 'reserved') return current;
    this.records.set(key, { state: 'pending', owner, leaseExpiresAt: now + leaseMs });
    return { state: 'reserved' };
  }

  async peek(key: string, now: number): Promise<Reservation> {
    return this.#peekNow(key, now);
  }

  #peekNow(key: string, now: number): Reservation {
    const record = this.records.get(key);
    if (record?.state === 'completed' && record.expiresAt > now) return { state: 'completed', record: record.record };
    if (record?.state === 'pending' && record.leaseExpiresAt > now) return { state: 'pending', leaseExpiresAt: record.leaseExpiresAt };
    return { state: 'reserved' };
  }

  async complete(key: string, { owner, record, expiresAt }: { owner: string; record: StoredCard; expiresAt: number }): Promise<void> {
    const current = this.records.get(key);
    // A claim taken over after our lease ran out belongs to someone else now; the card we got
    // is still the connector's answer for this Idempotency-Key, so keeping ours is correct.
    if (current?.state === 'completed') return;
    if (current?.state === 'pending' && current.owner !== owner) return;
    this.records.set(key, { state: 'completed', record, expiresAt });
  }

  async release(key: string, owner: string): Promise<void> {
    const current = this.records.get(key);
    if (current?.state === 'pending' && current.owner === owner) this.records.delete(key);
  }

  sweep(now: number): void {
    for (const [key, record] of this.records) {
      const end = record.state === 'completed' ? record.expiresAt : record.leaseExpiresAt;
      if (end <= now) this.records.delete(key);
    }
  }
}

class MemoryLockouts implements LockoutStore {
  readonly records = new Map<string, { failures: number; lastFailureAt: number; lockedUntil: number }>();

  async recordFailure(key: string, { now, maxFailures, lockoutMs }: { now: number; maxFailures: number; lockoutMs: number }): Promise<number> {
    const record = this.records.get(key) ?? { failures: 0, lastFailureAt: now, lockedUntil: 0 };
    if (record.lockedUntil > now) return 0;
    // As the Redis record's TTL does: a count left alone for a lock-out period starts over.
    if (now - record.lastFailureAt >= lockoutMs) record.failures = 0;
    record.failures += 1;
    record.lastFailureAt = now;
    if (record.failures >= maxFailures) {
      record.failures = 0;
      record.lockedUntil = now + lockoutMs;
    }
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

  /** Failures are counted for any submitted username, known or not: forget idle ones. */
  sweep(now: number, idleMs: number): void {
    for (const [key, record] of this.records) if (record.lockedUntil <= now && now - record.lastFailureAt >= idleMs) this.records.delete(key);
  }
}

export class MemoryStore implements GatewayStore {
  readonly sessions = new MemorySessions();
  readonly idempotency = new MemoryIdempotency();
  readonly lockouts = new MemoryLockouts();
  readonly #sweeper: NodeJS.Timeout;

  constructor(now: () => number = Date.now) {
    this.#sweeper = setInterval(() => {
      const at = now();
      this.sessions.sweep(at);
      this.idempotency.sweep(at);
      this.lockouts.sweep(at, 24 * 3600_000);
    }, 60_000);
    this.#sweeper.unref();
  }

  createRateLimiter({ keyPrefix, points, durationSeconds }: LimiterOptions): RateLimiterAbstract {
    return new RateLimiterMemory({ keyPrefix, points, duration: durationSeconds });
  }

  async ping(): Promise<void> {}

  async close(): Promise<void> {
    clearInterval(this.#sweeper);
  }
}
