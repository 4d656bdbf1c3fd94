import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandboxConnector, type RunningSandboxConnector } from '../../src/connector/sandbox/sandbox-connector.js';
import { CARDS, connectorStats, validCardBody, type CardAnswer } from '../support/card-fixture.js';
import { PASSWORD, rawTestConfig, testCertificatePem, writeTestConfig } from '../support/gateway-fixture.js';
import { RELAXED_LIMITS } from '../support/auth-requests.js';
import { freePort } from '../support/ports.js';
import { startHeldConnector, type HeldConnector } from '../support/held-connector.js';
import { builtEntryPoints, spawnEntry, type BuiltEntryPoints, type RunningProcess } from '../support/process.js';
import { realRequest, type RealResponse } from '../transport/real-clients.js';

/**
 * D22 under load: the real compiled process, 50 card creations in flight on 50 separate TLS
 * connections, each held before the connector until the test releases it after SIGTERM.
 * Draining means every one of them still gets its whole 201 (the upstream forward included),
 * new connections are refused, and the process exits 0. test/transport/graceful-shutdown.test.ts
 * covers one idle-upstream request.
 */

const IN_FLIGHT = 50;

describe('SIGTERM while 50 card creations are in flight', () => {
  let entry: BuiltEntryPoints | undefined;
  let connector: RunningSandboxConnector | undefined;
  let held: HeldConnector | undefined;
  let gateway: RunningProcess | undefined;

  beforeAll(async () => {
    [entry, connector] = await Promise.all([builtEntryPoints(), startSandboxConnector({ host: '127.0.0.1', port: 0, controls: true })]);
    held = await startHeldConnector(connector.url);
  }, 120_000);

  afterAll(async () => {
    gateway?.kill();
    await held?.close();
    await connector?.close();
  });

  it('answers every in-flight request with a complete 201, refuses new connections, and exits 0', async () => {
    const [https, admin] = [await freePort(), await freePort()];
    const written = await writeTestConfig(
      await rawTestConfig({
        listeners: { https: { host: '127.0.0.1', port: https }, admin: { host: '127.0.0.1', port: admin } },
        trustedProxies: [],
        // The hold counts against the deadline: generous, so that only the release ends it.
        connector: { url: held!.url, timeoutMs: 60_000 },
        rateLimits: RELAXED_LIMITS,
      }),
    );
    gateway = spawnEntry(entry!.mainJs, written.file);
    await gateway.waitForLog((line) => line['msg'] === 'gateway listening');
    const base = `https://127.0.0.1:${https}`;
    const ca = await testCertificatePem();

    const login = await realRequest(`${base}/api/v1/auth/login`, { ca, method: 'POST', body: JSON.stringify({ username: 'full', password: PASSWORD }) });
    expect(login.status, login.body).toBe(200);
    const { accessToken } = JSON.parse(login.body) as { accessToken: string };

    const before = await connectorStats(connector!);
    let answered = 0;
    const requests = Array.from({ length: IN_FLIGHT }, () =>
      realRequest(`${base}${CARDS}`, { ca, method: 'POST', body: JSON.stringify(validCardBody()), headers: { authorization: `Bearer ${accessToken}` } }).then(
        (response) => {
          answered += 1;
          return response;
        },
        (error: NodeJS.ErrnoException) => ({ status: 0, headers: {}, body: `${error.code ?? ''} ${error.message}` }) satisfies RealResponse,
      ),
    );

    // All 50 are inside the gateway (each forward is held before the connector), none answered yet.
    await held!.waitForHeld(IN_FLIGHT);
    const inFlightAtSignal = IN_FLIGHT - answered;
    const logged = gateway.lines.length;
    gateway.child.kill('SIGTERM');
    await gateway.waitForLog((line) => line['msg'] === 'draining in-flight requests', { from: logged, timeoutMs: 30_000 });

    // A new connection after the signal: refused, or at most told 503.
    const late = await realRequest(`${base}/.well-known/jwks.json`, { ca }).then(
      (response) => String(response.status),
      (error: NodeJS.ErrnoException) => error.code ?? error.message,
    );
    expect(['ECONNREFUSED', '503']).toContain(late);

    held!.release();
    const responses = await Promise.all(requests);
    for (const response of responses) {
      expect(response.status, response.body).toBe(201);
      const card = JSON.parse(response.body) as CardAnswer;
      expect(card).toMatchObject({ status: 'active', currency: 'EUR', cardLimit: 10_000 });
      expect(card.pan).toMatch(/^\*{12}\d{4}$/);
    }
    expect(new Set(responses.map((response) => (JSON.parse(response.body) as CardAnswer).cardId)).size).toBe(IN_FLIGHT);
    // The signal really came while they were in flight (held until after it).
    expect(inFlightAtSignal).toBe(IN_FLIGHT);

    const { code, signal } = await gateway.exited;
    expect({ code, signal, stderr: gateway.stderr() }).toMatchObject({ code: 0, signal: null });
    const messages = gateway.lines.map((line) => (JSON.parse(line) as { msg?: string }).msg);
    expect(messages.at(-1)).toBe('stopped');
    expect(messages).not.toContain('request failed');
    expect((await connectorStats(connector!)).cardsCreated - before.cardsCreated).toBe(IN_FLIGHT);
  }, 60_000);
});
