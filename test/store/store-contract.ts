import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { GatewayStore, StoredCard, StoreTopology, TokenRef } from '../../src/store/store-types.js';
import { eventStoreContract, everyEventOperation } from './event-store-contract.js';

/** Instants are explicit: no sleeps, no fake timers. */
const T0 = 1_700_000_000_000;
const GRACE = 60_000;
const DAY = 24 * 60 * 60 * 1000;
const LEASE = 10_000;
const CRED = 'cred-alice';
const OTHER_CRED = 'cred-bob';
/** The attempt an owner claims a key with; `previous` reports the first one of a released claim (D31). */
const attemptOf = (owner: string) => ({ fingerprint: `fp-${owner}`, requestedCardLimit: 1000, credentialId: `cred-${owner}` });

export function sampleRecord(overrides: Partial<StoredCard['card']> = {}): StoredCard {
  return {
    fingerprint: 'f'.repeat(64),
    creator: 'cred-alice',
    card: {
      cardId: `card_${randomUUID()}`,
      maskedPan: '************4242',
      expMonth: 7,
      expYear: 2031,
      status: 'active',
      requestedCardLimit: 1000,
      cardLimit: 1100,
      currency: 'EUR',
      createdAt: '2023-11-14T22:13:20.000Z',
      ...overrides,
    },
    sealedSecrets: 'v1.bm9uY2U.Y2lwaGVydGV4dA.dGFn',
  };
}

/**
 * One call of every operation of the store's port that reaches Redis, by name, for the tests of
 * a store that cannot answer (each must reject with StoreUnavailableError). `store` is read at
 * call time: a test may open a new one before each case.
 */
export function everyStoreOperation(store: () => GatewayStore, token: TokenRef): [string, () => Promise<unknown>][] {
  const binding = { credentialId: 'c', fingerprint: 'fp', notBefore: 0 };
  return [
    [
      'sessions.createFamily',
      () => store().sessions.createFamily({ token, credentialId: 'c', fingerprint: 'fp', expiresAt: T0 + DAY, endsAt: T0 + DAY, now: T0 }),
    ],
    ['sessions.discardFamily', () => store().sessions.discardFamily(token.familyId)],
    [
      'sessions.rotate',
      () => store().sessions.rotate({ token, ...binding, next: { tokenHash: 'h_new', sealed: 's_new' }, newExpiresAt: T0 + DAY, now: T0, graceMs: GRACE }),
    ],
    ['sessions.revokeFamily', () => store().sessions.revokeFamily({ token, ...binding, now: T0, graceMs: GRACE })],
    ['idempotency.reserve', () => store().idempotency.reserve('acct-1:req-1', { owner: 'gw-1', now: T0, leaseMs: LEASE, attempt: attemptOf('gw-1') })],
    ['idempotency.peek', () => store().idempotency.peek('acct-1:req-1', T0)],
    ['idempotency.complete', () => store().idempotency.complete('acct-1:req-1', { owner: 'gw-1', record: sampleRecord(), expiresAt: T0 + DAY, now: T0 })],
    ['idempotency.release', () => store().idempotency.release('acct-1:req-1', { owner: 'gw-1', now: T0, keepUntil: T0 + 1000 })],
    ['lockouts.recordFailure', () => store().lockouts.recordFailure('alice', { now: T0, maxFailures: 10, lockoutMs: 60_000 })],
    ['lockouts.read', () => store().lockouts.read('alice', T0)],
    ['lockouts.reset', () => store().lockouts.reset('alice')],
    ...everyEventOperation(() => store().events),
    ['ping', () => store().ping()],
  ];
}

/**
 * How a Redis store's records look from inside Redis: its key prefix and the `MEMORY USAGE` of
 * one of its keys (asked through a script on the key, so that a Cluster client sends it to the
 * key's shard). The memory store has none.
 */
export interface StoreInspector {
  readonly prefix: string;
  /** `allSamples`: every element of a collection counted, not an estimate from five. */
  memoryUsage(key: string, options?: { allSamples?: boolean }): Promise<number>;
  /** PTTL: ms left, -1 without expiry, -2 for no key. */
  pttl(key: string): Promise<number>;
  /** Deletes the key: what its TTL does when it runs out. */
  remove(key: string): Promise<void>;
  /** The members of a sorted set, lowest score first. */
  zrange(key: string): Promise<string[]>;
  /** Writes `value` under `key` as a plain string, as another version of the gateway would. */
  setRaw(key: string, value: string, ttlMs: number): Promise<void>;
  /** Every key of the store holding `tag` as its hash tag (`{tag}`), sorted. */
  keysOf(tag: string): Promise<string[]>;
}

export type MadeStore = { store: GatewayStore; cleanup(): Promise<void>; inspect?: StoreInspector };

/** A production-like key prefix (`cig:production:`): record sizes below are quoted for keys this long. */
const PRODUCTION_PREFIX_LENGTH = 'cig:production:'.length;
/** A card record as the gateway writes it, with fields of the usual lengths (the sandbox connector's ids, a 16-digit PAN). */
async function typicalCardRecord(): Promise<StoredCard> {
  const { CardSealer } = await import('../../src/cards/card-sealing.js');
  const { requestFingerprint } = await import('../../src/cards/request-fingerprint.js');
  const sealer = new CardSealer({ kid: 'card-2026-01', key: Buffer.alloc(32, 7) });
  return {
    fingerprint: requestFingerprint({ requestId: randomUUID(), cardLimit: 125000, currency: 'EUR' }),
    creator: 'cred-travel-eu',
    card: {
      cardId: 'card_0f3c5e7a9b1d2f4a6c8e0b2d',
      maskedPan: '************4242',
      maskedCvc: '***',
      expMonth: 7,
      expYear: 2031,
      status: 'active',
      requestedCardLimit: 125000,
      cardLimit: 131250,
      currency: 'EUR',
      createdAt: '2026-11-28T10:15:30.123Z',
    },
    sealedSecrets: sealer.seal({ pan: '4242424242424242', cvc: '123' }, 'acct-travel-eu:request'),
  };
}

/**
 * The contract every GatewayStore implementation keeps (D3-D6, D11, D11a, D16-D18), run once per
 * implementation. `make` returns a fresh, empty store for each test (and, for Redis, a look inside).
 */
export function storeContract(name: string, make: () => Promise<MadeStore>, topology?: StoreTopology): void {
  describe(`GatewayStore contract: ${name}`, () => {
    let store: GatewayStore;
    let cleanup: (() => Promise<void>) | undefined;
    let inspect: StoreInspector | undefined;

    beforeEach(async () => {
      const made = await make();
      store = made.store;
      cleanup = made.cleanup;
      inspect = made.inspect;
    });

    afterEach(async () => {
      await cleanup?.();
      cleanup = undefined;
    });

    /** A token of `familyId` at `generation` that no store has seen. */
    const newToken = (familyId: string, generation = 0): TokenRef => ({ familyId, generation, tokenHash: `h_${randomUUID()}` });

    /** A login at `now` under fingerprint `fp`: its first token expires at `expiresAt`, the session a week later (D41). */
    async function login(now = T0, expiresAt = now + DAY): Promise<TokenRef> {
      const token = newToken(`fam_${randomUUID()}`);
      await store.sessions.createFamily({ token, credentialId: CRED, fingerprint: 'fp', expiresAt, endsAt: now + 7 * DAY, now });
      return token;
    }

    /**
     * Rotates `token` at `now`, proposing a successor of the next generation; returns the store's
     * answer and the token the client holds afterwards: the proposed one when it rotated, the
     * family's current one when answered as a sibling (D5), the proposed one (unstored) otherwise.
     */
    async function rotate(token: TokenRef, now: number, credentialId = CRED) {
      const proposed = newToken(token.familyId, (token.generation ?? 0) + 1);
      const sealed = `sealed-${proposed.tokenHash}`;
      const result = await store.sessions.rotate({
        token,
        credentialId,
        fingerprint: 'fp',
        notBefore: 0,
        next: { tokenHash: proposed.tokenHash, sealed },
        newExpiresAt: now + DAY,
        now,
        graceMs: GRACE,
      });
      const next = result.outcome === 'sibling' ? { ...proposed, tokenHash: result.tokenHash } : proposed;
      return { outcome: result.outcome, result, next, sealed };
    }

    const revoke = (token: TokenRef, now: number, credentialId = CRED) =>
      store.sessions.revokeFamily({ token, credentialId, fingerprint: 'fp', notBefore: 0, now, graceMs: GRACE });

    eventStoreContract(
      () => store,
      () => inspect,
      topology,
    );

    describe('sessions: rotation (D3, D5)', () => {
      it('rotates a fresh token and the new token rotates in turn', async () => {
        const first = await login();
        const a = await rotate(first, T0 + 1_000);
        expect(a.result).toEqual({ outcome: 'rotated', expiresAt: T0 + 1_000 + DAY });
        const b = await rotate(a.next, T0 + 2_000);
        expect(b.outcome).toBe('rotated');
      });

      it('answers the replaced token inside its grace with the current token and its seal (a sibling), changing nothing', async () => {
        const first = await login();
        const r1 = await rotate(first, T0 + 1_000);
        const r2 = await rotate(first, T0 + 1_000 + GRACE / 2);
        expect(r2.result).toEqual({ outcome: 'sibling', expiresAt: T0 + 1_000 + DAY, sealed: r1.sealed, tokenHash: r1.next.tokenHash });
        // the sibling's proposal was not stored: the current token is still the first rotation's
        expect((await rotate(newToken(first.familyId, 1), T0 + 1_000 + GRACE / 2 + 1)).outcome).toBe('unknown');
        expect((await rotate(r1.next, T0 + 1_000 + GRACE / 2 + 2)).outcome).toBe('rotated');
      });

      it('is still within grace at rotatedAt + graceMs - 1', async () => {
        const first = await login();
        const rotatedAt = T0 + 1_000;
        await rotate(first, rotatedAt);
        expect((await rotate(first, rotatedAt + GRACE - 1)).outcome).toBe('sibling');
      });

      it('reports reuse at exactly rotatedAt + graceMs', async () => {
        const first = await login();
        const rotatedAt = T0 + 1_000;
        await rotate(first, rotatedAt);
        expect((await rotate(first, rotatedAt + GRACE)).outcome).toBe('reuse');
      });

      it('revokes every token of the family after reuse, the newest included', async () => {
        const first = await login();
        const r1 = await rotate(first, T0 + 1_000);
        const r2 = await rotate(r1.next, T0 + 2_000);
        expect((await rotate(r1.next, T0 + 2_000 + GRACE)).outcome).toBe('reuse');
        const later = T0 + 2_000 + GRACE + 1;
        expect((await rotate(first, later)).outcome).toBe('revoked');
        expect((await rotate(r1.next, later)).outcome).toBe('revoked');
        expect((await rotate(r2.next, later)).outcome).toBe('revoked');
      });

      it('runs the grace from the first rotation: a sibling inside it does not extend it', async () => {
        const first = await login();
        const rotatedAt = T0 + 1_000;
        await rotate(first, rotatedAt);
        expect((await rotate(first, rotatedAt + GRACE - 10)).outcome).toBe('sibling');
        expect((await rotate(first, rotatedAt + GRACE)).outcome).toBe('reuse');
      });

      it('treats a token of an older generation than the previous one as reuse, even within a minute of its own rotation', async () => {
        const first = await login();
        const r1 = await rotate(first, T0 + 1_000);
        await rotate(r1.next, T0 + 2_000);
        // `first` was rotated 2 s ago, but its successor has been rotated too: the family moved on twice
        expect((await rotate(first, T0 + 3_000)).outcome).toBe('reuse');
        expect((await rotate(r1.next, T0 + 3_001)).outcome).toBe('revoked');
      });

      it('never lets a sibling make another token reuse: siblings and the current holder all go on', async () => {
        const first = await login();
        const r1 = await rotate(first, T0 + 1_000);
        // two replicas answer `first` again: both hold the current token
        const s1 = await rotate(first, T0 + 1_001);
        const s2 = await rotate(first, T0 + 1_002);
        expect([s1.outcome, s2.outcome, s1.next.tokenHash, s2.next.tokenHash]).toEqual(['sibling', 'sibling', r1.next.tokenHash, r1.next.tokenHash]);
        // one of them rotates it; the others, presenting it within its grace, are answered the newer one
        const r2 = await rotate(s1.next, T0 + 30_000);
        expect(r2.outcome).toBe('rotated');
        const late = await rotate(s2.next, T0 + 30_000 + GRACE - 1);
        expect(late.result).toMatchObject({ outcome: 'sibling', tokenHash: r2.next.tokenHash });
        expect((await rotate(late.next, T0 + 30_000 + GRACE)).outcome).toBe('rotated');
      });

      it('answers unknown for an unknown family, an unknown token of a known family, a generation it never issued', async () => {
        const first = await login();
        expect((await rotate(newToken(`fam_${randomUUID()}`), T0 + 1)).outcome).toBe('unknown');
        expect((await rotate(newToken(first.familyId), T0 + 1)).outcome).toBe('unknown');
        expect((await rotate(newToken(first.familyId, 1), T0 + 1)).outcome).toBe('unknown');
        const r1 = await rotate(first, T0 + 2);
        // the previous generation with another hash, the current one with another hash
        expect((await rotate(newToken(first.familyId, 0), T0 + 3)).outcome).toBe('unknown');
        expect((await rotate(newToken(first.familyId, 1), T0 + 3)).outcome).toBe('unknown');
        // a token hash of one family is not valid in another
        const other = await login();
        expect((await rotate({ familyId: other.familyId, generation: 0, tokenHash: first.tokenHash }, T0 + 4)).outcome).toBe('unknown');
        // nothing of that changed the family
        expect((await rotate(r1.next, T0 + 5)).outcome).toBe('rotated');
      });

      it('answers mismatch for another credential and changes nothing', async () => {
        const first = await login();
        const wrong = await rotate(first, T0 + 1_000, OTHER_CRED);
        expect(wrong.outcome).toBe('mismatch');
        // no token was added and the presented one was not rotated
        expect((await rotate(wrong.next, T0 + 1_001)).outcome).toBe('unknown');
        expect((await rotate(first, T0 + 1_000 + GRACE + 5)).outcome).toBe('rotated');
      });

      it('answers mismatch, not reuse, for an older generation presented by another credential', async () => {
        const first = await login();
        const r1 = await rotate(first, T0 + 1_000);
        await rotate(r1.next, T0 + 2_000);
        expect((await rotate(first, T0 + 3_000, OTHER_CRED)).outcome).toBe('mismatch');
        expect(await revoke(first, T0 + 3_000, OTHER_CRED)).toBe('mismatch');
        expect((await rotate(first, T0 + 3_001)).outcome).toBe('reuse');
      });

      it('expires a token at its expiresAt, not a millisecond earlier', async () => {
        const expiresAt = T0 + 5_000;
        const a = await login(T0, expiresAt);
        expect((await rotate(a, expiresAt - 1)).outcome).toBe('rotated');
        const b = await login(T0, expiresAt);
        expect((await rotate(b, expiresAt)).outcome).toBe('expired');
        expect((await rotate(b, expiresAt + DAY)).outcome).toBe('expired');
      });

      it('expires the replaced token at its own expiry, within its grace too', async () => {
        const expiresAt = T0 + 5_000;
        const first = await login(T0, expiresAt);
        await rotate(first, expiresAt - 1_000);
        expect((await rotate(first, expiresAt - 1)).outcome).toBe('sibling');
        expect((await rotate(first, expiresAt)).outcome).toBe('expired');
      });

      it('gives the new token its own expiry', async () => {
        const first = await login(T0, T0 + 5_000);
        const r = await rotate(first, T0 + 1_000); // new token lives until T0 + 1_000 + DAY
        expect((await rotate(r.next, T0 + 10_000)).outcome).toBe('rotated');
      });

      // Redis only: what one session costs in memory, however often it is refreshed (issue 35).
      if (topology !== undefined && topology !== 'memory')
        it('keeps a session in one key whose MEMORY USAGE after 1,000 rotations is within 10 % of after one', async () => {
          if (!inspect) throw new Error(`the ${topology} store gives no look inside Redis`);
          let token = await login(T0);
          const key = `${inspect.prefix}ses:{${token.familyId}}`;
          let bytesAfterOne = 0;
          for (let i = 1; i <= 1_000; i += 1) {
            const r = await rotate(token, T0 + i * 1_000);
            expect(r.outcome).toBe('rotated');
            token = r.next;
            if (i === 1) bytesAfterOne = await inspect.memoryUsage(key);
          }
          const bytesAfterThousand = await inspect.memoryUsage(key);
          console.info(`[${topology}] a session: ${bytesAfterOne} B after one refresh, ${bytesAfterThousand} B after 1,000`);
          expect(bytesAfterThousand).toBeLessThanOrEqual(bytesAfterOne * 1.1);
          expect(await inspect.keysOf(token.familyId)).toEqual([key]);
        });
    });

    describe('sessions: logout (D6)', () => {
      it('revokes the family, then every token of it is revoked, and a second logout is already-revoked', async () => {
        const first = await login();
        const r1 = await rotate(first, T0 + 1_000);
        expect(await revoke(r1.next, T0 + 2_000)).toBe('revoked');
        expect((await rotate(first, T0 + 2_001)).outcome).toBe('revoked');
        expect((await rotate(r1.next, T0 + 2_001)).outcome).toBe('revoked');
        expect(await revoke(r1.next, T0 + 2_002)).toBe('already-revoked');
      });

      it('answers unknown for an unknown token', async () => {
        const first = await login();
        expect(await revoke(newToken(`fam_${randomUUID()}`), T0 + 1)).toBe('unknown');
        expect(await revoke(newToken(first.familyId), T0 + 1)).toBe('unknown');
        expect(await revoke(newToken(first.familyId, 3), T0 + 1)).toBe('unknown');
        expect((await rotate(first, T0 + 2)).outcome).toBe('rotated');
      });

      it('answers mismatch for another credential and does not revoke', async () => {
        const first = await login();
        expect(await revoke(first, T0 + 1, OTHER_CRED)).toBe('mismatch');
        expect((await rotate(first, T0 + 2)).outcome).toBe('rotated');
      });

      it('answers expired for an expired token', async () => {
        const expiresAt = T0 + 5_000;
        const first = await login(T0, expiresAt);
        expect(await revoke(first, expiresAt)).toBe('expired');
        const second = await login(T0, expiresAt);
        expect(await revoke(second, expiresAt - 1)).toBe('revoked');
      });

      it('answers rotated-out for a token rotated out past the grace, and revokes its family as reuse (D5)', async () => {
        const first = await login();
        const r1 = await rotate(first, T0 + 1_000);
        expect(await revoke(first, T0 + 1_000 + GRACE - 1)).toBe('revoked');
        const second = await login();
        const r2 = await rotate(second, T0 + 1_000);
        expect(await revoke(second, T0 + 1_000 + GRACE)).toBe('rotated-out');
        expect((await rotate(r2.next, T0 + 1_000 + GRACE + 1)).outcome).toBe('revoked');
        expect(r1.outcome).toBe('rotated');
      });

      it('answers rotated-out for a token of an older generation, and revokes its family', async () => {
        const first = await login();
        const r1 = await rotate(first, T0 + 1_000);
        const r2 = await rotate(r1.next, T0 + 2_000);
        expect(await revoke(first, T0 + 3_000)).toBe('rotated-out');
        expect((await rotate(r2.next, T0 + 3_001)).outcome).toBe('revoked');
      });

      it('revokes through a token still inside its grace, its grace siblings included', async () => {
        const first = await login();
        const r1 = await rotate(first, T0 + 1_000);
        const r2 = await rotate(first, T0 + 2_000);
        expect(await revoke(first, T0 + 3_000)).toBe('revoked');
        expect((await rotate(r1.next, T0 + 3_001)).outcome).toBe('revoked');
        expect((await rotate(r2.next, T0 + 3_001)).outcome).toBe('revoked');
      });

      it('discards a family whose login did not complete: its token is unknown', async () => {
        const first = await login();
        await store.sessions.discardFamily(first.familyId);
        expect((await rotate(first, T0 + 1)).outcome).toBe('unknown');
        expect(await revoke(first, T0 + 1)).toBe('unknown');
        await store.sessions.discardFamily(first.familyId);
      });
    });

    describe("sessions: bound to the credential's secret, with an absolute end (D41)", () => {
      const bound = (token: TokenRef, now: number, binding: { fingerprint?: string; notBefore?: number } = {}) =>
        store.sessions.rotate({
          token,
          credentialId: CRED,
          fingerprint: binding.fingerprint ?? 'fp',
          notBefore: binding.notBefore ?? 0,
          next: { tokenHash: `h_${randomUUID()}`, sealed: 's' },
          newExpiresAt: now + DAY,
          now,
          graceMs: GRACE,
        });

      it('ends a family made under another fingerprint, and it stays revoked under the old one', async () => {
        const first = await login();
        expect(await bound(first, T0 + 1_000, { fingerprint: 'fp-new' })).toEqual({ outcome: 'ended' });
        expect((await bound(first, T0 + 2_000)).outcome).toBe('revoked');
        const other = await login();
        expect(await revoke(other, T0 + 1)).toBe('revoked');
      });

      it('ends a family logged in before the not-before instant, not one logged in at it', async () => {
        const before = await login(T0 - 1);
        const at = await login(T0);
        expect(await bound(before, T0 + 1_000, { notBefore: T0 })).toEqual({ outcome: 'ended' });
        expect((await bound(at, T0 + 1_000, { notBefore: T0 })).outcome).toBe('rotated');
        // a reactivation does not bring the ended family back: it was revoked
        expect((await bound(before, T0 + 2_000)).outcome).toBe('revoked');
      });

      it('answers ended at logout too, and revokes the family', async () => {
        const first = await login();
        expect(await store.sessions.revokeFamily({ token: first, credentialId: CRED, fingerprint: 'fp', notBefore: T0 + 1, now: T0 + 2, graceMs: GRACE })).toBe(
          'ended',
        );
        expect((await bound(first, T0 + 3)).outcome).toBe('revoked');
        const second = await login();
        expect(await store.sessions.revokeFamily({ token: second, credentialId: CRED, fingerprint: 'fp-new', notBefore: 0, now: T0 + 2, graceMs: GRACE })).toBe(
          'ended',
        );
      });

      it('never lets a rotation move a token past the session end, and expires the session at it', async () => {
        const endsAt = T0 + 5_000;
        const token = newToken(`fam_${randomUUID()}`);
        await store.sessions.createFamily({ token, credentialId: CRED, fingerprint: 'fp', expiresAt: endsAt, endsAt, now: T0 });
        const next = newToken(token.familyId, 1);
        const rotated = await store.sessions.rotate({
          token,
          credentialId: CRED,
          fingerprint: 'fp',
          notBefore: 0,
          next: { tokenHash: next.tokenHash, sealed: 's' },
          newExpiresAt: T0 + 1_000 + DAY,
          now: T0 + 1_000,
          graceMs: GRACE,
        });
        expect(rotated).toEqual({ outcome: 'rotated', expiresAt: endsAt });
        expect(await bound(next, endsAt - 1)).toEqual({ outcome: 'rotated', expiresAt: endsAt });
        expect(await bound(next, endsAt)).toEqual({ outcome: 'expired' });
        // a token whose own expiry comes first keeps it
        const early = await login(T0, T0 + 2_000);
        expect(await bound(early, T0 + 1_000)).toEqual({ outcome: 'rotated', expiresAt: T0 + 1_000 + DAY });
      });

      it('answers every token of a session past its end as expired, an older generation included, and revokes nothing', async () => {
        const endsAt = T0 + 5_000;
        const token = newToken(`fam_${randomUUID()}`);
        await store.sessions.createFamily({ token, credentialId: CRED, fingerprint: 'fp', expiresAt: endsAt, endsAt, now: T0 });
        const r1 = await rotate(token, T0 + 1_000);
        const r2 = await rotate(r1.next, T0 + 2_000);
        expect((await rotate(token, endsAt)).outcome).toBe('expired');
        expect((await rotate(r2.next, endsAt)).outcome).toBe('expired');
        expect(await revoke(token, endsAt)).toBe('expired');
      });
    });

    describe('not-before instants (D41)', () => {
      it('raises an instant and never lowers it, answering the instant stored', async () => {
        const id = `cred-${randomUUID()}`;
        expect(await store.notBefore.raise(id, T0)).toBe(T0);
        expect(await store.notBefore.raise(id, T0 - 1)).toBe(T0);
        expect(await store.notBefore.raise(id, T0 + 1)).toBe(T0 + 1);
      });

      it('reads the instants of the credentials asked for; one without an instant is absent', async () => {
        const [a, b, c] = [`cred-${randomUUID()}`, `cred-${randomUUID()}`, `cred-${randomUUID()}`];
        await store.notBefore.raise(a, T0);
        await store.notBefore.raise(b, T0 + 5);
        expect(await store.notBefore.read([a, b, c])).toEqual(
          new Map([
            [a, T0],
            [b, T0 + 5],
          ]),
        );
        expect(await store.notBefore.read([c])).toEqual(new Map());
        expect(await store.notBefore.read([])).toEqual(new Map());
      });
    });

    describe('concurrency', () => {
      it('rotates one of 20 parallel presentations of one token; the 19 others are siblings answered the same new token', async () => {
        const first = await login();
        const results = await Promise.all(Array.from({ length: 20 }, (_, i) => rotate(first, T0 + 1_000 + i)));
        expect(results.filter((r) => r.outcome === 'rotated')).toHaveLength(1);
        expect(results.filter((r) => r.outcome === 'sibling')).toHaveLength(19);
        const current = results.find((r) => r.outcome === 'rotated')!.next;
        expect(new Set(results.map((r) => r.next.tokenHash))).toEqual(new Set([current.tokenHash]));
        // and so on: 20 parallel presentations of the token they all hold
        const again = await Promise.all(results.map((r) => rotate(r.next, T0 + 2_000)));
        expect(again.map((r) => r.outcome).sort()).toEqual(['rotated', ...Array<string>(19).fill('sibling')]);
      });

      it('grants one of 20 parallel reservations of a key; the others see it pending', async () => {
        const results = await Promise.all(
          Array.from({ length: 20 }, (_, i) =>
            store.idempotency.reserve('acct:req-race', { owner: `gw-${i}`, now: T0, leaseMs: LEASE, attempt: attemptOf(`gw-${i}`) }),
          ),
        );
        expect(results.filter((r) => r.state === 'reserved')).toHaveLength(1);
        const pending = results.filter((r) => r.state === 'pending');
        expect(pending).toHaveLength(19);
        for (const p of pending) expect(p).toEqual({ state: 'pending', leaseExpiresAt: T0 + LEASE });
      });
    });

    describe('idempotency (D16, D17)', () => {
      const KEY = 'acct-1:9b2f4c1e-0000-4000-8000-000000000001';

      it('reserves a free key, and peek of a free key says reserved', async () => {
        expect(await store.idempotency.peek(KEY, T0)).toEqual({ state: 'reserved' });
        expect(await store.idempotency.reserve(KEY, { owner: 'a', now: T0, leaseMs: LEASE, attempt: attemptOf('a') })).toEqual({ state: 'reserved' });
      });

      it('answers reserved again to the same owner (a re-sent reserve stays its own)', async () => {
        await store.idempotency.reserve(KEY, { owner: 'a', now: T0, leaseMs: LEASE, attempt: attemptOf('a') });
        expect(await store.idempotency.reserve(KEY, { owner: 'a', now: T0 + 1, leaseMs: LEASE, attempt: attemptOf('a') })).toEqual({ state: 'reserved' });
        // still a claim: another owner is kept out
        expect((await store.idempotency.reserve(KEY, { owner: 'b', now: T0 + 2, leaseMs: LEASE, attempt: attemptOf('b') })).state).toBe('pending');
      });

      it('answers pending with the lease end to another owner, and to peek', async () => {
        await store.idempotency.reserve(KEY, { owner: 'a', now: T0, leaseMs: LEASE, attempt: attemptOf('a') });
        expect(await store.idempotency.reserve(KEY, { owner: 'b', now: T0 + 1, leaseMs: LEASE, attempt: attemptOf('b') })).toEqual({
          state: 'pending',
          leaseExpiresAt: T0 + LEASE,
        });
        expect(await store.idempotency.peek(KEY, T0 + 1)).toEqual({ state: 'pending', leaseExpiresAt: T0 + LEASE });
      });

      it('serves the completed record, deep-equal, to peek and to any later reserve', async () => {
        const record = sampleRecord();
        await store.idempotency.reserve(KEY, { owner: 'a', now: T0, leaseMs: LEASE, attempt: attemptOf('a') });
        await store.idempotency.complete(KEY, { owner: 'a', record, expiresAt: T0 + DAY, now: T0 + 500 });
        expect(await store.idempotency.peek(KEY, T0 + 600)).toEqual({ state: 'completed', record });
        expect(await store.idempotency.reserve(KEY, { owner: 'b', now: T0 + 700, leaseMs: LEASE, attempt: attemptOf('b') })).toEqual({
          state: 'completed',
          record,
        });
        expect(await store.idempotency.reserve(KEY, { owner: 'a', now: T0 + DAY - 1, leaseMs: LEASE, attempt: attemptOf('a') })).toEqual({
          state: 'completed',
          record,
        });
      });

      it('frees the key once the completed record expires', async () => {
        await store.idempotency.reserve(KEY, { owner: 'a', now: T0, leaseMs: LEASE, attempt: attemptOf('a') });
        await store.idempotency.complete(KEY, { owner: 'a', record: sampleRecord(), expiresAt: T0 + DAY, now: T0 + 500 });
        expect(await store.idempotency.peek(KEY, T0 + DAY)).toEqual({ state: 'reserved' });
        expect(await store.idempotency.reserve(KEY, { owner: 'b', now: T0 + DAY, leaseMs: LEASE, attempt: attemptOf('b') })).toEqual({ state: 'reserved' });
        expect((await store.idempotency.reserve(KEY, { owner: 'c', now: T0 + DAY + 1, leaseMs: LEASE, attempt: attemptOf('c') })).state).toBe('pending');
      });

      it('lets another owner take over a claim whose lease ran out, not before, carrying its attempt forward', async () => {
        await store.idempotency.reserve(KEY, { owner: 'a', now: T0, leaseMs: LEASE, attempt: attemptOf('a') });
        expect((await store.idempotency.reserve(KEY, { owner: 'b', now: T0 + LEASE - 1, leaseMs: LEASE, attempt: attemptOf('b') })).state).toBe('pending');
        // the dead gateway's forward may have made the card: its attempt is the card's (D31)
        expect(await store.idempotency.reserve(KEY, { owner: 'b', now: T0 + LEASE, leaseMs: LEASE, attempt: attemptOf('b') })).toEqual({
          state: 'reserved',
          previous: attemptOf('a'),
        });
        expect(await store.idempotency.reserve(KEY, { owner: 'a', now: T0 + LEASE + 1, leaseMs: LEASE, attempt: attemptOf('a') })).toEqual({
          state: 'pending',
          leaseExpiresAt: T0 + 2 * LEASE,
        });
      });

      it('frees the key when its owner releases it, remembering the first attempt (D31)', async () => {
        await store.idempotency.reserve(KEY, { owner: 'a', now: T0, leaseMs: LEASE, attempt: attemptOf('a') });
        await store.idempotency.release(KEY, { owner: 'a', now: T0, keepUntil: T0 + DAY });
        expect(await store.idempotency.peek(KEY, T0 + 1)).toEqual({ state: 'reserved', previous: attemptOf('a') });
        expect(await store.idempotency.reserve(KEY, { owner: 'b', now: T0 + 1, leaseMs: LEASE, attempt: attemptOf('b') })).toEqual({
          state: 'reserved',
          previous: attemptOf('a'),
        });
      });

      it('carries the first attempt through several failed retries, until it expires', async () => {
        await store.idempotency.reserve(KEY, { owner: 'a', now: T0, leaseMs: LEASE, attempt: attemptOf('a') });
        await store.idempotency.release(KEY, { owner: 'a', now: T0 + 1, keepUntil: T0 + DAY });
        await store.idempotency.reserve(KEY, { owner: 'b', now: T0 + 2, leaseMs: LEASE, attempt: attemptOf('b') });
        await store.idempotency.release(KEY, { owner: 'b', now: T0 + 3, keepUntil: T0 + DAY + 3 });
        expect(await store.idempotency.reserve(KEY, { owner: 'c', now: T0 + 4, leaseMs: LEASE, attempt: attemptOf('c') })).toEqual({
          state: 'reserved',
          previous: attemptOf('a'),
        });
        // a re-sent reserve of the owner sees the same
        expect(await store.idempotency.reserve(KEY, { owner: 'c', now: T0 + 5, leaseMs: LEASE, attempt: attemptOf('c') })).toEqual({
          state: 'reserved',
          previous: attemptOf('a'),
        });
        await store.idempotency.release(KEY, { owner: 'c', now: T0 + 6, keepUntil: T0 + 100 });
        // past keepUntil the released attempt is forgotten
        expect(await store.idempotency.peek(KEY, T0 + 100)).toEqual({ state: 'reserved', previous: undefined });
        const fresh = await store.idempotency.reserve(KEY, { owner: 'd', now: T0 + 100, leaseMs: LEASE, attempt: attemptOf('d') });
        expect(fresh.state === 'reserved' && fresh.previous).toBeFalsy();
      });

      it('keeps the claim when someone else releases it', async () => {
        await store.idempotency.reserve(KEY, { owner: 'a', now: T0, leaseMs: LEASE, attempt: attemptOf('a') });
        await store.idempotency.release(KEY, { owner: 'b', now: T0, keepUntil: T0 + DAY });
        expect((await store.idempotency.reserve(KEY, { owner: 'b', now: T0 + 1, leaseMs: LEASE, attempt: attemptOf('b') })).state).toBe('pending');
      });

      it('does not release a completed record', async () => {
        const record = sampleRecord();
        await store.idempotency.reserve(KEY, { owner: 'a', now: T0, leaseMs: LEASE, attempt: attemptOf('a') });
        await store.idempotency.complete(KEY, { owner: 'a', record, expiresAt: T0 + DAY, now: T0 + 1 });
        await store.idempotency.release(KEY, { owner: 'a', now: T0 + 1, keepUntil: T0 + DAY });
        expect(await store.idempotency.peek(KEY, T0 + 2)).toEqual({ state: 'completed', record });
      });

      it('ignores a completion by the former owner after a takeover', async () => {
        const late = sampleRecord({ cardId: 'card_late' });
        const winner = sampleRecord({ cardId: 'card_winner' });
        await store.idempotency.reserve(KEY, { owner: 'a', now: T0, leaseMs: LEASE, attempt: attemptOf('a') });
        await store.idempotency.reserve(KEY, { owner: 'b', now: T0 + LEASE, leaseMs: LEASE, attempt: attemptOf('b') });
        await store.idempotency.complete(KEY, { owner: 'a', record: late, expiresAt: T0 + DAY, now: T0 + LEASE + 1 });
        expect(await store.idempotency.peek(KEY, T0 + LEASE + 2)).toEqual({ state: 'pending', leaseExpiresAt: T0 + 2 * LEASE });
        await store.idempotency.complete(KEY, { owner: 'b', record: winner, expiresAt: T0 + DAY, now: T0 + LEASE + 3 });
        expect(await store.idempotency.peek(KEY, T0 + LEASE + 4)).toEqual({ state: 'completed', record: winner });
      });

      it('does not overwrite a completed record', async () => {
        const first = sampleRecord({ cardId: 'card_first' });
        await store.idempotency.reserve(KEY, { owner: 'a', now: T0, leaseMs: LEASE, attempt: attemptOf('a') });
        await store.idempotency.complete(KEY, { owner: 'a', record: first, expiresAt: T0 + DAY, now: T0 + 1 });
        await store.idempotency.complete(KEY, { owner: 'a', record: sampleRecord({ cardId: 'card_second' }), expiresAt: T0 + DAY, now: T0 + 2 });
        expect(await store.idempotency.peek(KEY, T0 + 3)).toEqual({ state: 'completed', record: first });
      });

      it('keeps keys independent', async () => {
        const record = sampleRecord();
        await store.idempotency.reserve('acct-1:req-a', { owner: 'a', now: T0, leaseMs: LEASE, attempt: attemptOf('a') });
        await store.idempotency.complete('acct-1:req-a', { owner: 'a', record, expiresAt: T0 + DAY, now: T0 + 1 });
        expect(await store.idempotency.reserve('acct-1:req-b', { owner: 'b', now: T0 + 2, leaseMs: LEASE, attempt: attemptOf('b') })).toEqual({
          state: 'reserved',
        });
        expect(await store.idempotency.reserve('acct-2:req-a', { owner: 'c', now: T0 + 2, leaseMs: LEASE, attempt: attemptOf('c') })).toEqual({
          state: 'reserved',
        });
        expect(await store.idempotency.peek('acct-1:req-a', T0 + 3)).toEqual({ state: 'completed', record });
      });

      it('round-trips every field of a StoredCard, odd characters included', async () => {
        const record: StoredCard = {
          fingerprint: '0123456789abcdef'.repeat(4),
          creator: 'cred-ünïcødé',
          card: {
            cardId: 'card_ünïcødé "quoted" \\ {braces}',
            maskedPan: '***********0005',
            expMonth: 12,
            expYear: 2099,
            status: 'inactive',
            requestedCardLimit: Number.MAX_SAFE_INTEGER,
            cardLimit: 1,
            currency: 'JPY',
            createdAt: '2024-02-29T23:59:59.999Z',
          },
          sealedSecrets: 'A'.repeat(200),
        };
        await store.idempotency.reserve(KEY, { owner: 'a', now: T0, leaseMs: LEASE, attempt: attemptOf('a') });
        await store.idempotency.complete(KEY, { owner: 'a', record, expiresAt: T0 + DAY, now: T0 + 1 });
        expect(await store.idempotency.peek(KEY, T0 + 2)).toStrictEqual({ state: 'completed', record });
      });

      it('round-trips the shapes a compact record keeps apart: masks of every kind, a createdAt in another spelling', async () => {
        const base = sampleRecord();
        const shapes: StoredCard['card'][] = [
          { ...base.card, maskedPan: '4242', maskedCvc: '****', createdAt: '2024-02-29T23:59:59Z' },
          { ...base.card, maskedPan: '*', maskedCvc: '', createdAt: '2024-02-29T23:59:59.000+00:00' },
          { ...base.card, maskedPan: '**42**', maskedCvc: '12*', createdAt: 'not a date', status: 'canceled' },
          { ...base.card, maskedPan: '', maskedCvc: '*', createdAt: '1970-01-01T00:00:00.000Z' },
        ];
        for (const [index, card] of shapes.entries()) {
          const key = `acct-shapes:${index}`;
          const record: StoredCard = { ...base, card };
          await store.idempotency.reserve(key, { owner: 'a', now: T0, leaseMs: LEASE, attempt: attemptOf('a') });
          await store.idempotency.complete(key, { owner: 'a', record, expiresAt: T0 + DAY, now: T0 + 1 });
          expect(await store.idempotency.peek(key, T0 + 2)).toStrictEqual({ state: 'completed', record });
          expect(await store.idempotency.reserve(key, { owner: 'b', now: T0 + 3, leaseMs: LEASE, attempt: attemptOf('b') })).toStrictEqual({
            state: 'completed',
            record,
          });
        }
      });

      // Redis only: the memory store keeps objects, not bytes.
      if (topology !== undefined && topology !== 'memory')
        it('keeps a typical card record within 500 B of Redis memory (MEMORY USAGE, issue 35), where the previous encoding took more', async () => {
          if (!inspect) throw new Error(`the ${topology} store gives no look inside Redis`);
          const record = await typicalCardRecord();
          // A key as long as a production one: `cig:production:idem:{acct-...:<requestId>}`.
          const requestId = randomUUID();
          const account = 'a'.repeat(Math.max(1, PRODUCTION_PREFIX_LENGTH + 'acct-travel-eu'.length - inspect.prefix.length));
          const name = `${account}:${requestId}`;
          await store.idempotency.reserve(name, { owner: 'a', now: T0, leaseMs: LEASE, attempt: attemptOf('a') });
          await store.idempotency.complete(name, { owner: 'a', record, expiresAt: Date.now() + DAY, now: Date.now() });
          const bytes = await inspect.memoryUsage(`${inspect.prefix}idem:{${name}}`);
          // The same record in the previous version's encoding (the StoredCard's JSON), under a key as long.
          const previousName = `${account}:${randomUUID()}`;
          await inspect.setRaw(`${inspect.prefix}idem:{${previousName}}`, `c|${Date.now() + DAY}|${JSON.stringify(record)}`, DAY);
          const previousBytes = await inspect.memoryUsage(`${inspect.prefix}idem:{${previousName}}`);
          console.info(`[${name.length + inspect.prefix.length + 7}-byte key] card record: ${bytes} B of MEMORY USAGE (previous encoding: ${previousBytes} B)`);
          expect(bytes).toBeLessThanOrEqual(500);
          expect(previousBytes).toBeGreaterThan(500);
          // and what the previous version wrote is still a replay (a rolling upgrade)
          expect(await store.idempotency.peek(previousName, Date.now())).toStrictEqual({ state: 'completed', record });
          expect(await store.idempotency.reserve(previousName, { owner: 'b', now: Date.now(), leaseMs: LEASE, attempt: attemptOf('b') })).toStrictEqual({
            state: 'completed',
            record,
          });
        });
    });

    describe('lockouts (D11a)', () => {
      const lockedUntil = async (key: string, now: number) => (await store.lockouts.read(key, now)).lockedUntil;
      const opts = { maxFailures: 10, lockoutMs: 30 * 60_000 };

      async function fail(key: string, times: number, now: number): Promise<number[]> {
        const results: number[] = [];
        for (let i = 0; i < times; i += 1) results.push(await store.lockouts.recordFailure(key, { now: now + i, ...opts }));
        return results;
      }

      it('locks out on the 10th consecutive failure, until now + lockoutMs', async () => {
        expect(await fail('alice', 9, T0)).toEqual(Array(9).fill(0));
        expect(await lockedUntil('alice', T0 + 9)).toBe(0);
        const lockAt = T0 + 100;
        expect(await store.lockouts.recordFailure('alice', { now: lockAt, ...opts })).toBe(lockAt + opts.lockoutMs);
        expect(await lockedUntil('alice', lockAt)).toBe(lockAt + opts.lockoutMs);
        expect(await lockedUntil('alice', lockAt + opts.lockoutMs - 1)).toBe(lockAt + opts.lockoutMs);
        expect(await lockedUntil('alice', lockAt + opts.lockoutMs)).toBe(0);
      });

      it('does not count failures during a lockout', async () => {
        await fail('alice', 10, T0);
        const until = await lockedUntil('alice', T0 + 10);
        expect(until).toBe(T0 + 9 + opts.lockoutMs);
        expect(await fail('alice', 15, T0 + 20)).toEqual(Array(15).fill(0));
        expect(await lockedUntil('alice', T0 + 40)).toBe(until);
        // after the lockout a fresh count starts: 9 failures do not lock again
        expect(await fail('alice', 9, until)).toEqual(Array(9).fill(0));
        expect(await lockedUntil('alice', until + 9)).toBe(0);
        expect(await store.lockouts.recordFailure('alice', { now: until + 10, ...opts })).toBe(until + 10 + opts.lockoutMs);
      });

      it('reads the failures counted (what a success has to reset), none for an unknown key or after a reset', async () => {
        expect(await store.lockouts.read('alice', T0)).toEqual({ lockedUntil: 0, failures: 0 });
        await fail('alice', 3, T0);
        expect(await store.lockouts.read('alice', T0 + 3)).toEqual({ lockedUntil: 0, failures: 3 });
        await store.lockouts.reset('alice');
        expect(await store.lockouts.read('alice', T0 + 4)).toEqual({ lockedUntil: 0, failures: 0 });
      });

      it('clears the count on reset', async () => {
        await fail('alice', 9, T0);
        await store.lockouts.reset('alice');
        expect(await fail('alice', 9, T0 + 100)).toEqual(Array(9).fill(0));
        expect(await lockedUntil('alice', T0 + 200)).toBe(0);
        expect(await store.lockouts.recordFailure('alice', { now: T0 + 300, ...opts })).toBe(T0 + 300 + opts.lockoutMs);
      });

      it('keeps keys independent', async () => {
        await fail('alice', 10, T0);
        expect(await lockedUntil('alice', T0 + 20)).toBeGreaterThan(0);
        expect(await lockedUntil('bob', T0 + 20)).toBe(0);
        expect(await store.lockouts.recordFailure('bob', { now: T0 + 20, ...opts })).toBe(0);
      });
    });

    describe('rate limiter (D11)', () => {
      it('allows the configured points, then answers exceeded (an answer of the store, not a rejection)', async () => {
        const limiter = store.createRateLimiter({ keyPrefix: 'login', points: 5, durationSeconds: 60 });
        for (let i = 0; i < 5; i += 1) {
          const res = await limiter.consume('alice');
          expect(res).toMatchObject({ consumed: i + 1, remaining: 4 - i, exceeded: false });
        }
        const refused = await limiter.consume('alice');
        expect(refused).toMatchObject({ consumed: 6, exceeded: true });
        // The window's reset, computed by the limiter from the clock: not a measured duration.
        const untilReset = refused.resetMs;
        expect(untilReset).toBeGreaterThan(0);
        expect(untilReset).toBeLessThanOrEqual(60_000);
        expect(refused.remaining).toBe(0);
      });

      it('keeps keys independent', async () => {
        const limiter = store.createRateLimiter({ keyPrefix: 'login', points: 5, durationSeconds: 60 });
        for (let i = 0; i < 5; i += 1) await limiter.consume('alice');
        await expect(limiter.consume('bob')).resolves.toMatchObject({ remaining: 4, exceeded: false });
        await expect(limiter.consume('alice')).resolves.toMatchObject({ exceeded: true });
      });

      it('keeps limiters with different key prefixes independent', async () => {
        const login = store.createRateLimiter({ keyPrefix: 'login', points: 5, durationSeconds: 60 });
        const refresh = store.createRateLimiter({ keyPrefix: 'refresh', points: 5, durationSeconds: 60 });
        for (let i = 0; i < 5; i += 1) await login.consume('alice');
        await expect(refresh.consume('alice')).resolves.toMatchObject({ remaining: 4, exceeded: false });
        await expect(login.consume('alice')).resolves.toMatchObject({ exceeded: true });
      });
    });

    it('describes its topology, and says up once it has answered a ping, with nothing left to repair', async () => {
      await store.ping();
      const described = store.describe();
      expect(described.topology).toBe(topology ?? described.topology);
      expect(described).toMatchObject({ up: true, pendingRepairs: 0, unacknowledgedRecords: 0 });
      if (described.topology !== 'memory') expect(described.masters.length).toBeGreaterThan(0);
    });

    it('answers ping', async () => {
      await expect(store.ping()).resolves.toBeUndefined();
    });
  });
}
