import { afterAll, beforeAll, expect, it } from 'vitest';
import { cardIdempotencySuite } from '../cards/card-idempotency.js';
import { tokenLifecycleSuite } from '../auth/token-lifecycle.js';
import { openTopologyStore, openTopologyStoreWithClient, type ClusterTopology, type SentinelTopology } from '../support/redis-topologies.js';
import { inspectorOf } from '../support/redis.js';
import { measureRecordWrites } from './record-writes.js';
import { storeContract } from './store-contract.js';

/**
 * What the Sentinel and Cluster store files share (D35): one topology started for the file and
 * stopped after it, the store contract, the token lifecycle and the card idempotency suites run
 * unchanged on it, and the measure of what replicasToAck costs a card record.
 */

type ReplicatedTopology = SentinelTopology | ClusterTopology;

/**
 * Starts the topology in the file's beforeAll (stops it in its afterAll) and registers the shared
 * suites on fresh stores over it. Returns the running topology (only inside tests and hooks).
 */
export function topologySuites<T extends ReplicatedTopology>(name: T['kind'], start: () => Promise<T>): () => T {
  let topology: T | undefined;
  beforeAll(async () => {
    topology = await start();
  }, 60_000);
  afterAll(async () => {
    await topology?.stop();
  });
  const current = (): T => {
    if (!topology) throw new Error(`the ${name} topology is not running`);
    return topology;
  };
  const fresh = async () => {
    const store = await openTopologyStore(current());
    return { store, cleanup: () => store.close() };
  };
  storeContract(
    name,
    async () => {
      const { store, client, prefix } = await openTopologyStoreWithClient(current());
      return { store, cleanup: () => store.close(), inspect: inspectorOf(client, prefix) };
    },
    name,
  );
  tokenLifecycleSuite(name, fresh);
  cardIdempotencySuite(name, fresh);
  return current;
}

/**
 * A test measuring card record writes at each replicasToAck setting: every record acknowledged
 * (a count), and acknowledged by a WAIT the servers ran, one per record, none at 0 (a store that
 * never sent WAIT would count nothing as unacknowledged). What it costs in milliseconds is
 * reported, never asserted: a busy machine slows every setting, and the figure belongs with the
 * benchmark's.
 */
export function replicasToAckCostTest(title: string, topology: () => ReplicatedTopology, settings: number[]): void {
  it(title, async () => {
    const figures = await measureRecordWrites(topology(), settings);
    console.info(
      `[${topology().kind}] card record write, ms (mean / p99 over ${figures[0]!.count}): ${figures.map((f) => `replicasToAck ${f.replicasToAck}: ${f.meanMs.toFixed(2)} / ${f.p99Ms.toFixed(2)}`).join('; ')}`,
    );
    for (const figure of figures)
      expect({ replicasToAck: figure.replicasToAck, count: figure.count, unacknowledged: figure.unacknowledged, waitsSent: figure.waitsSent }).toEqual({
        replicasToAck: figure.replicasToAck,
        count: 200,
        unacknowledged: 0,
        waitsSent: figure.replicasToAck > 0 ? 200 : 0,
      });
  });
}
