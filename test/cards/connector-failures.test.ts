import type { LightMyRequestResponse } from 'fastify';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startSandboxConnector, type RunningSandboxConnector, type SandboxMode } from '../../src/connector/sandbox/sandbox-connector.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import type { GatewayStore } from '../../src/store/store-types.js';
import { metricValue } from '../support/auth-requests.js';
import {
  connectorStats,
  createCard,
  expectCard,
  expectError,
  resetConnector,
  setConnectorMode,
  startCardFixture,
  validCardBody,
  type CardFixture,
} from '../support/card-fixture.js';
import { createTestRedisStore } from '../support/redis.js';

/**
 * D19 with the sandbox's fault switches: refused, reset, cut or 5xx answers are 502, no answer
 * in time is 504, an answer that is not a card is 502; none of them leaks connector internals;
 * each failure releases the key (D17) so the client's retry with the same requestId succeeds,
 * and the connector never holds two cards for it.
 */

const TIMEOUT_MS = 500;
const BAD_GATEWAY = 'Card processor error';
const GATEWAY_TIMEOUT = 'Card processor did not answer in time';

interface FailureCase {
  name: string;
  mode: { mode: SandboxMode; delayMs?: number; status?: number };
  status: 502 | 504;
  kind: string;
  /** Whether the connector made the card while failing (then the retry is its replay). */
  createdWhileFailing: boolean;
}

const CASES: FailureCase[] = [
  { name: 'a reset connection', mode: { mode: 'reset' }, status: 502, kind: 'reset', createdWhileFailing: false },
  { name: 'a body cut short', mode: { mode: 'partial' }, status: 502, kind: 'reset', createdWhileFailing: false },
  { name: 'a 500 answer', mode: { mode: 'fail', status: 500 }, status: 502, kind: 'status', createdWhileFailing: false },
  { name: 'a 503 answer', mode: { mode: 'fail', status: 503 }, status: 502, kind: 'status', createdWhileFailing: false },
  { name: 'a body that is not JSON', mode: { mode: 'garbage' }, status: 502, kind: 'invalid_answer', createdWhileFailing: false },
  { name: 'JSON that is not a card', mode: { mode: 'wrong-shape' }, status: 502, kind: 'invalid_answer', createdWhileFailing: false },
  // Held far past the deadline (closing the sandbox releases it): only the gateway's deadline can end the call.
  { name: 'no answer within the timeout', mode: { mode: 'delay', delayMs: 600_000 }, status: 504, kind: 'timeout', createdWhileFailing: true },
];

/** The public envelope of a connector failure: exact message, nothing of the connector in it. */
function expectConnectorFailure(response: LightMyRequestResponse, status: 502 | 504, connectorUrl: string): void {
  const body = expectError(response, status, status === 504 ? GATEWAY_TIMEOUT : BAD_GATEWAY);
  expect(body.details).toEqual({});
  expect(Object.keys(body).sort()).toEqual(['code', 'correlationId', 'details', 'message', 'status', 'timestamp']);
  const port = new URL(connectorUrl).port;
  for (const leak of [connectorUrl, '127.0.0.1', `:${port}`, '/v1/cards', 'sandbox', 'undici', 'ECONN', 'UND_ERR', 'reply-from', 'socket', 'stack']) {
    expect(response.body).not.toContain(leak);
  }
  for (const [name, value] of Object.entries(response.headers)) {
    expect(`${name}: ${String(value)}`).not.toContain(connectorUrl);
  }
}

function failureSuite(storeName: string, makeStore: () => Promise<{ store: GatewayStore; cleanup(): Promise<void> }>): void {
  describe(`connector failures on the ${storeName} store (D19)`, () => {
    let fixture: CardFixture;
    let cleanupStore: () => Promise<void>;
    let token: string;

    beforeAll(async () => {
      const made = await makeStore();
      cleanupStore = made.cleanup;
      try {
        fixture = await startCardFixture({ store: made.store, connectorTimeoutMs: TIMEOUT_MS });
      } catch (error) {
        await cleanupStore();
        throw error;
      }
      token = await fixture.token('full');
    });
    afterAll(async () => {
      try {
        await fixture.close();
      } finally {
        await cleanupStore();
      }
    });
    beforeEach(async () => {
      await resetConnector(fixture.connector);
    });

    for (const failure of CASES) {
      it(`${failure.name} gives ${failure.status}; a retry with the same requestId then succeeds with one card`, async () => {
        const errorsBefore = await metricValue(fixture.gw, 'gateway_connector_errors_total', { kind: failure.kind });
        await setConnectorMode(fixture.connector, { ...failure.mode, count: 1 });
        const body = validCardBody();
        const key = `acct-eu:${String(body['requestId'])}`;

        expectConnectorFailure(await createCard(fixture.gw, token, body), failure.status, fixture.connector.url);
        expect(await metricValue(fixture.gw, 'gateway_connector_errors_total', { kind: failure.kind })).toBe(errorsBefore + 1);
        const during = await connectorStats(fixture.connector);
        expect(during.requestsReceived).toBe(1);
        expect(during.cardsCreated).toBe(failure.createdWhileFailing ? 1 : 0);

        // The sandbox is back to normal after one faulty answer (count: 1).
        const retry = await createCard(fixture.gw, token, body);
        const card = expectCard(retry);
        expect(retry.headers['idempotent-replayed']).toBeUndefined();
        const after = await connectorStats(fixture.connector);
        expect(after.requestsReceived).toBe(2);
        expect(after.cardsCreated).toBe(1);
        expect(after.keys).toEqual([key]);
        expect(after.lastHeaders?.['idempotency-key']).toBe(key);

        // From now on the gateway replays it without asking the connector.
        const replay = await createCard(fixture.gw, token, body);
        expect(expectCard(replay).cardId).toBe(card.cardId);
        expect(replay.headers['idempotent-replayed']).toBe('true');
        expect((await connectorStats(fixture.connector)).requestsReceived).toBe(2);
      });
    }

    it('audits and counts each failure, without a log line per request or any of the connector answer', async () => {
      await setConnectorMode(fixture.connector, { mode: 'partial', count: 1 });
      const body = validCardBody();
      const response = await createCard(fixture.gw, token, body);
      expect(response.statusCode).toBe(502);
      const correlationId = String(response.headers['x-correlation-id']);
      const audited = fixture.gw.audit.lines
        .map((line) => JSON.parse(line) as Record<string, unknown>)
        .filter((line) => line['correlationId'] === correlationId);
      expect(audited).toContainEqual(expect.objectContaining({ event: 'card.failed', outcome: 'failure', reason: 'reset', requestId: body['requestId'] }));
      // The fixture logs at debug, where every request has its line: nothing above that level.
      const logged = fixture.gw.logs.lines
        .filter((line) => line.includes(correlationId))
        .map((line) => (JSON.parse(line) as { level: string; msg: string }).msg);
      expect(logged).toEqual(['request']);
      // The fragment the sandbox sent starts a PAN; no part of its body may reach the log or the audit.
      expect(fixture.gw.logs.text()).not.toContain('4000000000000002');
      expect(fixture.gw.audit.lines.join('\n')).not.toContain('4000000000000002');
    });
  });
}

failureSuite('memory', async () => {
  const store = new MemoryStore();
  return { store, cleanup: () => store.close() };
});
failureSuite('redis', async () => {
  const { store, cleanup } = await createTestRedisStore('connector-failures');
  return { store, cleanup };
});

describe('connector down (D19)', () => {
  const running: RunningSandboxConnector[] = [];
  let fixture: CardFixture | undefined;

  afterEach(async () => {
    await fixture?.close();
    fixture = undefined;
    for (const connector of running.splice(0)) await connector.close();
  });

  it('a refused connection is 502 without internals; once the connector is back, the retry succeeds', async () => {
    const first = await startSandboxConnector({ host: '127.0.0.1', port: 0, controls: true });
    const port = Number(new URL(first.url).port);
    fixture = await startCardFixture({ connector: first, connectorTimeoutMs: TIMEOUT_MS });
    const token = await fixture.token('full');
    await first.close();

    const body = validCardBody();
    const refusedBefore = await metricValue(fixture.gw, 'gateway_connector_errors_total', { kind: 'refused' });
    expectConnectorFailure(await createCard(fixture.gw, token, body), 502, first.url);
    expectConnectorFailure(await createCard(fixture.gw, token, body), 502, first.url);
    expect(await metricValue(fixture.gw, 'gateway_connector_errors_total', { kind: 'refused' })).toBe(refusedBefore + 2);

    const second = await startSandboxConnector({ host: '127.0.0.1', port, controls: true });
    running.push(second);
    const card = expectCard(await createCard(fixture.gw, token, body));
    const stats = await connectorStats(second);
    expect(stats.cardsCreated).toBe(1);
    expect(stats.keys).toEqual([`acct-eu:${String(body['requestId'])}`]);
    expect(card.cardId).toMatch(/^card_/);
  });
});
