import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/foundation/clock.js';
import { startSandboxConnector, type RunningSandboxConnector } from '../../src/connector/sandbox/sandbox-connector.js';

import {
  connectorStats,
  createCard,
  expectCard,
  expectError,
  FIXTURE_CONNECTOR_TIMEOUT_MS,
  setConnectorMode,
  startCardFixture,
  validCardBody,
  type CardFixture,
} from '../support/card-fixture.js';
import { startHeldConnector, type HeldConnector } from '../support/held-connector.js';
import { createTestRedisStore, openReplicaStore, type TestRedisStore } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

/**
 * D17 across replicas: two gateway instances on one Redis (same prefix) and one connector.
 * Concurrent duplicates never make a second card; one still unresolved past the upstream
 * timeout gets 409 with retryAfter.
 */

interface Replicas {
  a: CardFixture;
  b: CardFixture;
  connector: RunningSandboxConnector;
  /** With `holdA`: between replica A and the connector, holding A's card requests until released. */
  held: HeldConnector | undefined;
}

const closers: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function startReplicas(timeouts: { a: number; b: number }, options: { holdA?: boolean } = {}): Promise<Replicas> {
  const connector = await startSandboxConnector({ host: '127.0.0.1', port: 0, controls: true });
  closers.push(() => connector.close());
  const held = options.holdA === true ? await startHeldConnector(connector.url) : undefined;
  if (held) closers.push(() => held.close());
  const shared: TestRedisStore = await createTestRedisStore('card-replicas');
  closers.push(() => shared.cleanup());
  // The second replica's own client and store, on the same Redis and prefix.
  const secondStore = await openReplicaStore(shared.prefix);
  closers.push(() => secondStore.close());
  const clock = new ManualClock();
  const a = await startCardFixture({ store: shared.store, clock, connector, connectorTimeoutMs: timeouts.a, ...(held && { connectorUrl: held.url }) });
  closers.push(() => a.close());
  const b = await startCardFixture({ store: secondStore, clock, connector, connectorTimeoutMs: timeouts.b });
  closers.push(() => b.close());
  return { a, b, connector, held };
}

describe('concurrent duplicates across two replicas on one Redis (D17)', () => {
  it('50 identical requests, split over both replicas, make exactly one card and all answer it with 201', async () => {
    // Deadlines (and so the duplicates' wait, deadline + 1 s) that a busy machine never reaches:
    // the 150 ms delay only makes duplicates likely to meet the first in flight. Whether they do
    // or come after it, the outcome asserted is the same.
    const { a, b, connector } = await startReplicas({ a: FIXTURE_CONNECTOR_TIMEOUT_MS, b: FIXTURE_CONNECTOR_TIMEOUT_MS });
    const [tokenA, tokenB] = await Promise.all([a.token('full'), b.token('full')]);
    await setConnectorMode(connector, { mode: 'delay', delayMs: 150 });
    const body = validCardBody({ config: { tolerance: { percentage: 5 } } });

    const responses = await Promise.all(Array.from({ length: 50 }, (_, i) => (i % 2 === 0 ? createCard(a.gw, tokenA, body) : createCard(b.gw, tokenB, body))));

    const cards = responses.map((response) => expectCard(response));
    const first = cards[0];
    for (const card of cards) expect(card).toEqual(first);
    const fresh = responses.filter((response) => response.headers['idempotent-replayed'] === undefined);
    expect(fresh).toHaveLength(1);
    expect(responses.filter((response) => response.headers['idempotent-replayed'] === 'true')).toHaveLength(49);

    const stats = await connectorStats(connector);
    expect(stats.cardsCreated).toBe(1);
    expect(stats.requestsReceived).toBe(1);
    expect(stats.keys).toEqual([`acct-eu:${String(body['requestId'])}`]);
  });

  it('a duplicate still unresolved after its upstream timeout gets 409 with retryAfter, then replays the card', async () => {
    // Replica A's forward is held until B has its answer (A's deadline, 30 s, is never what ends
    // it); replica B gives up on waiting after 300 ms + 1 s.
    const { a, b, connector, held } = await startReplicas({ a: FIXTURE_CONNECTOR_TIMEOUT_MS, b: 300 }, { holdA: true });
    const [tokenA, tokenB] = await Promise.all([a.token('full'), b.token('full')]);
    const body = validCardBody();

    const firstPromise = createCard(a.gw, tokenA, body);
    await held!.waitForHeld(1);
    const waiting = await createCard(b.gw, tokenB, body);
    const conflict = expectError(waiting, 409, 'A request with this requestId is still being processed');
    // The claim's lease is A's timeout + 5 s, and the shared manual clock has not moved.
    const leaseSeconds = (FIXTURE_CONNECTOR_TIMEOUT_MS + 5000) / 1000;
    expect(conflict.retryAfter).toBe(leaseSeconds);
    expect(waiting.headers['retry-after']).toBe(String(leaseSeconds));

    held!.release();
    const first = await firstPromise;
    const card = expectCard(first);
    expect(first.headers['idempotent-replayed']).toBeUndefined();

    const retry = await createCard(b.gw, tokenB, body);
    expect(expectCard(retry)).toEqual(card);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    const stats = await connectorStats(connector);
    expect(stats.cardsCreated).toBe(1);
    expect(stats.requestsReceived).toBe(1);
  });

  it('when the first times out (504), the waiting duplicate takes over and gets the one card the connector made', async () => {
    // A gives up at 300 ms; B waits up to its own deadline + 1 s (31 s) for A's claim, so only
    // A's release can end B's wait on any machine.
    const { a, b, connector } = await startReplicas({ a: 300, b: FIXTURE_CONNECTOR_TIMEOUT_MS });
    const [tokenA, tokenB] = await Promise.all([a.token('full'), b.token('full')]);
    // Held far past A's deadline (closing the sandbox releases it); the card is made on arrival.
    await setConnectorMode(connector, { mode: 'delay', delayMs: 600_000, count: 1 });
    const body = validCardBody();

    const firstPromise = createCard(a.gw, tokenA, body);
    await waitFor('the first forward to reach the connector', async () => (await connectorStats(connector)).requestsReceived === 1);
    const waitingPromise = createCard(b.gw, tokenB, body);
    const [first, waiting] = await Promise.all([firstPromise, waitingPromise]);

    expectError(first, 504, 'Card processor did not answer in time');
    // B reserved the released key and forwarded with the same Idempotency-Key: the connector replayed.
    const card = expectCard(waiting);
    expect(waiting.headers['idempotent-replayed']).toBeUndefined();
    const replay = await createCard(a.gw, tokenA, body);
    expect(expectCard(replay)).toEqual(card);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    const stats = await connectorStats(connector);
    expect(stats.cardsCreated).toBe(1);
    expect(stats.requestsReceived).toBe(2);
  });
});
