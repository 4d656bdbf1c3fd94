import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/foundation/clock.js';
import { createRedisClient } from '../../src/store/redis/redis-client.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { StoreUnavailableError } from '../../src/store/store-types.js';
import { startSandboxConnector } from '../../src/connector/sandbox/sandbox-connector.js';
import {
  connectorStats,
  createCard,
  FIXTURE_CONNECTOR_TIMEOUT_MS,
  setConnectorMode,
  startCardFixture,
  validCardBody,
  type CardAnswer,
  type CardFixture,
} from '../support/card-fixture.js';
import { startHeldConnector, type HeldConnector } from '../support/held-connector.js';
import { startPrivateRedis, type PrivateRedis } from '../support/private-redis.js';
import { readIdempotency } from '../support/redis.js';
import { waitUntilPingable } from '../support/redis-topologies.js';
import { startCuttingProxy, type CuttingProxy } from './cutting-proxy.js';
import { HANG_GUARD_MS, sleep, waitFor } from '../support/wait.js';

/**
 * Issue 10, "already seen on one Redis": an idempotency write whose reply is lost. A master that
 * dies between running a script and answering it, or a connection that breaks just before a
 * command goes out, leaves the gateway not knowing what happened. The client got 503 (or its
 * card) and D23 says it can simply retry; these tests make the loss happen for real (a TCP proxy
 * in front of a real redis-server cuts the connection at the chosen command and refuses new ones
 * for a second, like a failover) and check that the retry is served at once: no wait for a lease
 * that outlives the outage, no 409 with nothing in flight, one card.
 */

const PREFIX = `test:lost-replies:${randomUUID().slice(0, 8)}:`;
const OUTAGE_MS = 1000;
/** Longer than any hang guard: a lease that cannot end by itself during the test. */
const LONG_LEASE_MS = 3_600_000;
const ATTEMPT = { fingerprint: 'fp', requestedCardLimit: 1000, credentialId: 'cred-1' };

let redis: PrivateRedis;
let admin: Redis;

beforeAll(async () => {
  redis = await startPrivateRedis();
  admin = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  admin.on('error', () => undefined);
});

afterAll(async () => {
  admin?.disconnect();
  await redis?.stop();
});

const opened: { proxy: CuttingProxy; store: RedisStore; fixture?: CardFixture; after?: () => Promise<void> }[] = [];
afterEach(async () => {
  for (const { proxy, store, fixture, after } of opened.splice(0)) {
    await fixture?.close();
    await after?.();
    await store.close();
    await proxy.close();
  }
});

/**
 * How long after sending a guarded script may still run. The tests need the cut command to run
 * (its reply is what gets lost), and a heavily oversubscribed machine once took more than 1.3 s
 * to get a claim through the proxy, which the deadline then made a no-op. Not longer: a repair
 * waits the deadline out, so each test waits it too.
 */
const SCRIPT_DEADLINE_MS = 3000;

/** A store reaching Redis through a cutting proxy, tuned like production (300 ms commands). */
async function open(): Promise<{ proxy: CuttingProxy; store: RedisStore }> {
  const proxy = await startCuttingProxy(redis.port);
  const client = createRedisClient({ url: proxy.url, commandTimeoutMs: 300, connectTimeoutMs: 500 });
  const store = new RedisStore(client, PREFIX, { commandTimeoutMs: 300, deadlineMs: SCRIPT_DEADLINE_MS });
  await waitUntilPingable(store, 5_000);
  const made = { proxy, store };
  opened.push(made);
  return made;
}

async function openGateway(): Promise<{ proxy: CuttingProxy; store: RedisStore; fixture: CardFixture; token: string }> {
  const made = await open();
  // A clock that stands still: a lost claim's lease never runs out by itself here, so only the
  // repair can free the key (with a moving clock it would after the connector timeout + 5 s).
  const fixture = await startCardFixture({ store: made.store, clock: new ManualClock(Date.now()), connectorTimeoutMs: 1000 });
  opened[opened.length - 1]!.fixture = fixture;
  return { ...made, fixture, token: await fixture.token() };
}

/**
 * Like {@link openGateway}, with card requests held between the gateway and the connector until
 * released: the test decides when the connector answers, so the connector deadline is the
 * fixture's generous one (the hold counts against it).
 */
async function openHeldGateway(): Promise<{ proxy: CuttingProxy; store: RedisStore; fixture: CardFixture; token: string; held: HeldConnector }> {
  const made = await open();
  const entry = opened[opened.length - 1]!;
  const connector = await startSandboxConnector({ host: '127.0.0.1', port: 0, controls: true });
  const held = await startHeldConnector(connector.url).catch(async (error: unknown) => {
    await connector.close();
    throw error;
  });
  entry.after = async () => {
    await held.close();
    await connector.close();
  };
  const fixture = await startCardFixture({
    store: made.store,
    clock: new ManualClock(Date.now()),
    connector,
    connectorUrl: held.url,
    connectorTimeoutMs: FIXTURE_CONNECTOR_TIMEOUT_MS,
  });
  entry.fixture = fixture;
  return { ...made, fixture, token: await fixture.token(), held };
}

/** Waits until the store has a write whose outcome it does not know, queued for repair. */
async function waitForRepairQueued(store: RedisStore): Promise<void> {
  await waitFor(`a write queued for repair (${store.describe().pendingRepairs} so far)`, () => store.describe().pendingRepairs > 0);
}

const recordKey = (requestId: string) => `${PREFIX}idem:{acct-eu:${requestId}}`;

describe('idempotency writes whose outcome is unknown are settled once the store answers again', () => {
  it('a claim that ran but whose reply was lost is released by the repair, not by its lease running out', async () => {
    const { proxy, store } = await open();
    const name = `acct-1:${randomUUID()}`;
    const cut = proxy.cutAt({ match: name, forward: true, outageMs: OUTAGE_MS });
    // A lease far longer than the test's hang guard: if the key is free again, the repair freed
    // it (an expired lease would leave the pending claim in Redis, not a released one).
    await expect(store.idempotency.reserve(name, { owner: 'gw-lost', now: Date.now(), leaseMs: LONG_LEASE_MS, attempt: ATTEMPT })).rejects.toBeInstanceOf(
      StoreUnavailableError,
    );
    await cut;
    // The claim is in Redis, held by an owner that answered 503: the problem is real.
    expect((await readIdempotency(admin, `${PREFIX}idem:{${name}}`)).fields['owner']).toBe('gw-lost');
    expect(store.describe().pendingRepairs).toBe(1);

    // Read on another connection, the release can be seen before the store has its reply and
    // takes the repair off its queue: both are waited for.
    await waitFor(
      () => `the repair to release the lost claim and leave the queue (${store.describe().pendingRepairs} pending)`,
      async () => (await readIdempotency(admin, `${PREFIX}idem:{${name}}`)).state === 'released' && store.describe().pendingRepairs === 0,
    );
    // Free for the retry, which carries the lost attempt forward (D31) like any released claim.
    expect(await store.idempotency.reserve(name, { owner: 'gw-retry', now: Date.now(), leaseMs: 60_000, attempt: ATTEMPT })).toEqual({
      state: 'reserved',
      previous: ATTEMPT,
    });
  });

  it("regression: a card request answered 503 because its claim's reply was lost gets its card at the first retries, not a 409", async () => {
    const { proxy, fixture, token } = await openGateway();
    const body = validCardBody();
    const requestId = String(body['requestId']);
    const cut = proxy.cutAt({ match: requestId, forward: true, outageMs: OUTAGE_MS });
    const first = await createCard(fixture.gw, token, body);
    await cut;
    expect(first.statusCode, first.body).toBe(503);
    expect(await readIdempotency(admin, recordKey(requestId)).then((stored) => stored.state)).toBe('pending');

    // The client retries as told (Retry-After: 1), again on each 503 (bounded in count: a hang guard).
    let retry = first;
    for (let attempt = 0; retry.statusCode === 503 && attempt < 60; attempt += 1) {
      await sleep(Number(retry.headers['retry-after'] ?? 1) * 1000);
      retry = await createCard(fixture.gw, token, body);
    }
    // Without the repair the retry waits on the dead claim (the clock stands still, so its
    // lease never ends) for the connector timeout + 1 s and gets 409: never a 201.
    expect(retry.statusCode, retry.body).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBeUndefined();
    const stats = await connectorStats(fixture.connector);
    expect(stats.keys.filter((key) => key.endsWith(requestId))).toHaveLength(1);
    expect(stats.received.filter((request) => request.headers['idempotency-key'] === `acct-eu:${requestId}`)).toHaveLength(1);
  });

  it('a card record that could not be sent (the store went away during the forward) is stored once Redis answers: the retry is a replay of the same card, one forward', async () => {
    const { proxy, store, fixture, token, held } = await openHeldGateway();
    const body = validCardBody();
    const requestId = String(body['requestId']);
    // The store goes away while the forward is held at the connector, and stays away until the
    // record's write has failed: no outage length to race.
    const answer = createCard(fixture.gw, token, body);
    await held.waitForHeld(1);
    proxy.cutNow(Number.POSITIVE_INFINITY);
    held.release();
    const first = await answer;
    // The card exists: its client gets it (the record is what is missing).
    expect(first.statusCode, first.body).toBe(201);
    const card = first.json<CardAnswer>();
    await waitForRepairQueued(store);
    expect(await readIdempotency(admin, recordKey(requestId)).then((stored) => stored.state)).toBe('pending');
    proxy.restore();

    await expect
      .poll(() => readIdempotency(admin, recordKey(requestId)).then((stored) => stored.state), { timeout: HANG_GUARD_MS, interval: 50 })
      .toBe('completed');
    const again = await createCard(fixture.gw, token, body);
    expect(again.statusCode, again.body).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.json<CardAnswer>().cardId).toBe(card.cardId);
    expect((await connectorStats(fixture.connector)).received.filter((request) => request.headers['idempotency-key'] === `acct-eu:${requestId}`)).toHaveLength(
      1,
    );
  });

  it('a release that could not be sent (the forward timed out while the store was away) is sent once Redis answers: the retry forwards at once', async () => {
    const { proxy, store, fixture, token } = await openGateway();
    const body = validCardBody();
    const requestId = String(body['requestId']);
    // Held far past the connector deadline (1 s; closing the sandbox releases it): 504, and the
    // claim must be released (D17). The card is made on arrival.
    await setConnectorMode(fixture.connector, { mode: 'delay', delayMs: 600_000, count: 1 });
    const before = (await connectorStats(fixture.connector)).requestsReceived;
    const answer = createCard(fixture.gw, token, body);
    await waitFor('the card request to reach the connector', async () => (await connectorStats(fixture.connector)).requestsReceived > before, {
      intervalMs: 10,
    });
    // Away until the release has failed: however late the deadline fires, the store is still away.
    proxy.cutNow(Number.POSITIVE_INFINITY);
    const first = await answer;
    expect(first.statusCode, first.body).toBe(504);
    await waitForRepairQueued(store);
    expect(await readIdempotency(admin, recordKey(requestId)).then((stored) => stored.state)).toBe('pending');
    proxy.restore();

    await expect
      .poll(() => readIdempotency(admin, recordKey(requestId)).then((stored) => stored.state), { timeout: HANG_GUARD_MS, interval: 50 })
      .toBe('released');
    const retry = await createCard(fixture.gw, token, body);
    expect(retry.statusCode, retry.body).toBe(201);
    // The connector made the card during the timed-out forward and answers it again (D31): one card.
    expect((await connectorStats(fixture.connector)).keys.filter((key) => key.endsWith(requestId))).toHaveLength(1);
  });
});
