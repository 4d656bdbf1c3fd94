import type { LockoutState, LockoutStore } from '../store-types.js';

/** Failed-login lockouts in the process (D11a), counted as the Redis script recordLoginFailure and its TTL count them. */
export class MemoryLockouts implements LockoutStore {
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

  async read(key: string, now: number): Promise<LockoutState> {
    const record = this.records.get(key);
    if (!record) return { lockedUntil: 0, failures: 0 };
    // A count left alone for a lock-out period is forgotten (recordFailure starts it over).
    return { lockedUntil: record.lockedUntil > now ? record.lockedUntil : 0, failures: record.forgetAt > now ? record.failures : 0 };
  }

  async reset(key: string): Promise<void> {
    this.records.delete(key);
  }

  sweep(now: number): void {
    for (const [key, record] of this.records) if (record.forgetAt <= now) this.records.delete(key);
  }
}
