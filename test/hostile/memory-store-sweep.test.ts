import { randomUUID } from 'node:crypto';
import { describe, expect, it, vi } from 'vitest';
import { ManualClock } from '../../src/foundation/clock.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import type { IdempotencyStore, StoredCard } from '../../src/store/store-types.js';
import { HOUR, MINUTE, SECOND, T0 } from '../support/auth-requests.js';

/**
 * Issue 8, "Memory store: sweeps expired records, so its size is bounded by live data". A flood
 * of unknown usernames, abandoned card claims, expired sessions and idempotency records must not
 * stay in the memory store once they are dead by the injected clock. Old code: failed-login
 * records of unknown usernames stayed 24 h, long after the 30-minute lockout period made them
 * meaningless.
 *
 * Dead means dead by the rules the store itself applies: a refresh family or idempotency record
 * past its expiry, a pending claim past its lease, a failure count left alone for a lockout
 * period (recordFailure starts it over) and not locked. The store sweeps every minute by
 * itself, by the injected clock; the test moves the clock and lets the store's minute timer fire.
 */

const FLOOD = 200;
const LOCKOUT = { maxFailures: 10, lockoutMs: 30 * MINUTE };

function storedCard(): StoredCard {
  return {
    fingerprint: 'f'.repeat(64),
    creator: 'cred-full',
    card: {
      cardId: `card_${randomUUID()}`,
      maskedPan: '************1234',
      maskedCvc: '***',
      expMonth: 1,
      expYear: 2030,
      status: 'active',
      requestedCardLimit: 100,
      cardLimit: 100,
      currency: 'EUR',
      createdAt: new Date(T0).toISOString(),
    },
    sealedSecrets: 'sealed',
  };
}

const sizes = (store: MemoryStore) => store.size();

describe('memory store size is bounded by live data', () => {
  it('sweeps dead lockout counts, abandoned claims, expired sessions and idempotency records, and keeps live ones', async () => {
    // Only the store's own minute timer is faked: the test runs the sweep the store schedules
    // itself, rather than calling sweep() by hand.
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const clock = new ManualClock(T0);
    const store = new MemoryStore(() => clock.now());
    const now = () => clock.now();
    // Through the store contract, as the gateway calls it.
    const idempotency: IdempotencyStore = store.idempotency;

    /** A minute passes: the store's own sweep runs, at the injected clock's now. */
    const letItSweep = async () => {
      vi.advanceTimersByTime(60_000);
    };

    try {
      // T0: a flood of unknown usernames (one failure each), abandoned claims, sessions, cards.
      for (let i = 0; i < FLOOD; i += 1) {
        await store.lockouts.recordFailure(`unknown-${i}`, { now: now(), ...LOCKOUT });
        const owner = randomUUID();
        await store.idempotency.reserve(`acct:abandoned-${i}`, {
          owner,
          now: now(),
          leaseMs: 7 * SECOND,
          attempt: { fingerprint: 'f', requestedCardLimit: 100, credentialId: 'cred-full' },
        });
        await store.sessions.createFamily({
          token: { familyId: `fam-${i}`, generation: 0, tokenHash: `hash-${i}` },
          credentialId: 'cred-full',
          fingerprint: 'fp',
          expiresAt: now() + 24 * HOUR,
          endsAt: now() + 24 * HOUR,
          now: now(),
        });
        await idempotency.complete(`acct:card-${i}`, { owner: 'o', record: storedCard(), expiresAt: now() + 24 * HOUR, now: now() });
      }
      expect(sizes(store)).toEqual({ families: FLOOD, idempotency: 2 * FLOOD, lockouts: FLOOD });

      // T0 + 31 min: the flood's failure counts are dead (idle for a lockout period, never
      // locked), the claims' leases ran out. Live: a locked-out user and a fresh failure.
      clock.advance(31 * MINUTE);
      for (let i = 0; i < LOCKOUT.maxFailures; i += 1) await store.lockouts.recordFailure('locked-user', { now: now(), ...LOCKOUT });
      await store.lockouts.recordFailure('recent-user', { now: now(), ...LOCKOUT });
      expect((await store.lockouts.read('locked-user', now())).lockedUntil).toBeGreaterThan(now());
      await letItSweep();
      expect(store.size().lockouts, 'failed-login records left 31 min after a flood of unknown usernames').toBe(2);
      expect(store.size().idempotency, 'idempotency records left after the abandoned claims expired').toBe(FLOOD);
      expect((await store.lockouts.read('locked-user', now())).lockedUntil).toBeGreaterThan(now());

      // T0 + 12 h: one live session and one live card record, created later.
      clock.set(T0 + 12 * HOUR);
      await store.sessions.createFamily({
        token: { familyId: 'fam-live', generation: 0, tokenHash: 'hash-live' },
        credentialId: 'cred-full',
        fingerprint: 'fp',
        expiresAt: now() + 24 * HOUR,
        endsAt: now() + 24 * HOUR,
        now: now(),
      });
      await idempotency.complete('acct:card-live', { owner: 'o', record: storedCard(), expiresAt: now() + 24 * HOUR, now: now() });

      // T0 + 24 h + 1 min: the flood's sessions and card records have expired; the live ones have not.
      clock.set(T0 + 24 * HOUR + MINUTE);
      await letItSweep();
      expect(sizes(store)).toEqual({ families: 1, idempotency: 1, lockouts: 0 });
      expect((await store.idempotency.peek('acct:card-live', now())).state).toBe('completed');
      expect(
        await store.sessions.rotate({
          token: { familyId: 'fam-live', generation: 0, tokenHash: 'hash-live' },
          credentialId: 'cred-full',
          fingerprint: 'fp',
          notBefore: 0,
          next: { tokenHash: 'hash-next', sealed: 's' },
          newExpiresAt: now() + HOUR,
          now: now(),
          graceMs: 60 * SECOND,
        }),
      ).toMatchObject({ outcome: 'rotated' });
    } finally {
      await store.close();
      vi.useRealTimers();
    }
  });
});
