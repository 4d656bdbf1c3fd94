import { Agent } from 'node:https';
import { describe, expect, it } from 'vitest';
import { startSandboxConnector, type RunningSandboxConnector } from '../../src/connector/sandbox/sandbox-connector.js';
import { setConnectorMode } from '../support/card-fixture.js';
import { adminGet, expectCodedError, INSIDER, listenCardGateway, metricSum, perTestGateway, type HttpAnswer } from './support.js';
import { waitFor } from '../support/wait.js';

/**
 * Issue 8, attack 4: the connector answers a byte a second to more concurrent card creations
 * than the gateway has upstream connections, then recovers. Every creation gets 504 within
 * about the connector deadline (now the TOTAL deadline: connect, headers and whole body), the
 * upstream request is aborted and its socket released, /readyz and the pool metrics
 * (gateway_connector_pool_queued, _saturated, _in_flight) show the saturated pool while requests
 * queue and read 0 again after recovery, and the next card after the connector recovers
 * succeeds. Old code: all got 504, but the dripping sockets stayed pinned, so new cards got 504
 * for minutes afterwards.
 */

const CONNECTIONS = 8;
/**
 * The window in which the test looks for the saturated pool (every request ends at it): long
 * enough that a busy machine's slow probes still see it, while a dripped card takes minutes.
 */
const TIMEOUT_MS = 10_000;
const CONCURRENT = 20;
/** The client's own limit: a hang guard, far beyond the deadline (a whole dripped card takes minutes). */
const CLIENT_GUARD_MS = 60_000;

interface PoolMetrics {
  inFlight: number | undefined;
  queued: number | undefined;
  saturated: number | undefined;
}

/** The connector pool gauges of one admin /metrics scrape. */
async function poolMetrics(adminUrl: string): Promise<PoolMetrics> {
  const text = (await adminGet(adminUrl, '/metrics')).body;
  return {
    inFlight: metricSum(text, 'gateway_connector_pool_in_flight'),
    queued: metricSum(text, 'gateway_connector_pool_queued'),
    saturated: metricSum(text, 'gateway_connector_pool_saturated'),
  };
}

describe('slow-drip connector, then recovery', () => {
  let connector: RunningSandboxConnector | undefined;
  const suite = perTestGateway(async () => {
    await connector?.close();
    connector = undefined;
  });

  it(`answers ${CONCURRENT} dripping creations 504 at the deadline, then the next card after recovery is 201`, async () => {
    connector = await startSandboxConnector({ host: INSIDER, port: 0, controls: true });
    const gateway = (suite.listening = await listenCardGateway(suite.ca, { url: connector.url, timeoutMs: TIMEOUT_MS, connections: CONNECTIONS }));
    const { adminUrl } = gateway;
    const usedAgent = (suite.agent = new Agent({ keepAlive: true, maxSockets: CONCURRENT + 2, ca: suite.ca }));
    const createCard = (timeoutMs: number): Promise<HttpAnswer> => gateway.createCard(timeoutMs, usedAgent);

    // Healthy first, and the TLS connections are open before the clock starts.
    const warm = await Promise.all(Array.from({ length: 4 }, () => createCard(CLIENT_GUARD_MS)));
    for (const answer of warm) expect(answer.status, answer.body).toBe(201);

    await setConnectorMode(connector, { mode: 'drip', delayMs: 1000 });
    let settled = 0;
    const stuck = Array.from({ length: CONCURRENT }, () =>
      createCard(CLIENT_GUARD_MS).finally(() => {
        settled += 1;
      }),
    );

    // While every upstream connection is busy and requests queue, readiness and the metrics say so.
    let saturated: HttpAnswer | undefined;
    let saturatedPool: PoolMetrics | undefined;
    const seenPool: PoolMetrics[] = [];
    // Looked for while the requests are still queued or in flight (they all end at the deadline).
    while ((!saturated || !saturatedPool) && settled < CONCURRENT) {
      if (!saturated) {
        const readyz = await adminGet(adminUrl, '/readyz');
        if (readyz.status === 503 && (JSON.parse(readyz.body) as { checks?: Record<string, string> }).checks?.['connector'] === 'saturated') saturated = readyz;
      }
      if (!saturatedPool) {
        const pool = await poolMetrics(adminUrl);
        seenPool.push(pool);
        if ((pool.queued ?? 0) > 0 && pool.saturated === 1) saturatedPool = pool;
      }
      if (!saturated || !saturatedPool) await new Promise((resolve) => setTimeout(resolve, 50));
    }

    const results = await Promise.all(stuck);
    // A 504 from the gateway's total deadline: without it each answer would drip for minutes
    // and reach the client's hang guard instead.
    for (const answer of results) expectCodedError(answer, 504, 'connector_timeout', 'Card processor did not answer in time');

    // The connector recovers: the next card succeeds at once (the pinned sockets were released).
    await setConnectorMode(connector, { mode: 'normal' });
    const next = await createCard(CLIENT_GUARD_MS);
    // Pinned sockets would leave every pooled connection busy dripping: a 504 again, not a 201.
    expect(next.status, `first card after recovery: ${next.status} ${next.body}`).toBe(201);
    expect((await adminGet(adminUrl, '/readyz')).status).toBe(200);
    expect(saturated, '/readyz never reported checks.connector "saturated" while requests queued').toBeDefined();
    expect(saturatedPool, `the pool metrics never showed requests queueing during the drip: ${JSON.stringify(seenPool)}`).toBeDefined();
    expect(saturatedPool!.queued).toBeLessThanOrEqual(CONCURRENT - CONNECTIONS);
    // In flight counts requests on a connection, never the queue: at most one per pooled connection.
    expect(saturatedPool!.inFlight).toBeGreaterThan(0);
    expect(saturatedPool!.inFlight).toBeLessThanOrEqual(CONNECTIONS);
    // After recovery nothing is in flight or queued any more, and the pool no longer reads saturated.
    const idle = await waitFor('the connector pool metrics to read 0 after recovery', async () => {
      const pool = await poolMetrics(adminUrl);
      return pool.inFlight === 0 && pool.queued === 0 && pool.saturated === 0 ? pool : undefined;
    });
    expect(idle).toEqual({ inFlight: 0, queued: 0, saturated: 0 });
  });
});
