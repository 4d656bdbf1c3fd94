import { afterEach, describe, expect, it } from 'vitest';
import { startSandboxConnector, type RunningSandboxConnector } from '../../src/connector/sandbox/sandbox-connector.js';
import { ManualClock } from '../../src/foundation/clock.js';
import { createRedisClient } from '../../src/store/redis/redis-client.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { StoreUnavailableError, type GatewayStore } from '../../src/store/store-types.js';
import { CARDS, connectorStats, createCard, expectCard, startCardFixture, validCardBody, type CardFixture } from '../support/card-fixture.js';
import { CountingStore } from '../support/counting-store.js';
import { FaultyStore } from '../support/faulty-store.js';
import { createTestRedisStore, requireRedisUrl, TEST_COMMAND_TIMEOUT_MS } from '../support/redis.js';
import { PASSWORD, type TestCredential } from '../support/config-fixture.js';
import { waitFor } from '../support/wait.js';

/**
 * Issue 20: a card is answered before its idempotency record is acknowledged by the store. The
 * record's write is held by the test (FaultyStore.hold), so "answered while the write is under
 * way" is a state the test asserts, not a race; every check is an order or a count.
 */

const closers: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

interface Setup {
  connector: RunningSandboxConnector;
  clock: ManualClock;
  /** Replica A's store: the real Redis store, its record writes holdable. */
  storeA: FaultyStore;
  prefix: string;
  a: CardFixture;
}

/** Creates, reads and reveals its own cards. */
const CREDENTIALS: TestCredential[] = [
  { id: 'cred-life', username: 'life', password: PASSWORD, issuingAccount: 'acct-eu', permissions: ['cards:create', 'cards:read', 'cards:reveal'] },
];

async function startReplicaA(overrides: Record<string, unknown> = {}): Promise<Setup> {
  const connector = await startSandboxConnector({ host: '127.0.0.1', port: 0, controls: true });
  closers.push(() => connector.close());
  const shared = await createTestRedisStore('card-record-after-answer');
  closers.push(() => shared.cleanup());
  const storeA = new FaultyStore(shared.store);
  const clock = new ManualClock();
  const a = await startCardFixture({ store: storeA, clock, connector, connectorTimeoutMs: 30_000, overrides, credentials: CREDENTIALS });
  closers.push(() => a.close());
  return { connector, clock, storeA, prefix: shared.prefix, a };
}

/** A second replica: its own Redis client and store on the same prefix, and the same connector. */
async function startReplicaB(setup: Setup): Promise<{ b: CardFixture; storeB: CountingStore }> {
  const client = createRedisClient({ url: requireRedisUrl(), commandTimeoutMs: TEST_COMMAND_TIMEOUT_MS, connectTimeoutMs: 5_000 });
  client.on('error', () => undefined);
  const redisStore = new RedisStore(client, setup.prefix, { commandTimeoutMs: TEST_COMMAND_TIMEOUT_MS, deadlineMs: TEST_COMMAND_TIMEOUT_MS + 2_000 });
  closers.push(() => redisStore.close());
  const storeB = new CountingStore(redisStore);
  // A long connector timeout: B's wait for A's record is bounded by it, and the test decides when the record lands.
  const b = await startCardFixture({ store: storeB, clock: setup.clock, connector: setup.connector, connectorTimeoutMs: 30_000, credentials: CREDENTIALS });
  closers.push(() => b.close());
  return { b, storeB };
}

const recordKeyOf = (body: Record<string, unknown>): string => `acct-eu:${String(body['requestId'])}`;

async function recordState(store: GatewayStore, clock: ManualClock, body: Record<string, unknown>): Promise<string> {
  return (await store.idempotency.peek(recordKeyOf(body), clock.now())).state;
}

/** Tracks whether a request (or a close) has settled yet, without waiting for it. */
function pending<T>(request: Promise<T>): { answered: () => boolean; response: Promise<T> } {
  let answered = false;
  void request.then(
    () => (answered = true),
    () => (answered = true),
  );
  return { answered: () => answered, response: request };
}

describe('the card is answered before its idempotency record is acknowledged (issue 20)', () => {
  it('answers 201 while the record write is held; after the release the record is in the store and a replay is answered from it', async () => {
    const { a, storeA, clock, connector } = await startReplicaA();
    const held = storeA.hold('idempotency', 'complete');
    const token = await a.token('life');
    const body = validCardBody();

    const card = expectCard(await createCard(a.gw, token, body));
    // The record is written once the answer is on its way: its write starts a turn after it.
    await waitFor('the record write to reach the held store', () => held.waiting === 1);
    expect(held.done).toBe(0);
    // Claimed, not completed: nobody but this process knows the answer yet.
    expect(await recordState(storeA.inner, clock, body)).toBe('pending');

    held.release();
    await waitFor('the record to land', async () => (await recordState(storeA.inner, clock, body)) === 'completed');
    expect(held.done).toBe(1);

    const replay = await createCard(a.gw, token, body);
    expect(expectCard(replay)).toEqual(card);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    const stats = await connectorStats(connector);
    expect(stats.cardsCreated).toBe(1);
    expect(stats.requestsReceived).toBe(1);
  });

  it('a duplicate in the same process while the write is held is answered from memory: no claim, no poll, no second forward', async () => {
    const connector = await startSandboxConnector({ host: '127.0.0.1', port: 0, controls: true });
    closers.push(() => connector.close());
    const shared = await createTestRedisStore('card-record-after-answer');
    closers.push(() => shared.cleanup());
    const faulty = new FaultyStore(shared.store);
    const counting = new CountingStore(faulty);
    const a = await startCardFixture({ store: counting, connector, connectorTimeoutMs: 30_000, credentials: CREDENTIALS });
    closers.push(() => a.close());
    const held = faulty.hold('idempotency', 'complete');
    const token = await a.token('life');
    const body = validCardBody();

    const card = expectCard(await createCard(a.gw, token, body));
    counting.reset();
    const duplicate = await createCard(a.gw, token, body);
    expect(expectCard(duplicate)).toEqual(card);
    expect(duplicate.headers['idempotent-replayed']).toBe('true');
    expect(counting.calls.get('idempotency.reserve') ?? 0).toBe(0);
    expect(counting.calls.get('idempotency.peek') ?? 0).toBe(0);
    // The record is written once the answer is on its way: its write starts a turn after it.
    await waitFor('the record write to reach the held store', () => held.waiting === 1);

    held.release();
    await waitFor('the record to land', () => held.done === 1);
    expect((await connectorStats(connector)).requestsReceived).toBe(1);
  });

  it('a duplicate on another replica during the held write waits, and is answered the same card once the record lands', async () => {
    const setup = await startReplicaA();
    const { a, storeA, connector } = setup;
    const { b, storeB } = await startReplicaB(setup);
    const held = storeA.hold('idempotency', 'complete');
    const [tokenA, tokenB] = await Promise.all([a.token('life'), b.token('life')]);
    const body = validCardBody();

    const card = expectCard(await createCard(a.gw, tokenA, body));
    storeB.reset();
    const duplicate = pending(createCard(b.gw, tokenB, body));
    // B found the key claimed and has looked at it again: it waits for the record, and the record is held.
    await waitFor('replica B to poll the claimed key (or to answer)', () => (storeB.calls.get('idempotency.peek') ?? 0) >= 1 || duplicate.answered());
    if (duplicate.answered()) {
      const early = await duplicate.response;
      expect.fail(`replica B answered before the record landed: ${early.statusCode} ${early.body} after ${JSON.stringify(storeB.counted())}`);
    }
    // The record is written once the answer is on its way: its write starts a turn after it.
    await waitFor('the record write to reach the held store', () => held.waiting === 1);

    held.release();
    const answer = await duplicate.response;
    expect(expectCard(answer)).toEqual(card);
    expect(answer.headers['idempotent-replayed']).toBe('true');
    // B answers from the record in Redis; A's own write is counted once its reply has been read,
    // which may be a turn after B's poll saw the record.
    await waitFor('the held write to be answered by the store', () => held.done === 1);
    const stats = await connectorStats(connector);
    expect(stats.cardsCreated).toBe(1);
    expect(stats.requestsReceived).toBe(1);
  });

  it('a reveal in the creating process while the write is held finds the creator in memory; another replica refuses it until the record lands', async () => {
    const setup = await startReplicaA();
    const { a, storeA } = setup;
    const { b } = await startReplicaB(setup);
    const held = storeA.hold('idempotency', 'complete');
    const [tokenA, tokenB] = await Promise.all([a.token('life'), b.token('life')]);
    const reveal = (fixture: CardFixture, token: string, cardId: string) =>
      fixture.gw.inject({ method: 'GET', url: `${CARDS}/${cardId}?revealDetails=true`, headers: { authorization: `Bearer ${token}` } });

    const card = expectCard(await createCard(a.gw, tokenA, validCardBody()));
    const revealed = await reveal(a, tokenA, card.cardId);
    expect(revealed.statusCode, revealed.body).toBe(200);
    const shown = revealed.json<{ pan: string; cvc: string }>();
    expect(shown.pan).toMatch(/^\d{12,19}$/);
    expect(shown.cvc).toMatch(/^\d{3,4}$/);
    // The documented limit: only the creating process knows the creator before the store does.
    expect((await reveal(b, tokenB, card.cardId)).statusCode).toBe(403);
    // The record is written once the answer is on its way: its write starts a turn after it.
    await waitFor('the record write to reach the held store', () => held.waiting === 1);

    held.release();
    await waitFor('the record to land', () => held.done === 1);
    expect((await reveal(b, tokenB, card.cardId)).statusCode).toBe(200);
  });

  it('a failed record write still answers 201 and is logged as card.record_deferred, without a second forward', async () => {
    const { a, storeA, connector } = await startReplicaA();
    const held = storeA.hold('idempotency', 'complete');
    const token = await a.token('life');

    const card = expectCard(await createCard(a.gw, token, validCardBody()));
    const deferred = (line: string) => line.includes('its idempotency record is written when the store answers again');
    expect(a.gw.logs.lines.filter(deferred)).toEqual([]);

    held.release(new StoreUnavailableError(new Error('injected outage')));
    const line = await waitFor('the deferred record to be logged', () => a.gw.logs.lines.find(deferred));
    expect(JSON.parse(line)).toMatchObject({ level: 'warn', cardId: card.cardId, reason: expect.any(String) as string });
    expect(held.done).toBe(0);
    expect((await connectorStats(connector)).requestsReceived).toBe(1);
  });

  it('with store.redis.replicasToAck the answer still waits for the record (D35)', async () => {
    const { a, storeA } = await startReplicaA({ store: { kind: 'redis', redis: { url: requireRedisUrl(), keyPrefix: 'test:unused:', replicasToAck: 1 } } });
    const held = storeA.hold('idempotency', 'complete');
    const token = await a.token('life');

    const creation = pending(createCard(a.gw, token, validCardBody()));
    await held.whenWaiting(1);
    expect(creation.answered()).toBe(false);
    held.release();
    expectCard(await creation.response);
    expect(held.done).toBe(1);
  });

  it('closing the app waits for a held record write: the record is in the store when close returns', async () => {
    const { a, storeA, clock } = await startReplicaA();
    const held = storeA.hold('idempotency', 'complete');
    const token = await a.token('life');
    const body = validCardBody();
    expectCard(await createCard(a.gw, token, body));

    const app = a.gw.gateway.app;
    const closing = pending(app.close());
    // Fastify refuses inject once closing has begun: from then on only the drain stands between it and the end.
    await waitFor('the app to start closing', async () => {
      try {
        await app.inject({ method: 'GET', url: '/' });
        return false;
      } catch {
        return true;
      }
    });
    expect(closing.answered()).toBe(false);
    // The record is written once the answer is on its way: its write starts a turn after it.
    await waitFor('the record write to reach the held store', () => held.waiting === 1);

    held.release();
    await closing.response;
    expect(held.done).toBe(1);
    expect(await recordState(storeA.inner, clock, body)).toBe('completed');
  });
});
