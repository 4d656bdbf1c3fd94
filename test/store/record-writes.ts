import { randomUUID } from 'node:crypto';
import type { RedisStore } from '../../src/store/redis/redis-store.js';
import { openTopologyStore, type ClusterTopology, type SentinelTopology } from '../support/redis-topologies.js';
import { sampleRecord } from './store-contract.js';

export interface RecordWriteFigures {
  replicasToAck: number;
  count: number;
  meanMs: number;
  p99Ms: number;
  unacknowledged: number;
  /** WAIT commands the servers ran during this setting's writes (commandstats): one per record when replicasToAck > 0. */
  waitsSent: number;
}

/** WAIT commands run so far on the topology's data nodes, from INFO commandstats. */
async function waitCalls(topology: SentinelTopology | ClusterTopology): Promise<number> {
  const counts = await Promise.all(
    topology.nodes
      .filter((node) => node.running)
      .map(async (node) => {
        const stats = String(await node.call('INFO', 'commandstats'));
        return Number(/^cmdstat_wait:calls=(\d+)/m.exec(stats)?.[1] ?? 0);
      }),
  );
  return counts.reduce((sum, count) => sum + count, 0);
}

/**
 * What `replicasToAck` costs (D35): the time of `idempotency.complete` (the card record, plus
 * WAIT when asked for), one write at a time, for each setting in turn over several rounds so
 * that a slow spell of the shared machine does not land on one setting only.
 */
export async function measureRecordWrites(
  topology: SentinelTopology | ClusterTopology,
  settings: number[],
  rounds = 4,
  perRound = 50,
): Promise<RecordWriteFigures[]> {
  const stores = new Map<number, RedisStore>();
  const samples = new Map<number, number[]>();
  const waits = new Map<number, number>();
  try {
    for (const replicasToAck of settings) {
      stores.set(replicasToAck, await openTopologyStore(topology, { replicasToAck }));
      samples.set(replicasToAck, []);
      waits.set(replicasToAck, 0);
    }
    const attempt = { fingerprint: 'fp', requestedCardLimit: 1000, credentialId: 'cred-1' };
    const record = sampleRecord();
    for (let round = 0; round < rounds; round += 1) {
      for (const replicasToAck of settings) {
        const store = stores.get(replicasToAck)!;
        const waitsBefore = await waitCalls(topology);
        for (let i = 0; i < perRound; i += 1) {
          const name = `acct-1:${randomUUID()}`;
          const now = Date.now();
          await store.idempotency.reserve(name, { owner: 'gw', now, leaseMs: 10_000, attempt });
          const started = performance.now();
          await store.idempotency.complete(name, { owner: 'gw', record, expiresAt: now + 60_000, now });
          samples.get(replicasToAck)!.push(performance.now() - started);
        }
        waits.set(replicasToAck, waits.get(replicasToAck)! + (await waitCalls(topology)) - waitsBefore);
      }
    }
    return settings.map((replicasToAck) => {
      const sorted = [...samples.get(replicasToAck)!].sort((a, b) => a - b);
      return {
        replicasToAck,
        count: sorted.length,
        meanMs: sorted.reduce((sum, value) => sum + value, 0) / sorted.length,
        p99Ms: sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))]!,
        unacknowledged: stores.get(replicasToAck)!.describe().unacknowledgedRecords,
        waitsSent: waits.get(replicasToAck)!,
      };
    });
  } finally {
    await Promise.all([...stores.values()].map((store) => store.close()));
  }
}
