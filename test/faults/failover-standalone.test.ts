import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStandalone, storeSection, type StandaloneTopology } from '../support/redis-topologies.js';
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
 * Issue 10: what users of a single Redis get. The same load as the Sentinel and Cluster runs;
 * the server is SIGKILLed and a new, empty one (no persistence, as the tests run it) starts on
 * the same port 2 s later, as a process supervisor would. Sessions are gone with the data:
 * refresh clients get 401 and log in again.
 */
describe('single Redis: killed under load and restarted empty', () => {
  let standalone: StandaloneTopology;
  let connector: CountingConnector;
  let replicas: Replicas;

  beforeAll(async () => {
    standalone = await startStandalone();
    connector = await startCountingConnector();
    replicas = await startReplicas(storeSection(standalone, `test:failover:${randomUUID().slice(0, 8)}:`), connector.url);
  }, 60_000);

  afterAll(async () => {
    await replicas?.close();
    await connector?.close();
    await standalone?.stop();
  });

  it('answers only 201, 503 or 409, never slower than 3 s, resumes within 15 s, one card per requestId; refresh and logout work after', async () => {
    const report = await runFailoverUnderLoad({
      replicas,
      connector,
      nextRequestId: freshRequestId,
      fault: async () => {
        await standalone.server.kill();
        await new Promise((resolve) => setTimeout(resolve, 2_000));
        await standalone.server.start();
      },
    });
    console.info(summarise('standalone', report));
    await expectSurvivedFailover(report, replicas, 'standalone');
    for (const store of replicas.stores)
      expect(store.describe()).toMatchObject({ topology: 'standalone', up: true, masters: [standalone.server.address], masterChanges: 0 });
  }, 90_000);
});
