import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandboxConnector } from '../../src/connector/sandbox/sandbox-connector.js';
import { ManualClock } from '../../src/foundation/clock.js';
import type { GatewayEvent } from '../../src/foundation/event-types.js';
import { listenGateway, type RunningGateway } from '../../src/server.js';
import { call, cardBody, loginOver, postCard } from '../operations/support.js';
import { metricValue, RELAXED_LIMITS, T0 } from '../support/auth-requests.js';
import { FIXTURE_CONNECTOR_TIMEOUT_MS } from '../support/card-fixture.js';
import { transactionBody } from '../support/connector-events.js';
import { EVENTS_PATH, EVENTS_READER, postConnectorEvent, readAllEvents, writeEventSecrets, type RecordedAnswer } from '../support/event-clients.js';
import { createTestGateway, DEFAULT_CREDENTIALS, testCertificatePem, testConfig, type TestGateway } from '../support/gateway-fixture.js';
import { createTestRedisStore, openReplicaStore } from '../support/redis.js';
import { deliveriesByEvent, isUnverified, TEST_WEBHOOK_SECRET, type VerifiedDelivery } from '../support/signed-deliveries.js';
import { waitFor } from '../support/wait.js';
import { startWebhookReceiver, type ReceivedRequest, type WebhookReceiver } from '../support/webhook-receiver.js';

/**
 * Events across two gateway replicas on one Redis (D64-D66), over real listeners: each replica
 * listens for real (API over TLS, admin, connector listener) and runs its own delivery loop on a
 * shared ManualClock; the partner's webhook receiver is a real HTTP server. A card created on
 * one replica is delivered once the loops see it and readable from the other; a connector
 * event posted twice is one event; a delivery that failed the whole retry schedule (the clock
 * driven through it) is redelivered from the admin listener with the event unchanged.
 */

const ENDPOINT = 'partner';
const RETRY_ATTEMPTS = 8;

interface Replica {
  gw: TestGateway;
  running: RunningGateway;
}

describe('events across two replicas on one Redis, over real listeners (D64-D66)', () => {
  const closers: (() => Promise<void>)[] = [];
  const replicas: Replica[] = [];
  const clock = new ManualClock(T0);
  /** The status the receiver answered each request with. */
  const answered = new Map<ReceivedRequest, number>();
  let failing = false;
  let receiver: WebhookReceiver;
  let ca: string;

  beforeAll(async () => {
    ca = await testCertificatePem();
    const connector = await startSandboxConnector({ host: '127.0.0.1', port: 0 });
    closers.push(() => connector.close());
    receiver = await startWebhookReceiver((response, request) => {
      const status = failing ? 500 : 200;
      answered.set(request, status);
      response.writeHead(status);
      response.end();
    });
    closers.push(() => receiver.close());
    const shared = await createTestRedisStore('events-replicas');
    closers.push(() => shared.cleanup());
    const { connectorSecretFile, webhookSecretFile } = writeEventSecrets();
    const config = await testConfig(
      {
        listeners: { https: { host: '127.0.0.1', port: 0 }, admin: { host: '127.0.0.1', port: 0 }, connector: { host: '127.0.0.1', port: 0 } },
        connector: { url: connector.url, timeoutMs: FIXTURE_CONNECTOR_TIMEOUT_MS, eventsSecret: { file: connectorSecretFile } },
        rateLimits: RELAXED_LIMITS,
        events: {
          pollIntervalMs: 50,
          endpoints: [{ id: ENDPOINT, issuingAccount: 'acct-eu', url: receiver.url, secrets: [{ file: webhookSecretFile }], timeoutMs: 5000, maxInFlight: 4 }],
        },
      },
      [...DEFAULT_CREDENTIALS, EVENTS_READER],
    );
    for (let index = 0; index < 2; index += 1) {
      let store = shared.store;
      if (index > 0) {
        const own = await openReplicaStore(shared.prefix);
        closers.push(() => own.close());
        store = own;
      }
      const gw = await createTestGateway({ config, clock, store });
      closers.push(() => gw.close());
      // Listening starts the replica's delivery loop.
      const running = await listenGateway(gw.gateway, {
        https: { host: '127.0.0.1', port: 0 },
        admin: { host: '127.0.0.1', port: 0 },
        connector: { host: '127.0.0.1', port: 0 },
      });
      closers.push(() => running.close());
      replicas.push({ gw, running });
    }
  }, 60_000);

  afterAll(async () => {
    for (const close of closers.splice(0).reverse()) {
      try {
        await close();
      } catch {
        // keep closing the rest
      }
    }
  });

  const [A, B] = [0, 1];
  const replica = (index: number): Replica => replicas[index]!;
  const connectorUrl = (index: number) => replica(index).running.connectorUrl!;
  /** Every request the receiver got, verified, grouped by webhook-id. */
  const verified = () => deliveriesByEvent(receiver.requests, TEST_WEBHOOK_SECRET);
  /** No send in flight on either replica: every attempt made so far is settled in the store. */
  const settled = () => Promise.all(replicas.map(({ gw }) => gw.gateway.events.loop.idle()));
  const adminDelivery = (eventId: string) => call(`${replica(A).running.adminUrl}/events/endpoints/${ENDPOINT}/deliveries/${eventId}`);

  it('delivers a card created on A while both replicas run their loops, at least once under one webhook-id, and B reads it back', async () => {
    const token = await loginOver(replica(A).running.httpsUrl, ca);
    const created = await postCard(replica(A).running.httpsUrl, ca, token, cardBody());
    expect(created.status, created.body).toBe(201);
    const { cardId } = JSON.parse(created.body) as { cardId: string };

    const ofCard = (deliveries: VerifiedDelivery[]) =>
      deliveries.filter((delivery) => delivery.event.type === 'card.created' && (delivery.event.data['card'] as { cardId: string }).cardId === cardId);
    const deliveries = await waitFor(
      'card.created at the webhook',
      () => {
        const found = ofCard([...verified().values()].flat());
        return found.length > 0 && found;
      },
      { stopOn: isUnverified },
    );
    await settled();
    // At least once; a repeat is the same event under the same webhook-id, byte for byte.
    const again = ofCard([...verified().values()].flat());
    expect(again.length).toBeGreaterThanOrEqual(1);
    expect(new Set(again.map((delivery) => delivery.id))).toEqual(new Set([deliveries[0]!.id]));
    expect(new Set(again.map((delivery) => delivery.body)).size).toBe(1);
    expect(again.every((delivery) => answered.get(delivery.request) === 200)).toBe(true);

    // B reads what A recorded and both delivered: the same event, in the list and by id.
    const reader = await loginOver(replica(B).running.httpsUrl, ca, EVENTS_READER.username);
    const listed = await readAllEvents(replica(B).running.httpsUrl, ca, reader, `type=card.created&cardId=${cardId}`);
    expect(listed).toEqual([JSON.parse(deliveries[0]!.body) as GatewayEvent]);
    const one = await call(`${replica(B).running.httpsUrl}${EVENTS_PATH}/${deliveries[0]!.id}`, { ca, headers: { authorization: `Bearer ${reader}` } });
    expect(one.status, one.body).toBe(200);
    expect(JSON.parse(one.body)).toEqual(listed[0]);
    expect(listed[0]).toMatchObject({ type: 'card.created', issuingAccount: 'acct-eu', data: { card: { cardId, status: 'active' } } });
  });

  it("records a processor event posted twice to B's connector listener once: 202, then 200 with the same id and sequence", async () => {
    const before = {
      recorded: await metricValue(replica(B).gw, 'gateway_connector_events_total', { outcome: 'recorded' }),
      repeat: await metricValue(replica(B).gw, 'gateway_connector_events_total', { outcome: 'repeat' }),
    };
    const transactionId = `txn_${randomUUID()}`;
    const body = transactionBody('transaction.authorized', { transactionId });
    const first = await postConnectorEvent(connectorUrl(B), ca, body);
    const second = await postConnectorEvent(connectorUrl(B), ca, body);
    expect(first.status, first.body).toBe(202);
    expect(second.status, second.body).toBe(200);
    const recorded = JSON.parse(first.body) as RecordedAnswer;
    expect(JSON.parse(second.body)).toEqual(recorded);
    expect(await metricValue(replica(B).gw, 'gateway_connector_events_total', { outcome: 'recorded' })).toBe(before.recorded + 1);
    expect(await metricValue(replica(B).gw, 'gateway_connector_events_total', { outcome: 'repeat' })).toBe(before.repeat + 1);

    // One event, read from A; delivered under its id.
    const reader = await loginOver(replica(A).running.httpsUrl, ca, EVENTS_READER.username);
    const ofTransaction = (await readAllEvents(replica(A).running.httpsUrl, ca, reader, 'type=transaction.authorized')).filter(
      (event) => (event.data as { transactionId: string }).transactionId === transactionId,
    );
    expect(ofTransaction.map((event) => [event.id, event.sequence])).toEqual([[recorded.id, recorded.sequence]]);
    await waitFor('the transaction at the webhook', () => verified().has(recorded.id), { stopOn: isUnverified });
    await settled();
    const deliveries = [...verified().values()].flat().filter((delivery) => delivery.event.data['transactionId'] === transactionId);
    expect(new Set(deliveries.map((delivery) => delivery.id))).toEqual(new Set([recorded.id]));
    expect(JSON.parse(deliveries[0]!.body)).toEqual(ofTransaction[0]);
  });

  it("redelivers from A's admin listener a delivery that failed all 8 attempts, the event unchanged (the clock driven through the schedule)", async () => {
    await waitFor('nothing pending', async () => {
      const answer = await call(`${replica(A).running.adminUrl}/events/endpoints`);
      return (JSON.parse(answer.body) as { endpoints: { backlog: { pending: number } }[] }).endpoints[0]?.backlog.pending === 0;
    });
    failing = true;
    const posted = await postConnectorEvent(connectorUrl(B), ca, transactionBody('transaction.declined'));
    expect(posted.status, posted.body).toBe(202);
    const { id } = JSON.parse(posted.body) as RecordedAnswer;
    const attemptsAtWebhook = () => verified().get(id)?.length ?? 0;

    for (let attempt = 1; attempt <= RETRY_ATTEMPTS; attempt += 1) {
      await waitFor(`attempt ${attempt} at the webhook`, () => attemptsAtWebhook() >= attempt, { stopOn: isUnverified });
      await settled();
      expect(attemptsAtWebhook()).toBe(attempt);
      const record = await adminDelivery(id);
      expect(record.status, record.body).toBe(200);
      const delivery = JSON.parse(record.body) as { state: string; attempts: number; nextAttemptAt?: string; lastError?: string };
      expect(delivery).toMatchObject({ attempts: attempt, lastError: 'status 500' });
      if (attempt < RETRY_ATTEMPTS) {
        // Just inside the schedule: still pending, due later; the clock is moved to that instant.
        expect(delivery.state).toBe('pending');
        const due = Date.parse(delivery.nextAttemptAt!);
        expect(due).toBeGreaterThan(clock.now());
        clock.set(due);
      } else {
        // Past it: failed, listed as such, and no round sends it again.
        expect(delivery.state).toBe('failed');
        clock.advance(24 * 3_600_000);
        await Promise.all(replicas.map(({ gw }) => gw.gateway.events.loop.runOnce()));
        await settled();
        expect(attemptsAtWebhook()).toBe(RETRY_ATTEMPTS);
        const failed = await call(`${replica(A).running.adminUrl}/events/endpoints/${ENDPOINT}/deliveries?state=failed`);
        expect(JSON.parse(failed.body)).toMatchObject({ deliveries: [{ eventId: id, state: 'failed', attempts: RETRY_ATTEMPTS }] });
      }
    }

    failing = false;
    const redelivered = await call(`${replica(A).running.adminUrl}/events/endpoints/${ENDPOINT}/deliveries/${id}/redeliver`, { method: 'POST' });
    expect(redelivered.status, redelivered.body).toBe(200);
    expect(JSON.parse(redelivered.body)).toEqual({ redelivered: 1, endpointStopped: false });
    await waitFor('the redelivery at the webhook', () => attemptsAtWebhook() > RETRY_ATTEMPTS, { stopOn: isUnverified });
    await settled();
    const all = verified().get(id)!;
    expect(all.map((delivery) => answered.get(delivery.request))).toEqual([...Array<number>(RETRY_ATTEMPTS).fill(500), 200]);
    // Signed every time, the same event byte for byte: a redelivery cannot alter what was signed.
    expect(new Set(all.map((delivery) => delivery.body)).size).toBe(1);
    expect((await adminDelivery(id)).status).toBe(404);
    expect(replica(A).gw.audit.lines.filter((line) => line.includes('"event.redelivered"') && line.includes(id))).toHaveLength(1);
  });
});
