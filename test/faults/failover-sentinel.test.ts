import { expect } from 'vitest';
import { metricValue } from '../support/auth-requests.js';
import { startSentinel } from '../support/redis-topologies.js';
import { describeFailover } from './failover-load.js';

/**
 * Issue 10: Sentinel failover under load. Two gateway replicas on a Sentinel group (1 master,
 * 2 replicas, 3 sentinels, down-after 1 s); card creation with duplicates across both replicas
 * and refreshes run while the master is SIGKILLed. The sentinels promote a replica; the
 * gateways follow without a restart.
 */
describeFailover('Sentinel: the master is killed under load', startSentinel, async (sentinel) => {
  const master = await sentinel.master();
  return {
    fault: () => master.kill(),
    async after(_report, replicas) {
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
    },
  };
});
