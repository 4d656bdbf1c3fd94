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
  try {
    for (const replicasToAck of settings) {
      stores.set(replicasToAck, await openTopologyStore(topology, { replicasToAck }));
      samples.set(replicasToAck, []);
    }
    const attempt = { fingerprint: 'fp', requestedCardLimit: 1000, credentialId: 'cred-1' };
    const record = sampleRecord();
    for (let round = 0; round < rounds; round += 1) {
      for (const replicasToAck of settings) {
        const store = stores.get(replicasToAck)!;
        for (let i = 0; i < perRound; i += 1) {
          const name = `acct-1:${randomUUID()}`;
          const now = Date.now();
          await store.idempotency.reserve(name, { owner: 'gw', now, leaseMs: 10_000, attempt });
          const started = performance.now();
          await store.idempotency.complete(name, { owner: 'gw', record, expiresAt: now + 60_000, now });
          samples.get(replicasToAck)!.push(performance.now() - started);
        }
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
      };
    });
  } finally {
    await Promise.all([...stores.values()].map((store) => store.close()));
  }
}
