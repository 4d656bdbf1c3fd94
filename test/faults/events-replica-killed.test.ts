import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, killAll, startGateway, type GatewayProcess } from '../operations/support.js';
import { RELAXED_LIMITS } from '../support/auth-requests.js';
import { transactionBody } from '../support/connector-events.js';
import { postConnectorEvent, waitForStore, writeEventSecrets, type RecordedAnswer } from '../support/event-clients.js';
import { rawTestConfig, testCertificatePem, writeTestConfig } from '../support/gateway-fixture.js';
import { startStandalone, storeSection, type StandaloneTopology } from '../support/redis-topologies.js';
import { deliveriesByEvent, isUnverified, TEST_WEBHOOK_SECRET } from '../support/signed-deliveries.js';
import { waitFor } from '../support/wait.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';

/**
 * D66: a replica that dies mid-delivery has its deliveries taken over after a lease. Two gateway
 * processes on one Redis, one webhook endpoint whose receiver never answers replica A: A's
 * deliveries are in flight (held) when A is SIGKILLed, and replica B, running all along, sends
 * those events once their lease (the endpoint's timeoutMs + 5 s) has run out, along with the
 * ones A never claimed. Every event arrives at least once, each request signed.
 *
 * The two replicas share everything but the endpoint URL's path (`/replica-a`, `/replica-b`):
 * that is how the receiver tells who sent a request; the store keys deliveries by endpoint id.
 */

const EVENTS = 12;
/** Replica A's deliveries in flight at once: the receiver holds this many, then A is killed. */
const MAX_IN_FLIGHT = 4;

describe('a replica killed with deliveries in flight (D66)', () => {
  let redis: StandaloneTopology | undefined;
  let receiver: WebhookReceiver | undefined;
  let replicaA: GatewayProcess | undefined;
  let replicaB: GatewayProcess | undefined;
  let ca = '';
  /** A's requests, held unanswered; whether each one's connection was still open when A was killed. */
  const heldByA: ServerResponse[] = [];
  let openAtKill: boolean[] | undefined;

  beforeAll(async () => {
    [redis, ca] = await Promise.all([startStandalone(), testCertificatePem()]);
    receiver = await startWebhookReceiver((response, request) => {
      if (request.url === '/replica-a') {
        heldByA.push(response);
        // In the turn A's last slot is seen taken: none of A's sends can have reached its deadline yet.
        if (heldByA.length === MAX_IN_FLIGHT && openAtKill === undefined) {
          openAtKill = heldByA.map((held) => held.socket !== null && !held.socket.destroyed);
          replicaA?.child.kill('SIGKILL');
        }
        return;
      }
      response.writeHead(204);
      response.end();
    });
    const origin = new URL(receiver.url).origin;
    const { connectorSecretFile, webhookSecretFile } = writeEventSecrets();
    const store = storeSection(redis, `test:events-replica-killed:${randomUUID().slice(0, 8)}:`, { commandTimeoutMs: 2000, connectTimeoutMs: 2000 });
    const configOf = async (path: string) =>
      (
        await writeTestConfig(
          await rawTestConfig({
            listeners: { https: { host: '127.0.0.1', port: 0 }, admin: { host: '127.0.0.1', port: 0 }, connector: { host: '127.0.0.1', port: 0 } },
            trustedProxies: [],
            store,
            connector: { url: 'http://127.0.0.1:9', timeoutMs: 1000, eventsSecret: { file: connectorSecretFile } },
            rateLimits: RELAXED_LIMITS,
            events: {
              pollIntervalMs: 1000,
              endpoints: [
                {
                  id: 'partner',
                  issuingAccount: 'acct-eu',
                  url: `${origin}${path}`,
                  secrets: [{ file: webhookSecretFile }],
                  timeoutMs: 1000,
                  maxInFlight: MAX_IN_FLIGHT,
                },
              ],
            },
          }),
        )
      ).file;
    [replicaA, replicaB] = await Promise.all([startGateway(await configOf('/replica-a')), startGateway(await configOf('/replica-b'))]);
    await Promise.all([waitForStore(replicaA.adminUrl), waitForStore(replicaB.adminUrl)]);
  }, 120_000);

  afterAll(async () => {
    await killAll();
    await receiver?.close();
    await redis?.stop();
  });

  it('lets replica B deliver, after their lease, the events A held in flight when it was SIGKILLed; every event arrives, signed', async () => {
    const hooks = receiver!;
    const a = replicaA!;
    // The connector posts every event to A: A records them and, nudged, claims them first. Once
    // A is gone, the connector posts the same event to B, as behind a load balancer.
    // Like any connector, it posts an event again on a 503 (D64).
    const recorded: RecordedAnswer[] = [];
    const statuses: number[] = [];
    for (let n = 0; n < EVENTS; n += 1) {
      const body = transactionBody('transaction.cleared');
      const answer = await waitFor(
        `event ${n} recorded`,
        async () => {
          const got =
            (await postConnectorEvent(String(a.listening['connectorListener']), ca, body).catch(() => undefined)) ??
            (await postConnectorEvent(String(replicaB!.listening['connectorListener']), ca, body));
          statuses.push(got.status);
          return (got.status === 200 || got.status === 202) && got;
        },
        { intervalMs: 100 },
      );
      recorded.push(JSON.parse(answer.body) as RecordedAnswer);
    }
    expect(new Set(statuses)).toSatisfy((seen: Set<number>) => [...seen].every((status) => [200, 202, 503].includes(status)));
    await waitFor(`replica A to hold ${MAX_IN_FLIGHT} deliveries (${heldByA.length} so far)`, () => openAtKill !== undefined);
    const exit = await a.exitWithin(10_000);
    expect(exit.signal).toBe('SIGKILL');

    // A was killed mid-send: every request it had out was still waiting for its answer.
    expect(openAtKill).toEqual(Array.from({ length: MAX_IN_FLIGHT }, () => true));
    const heldRequests = hooks.requests.filter((request) => request.url === '/replica-a');
    expect(heldRequests).toHaveLength(MAX_IN_FLIGHT);
    const heldIds = [...deliveriesByEvent(heldRequests, TEST_WEBHOOK_SECRET).keys()];
    expect(heldIds).toHaveLength(MAX_IN_FLIGHT);

    // B delivers everything: what A held once its lease ran out, and whatever A had not claimed.
    const ids = recorded.map((event) => event.id);
    const fromB = await waitFor(
      'replica B to deliver every event',
      () => {
        const byEvent = deliveriesByEvent(
          hooks.requests.filter((request) => request.url === '/replica-b'),
          TEST_WEBHOOK_SECRET,
        );
        return ids.every((id) => byEvent.has(id)) && byEvent;
      },
      { stopOn: isUnverified },
    );
    expect([...fromB.keys()].sort()).toEqual([...ids].sort());
    // Every request either replica sent is signed and carries the event unchanged.
    const all = deliveriesByEvent(hooks.requests, TEST_WEBHOOK_SECRET);
    expect([...all.keys()].sort()).toEqual([...ids].sort());
    for (const [id, deliveries] of all) expect(new Set(deliveries.map((delivery) => delivery.body)).size, id).toBe(1);
    for (const id of heldIds) {
      const [first, ...later] = all.get(id)!.map((delivery) => delivery.request.url);
      expect(first).toBe('/replica-a');
      expect(later).toContain('/replica-b');
    }
    console.info(
      `[events replica killed] ${ids.length} events; replica A held ${heldIds.length} when killed; webhook requests: ${heldRequests.length} from A, ${hooks.requests.length - heldRequests.length} from B`,
    );

    // Nothing is left pending or failed.
    await waitFor('the backlog to drain', async () => {
      const answer = await call(`${replicaB!.adminUrl}/events/endpoints`);
      const [endpoint] = (JSON.parse(answer.body) as { endpoints: { backlog: { pending: number; failed: number } }[] }).endpoints;
      return endpoint?.backlog.pending === 0 && endpoint.backlog.failed === 0;
    });
  }, 180_000);
});
