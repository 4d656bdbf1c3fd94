import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisClient, waitUntilReady } from '../../src/store/redis/redis-client.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import type { NewEvent } from '../../src/store/event-store.js';
import { StoreUnavailableError, type StoreEvent, type TokenRef } from '../../src/store/store-types.js';
import { startPrivateRedis, type PrivateRedis } from '../support/private-redis.js';
import { adminConnection, fillUntilOutOfMemory, freeFillers, serverMemory } from '../support/redis-memory.js';
import { keysWithPrefix, uniquePrefix } from '../support/redis.js';
import { sampleRecord } from './store-contract.js';

/**
 * D54 at the store: a Redis at its `maxmemory` with `noeviction` refuses every write the
 * gateway sends before the write happens. Each script, the session MULTI and the limiter's own
 * script are run against a full private redis-server from a state where they would write (a
 * released claim to take over, an own claim to complete, a live family to rotate or revoke, a
 * counted lockout and limiter): each is refused with a failure named `out_of_memory`, no key the
 * store holds changes, and the dataset does not grow. Reads still answer; once memory is freed
 * every write works again.
 */
const T0 = 1_700_000_000_000;
const DAY = 24 * 60 * 60 * 1000;
const ATTEMPT = { fingerprint: 'fp', requestedCardLimit: 1000, credentialId: 'cred-1' };
const ENDPOINT = { issuingAccount: 'acct', endpointId: 'ep-1' };
const eventOf = (id: string): NewEvent => ({
  id,
  type: 'card.created',
  cardId: 'card_1',
  createdAt: T0,
  head: `{"id":"${id}","type":"card.created","sequence":`,
  tail: ',"data":{}}',
  endpoints: [ENDPOINT.endpointId],
});

describe('RedisStore on a Redis out of memory (D54)', () => {
  let redis: PrivateRedis;
  let admin: Redis;
  let store: RedisStore;
  let prefix: string;
  let fillers = 0;
  const events: StoreEvent[] = [];
  const family: TokenRef = { familyId: `fam_${randomUUID()}`, generation: 0, tokenHash: 'h_first' };
  /** A family of the format before issue 35 (a family hash and a hash per token), written as that version wrote it. */
  const legacy: TokenRef = { familyId: `fam_${randomUUID()}`, tokenHash: 'h_legacy' };

  beforeAll(async () => {
    redis = await startPrivateRedis();
    admin = adminConnection(redis.url);
    prefix = uniquePrefix('oom');
    const client = createRedisClient({ url: redis.url, commandTimeoutMs: 300, connectTimeoutMs: 500 });
    store = new RedisStore(client, prefix);
    store.subscribe((event) => events.push(event));
    expect(await waitUntilReady(client, 5_000)).toBe(true);
    await store.ping();

    // State from which every write operation would write.
    await store.sessions.createFamily({ token: family, credentialId: 'cred-1', fingerprint: 'fp', expiresAt: T0 + DAY, endsAt: T0 + 7 * DAY, now: T0 });
    await admin.hset(`${prefix}fam:{${legacy.familyId}}`, 'cred', 'cred-1', 'revoked', '0', 'fp', 'fp', 'login', String(T0), 'end', String(T0 + 7 * DAY));
    await admin.hset(`${prefix}rt:{${legacy.familyId}}:${legacy.tokenHash}`, 'exp', String(T0 + DAY));
    await store.idempotency.reserve('acct:released', { owner: 'gw-a', now: T0, leaseMs: 10_000, attempt: ATTEMPT });
    await store.idempotency.release('acct:released', { owner: 'gw-a', now: T0, keepUntil: T0 + DAY });
    await store.idempotency.reserve('acct:pending', { owner: 'gw-a', now: T0, leaseMs: 10_000, attempt: ATTEMPT });
    await store.lockouts.recordFailure('alice', { now: T0, maxFailures: 5, lockoutMs: 60_000 });
    await store.createRateLimiter({ keyPrefix: 'rl:login:', points: 5, durationSeconds: 60 }).consume('alice');
    // Events: a delivery claimed (to settle), one failed (to redeliver), one due (to claim).
    for (const id of ['evt_1', 'evt_2', 'evt_3']) await store.events.record('acct', eventOf(id), { now: Date.now(), expiresAt: Date.now() + DAY });
    await store.events.claimDue(ENDPOINT, { now: T0, leaseMs: 10_000, limit: 2, owner: 'gw-a' });
    await store.events.settle(ENDPOINT, 'evt_2', 'gw-a', { kind: 'failed', error: 'status 500' }, { now: T0, keepUntil: T0 + DAY });
    // Every event script loaded now, not while memory is full: Redis 7.0 keeps about 25 KB per
    // script it has compiled, refused ones included, which the margin after the fill would not cover.
    await store.events.redeliver(ENDPOINT, ['evt_unknown'], T0);
    await Promise.all([
      store.events.scan('acct', { limit: 1 }),
      store.events.get('acct', 'evt_1'),
      store.events.backlog(ENDPOINT),
      store.events.deliveries(ENDPOINT, { state: 'failed', limit: 1 }),
      store.events.delivery(ENDPOINT, 'evt_1'),
    ]);
  }, 30_000);

  afterAll(async () => {
    await store?.close();
    admin?.disconnect();
    await redis?.stop();
  });

  /** Every key of the store with its serialized value: what "nothing changed" compares. */
  async function snapshot(): Promise<Map<string, string>> {
    const keys = (await keysWithPrefix(admin, prefix)).sort();
    const values = await Promise.all(keys.map(async (key) => (await admin.dumpBuffer(key))?.toString('base64') ?? 'gone'));
    return new Map(keys.map((key, index) => [key, values[index] ?? 'gone']));
  }

  const writes: [string, () => Promise<unknown>][] = [
    [
      'sessions.createFamily (MULTI)',
      () =>
        store.sessions.createFamily({
          token: { familyId: `fam_${randomUUID()}`, generation: 0, tokenHash: 'h' },
          credentialId: 'c',
          fingerprint: 'fp',
          expiresAt: T0 + DAY,
          endsAt: T0 + 7 * DAY,
          now: T0,
        }),
    ],
    [
      'sessions.rotate',
      () =>
        store.sessions.rotate({
          token: family,
          credentialId: 'cred-1',
          next: { tokenHash: 'h_next', sealed: 's' },
          newExpiresAt: T0 + DAY,
          now: T0 + 1,
          graceMs: 60_000,
          fingerprint: 'fp',
          notBefore: 0,
        }),
    ],
    [
      'sessions.revokeFamily',
      () => store.sessions.revokeFamily({ token: family, credentialId: 'cred-1', now: T0 + 1, graceMs: 60_000, fingerprint: 'fp', notBefore: 0 }),
    ],
    [
      'sessions.rotate (a token of the earlier format)',
      () =>
        store.sessions.rotate({
          token: legacy,
          credentialId: 'cred-1',
          next: { tokenHash: 'h_legacy_next', sealed: '' },
          newExpiresAt: T0 + DAY,
          now: T0 + 1,
          graceMs: 60_000,
          fingerprint: 'fp',
          notBefore: 0,
        }),
    ],
    [
      'sessions.revokeFamily (a token of the earlier format)',
      () => store.sessions.revokeFamily({ token: legacy, credentialId: 'cred-1', now: T0 + 1, graceMs: 60_000, fingerprint: 'fp', notBefore: 0 }),
    ],
    // A released claim is taken over by deleting the hash and writing it anew: the script that wrote past maxmemory.
    [
      'idempotency.reserve (takes over a released claim)',
      () => store.idempotency.reserve('acct:released', { owner: 'gw-b', now: T0 + 1, leaseMs: 10_000, attempt: ATTEMPT }),
    ],
    [
      'idempotency.reserve (a new key)',
      () => store.idempotency.reserve(`acct:${randomUUID()}`, { owner: 'gw-b', now: T0 + 1, leaseMs: 10_000, attempt: ATTEMPT }),
    ],
    [
      'idempotency.complete (its own claim)',
      () => store.idempotency.complete('acct:pending', { owner: 'gw-a', record: sampleRecord(), expiresAt: T0 + DAY, now: T0 + 1 }),
    ],
    ['idempotency.release (its own claim)', () => store.idempotency.release('acct:pending', { owner: 'gw-a', now: T0 + 1, keepUntil: T0 + DAY })],
    ['lockouts.recordFailure', () => store.lockouts.recordFailure('alice', { now: T0 + 1, maxFailures: 5, lockoutMs: 60_000 })],
    ['limiter consume (rlflxIncr)', () => store.createRateLimiter({ keyPrefix: 'rl:login:', points: 5, durationSeconds: 60 }).consume('alice')],
    ['events.record', () => store.events.record('acct', eventOf('evt_4'), { now: Date.now(), expiresAt: Date.now() + DAY })],
    ['events.claimDue (a due delivery)', () => store.events.claimDue(ENDPOINT, { now: T0 + 10_000, leaseMs: 10_000, limit: 10, owner: 'gw-b' })],
    ['events.settle (its own claim)', () => store.events.settle(ENDPOINT, 'evt_1', 'gw-a', { kind: 'delivered' }, { now: T0 + 1, keepUntil: T0 + DAY })],
    ['events.redeliver (a failed delivery)', () => store.events.redeliver(ENDPOINT, 'all-failed', T0 + 1)],
  ];

  it('refuses every write before it writes, names the failure out_of_memory, and counts each', async () => {
    ({ fillers } = await fillUntilOutOfMemory(admin));
    const before = await snapshot();
    const memoryBefore = await serverMemory(admin);

    const outcomes: Record<string, unknown> = {};
    for (const [name, write] of writes) {
      outcomes[name] = await write().then(
        (answer) => ({ answered: answer }),
        (error: unknown) => (error instanceof StoreUnavailableError ? { refused: error.failure?.reason } : { other: String(error) }),
      );
    }
    expect(outcomes).toEqual(Object.fromEntries(writes.map(([name]) => [name, { refused: 'out_of_memory' }])));

    // Nothing the store holds changed, and no key was added.
    expect(await snapshot()).toEqual(before);
    const memoryAfter = await serverMemory(admin);
    expect(memoryAfter.keys).toBe(memoryBefore.keys);
    // Buffers and bookkeeping move a few hundred bytes; one refused card record alone is over 1 KB.
    expect(memoryAfter.dataset - memoryBefore.dataset).toBeLessThan(1024);
    expect(store.describe().failedOperations).toMatchObject({ out_of_memory: writes.length });
  });

  it('still answers reads, and deletes (which free memory)', async () => {
    await expect(store.idempotency.peek('acct:released', T0 + 1)).resolves.toMatchObject({ state: 'reserved', previous: ATTEMPT });
    await expect(store.lockouts.read('alice', T0 + 1)).resolves.toEqual({ lockedUntil: 0, failures: 1 });
    // the event reads are scripts that say they only read (flags=no-writes)
    await expect(store.events.scan('acct', { limit: 10 })).resolves.toHaveLength(3);
    await expect(store.events.get('acct', 'evt_1')).resolves.toMatchObject({ sequence: 1 });
    await expect(store.events.backlog(ENDPOINT)).resolves.toEqual({ pending: 2, failed: 1, oldestDueAt: T0 });
    await expect(store.events.deliveries(ENDPOINT, { state: 'failed', limit: 10 })).resolves.toMatchObject([{ eventId: 'evt_2' }]);
    await expect(store.events.delivery(ENDPOINT, 'evt_1')).resolves.toMatchObject({ state: 'pending', attempts: 1 });
  });

  it('describes itself down with the reason, says so once, and /readyz gets the reason from ping', async () => {
    const refused = await store.ping().then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(StoreUnavailableError);
    expect((refused as StoreUnavailableError).reason).toMatch(
      /^out_of_memory: used memory \d+ of maxmemory \d+ bytes on 127\.0\.0\.1:\d+; writes are refused \(OOM\)$/,
    );
    expect(store.describe()).toMatchObject({ up: false, failure: { reason: 'out_of_memory' }, evictingPolicy: undefined });
    expect(store.describe().memoryUsedRatio).toBeGreaterThan(0.95);
    await store.ping().catch(() => undefined);
    expect(events.filter((event) => event.kind === 'down')).toEqual([expect.objectContaining({ kind: 'down', reason: 'out_of_memory' })]);
  });

  it('serves every write again once memory is freed, from the state it had', async () => {
    await freeFillers(admin, fillers);
    await store.ping();
    expect(store.describe()).toMatchObject({ up: true, failure: undefined });
    expect(events.map((event) => event.kind)).toEqual(['up', 'down', 'up']);
    await expect(store.idempotency.reserve('acct:released', { owner: 'gw-b', now: T0 + 2, leaseMs: 10_000, attempt: ATTEMPT })).resolves.toEqual({
      state: 'reserved',
      previous: ATTEMPT,
    });
    await expect(
      store.idempotency.complete('acct:pending', { owner: 'gw-a', record: sampleRecord(), expiresAt: T0 + DAY, now: T0 + 2 }),
    ).resolves.toBeUndefined();
    await expect(
      store.sessions.rotate({
        token: family,
        credentialId: 'cred-1',
        next: { tokenHash: 'h_next', sealed: 's' },
        newExpiresAt: T0 + DAY,
        now: T0 + 2,
        graceMs: 60_000,
        fingerprint: 'fp',
        notBefore: 0,
      }),
    ).resolves.toMatchObject({ outcome: 'rotated' });
    await expect(store.lockouts.recordFailure('alice', { now: T0 + 2, maxFailures: 5, lockoutMs: 60_000 })).resolves.toBe(0);
    await expect(store.createRateLimiter({ keyPrefix: 'rl:login:', points: 5, durationSeconds: 60 }).consume('alice')).resolves.toMatchObject({
      consumed: 2,
    });
    // the refused event is recorded now (by the caller's retry, or by the repair of the write before it: the same once)
    await expect(store.events.record('acct', eventOf('evt_4'), { now: Date.now(), expiresAt: Date.now() + DAY })).resolves.toEqual({
      state: 'recorded',
      id: 'evt_4',
      sequence: 4,
    });
  });
});
