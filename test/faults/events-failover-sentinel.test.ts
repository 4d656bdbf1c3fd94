import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandboxConnector, type RunningSandboxConnector } from '../../src/connector/sandbox/sandbox-connector.js';
import type { GatewayEvent } from '../../src/foundation/event-types.js';
import { STORE_LOG } from '../../src/observability/store-observer.js';
import { cardBody, killAll, loginOver, postCard, startGateway, type GatewayProcess } from '../operations/support.js';
import { parseLogLine } from '../support/process.js';
import { RELAXED_LIMITS } from '../support/auth-requests.js';
import { DEFAULT_CREDENTIALS, rawTestConfig, testCertificatePem, writeTestConfig } from '../support/gateway-fixture.js';
import { transactionBody } from '../support/connector-events.js';
import { EVENTS_READER, postConnectorEvent, readAllEvents, waitForStore, writeEventSecrets, type RecordedAnswer } from '../support/event-clients.js';
import { startSentinel, storeSection, type RedisProcess, type SentinelTopology } from '../support/redis-topologies.js';
import { deliveriesByEvent, isUnverified, TEST_WEBHOOK_SECRET } from '../support/signed-deliveries.js';
import { sleep, waitFor } from '../support/wait.js';
import { startWebhookReceiver, type ReceivedRequest, type WebhookReceiver } from '../support/webhook-receiver.js';

/**
 * D66 through a Sentinel failover: a gateway process on a Sentinel group (1 master, 2 replicas,
 * 3 sentinels) with `store.redis.replicasToAck: 1`: an event is answered after WAIT, once a
 * replica has it (D35, D64). WAIT gives up after the command deadline and the event is answered
 * all the same, like a card record, so the test checks that this never happened before the kill
 * (no `replicas behind` line): that is the premise of "no acknowledged event lost". The connector posts transaction events to the connector listener
 * and a partner creates cards, both retrying as the contract tells them to (same eventId, same
 * requestId), while the master is SIGKILLed. The partner's webhook answers nothing until the
 * promotion: what was recorded before the kill waits in the delivery queue (or in flight), so it
 * can only be delivered from what the promoted replica holds. No acknowledged event is lost:
 * every event answered 202 (or 200) and every card answered 201, before and after the
 * failover, is readable through the API and delivered, signed, once a replica is promoted;
 * deliveries go on after the promotion.
 */

/** Bounds of the flood: a client stops at these whatever happens (the run's own end comes first). */
const MAX_EVENTS_PER_POSTER = 300;
const MAX_CARDS = 120;
/** Deliveries in flight at once: the webhook holds them until the promotion. */
const MAX_IN_FLIGHT = 8;
/** Acknowledged before the kill, and after the promotion, before the run ends. */
const BEFORE_KILL = { events: 30, cards: 5 };
const AFTER_PROMOTION = { events: 20, cards: 5 };

type Phase = 'before' | 'during' | 'after';

interface EventPost {
  connectorEventId: string;
  transactionId: string;
  statuses: number[];
  recorded?: RecordedAnswer;
  phase?: Phase;
}

interface CardPost {
  requestId: string;
  statuses: number[];
  cardId?: string;
  phase?: Phase;
}

describe('events through a Sentinel failover (D66, replicasToAck 1)', () => {
  let sentinel: SentinelTopology | undefined;
  let connector: RunningSandboxConnector | undefined;
  let receiver: WebhookReceiver | undefined;
  let gateway: GatewayProcess | undefined;
  let connectorUrl = '';
  let ca = '';
  /** Until the promotion, the webhook holds every request unanswered; then it answers 204. */
  let answering = false;
  const held: [ServerResponse, ReceivedRequest][] = [];
  const answeredRequests = new Set<ReceivedRequest>();
  const answer = (response: ServerResponse, request: ReceivedRequest) => {
    if (response.destroyed) return;
    answeredRequests.add(request);
    response.writeHead(204);
    response.end();
  };

  beforeAll(async () => {
    [sentinel, connector, receiver, ca] = await Promise.all([
      startSentinel(),
      startSandboxConnector({ host: '127.0.0.1', port: 0 }),
      startWebhookReceiver((response, request) => {
        if (answering) answer(response, request);
        else held.push([response, request]);
      }),
      testCertificatePem(),
    ]);
    const { connectorSecretFile, webhookSecretFile } = writeEventSecrets();
    const written = await writeTestConfig(
      await rawTestConfig({
        listeners: { https: { host: '127.0.0.1', port: 0 }, admin: { host: '127.0.0.1', port: 0 }, connector: { host: '127.0.0.1', port: 0 } },
        trustedProxies: [],
        // A generous command deadline: WAIT gets this long for its replica, so that a busy
        // machine never answers an event short of its acknowledgement (the premise below).
        store: storeSection(sentinel, `test:events-failover:${randomUUID().slice(0, 8)}:`, {
          replicasToAck: 1,
          commandTimeoutMs: 2000,
          connectTimeoutMs: 2000,
        }),
        connector: { url: connector.url, timeoutMs: 10_000, eventsSecret: { file: connectorSecretFile } },
        rateLimits: RELAXED_LIMITS,
        events: {
          pollIntervalMs: 200,
          endpoints: [
            {
              id: 'partner',
              issuingAccount: 'acct-eu',
              url: receiver.url,
              secrets: [{ file: webhookSecretFile }],
              timeoutMs: 60_000,
              maxInFlight: MAX_IN_FLIGHT,
            },
          ],
        },
      }),
      [...DEFAULT_CREDENTIALS, EVENTS_READER],
    );
    gateway = await startGateway(written.file);
    await waitForStore(gateway.adminUrl);
    connectorUrl = String(gateway.listening['connectorListener']);
    expect(connectorUrl).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
  }, 120_000);

  afterAll(async () => {
    await killAll();
    await receiver?.close();
    await connector?.close();
    await sentinel?.stop();
  });

  it('loses no acknowledged event: each 202 and 201 is readable and delivered after the promotion, and deliveries go on', async () => {
    const gw = gateway!;
    const hooks = receiver!;
    const cardToken = await loginOver(gw.httpsUrl, ca);
    let phase: Phase = 'before';
    let stopped = false;
    const posts: EventPost[] = [];
    const cards: CardPost[] = [];
    const acknowledged = (list: readonly { phase?: Phase }[], of: Phase) => list.filter((entry) => entry.phase === of).length;

    // The connector (D64): each event posted until 202, 200 or 400, the same eventId every time.
    const poster = async () => {
      for (let n = 0; n < MAX_EVENTS_PER_POSTER && !stopped; n += 1) {
        const transactionId = `txn_${randomUUID()}`;
        const body = transactionBody('transaction.authorized', { transactionId, cardId: 'card_failover' });
        const post: EventPost = { connectorEventId: String(body['eventId']), transactionId, statuses: [] };
        posts.push(post);
        for (;;) {
          const answer = await postConnectorEvent(connectorUrl, ca, body, 30_000).catch(() => ({ status: 0, body: '' }));
          post.statuses.push(answer.status);
          if (answer.status === 200 || answer.status === 202) {
            post.recorded = JSON.parse(answer.body) as RecordedAnswer;
            post.phase = phase;
            break;
          }
          if (answer.status === 400) break;
          await sleep(100);
        }
        await sleep(20);
      }
    };
    // A partner creating cards (D23): the same requestId until 201.
    const cardClient = async () => {
      for (let n = 0; n < MAX_CARDS && !stopped; n += 1) {
        const body = cardBody();
        const card: CardPost = { requestId: String(body['requestId']), statuses: [] };
        cards.push(card);
        for (;;) {
          const answer = await postCard(gw.httpsUrl, ca, cardToken, body, { timeoutMs: 30_000 }).catch(() => ({ status: 0, body: '' }));
          card.statuses.push(answer.status);
          if (answer.status === 201) {
            card.cardId = (JSON.parse(answer.body) as { cardId: string }).cardId;
            card.phase = phase;
            break;
          }
          await sleep(100);
        }
        await sleep(50);
      }
    };
    const clients = [poster(), poster(), cardClient()];

    await waitFor(
      'events and cards acknowledged before the kill',
      () => acknowledged(posts, 'before') >= BEFORE_KILL.events && acknowledged(cards, 'before') >= BEFORE_KILL.cards,
    );
    // What was acknowledged up to here was acknowledged before the kill: phase changes in the same turn as the kill.
    const master: RedisProcess = await sentinel!.master();
    phase = 'during';
    const linesAtKill = gw.lines.length;
    const sentBeforeKill = hooks.requests.length;
    await master.kill();
    const promoted = await sentinel!.waitForNewMaster(master);
    phase = 'after';
    answering = true;
    for (const [response, request] of held.splice(0)) answer(response, request);
    await waitFor(
      'events and cards acknowledged after the promotion',
      () => acknowledged(posts, 'after') >= AFTER_PROMOTION.events && acknowledged(cards, 'after') >= AFTER_PROMOTION.cards,
      { timeoutMs: 120_000 },
    );
    stopped = true;
    await Promise.all(clients);

    // The premise: before the kill, every record had its replica's acknowledgement (D35).
    const before = gw.lines.slice(0, linesAtKill).map((line) => parseLogLine(line)?.['msg']);
    expect(before).not.toContain(STORE_LOG.replicasBehind);
    // The fault was real: the gateway refused while no master served, and followed the promotion.
    const statuses = posts.flatMap((post) => post.statuses);
    expect(statuses).toContain(503);
    expect(new Set(statuses)).toSatisfy((seen: Set<number>) => [...seen].every((status) => [200, 202, 503].includes(status)));
    expect(new Set(cards.flatMap((card) => card.statuses))).toSatisfy((seen: Set<number>) => [...seen].every((status) => [201, 409, 503].includes(status)));
    await gw.waitForLog((line) => line['msg'] === STORE_LOG.masterChanged && line['to'] === promoted.address, { from: linesAtKill });

    const recorded = posts.filter((post) => post.recorded !== undefined);
    const created = cards.filter((card) => card.cardId !== undefined);
    expect(recorded).toHaveLength(posts.length);
    expect(created).toHaveLength(cards.length);
    // Most of what was acknowledged before the kill had not even been sent: it waited in the queue.
    expect(sentBeforeKill).toBeLessThanOrEqual(MAX_IN_FLIGHT);
    expect(acknowledged(posts, 'before') + acknowledged(cards, 'before')).toBeGreaterThan(sentBeforeKill);

    // Readable through the API, each once: every connector event under the id it was answered,
    // every card's card.created (a record the outage deferred lands once the store answers).
    const reader = await loginOver(gw.httpsUrl, ca, EVENTS_READER.username);
    const events = await waitFor(
      'every acknowledged event to be readable',
      async () => {
        const all = await readAllEvents(gw.httpsUrl, ca, reader);
        const ids = new Set(all.map((event) => event.id));
        const createdCards = new Set(
          all.filter((event) => event.type === 'card.created').map((event) => (event.data as { card: { cardId: string } }).card.cardId),
        );
        return recorded.every((post) => ids.has(post.recorded!.id)) && created.every((card) => createdCards.has(card.cardId!)) && all;
        // Gently: the reads count against the credential's API limit.
      },
      { intervalMs: 500 },
    );
    const byId = new Map(events.map((event) => [event.id, event]));
    for (const post of recorded) {
      const event = byId.get(post.recorded!.id) as Extract<GatewayEvent, { type: 'transaction.authorized' }> | undefined;
      expect(event, `${post.phase} ${post.connectorEventId}`).toMatchObject({ type: 'transaction.authorized', sequence: post.recorded!.sequence });
      expect(event!.data.transactionId).toBe(post.transactionId);
    }
    // One event per connector event and per card, one sequence per event.
    const transactions = events
      .filter((event) => event.type === 'transaction.authorized')
      .map((event) => (event.data as { transactionId: string }).transactionId);
    expect(new Set(transactions).size).toBe(transactions.length);
    expect(new Set(transactions)).toEqual(new Set(recorded.map((post) => post.transactionId)));
    const cardIds = events.filter((event) => event.type === 'card.created').map((event) => (event.data as { card: { cardId: string } }).card.cardId);
    expect(cardIds.sort()).toEqual(created.map((card) => card.cardId!).sort());
    expect(new Set(events.map((event) => event.sequence)).size).toBe(events.length);

    // Delivered (answered 204, all after the promotion), each at least once, signed, with the body the API reads back.
    const wanted = events.map((event) => event.id);
    const delivered = await waitFor(
      'every event delivered to the webhook',
      () => {
        const byEvent = deliveriesByEvent(
          hooks.requests.filter((request) => answeredRequests.has(request)),
          TEST_WEBHOOK_SECRET,
        );
        return wanted.every((id) => byEvent.has(id)) && byEvent;
      },
      { stopOn: isUnverified },
    );
    expect(deliveriesByEvent(hooks.requests, TEST_WEBHOOK_SECRET).size).toBe(delivered.size);
    for (const event of events) for (const delivery of delivered.get(event.id)!) expect(JSON.parse(delivery.body)).toEqual(event);
    // Deliveries went on after the failover: the events acknowledged after the promotion are among them.
    expect(acknowledged(posts, 'after')).toBeGreaterThanOrEqual(AFTER_PROMOTION.events);
    expect(acknowledged(cards, 'after')).toBeGreaterThanOrEqual(AFTER_PROMOTION.cards);

    console.info(
      `[events failover sentinel] connector events ${recorded.length} (before the kill ${acknowledged(posts, 'before')}, during ${acknowledged(posts, 'during')}, after ${acknowledged(posts, 'after')}), ` +
        `503 answers ${statuses.filter((status) => status === 503).length}; cards ${created.length}; events read ${events.length}; webhook requests ${hooks.requests.length} (${sentBeforeKill} before the kill) for ${delivered.size} events`,
    );
  }, 300_000);
});
