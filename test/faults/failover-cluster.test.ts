import { randomUUID } from 'node:crypto';
import { expect } from 'vitest';
import { metricValue } from '../support/auth-requests.js';
import { keySlot, startCluster, type ClusterShard } from '../support/redis-topologies.js';
import { describeFailover } from './failover-load.js';

/**
 * Issue 10: Cluster failover under load. Two gateway replicas on a 3-shard Cluster (a replica
 * per master, node timeout 1 s); every card request and every refresh of the run has its
 * keys on one shard, and that shard's master is SIGKILLed mid-run. Its replica takes over; the
 * gateways learn the new slot map from the cluster (MOVED) without a restart.
 */
describeFailover('Cluster: the master owning the traffic is killed under load', startCluster, async (cluster) => {
  const [victim] = (await cluster.shards()) as [ClusterShard, ...ClusterShard[]];
  const onVictim = (slot: number) => victim.slots.some(([start, end]) => slot >= start && slot <= end);
  const probeSlot = victim.slots[0]![0];
  return {
    fault: () => victim.master.kill(),
    // The record key's hash tag is {issuingAccount:requestId}.
    nextRequestId() {
      for (;;) {
        const requestId = randomUUID();
        if (onVictim(keySlot(`acct-eu:${requestId}`))) return requestId;
      }
    },
    // Refresh tokens are `<familyId>.<secret>`; the family's keys are tagged {familyId}.
    acceptSession: (refreshToken) => onVictim(keySlot(refreshToken.split('.')[0]!)),
    async after(_report, replicas) {
      const promoted = await cluster.waitForNewMaster(probeSlot, victim.master);
      expect(victim.replicas).toContain(promoted);
      for (const [index, store] of replicas.stores.entries()) {
        const described = store.describe();
        expect(described).toMatchObject({ topology: 'cluster', up: true });
        expect(described.masters).toContain(promoted.address);
        expect(described.masters).not.toContain(victim.master.address);
        expect(described.masterChanges).toBeGreaterThanOrEqual(1);
        const gw = replicas.gateways[index]!;
        expect(await metricValue(gw, 'gateway_store_master_changes_total')).toBe(described.masterChanges);
        const changes = gw.logs.lines
          .map((line) => JSON.parse(line) as { msg?: string; from?: string; to?: string })
          .filter((line) => line.msg === 'store master changed');
        expect(changes.length).toBe(described.masterChanges);
        expect(changes).toContainEqual(expect.objectContaining({ from: victim.master.address, to: promoted.address }));
      }
    },
  };
});
