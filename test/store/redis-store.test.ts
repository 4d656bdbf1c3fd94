import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import type { Redis } from 'ioredis';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createRedisClient, waitUntilReady } from '../../src/store/redis/redis-client.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { StoreUnavailableError, type StoredCard, type TokenRef } from '../../src/store/store-types.js';
import {
  createTestRedisStore,
  inspectorOf,
  keysWithPrefix,
  readIdempotency,
  requireRedisUrl,
  unusedPort,
  uniquePrefix,
  type TestRedisStore,
} from '../support/redis.js';
import { everyStoreOperation, sampleRecord, storeContract } from './store-contract.js';
import { decodeStoredCard } from '../../src/store/redis/card-record-codec.js';

const ATTEMPT = { fingerprint: 'fp', requestedCardLimit: 1000, credentialId: 'cred-1' };

storeContract(
  'redis',
  async () => {
    const { store, client, prefix, cleanup } = await createTestRedisStore('contract');
    return { store, cleanup, inspect: inspectorOf(client, prefix) };
  },
  'standalone',
);

const T0 = 1_700_000_000_000;
const DAY = 24 * 60 * 60 * 1000;
const GRACE = 60_000;
/** The cleanup TTL the store adds on top of a record's own lifetime. */
const SLACK = 60_000;

const opened: TestRedisStore[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((t) => t.cleanup()));
});

async function open(label: string): Promise<TestRedisStore> {
  const t = await createTestRedisStore(label);
  opened.push(t);
  return t;
}

const freshToken = (): TokenRef => ({ familyId: `fam_${randomUUID()}`, generation: 0, tokenHash: `h_${randomUUID()}` });

async function pttls(client: Redis, prefix: string): Promise<Map<string, number>> {
  const keys = await keysWithPrefix(client, prefix);
  const result = new Map<string, number>();
  for (const key of keys) result.set(key, await client.pttl(key));
  return result;
}

function expectAllExpiring(ttls: Map<string, number>, maxMs: number): void {
  expect(ttls.size).toBeGreaterThan(0);
  for (const [key, ttl] of ttls) {
    expect({ key, hasTtl: ttl > 0 }).toEqual({ key, hasTtl: true });
    expect(ttl).toBeLessThanOrEqual(maxMs);
  }
}

describe('RedisStore: what it writes (D18)', () => {
  it('keeps only state, expiry and the sealed record in an idempotency record, never a plaintext PAN or CVC', async () => {
    const { store, client, prefix } = await open('secrets');
    const pan = '4242424242424242';
    const cvc = '987';
    // What a gateway stores: masked PAN and an opaque sealed blob (here: not derived from the PAN).
    const record: StoredCard = { ...sampleRecord({ maskedPan: '************4242' }), sealedSecrets: `v1.${randomUUID()}.${randomUUID()}` };
    await store.idempotency.reserve('acct-1:req-1', { owner: 'gw-1', now: T0, leaseMs: 10_000, attempt: ATTEMPT });
    await store.idempotency.complete('acct-1:req-1', { owner: 'gw-1', record, expiresAt: T0 + DAY, now: T0 + 1 });

    const keys = await keysWithPrefix(client, prefix);
    expect(keys).toHaveLength(1);
    const stored = await readIdempotency(client, keys[0] ?? '');
    expect(stored.state).toBe('completed');
    expect(Object.keys(stored.fields).sort()).toEqual(['exp', 'record']);
    expect(stored.fields['exp']).toBe(String(T0 + DAY));
    expect(decodeStoredCard(stored.fields['record'] ?? '')).toStrictEqual(record);
    const raw = (await client.get(keys[0] ?? '')) ?? '';
    expect(raw).not.toContain(pan);
    expect(raw).not.toMatch(/"(pan|cvc)"/);
    expect(raw).not.toContain(`"${cvc}"`);
  });

  it('keeps no owner or lease left over from the claim once completed', async () => {
    const { store, client, prefix } = await open('leftover');
    await store.idempotency.reserve('acct-1:req-2', { owner: 'gw-1', now: T0, leaseMs: 10_000, attempt: ATTEMPT });
    const [key] = await keysWithPrefix(client, prefix);
    expect(Object.keys((await readIdempotency(client, key ?? '')).fields).sort()).toEqual(['leaseExp', 'ocred', 'ofp', 'oreq', 'owner', 'prev']);
    await store.idempotency.complete('acct-1:req-2', { owner: 'gw-1', record: sampleRecord(), expiresAt: T0 + DAY, now: T0 + 1 });
    expect(Object.keys((await readIdempotency(client, key ?? '')).fields).sort()).toEqual(['exp', 'record']);
  });

  it('reads, takes over, completes and releases the hash an earlier version kept under the same key (a rolling upgrade)', async () => {
    const { store, client, prefix } = await open('legacy');
    const key = (name: string) => `${prefix}idem:{${name}}`;
    const record = sampleRecord();
    // completed: a replay, to peek and to a claim
    await client.hset(key('acct-1:done'), 'state', 'completed', 'exp', String(T0 + DAY), 'record', JSON.stringify(record));
    expect(await store.idempotency.peek('acct-1:done', T0)).toEqual({ state: 'completed', record });
    expect(await store.idempotency.reserve('acct-1:done', { owner: 'gw-2', now: T0, leaseMs: 10_000, attempt: ATTEMPT })).toEqual({
      state: 'completed',
      record,
    });
    // pending of an old replica: its owner completes it; a stranger's completion is ignored
    const claim = ['state', 'pending', 'owner', 'gw-old', 'leaseExp', String(T0 + 10_000), 'ofp', 'fp-old', 'oreq', '100', 'ocred', 'cred-old', 'prev', '0'];
    await client.hset(key('acct-1:open'), ...claim);
    expect(await store.idempotency.reserve('acct-1:open', { owner: 'gw-2', now: T0, leaseMs: 10_000, attempt: ATTEMPT })).toEqual({
      state: 'pending',
      leaseExpiresAt: T0 + 10_000,
    });
    await store.idempotency.complete('acct-1:open', { owner: 'gw-2', record, expiresAt: T0 + DAY, now: T0 + 1 });
    expect((await store.idempotency.peek('acct-1:open', T0 + 2)).state).toBe('pending');
    await store.idempotency.complete('acct-1:open', { owner: 'gw-old', record, expiresAt: T0 + DAY, now: T0 + 3 });
    expect(await store.idempotency.peek('acct-1:open', T0 + 4)).toEqual({ state: 'completed', record });
    // released by its owner, then taken over carrying the first attempt forward (D31)
    await client.hset(key('acct-1:freed'), ...claim);
    await store.idempotency.release('acct-1:freed', { owner: 'gw-old', now: T0, keepUntil: T0 + DAY });
    const first = { fingerprint: 'fp-old', requestedCardLimit: 100, credentialId: 'cred-old' };
    expect(await store.idempotency.reserve('acct-1:freed', { owner: 'gw-2', now: T0 + 1, leaseMs: 10_000, attempt: ATTEMPT })).toEqual({
      state: 'reserved',
      previous: first,
    });
  });
});

describe('RedisStore: sessions of the format before issue 35 (a rolling upgrade)', () => {
  /** A family as that version wrote it: a family hash and one hash per token (no generation in its tokens). */
  async function legacyLogin(client: Redis, prefix: string, now: number): Promise<TokenRef> {
    const token: TokenRef = { familyId: `fam_${randomUUID()}`, tokenHash: `h_${randomUUID()}` };
    await client.hset(`${prefix}fam:{${token.familyId}}`, 'cred', 'c', 'revoked', '0', 'fp', 'fp', 'login', String(now), 'end', String(now + 7 * DAY));
    await client.pexpire(`${prefix}fam:{${token.familyId}}`, DAY + SLACK);
    await client.hset(`${prefix}rt:{${token.familyId}}:${token.tokenHash}`, 'exp', String(now + DAY));
    await client.pexpire(`${prefix}rt:{${token.familyId}}:${token.tokenHash}`, DAY + SLACK);
    return token;
  }
  const rotateLegacy = (store: RedisStore, token: TokenRef, now: number) => {
    const next: TokenRef = { familyId: token.familyId, tokenHash: `h_${randomUUID()}` };
    return store.sessions
      .rotate({
        token,
        credentialId: 'c',
        fingerprint: 'fp',
        notBefore: 0,
        next: { tokenHash: next.tokenHash, sealed: '' },
        newExpiresAt: now + DAY,
        now,
        graceMs: GRACE,
      })
      .then((result) => ({ outcome: result.outcome, next }));
  };

  it('rotates them as that version did: a token key per token, siblings within the grace, reuse after it', async () => {
    const { store, client, prefix } = await open('legacy-sessions');
    const first = await legacyLogin(client, prefix, T0);
    const r1 = await rotateLegacy(store, first, T0 + 1_000);
    const r2 = await rotateLegacy(store, first, T0 + 2_000);
    expect([r1.outcome, r2.outcome]).toEqual(['rotated', 'rotated']);
    expect(await client.hget(`${prefix}rt:{${first.familyId}}:${r1.next.tokenHash}`, 'exp')).toBe(String(T0 + 1_000 + DAY));
    expect((await rotateLegacy(store, r2.next, T0 + 3_000)).outcome).toBe('rotated');
    expect((await rotateLegacy(store, first, T0 + 1_000 + GRACE)).outcome).toBe('reuse');
    expect((await rotateLegacy(store, r1.next, T0 + 1_000 + GRACE + 1)).outcome).toBe('revoked');
    // nothing of the new format was written for them
    expect((await keysWithPrefix(client, prefix)).filter((key) => key.includes('ses:'))).toEqual([]);
  });

  it('logs them out as that version did, a token past its grace as reuse', async () => {
    const { store, client, prefix } = await open('legacy-logout');
    const first = await legacyLogin(client, prefix, T0);
    const r1 = await rotateLegacy(store, first, T0 + 1_000);
    const revoke = (token: TokenRef, now: number) =>
      store.sessions.revokeFamily({ token, credentialId: 'c', fingerprint: 'fp', notBefore: 0, now, graceMs: GRACE });
    expect(await revoke(r1.next, T0 + 2_000)).toBe('revoked');
    expect(await revoke(r1.next, T0 + 2_001)).toBe('already-revoked');
    const second = await legacyLogin(client, prefix, T0);
    await rotateLegacy(store, second, T0 + 1_000);
    expect(await revoke(second, T0 + 1_000 + GRACE)).toBe('rotated-out');
    const third = await legacyLogin(client, prefix, T0);
    expect(await store.sessions.revokeFamily({ token: third, credentialId: 'c', fingerprint: 'fp-new', notBefore: 0, now: T0 + 1, graceMs: GRACE })).toBe(
      'ended',
    );
  });
});

describe('RedisStore: every record expires', () => {
  it('gives the family a TTL on createFamily: one key', async () => {
    const { store, client, prefix } = await open('ttl-create');
    await store.sessions.createFamily({ token: freshToken(), credentialId: 'c', fingerprint: 'fp', expiresAt: T0 + DAY, endsAt: T0 + DAY, now: T0 });
    const ttls = await pttls(client, prefix);
    expect(ttls.size).toBe(1);
    expectAllExpiring(ttls, DAY + SLACK);
  });

  it('keeps the family alive as long as its newest token on rotate, still one key', async () => {
    const { store, client, prefix } = await open('ttl-rotate');
    const token = freshToken();
    // a short-lived first token, rotated into a day-long one
    await store.sessions.createFamily({ token, credentialId: 'c', fingerprint: 'fp', expiresAt: T0 + 5_000, endsAt: T0 + 7 * DAY, now: T0 });
    expect([...(await pttls(client, prefix)).values()][0]).toBeLessThanOrEqual(5_000 + SLACK);
    const outcome = await store.sessions.rotate({
      token,
      credentialId: 'c',
      fingerprint: 'fp',
      notBefore: 0,
      next: { tokenHash: `h_${randomUUID()}`, sealed: 's' },
      newExpiresAt: T0 + 1_000 + DAY,
      now: T0 + 1_000,
      graceMs: GRACE,
    });
    expect(outcome).toEqual({ outcome: 'rotated', expiresAt: T0 + 1_000 + DAY });
    const ttls = await pttls(client, prefix);
    expect(ttls.size).toBe(1);
    expectAllExpiring(ttls, DAY + SLACK);
    const family = [...ttls].find(([key]) => key.includes('ses:'));
    expect(family?.[1]).toBeGreaterThan(DAY);
  });

  it('gives idempotency claims and records a TTL', async () => {
    const { store, client, prefix } = await open('ttl-idem');
    await store.idempotency.reserve('acct-1:req-1', { owner: 'gw-1', now: T0, leaseMs: 10_000, attempt: ATTEMPT });
    expectAllExpiring(await pttls(client, prefix), 10_000 + SLACK);
    await store.idempotency.complete('acct-1:req-1', { owner: 'gw-1', record: sampleRecord(), expiresAt: T0 + DAY, now: T0 + 1 });
    const ttls = await pttls(client, prefix);
    expectAllExpiring(ttls, DAY + SLACK);
    expect([...ttls.values()][0]).toBeGreaterThan(DAY - 60_000);
  });

  it('gives lockout counters and rate-limit counters a TTL', async () => {
    const { store, client, prefix } = await open('ttl-lock');
    const lockoutMs = 30 * 60_000;
    for (let i = 0; i < 10; i += 1) await store.lockouts.recordFailure('alice', { now: T0 + i, maxFailures: 10, lockoutMs });
    await store.lockouts.recordFailure('bob', { now: T0, maxFailures: 10, lockoutMs });
    await store.createRateLimiter({ keyPrefix: 'login', points: 5, durationSeconds: 60 }).consume('alice');
    const ttls = await pttls(client, prefix);
    expect(ttls.size).toBe(3);
    expectAllExpiring(ttls, lockoutMs + SLACK);
  });
});

describe('RedisStore: namespaces (D8)', () => {
  it('keeps every key under its prefix', async () => {
    const { store, client, prefix } = await open('ns-keys');
    await store.sessions.createFamily({ token: freshToken(), credentialId: 'c', fingerprint: 'fp', expiresAt: T0 + DAY, endsAt: T0 + DAY, now: T0 });
    await store.idempotency.reserve('acct-1:req-1', { owner: 'gw-1', now: T0, leaseMs: 10_000, attempt: ATTEMPT });
    await store.lockouts.recordFailure('alice', { now: T0, maxFailures: 10, lockoutMs: 60_000 });
    await store.createRateLimiter({ keyPrefix: 'login', points: 5, durationSeconds: 60 }).consume('alice');
    const keys = await keysWithPrefix(client, prefix);
    expect(keys).toHaveLength(4);
    for (const key of keys) expect(key.startsWith(prefix)).toBe(true);
  });

  it('does not let stores with different prefixes see each other', async () => {
    const sandbox = await open('ns-sandbox');
    const production = await open('ns-production');
    const token = freshToken();
    const record = sampleRecord();
    await sandbox.store.sessions.createFamily({ token, credentialId: 'c', fingerprint: 'fp', expiresAt: T0 + DAY, endsAt: T0 + DAY, now: T0 });
    await sandbox.store.idempotency.reserve('acct-1:req-1', { owner: 'gw-1', now: T0, leaseMs: 10_000, attempt: ATTEMPT });
    await sandbox.store.idempotency.complete('acct-1:req-1', { owner: 'gw-1', record, expiresAt: T0 + DAY, now: T0 + 1 });
    for (let i = 0; i < 10; i += 1) await sandbox.store.lockouts.recordFailure('alice', { now: T0 + i, maxFailures: 10, lockoutMs: 60_000 });
    const sandboxLimiter = sandbox.store.createRateLimiter({ keyPrefix: 'login', points: 5, durationSeconds: 60 });
    for (let i = 0; i < 5; i += 1) await sandboxLimiter.consume('alice');

    const rotateArgs = {
      token,
      credentialId: 'c',
      fingerprint: 'fp',
      notBefore: 0,
      next: { tokenHash: `h_${randomUUID()}`, sealed: 's' },
      newExpiresAt: T0 + DAY,
      now: T0 + 100,
      graceMs: GRACE,
    };
    expect(await production.store.sessions.rotate(rotateArgs)).toEqual({ outcome: 'unknown' });
    expect(await production.store.sessions.revokeFamily({ token, credentialId: 'c', fingerprint: 'fp', notBefore: 0, now: T0 + 100, graceMs: GRACE })).toBe(
      'unknown',
    );
    expect(await production.store.idempotency.peek('acct-1:req-1', T0 + 100)).toEqual({ state: 'reserved' });
    expect(await production.store.idempotency.reserve('acct-1:req-1', { owner: 'gw-2', now: T0 + 100, leaseMs: 10_000, attempt: ATTEMPT })).toEqual({
      state: 'reserved',
    });
    expect((await production.store.lockouts.read('alice', T0 + 100)).lockedUntil).toBe(0);
    await expect(production.store.createRateLimiter({ keyPrefix: 'login', points: 5, durationSeconds: 60 }).consume('alice')).resolves.toMatchObject({
      remaining: 4,
    });

    // and the sandbox's own state is untouched by production's writes
    expect(await sandbox.store.idempotency.peek('acct-1:req-1', T0 + 100)).toEqual({ state: 'completed', record });
    expect((await sandbox.store.sessions.rotate(rotateArgs)).outcome).toBe('rotated');
    expect((await sandbox.store.lockouts.read('alice', T0 + 100)).lockedUntil).toBeGreaterThan(0);
  });

  it('shares everything between replicas on the same prefix', async () => {
    const first = await open('replicas');
    const client = createRedisClient({ url: requireRedisUrl(), commandTimeoutMs: 300, connectTimeoutMs: 500 });
    client.on('error', () => undefined);
    const second = new RedisStore(client, first.prefix);
    try {
      expect(await waitUntilReady(client, 5_000)).toBe(true);
      const token = freshToken();
      await first.store.sessions.createFamily({ token, credentialId: 'c', fingerprint: 'fp', expiresAt: T0 + DAY, endsAt: T0 + DAY, now: T0 });
      const results = await Promise.all(
        [first.store, second, first.store, second].map((s, i) =>
          s.sessions.rotate({
            token,
            credentialId: 'c',
            fingerprint: 'fp',
            notBefore: 0,
            next: { tokenHash: `h_${i}`, sealed: `s_${i}` },
            newExpiresAt: T0 + DAY,
            now: T0 + 1_000 + i,
            graceMs: GRACE,
          }),
        ),
      );
      // one rotated; the others, on either replica, were answered its token as siblings
      const rotated = results.findIndex((result) => result.outcome === 'rotated');
      expect(results.map((result) => result.outcome).sort()).toEqual(['rotated', 'sibling', 'sibling', 'sibling']);
      for (const result of results) if (result.outcome === 'sibling') expect(result).toMatchObject({ tokenHash: `h_${rotated}`, sealed: `s_${rotated}` });
      expect(
        // the grace runs from the rotation (T0 + 1 000 to 1 003, whichever ran first)
        await second.sessions.rotate({
          token,
          credentialId: 'c',
          fingerprint: 'fp',
          notBefore: 0,
          next: { tokenHash: 'h_late', sealed: 's' },
          newExpiresAt: T0 + DAY,
          now: T0 + 1_003 + GRACE,
          graceMs: GRACE,
        }),
      ).toEqual({ outcome: 'reuse' });
      expect(
        await first.store.sessions.rotate({
          token: { ...token, generation: 1, tokenHash: `h_${rotated}` },
          credentialId: 'c',
          fingerprint: 'fp',
          notBefore: 0,
          next: { tokenHash: 'h_x', sealed: 's' },
          newExpiresAt: T0 + DAY,
          now: T0 + 2 * GRACE,
          graceMs: GRACE,
        }),
      ).toEqual({ outcome: 'revoked' });

      await first.store.idempotency.reserve('acct-1:req-1', { owner: 'gw-1', now: T0, leaseMs: 10_000, attempt: ATTEMPT });
      expect(await second.idempotency.reserve('acct-1:req-1', { owner: 'gw-2', now: T0 + 1, leaseMs: 10_000, attempt: ATTEMPT })).toEqual({
        state: 'pending',
        leaseExpiresAt: T0 + 10_000,
      });

      const a = first.store.createRateLimiter({ keyPrefix: 'login', points: 5, durationSeconds: 60 });
      const b = second.createRateLimiter({ keyPrefix: 'login', points: 5, durationSeconds: 60 });
      for (let i = 0; i < 5; i += 1) await (i % 2 ? a : b).consume('alice');
      await expect(b.consume('alice')).resolves.toMatchObject({ exceeded: true });
    } finally {
      await second.close();
    }
  });
});

describe('RedisStore: fail fast when Redis is unreachable (D23)', () => {
  let store: RedisStore;
  let client: Redis;

  beforeEach(async () => {
    const port = await unusedPort();
    client = createRedisClient({ url: `redis://127.0.0.1:${port}`, commandTimeoutMs: 300, connectTimeoutMs: 500 });
    // The first refused connection: from here on the client is in its reconnect loop, as in an outage.
    const refused = once(client, 'error', { signal: AbortSignal.timeout(3_000) });
    store = new RedisStore(client, uniquePrefix('down'));
    await refused;
    client.on('error', () => undefined);
  });

  afterEach(async () => {
    await store.close();
    client.disconnect();
  });

  const token = freshToken();
  const operations = everyStoreOperation(() => store, token);

  for (const [name, operation] of operations) {
    it(`rejects ${name} with StoreUnavailableError`, async () => {
      const error = await operation().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(StoreUnavailableError);
    });
  }

  it('rejects a rate-limiter consume with a StoreUnavailableError, not an over-the-limit answer', async () => {
    const limiter = store.createRateLimiter({ keyPrefix: 'login', points: 5, durationSeconds: 60 });
    const error = await limiter.consume('alice').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(StoreUnavailableError);
  });

  it('fails fast even before the first connection attempt has failed', async () => {
    const port = await unusedPort();
    const fresh = createRedisClient({ url: `redis://127.0.0.1:${port}`, commandTimeoutMs: 300, connectTimeoutMs: 500 });
    fresh.on('error', () => undefined);
    const early = new RedisStore(fresh, uniquePrefix('down-early'));
    try {
      await expect(early.ping()).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(early.idempotency.reserve('k', { owner: 'o', now: T0, leaseMs: 1_000, attempt: ATTEMPT })).rejects.toBeInstanceOf(StoreUnavailableError);
    } finally {
      await early.close();
      fresh.disconnect();
    }
  });
});

describe('RedisStore: scripts that arrive after the gateway gave up change nothing', () => {
  it('regression: a rotation, logout or idempotency claim that reaches Redis past its deadline is a no-op (a paused Redis resuming cannot rotate or revoke behind a client that got 503)', async () => {
    const { store, client, prefix } = await open('stale');
    // Same namespace and client, but every guarded script is already past its deadline on arrival.
    const late = new RedisStore(client, prefix, { ownsClient: false, deadlineMs: -10_000 });
    const token = freshToken();
    await store.sessions.createFamily({ token, credentialId: 'cred-1', fingerprint: 'fp', expiresAt: T0 + DAY, endsAt: T0 + DAY, now: T0 });

    await expect(
      late.sessions.rotate({
        token,
        credentialId: 'cred-1',
        fingerprint: 'fp',
        notBefore: 0,
        next: { tokenHash: 'h_late', sealed: 's' },
        newExpiresAt: T0 + DAY,
        now: T0 + 1_000,
        graceMs: GRACE,
      }),
    ).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(
      late.sessions.revokeFamily({ token, credentialId: 'cred-1', fingerprint: 'fp', notBefore: 0, now: T0 + 1_000, graceMs: GRACE }),
    ).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(late.idempotency.reserve('acct-1:req-late', { owner: 'gw-late', now: T0, leaseMs: 10_000, attempt: ATTEMPT })).rejects.toBeInstanceOf(
      StoreUnavailableError,
    );

    // Nothing happened: the token was never rotated (so a retry more than a grace later is not
    // reuse), the family is not revoked, and the requestId is free for another claim.
    expect(await client.hmget(`${prefix}ses:{${token.familyId}}`, 'gen', 'ch', 'rev')).toEqual(['0', token.tokenHash, null]);
    expect(
      await store.sessions.rotate({
        token,
        credentialId: 'cred-1',
        fingerprint: 'fp',
        notBefore: 0,
        next: { tokenHash: 'h_next', sealed: 's' },
        newExpiresAt: T0 + DAY,
        now: T0 + 2 * GRACE,
        graceMs: GRACE,
      }),
    ).toMatchObject({ outcome: 'rotated' });
    expect(await store.idempotency.reserve('acct-1:req-late', { owner: 'gw-other', now: T0, leaseMs: 10_000, attempt: ATTEMPT })).toEqual({
      state: 'reserved',
    });
  });
});

describe('RedisStore: rate limiters made at any time', () => {
  it("regression: a limiter made and used while an automatic pipeline is open (the health check's PING) works", async () => {
    const { store } = await open('limiter-pipeline');
    await store.ping();
    // Same tick: the PING opens an automatic pipeline, then the limiter defines its script and calls it.
    const pinged = store.ping();
    const consumed = store.createRateLimiter({ keyPrefix: 'rl:late:', points: 5, durationSeconds: 60 }).consume('alice');
    await expect(consumed).resolves.toMatchObject({ consumed: 1 });
    await expect(pinged).resolves.toBeUndefined();
  });
});
