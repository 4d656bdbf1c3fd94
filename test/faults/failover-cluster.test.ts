import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metricValue } from '../support/auth-requests.js';
import { keySlot, startCluster, storeSection, type ClusterShard, type ClusterTopology } from '../support/redis-topologies.js';
import {
  expectSurvivedFailover,
  runFailoverUnderLoad,
  startCountingConnector,
  startReplicas,
  summarise,
  type CountingConnector,
  type Replicas,
} from './failover-load.js';

/**
 * Issue 10: Cluster failover under load. Two gateway replicas on a 3-shard Cluster (a replica
 * per master, node timeout 1 s); every card request and every refresh of the run has its
 * keys on one shard, and that shard's master is SIGKILLed mid-run. Its replica takes over; the
 * gateways learn the new slot map from the cluster (MOVED) without a restart.
 */
describe('Cluster: the master owning the traffic is killed under load', () => {
  let cluster: ClusterTopology;
  let connector: CountingConnector;
  let replicas: Replicas;

  beforeAll(async () => {
    cluster = await startCluster();
    connector = await startCountingConnector();
    replicas = await startReplicas(storeSection(cluster, `test:failover:${randomUUID().slice(0, 8)}:`), connector.url);
  }, 60_000);

  afterAll(async () => {
    await replicas?.close();
    await connector?.close();
    await cluster?.stop();
  });

  it('answers only 201, 503 or 409, never slower than 3 s, resumes within 15 s, one card per requestId; refresh and logout work after', async () => {
    const [victim] = (await cluster.shards()) as [ClusterShard, ...ClusterShard[]];
    const onVictim = (slot: number) => victim.slots.some(([start, end]) => slot >= start && slot <= end);
    // The record key's hash tag is {issuingAccount:requestId}.
    const nextRequestId = () => {
      for (;;) {
        const requestId = randomUUID();
        if (onVictim(keySlot(`acct-eu:${requestId}`))) return requestId;
      }
    };
    const probeSlot = victim.slots[0]![0];
    // Refresh tokens are `<familyId>.<secret>`; the family's keys are tagged {familyId}.
    const acceptSession = (refreshToken: string) => onVictim(keySlot(refreshToken.split('.')[0]!));
    const report = await runFailoverUnderLoad({ replicas, connector, nextRequestId, acceptSession, fault: () => victim.master.kill() });
    console.info(summarise('cluster', report));
    await expectSurvivedFailover(report, replicas, 'cluster');

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
  }, 90_000);
});
