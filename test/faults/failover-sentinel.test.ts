import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metricValue } from '../support/auth-requests.js';
import { startSentinel, storeSection, type SentinelTopology } from '../support/redis-topologies.js';
import {
  expectSurvivedFailover,
  freshRequestId,
  runFailoverUnderLoad,
  startCountingConnector,
  startReplicas,
  summarise,
  type CountingConnector,
  type Replicas,
} from './failover-load.js';

/**
 * Issue 10: Sentinel failover under load. Two gateway replicas on a Sentinel group (1 master,
 * 2 replicas, 3 sentinels, down-after 1 s); card creation with duplicates across both replicas
 * and refreshes run while the master is SIGKILLed. The sentinels promote a replica; the
 * gateways follow without a restart.
 */
describe('Sentinel: the master is killed under load', () => {
  let sentinel: SentinelTopology;
  let connector: CountingConnector;
  let replicas: Replicas;

  beforeAll(async () => {
    sentinel = await startSentinel();
    connector = await startCountingConnector();
    replicas = await startReplicas(storeSection(sentinel, `test:failover:${randomUUID().slice(0, 8)}:`), connector.url);
  }, 60_000);

  afterAll(async () => {
    await replicas?.close();
    await connector?.close();
    await sentinel?.stop();
  });

  it('answers only 201, 503 or 409, never slower than 3 s, resumes within 15 s, one card per requestId; refresh and logout work after', async () => {
    const master = await sentinel.master();
    const report = await runFailoverUnderLoad({ replicas, connector, nextRequestId: freshRequestId, fault: () => master.kill() });
    console.info(summarise('sentinel', report));
    await expectSurvivedFailover(report, replicas, 'sentinel');

    const promoted = await sentinel.master();
    expect(promoted).not.toBe(master);
    for (const [index, store] of replicas.stores.entries()) {
      expect(store.describe()).toMatchObject({ topology: 'sentinel', up: true, masters: [promoted.address], masterChanges: 1 });
      const gw = replicas.gateways[index]!;
      expect(await metricValue(gw, 'gateway_store_master_changes_total')).toBe(1);
      const changes = gw.logs.lines
        .map((line) => JSON.parse(line) as { msg?: string; from?: string; to?: string })
        .filter((line) => line.msg === 'store master changed');
      expect(changes).toMatchObject([{ from: master.address, to: promoted.address }]);
    }
  }, 90_000);
});
