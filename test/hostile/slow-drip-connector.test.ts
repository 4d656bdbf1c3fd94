import { randomUUID } from 'node:crypto';
import { Agent } from 'node:https';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startSandboxConnector, type RunningSandboxConnector } from '../../src/connector/sandbox/sandbox-connector.js';
import { RELAXED_LIMITS } from '../support/auth-requests.js';
import { setConnectorMode } from '../support/card-fixture.js';
import { testCertificatePem } from '../support/gateway-fixture.js';
import { adminGet, call, CARDS_PATH, expectCodedError, INSIDER, listenTestGateway, loginOverTls, type HttpAnswer, type ListeningGateway } from './support.js';

/**
 * Issue 8, attack 4: the connector answers a byte a second to more concurrent card creations
 * than the gateway has upstream connections, then recovers. Every creation gets 504 within
 * about the connector deadline (now the TOTAL deadline: connect, headers and whole body), the
 * upstream request is aborted and its socket released, /readyz shows the saturated pool while
 * requests queue, and the next card after the connector recovers succeeds. Old code: all got
 * 504, but the dripping sockets stayed pinned, so new cards got 504 for minutes afterwards.
 */

const CONNECTIONS = 8;
const TIMEOUT_MS = 1000;
const CONCURRENT = 20;
/** Slack on the deadline for a loaded 2-core machine. */
const SLACK_MS = 2000;

describe('slow-drip connector, then recovery', () => {
  let ca: string;
  let connector: RunningSandboxConnector | undefined;
  let listening: ListeningGateway | undefined;
  let agent: Agent | undefined;

  beforeAll(async () => {
    ca = await testCertificatePem();
  });
  afterEach(async () => {
    agent?.destroy();
    agent = undefined;
    await listening?.close();
    listening = undefined;
    await connector?.close();
    connector = undefined;
  });

  it(`answers ${CONCURRENT} dripping creations 504 by the deadline, then the next card after recovery is 201`, async () => {
    connector = await startSandboxConnector({ host: INSIDER, port: 0, controls: true });
    listening = await listenTestGateway({
      overrides: { connector: { url: connector.url, timeoutMs: TIMEOUT_MS, connections: CONNECTIONS }, rateLimits: RELAXED_LIMITS },
    });
    const { httpsUrl, adminUrl } = listening;
    const token = await loginOverTls(httpsUrl, ca);
    agent = new Agent({ keepAlive: true, maxSockets: CONCURRENT + 2, ca });
    const usedAgent = agent;
    const createCard = (timeoutMs: number): Promise<HttpAnswer> =>
      call(`${httpsUrl}${CARDS_PATH}`, {
        agent: usedAgent,
        headers: { authorization: `Bearer ${token}` },
        body: JSON.stringify({ requestId: randomUUID(), cardLimit: 10_000, currency: 'EUR' }),
        timeoutMs,
      });

    // Healthy first, and the TLS connections are open before the clock starts.
    const warm = await Promise.all(Array.from({ length: 4 }, () => createCard(5000)));
    for (const answer of warm) expect(answer.status, answer.body).toBe(201);

    await setConnectorMode(connector, { mode: 'drip', delayMs: 1000 });
    const started = performance.now();
    const stuck = Array.from({ length: CONCURRENT }, () => createCard(15_000).then((answer) => ({ answer, ms: performance.now() - started })));

    // While every upstream connection is busy and requests queue, readiness says so.
    let saturated: HttpAnswer | undefined;
    while (!saturated && performance.now() - started < TIMEOUT_MS) {
      const readyz = await adminGet(adminUrl, '/readyz');
      if (readyz.status === 503 && (JSON.parse(readyz.body) as { checks?: Record<string, string> }).checks?.['connector'] === 'saturated') saturated = readyz;
      else await new Promise((resolve) => setTimeout(resolve, 50));
    }

    const results = await Promise.all(stuck);
    for (const { answer, ms } of results) {
      expectCodedError(answer, 504, 'connector_timeout', 'Card processor did not answer in time');
      expect(ms, 'a 504 arrives within about the connector deadline, queueing included').toBeLessThan(TIMEOUT_MS + SLACK_MS);
    }

    // The connector recovers: the next card succeeds at once (the pinned sockets were released).
    await setConnectorMode(connector, { mode: 'normal' });
    const recoveredAt = performance.now();
    const next = await createCard(10_000);
    expect(next.status, `first card after recovery: ${next.status} ${next.body}`).toBe(201);
    expect(performance.now() - recoveredAt).toBeLessThan(3000);
    expect((await adminGet(adminUrl, '/readyz')).status).toBe(200);
    expect(saturated, '/readyz never reported checks.connector "saturated" while requests queued').toBeDefined();
  }, 60_000);
});
