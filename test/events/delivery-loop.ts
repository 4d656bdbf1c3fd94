import { createHmac } from 'node:crypto';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { DeliveryLoop, type DeliveryEndpoint } from '../../src/events/delivery/delivery-loop.js';
import { RETRY_DELAYS_MS } from '../../src/events/delivery/retry-schedule.js';
import { createWebhookSender, type WebhookSender } from '../../src/events/delivery/webhook-sender.js';
import { ManualClock } from '../../src/foundation/clock.js';
import { EventMetrics } from '../../src/observability/event-metrics.js';
import type { EndpointRef, EventStore } from '../../src/store/event-store.js';
import { LogCapture } from '../support/config-fixture.js';
import { metricSum } from '../support/metrics.js';
import { waitFor } from '../support/wait.js';
import { startWebhookReceiver, type ReceiverAnswer, type WebhookReceiver } from '../support/webhook-receiver.js';

/** The stores a suite runs on: `second` is another replica's view of the same data (the same store in memory). */
export interface DeliveryStores {
  events: EventStore;
  second: EventStore;
  cleanup(): Promise<void>;
}

export const ACCOUNT = 'acct_demo';
export const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const RETENTION_MS = 7 * 24 * 3_600_000;
const TIMEOUT_MS = 10_000;
/** The design: the send's deadline plus 5 s. */
const LEASE_MS = TIMEOUT_MS + 5_000;

export const eventId = (n: number): string => `evt_01JD${String(n).padStart(22, '0')}`;

/** Records one card.created event of ACCOUNT for these endpoints, at the clock's now; answers its id and stored JSON. */
export async function recordEvent(store: EventStore, clock: ManualClock, n: number, endpoints: readonly string[]): Promise<{ id: string; json: string }> {
  const id = eventId(n);
  const now = clock.now();
  const head = `{"id":"${id}","type":"card.created","createdAt":"${new Date(now).toISOString()}","issuingAccount":"${ACCOUNT}","sequence":`;
  const tail = `,"data":{"card":{"cardId":"card_${n}","maskedPan":"411111******1111"}}}`;
  const recorded = await store.record(
    ACCOUNT,
    { id, type: 'card.created', cardId: `card_${n}`, createdAt: now, head, tail, endpoints },
    { now, expiresAt: now + RETENTION_MS },
  );
  return { id, json: `${head}${recorded.sequence}${tail}` };
}

/** What one Standard Webhooks signature of the body is, computed here without the gateway's module. */
const expectedSignature = (id: string, timestamp: string, body: string): string =>
  `v1,${createHmac('sha256', Buffer.from(SECRET.slice(6), 'base64'))
    .update(`${id}.${timestamp}.${body}`)
    .digest('base64')}`;

export function deliveryLoopSuite(name: string, open: (clock: ManualClock) => Promise<DeliveryStores>): void {
  describe(`the delivery loop (D65) on ${name}`, () => {
    const closing: (() => Promise<void>)[] = [];
    afterEach(async () => {
      for (const close of closing.splice(0).reverse()) await close();
    });

    interface Harness {
      clock: ManualClock;
      stores: DeliveryStores;
      registry: Registry;
      metrics: EventMetrics;
      log: LogCapture;
      endpoints: DeliveryEndpoint[];
      loop: DeliveryLoop;
      sender: WebhookSender;
      receiver(answer?: ReceiverAnswer): Promise<WebhookReceiver>;
      endpoint(id: string, hooks: WebhookReceiver, extra?: Partial<DeliveryEndpoint>): DeliveryEndpoint;
      ref(id: string): EndpointRef;
      metric(metricName: string, labels: Record<string, string>): Promise<number | undefined>;
      /** Another replica: its own loop, sender and metrics over `stores.second`. */
      replica(): { loop: DeliveryLoop; sender: WebhookSender };
    }

    async function harness(options: { pollIntervalMs?: number } = {}): Promise<Harness> {
      const clock = new ManualClock();
      const stores = await open(clock);
      closing.push(() => stores.cleanup());
      const registry = new Registry();
      const log = new LogCapture();
      const endpoints: DeliveryEndpoint[] = [];
      const makeLoop = (store: EventStore, metrics: EventMetrics) => {
        const sender = createWebhookSender({ guarded: false });
        const loop = new DeliveryLoop({
          store,
          clock,
          endpoints: () => endpoints,
          metrics,
          logger: log.logger,
          sender,
          retentionMs: RETENTION_MS,
          pollIntervalMs: options.pollIntervalMs ?? 1000,
          random: () => 0.5,
        });
        closing.push(async () => {
          await loop.stop(0);
          await sender.close();
        });
        return { loop, sender };
      };
      const metrics = new EventMetrics(registry);
      const { loop, sender } = makeLoop(stores.events, metrics);
      return {
        clock,
        stores,
        registry,
        metrics,
        log,
        endpoints,
        loop,
        sender,
        receiver: async (answer = 200) => {
          const hooks = await startWebhookReceiver(answer);
          closing.push(() => hooks.close());
          return hooks;
        },
        endpoint: (id, hooks, extra = {}) => {
          const endpoint = { id, issuingAccount: ACCOUNT, url: hooks.url, secrets: [SECRET], timeoutMs: TIMEOUT_MS, maxInFlight: 4, ...extra };
          endpoints.push(endpoint);
          return endpoint;
        },
        ref: (id) => ({ issuingAccount: ACCOUNT, endpointId: id }),
        metric: async (metricName, labels) => metricSum(await registry.metrics(), metricName, labels),
        replica: () => makeLoop(stores.second, new EventMetrics(new Registry())),
      };
    }

    /** One round at the clock's now, and every send it started answered and settled. */
    const round = async (h: Harness, loop: DeliveryLoop = h.loop): Promise<void> => {
      await loop.runOnce(h.clock.now());
      await loop.idle();
    };

    it('sends a new event at once, signed, exactly as stored, and forgets the delivery once the endpoint took it', async () => {
      const h = await harness();
      const hooks = await h.receiver(204);
      h.endpoint('partner', hooks);
      const event = await recordEvent(h.stores.events, h.clock, 1, ['partner']);
      await round(h);
      expect(hooks.requests).toHaveLength(1);
      const [request] = hooks.requests;
      expect(request?.body).toBe(event.json);
      expect(request?.headers['webhook-id']).toBe(event.id);
      expect(request?.headers['webhook-timestamp']).toBe(String(Math.floor(h.clock.now() / 1000)));
      expect(request?.headers['webhook-signature']).toBe(expectedSignature(event.id, String(Math.floor(h.clock.now() / 1000)), event.json));
      expect(await h.stores.events.delivery(h.ref('partner'), event.id)).toBeUndefined();
      expect(await h.metric('gateway_event_deliveries_total', { endpoint: 'partner', outcome: 'delivered' })).toBe(1);
      expect(await h.metric('gateway_event_delivery_duration_seconds_count', { endpoint: 'partner' })).toBe(1);
      await round(h);
      expect(hooks.requests).toHaveLength(1);
      expect(await h.metric('gateway_event_backlog', { endpoint: 'partner' })).toBe(0);
    });

    it('tries again 5 s after a failed first attempt, not a millisecond before', async () => {
      const h = await harness();
      const hooks = await h.receiver({ status: 500, body: 'internal details of the partner' });
      h.endpoint('partner', hooks);
      const event = await recordEvent(h.stores.events, h.clock, 1, ['partner']);
      const first = h.clock.now();
      await round(h);
      expect(await h.stores.events.delivery(h.ref('partner'), event.id)).toEqual({
        eventId: event.id,
        state: 'pending',
        attempts: 1,
        at: first + 5_000,
        lastError: 'status 500',
      });
      expect(await h.metric('gateway_event_deliveries_total', { endpoint: 'partner', outcome: 'retry' })).toBe(1);
      h.clock.set(first + 4_999);
      await round(h);
      expect(hooks.requests).toHaveLength(1);
      h.clock.set(first + 5_000);
      hooks.answer(200);
      await round(h);
      expect(hooks.requests).toHaveLength(2);
      expect(hooks.requests[1]?.headers['webhook-id']).toBe(event.id);
      expect(await h.stores.events.delivery(h.ref('partner'), event.id)).toBeUndefined();
      expect(h.log.text()).not.toContain('internal details');
    });

    it('fails a delivery after its eighth attempt, keeps it for the retention, and counts it', async () => {
      const h = await harness();
      const hooks = await h.receiver(503);
      h.endpoint('partner', hooks);
      const event = await recordEvent(h.stores.events, h.clock, 1, ['partner']);
      await round(h);
      for (let attempt = 2; attempt <= 8; attempt += 1) {
        const record = await h.stores.events.delivery(h.ref('partner'), event.id);
        expect(record?.state, `before attempt ${attempt}`).toBe('pending');
        expect(record?.at).toBe(h.clock.now() + RETRY_DELAYS_MS[attempt - 1]!);
        h.clock.set(record!.at);
        await round(h);
      }
      expect(hooks.requests).toHaveLength(8);
      const failedAt = h.clock.now();
      expect(await h.stores.events.delivery(h.ref('partner'), event.id)).toEqual({
        eventId: event.id,
        state: 'failed',
        attempts: 8,
        at: failedAt,
        lastError: 'status 503',
      });
      expect(await h.metric('gateway_event_deliveries_total', { endpoint: 'partner', outcome: 'retry' })).toBe(7);
      expect(await h.metric('gateway_event_deliveries_total', { endpoint: 'partner', outcome: 'failed' })).toBe(1);
      // The gauges are refreshed each round, after its claims: the next round shows the settlement.
      await round(h);
      expect(await h.metric('gateway_event_failed_deliveries', { endpoint: 'partner' })).toBe(1);
      expect(await h.metric('gateway_event_backlog', { endpoint: 'partner' })).toBe(0);
      expect(h.log.lines.filter((line) => line.includes('failed every attempt'))).toHaveLength(1);
      // Never sent again by itself.
      h.clock.set(failedAt + 36_000_000 * 2);
      await round(h);
      expect(hooks.requests).toHaveLength(8);
      // Kept for the retention, to the millisecond.
      h.clock.set(failedAt + RETENTION_MS - 1);
      await round(h);
      expect(await h.stores.events.deliveries(h.ref('partner'), { state: 'failed', limit: 10 })).toHaveLength(1);
      h.clock.set(failedAt + RETENTION_MS);
      await round(h);
      expect(await h.stores.events.deliveries(h.ref('partner'), { state: 'failed', limit: 10 })).toHaveLength(0);
    });

    it('sends a failed delivery again once it is redelivered, from its first attempt', async () => {
      const h = await harness();
      const hooks = await h.receiver(500);
      h.endpoint('partner', hooks);
      const event = await recordEvent(h.stores.events, h.clock, 1, ['partner']);
      await round(h);
      for (let attempt = 2; attempt <= 8; attempt += 1) {
        h.clock.set((await h.stores.events.delivery(h.ref('partner'), event.id))!.at);
        await round(h);
      }
      expect((await h.stores.events.delivery(h.ref('partner'), event.id))?.state).toBe('failed');
      h.clock.advance(60_000);
      hooks.answer(500);
      expect(await h.stores.events.redeliver(h.ref('partner'), [event.id], h.clock.now())).toBe(1);
      await round(h);
      expect(hooks.requests).toHaveLength(9);
      // A redelivery starts the schedule over: the next wait is 5 s again.
      expect(await h.stores.events.delivery(h.ref('partner'), event.id)).toMatchObject({ state: 'pending', attempts: 1, at: h.clock.now() + 5_000 });
      h.clock.advance(5_000);
      hooks.answer(200);
      await round(h);
      expect(await h.stores.events.delivery(h.ref('partner'), event.id)).toBeUndefined();
    });

    it('stops sending to an endpoint that answers 410, with one log line and the gauge at 1, until resumed or reloaded', async () => {
      const h = await harness();
      const hooks = await h.receiver(410);
      h.endpoint('partner', hooks, { maxInFlight: 1 });
      const first = await recordEvent(h.stores.events, h.clock, 1, ['partner']);
      const second = await recordEvent(h.stores.events, h.clock, 2, ['partner']);
      await round(h);
      expect(hooks.requests).toHaveLength(1);
      expect(h.loop.isStopped('partner')).toBe(true);
      expect(await h.metric('gateway_event_endpoint_stopped', { endpoint: 'partner' })).toBe(1);
      expect(await h.metric('gateway_event_deliveries_total', { endpoint: 'partner', outcome: 'gone' })).toBe(1);
      // The delivery waits, due at once, for the endpoint's return.
      expect(await h.stores.events.delivery(h.ref('partner'), first.id)).toMatchObject({ state: 'pending', at: h.clock.now(), lastError: 'status 410' });
      for (const step of [1_000, 60_000, 3_600_000]) {
        h.clock.advance(step);
        await round(h);
      }
      expect(hooks.requests).toHaveLength(1);
      expect(h.log.lines.filter((line) => line.includes('410'))).toHaveLength(1);
      expect(await h.metric('gateway_event_backlog', { endpoint: 'partner' })).toBe(2);
      expect(await h.metric('gateway_event_oldest_pending_age_seconds', { endpoint: 'partner' })).toBe(3_661);

      hooks.answer(200);
      expect(h.loop.resume('partner')).toBe(true);
      expect(await h.metric('gateway_event_endpoint_stopped', { endpoint: 'partner' })).toBe(0);
      await round(h);
      await round(h);
      expect(hooks.requests.map((request) => request.headers['webhook-id'])).toEqual([first.id, first.id, second.id]);
      expect(h.loop.resume('partner')).toBe(false);

      // A reload resumes too.
      hooks.answer(410);
      await recordEvent(h.stores.events, h.clock, 3, ['partner']);
      await round(h);
      expect(h.loop.isStopped('partner')).toBe(true);
      hooks.answer(200);
      await round(h);
      expect(hooks.requests).toHaveLength(4);
      h.loop.endpointsChanged();
      expect(h.loop.isStopped('partner')).toBe(false);
      await round(h);
      expect(hooks.requests).toHaveLength(5);
      await round(h);
      expect(await h.metric('gateway_event_backlog', { endpoint: 'partner' })).toBe(0);
    });

    it('never lets a slow or dead endpoint delay another, and keeps at most maxInFlight in flight per endpoint', async () => {
      const h = await harness();
      const slow = await h.receiver('hold');
      const dead = await h.receiver(200);
      const deadUrl = dead.url;
      await dead.close();
      const quick = await h.receiver(200);
      h.endpoint('slow', slow, { maxInFlight: 2 });
      h.endpoints.push({ ...h.endpoints[0]!, id: 'dead', url: deadUrl, maxInFlight: 4 });
      h.endpoint('quick', quick);
      for (let n = 1; n <= 3; n += 1) await recordEvent(h.stores.events, h.clock, n, ['slow', 'dead', 'quick']);
      await h.loop.runOnce(h.clock.now());
      await quick.waitForRequests(3);
      await waitFor('the quick endpoint settled', async () => (await h.stores.events.backlog(h.ref('quick'))).pending === 0);
      await waitFor('the dead endpoint settled', async () => (await h.stores.events.delivery(h.ref('dead'), eventId(3)))?.lastError === 'connection refused');
      await slow.waitForHeld(2);
      expect(slow.requests).toHaveLength(2);

      // Its slots are full: the next rounds claim nothing more for it, while the others go on.
      await recordEvent(h.stores.events, h.clock, 4, ['slow', 'quick']);
      await h.loop.runOnce(h.clock.now());
      await quick.waitForRequests(4);
      await h.loop.runOnce(h.clock.now());
      expect(slow.requests).toHaveLength(2);

      slow.release(200);
      await h.loop.idle();
      await h.loop.runOnce(h.clock.now());
      await slow.waitForHeld(2);
      slow.release(200);
      await h.loop.idle();
      expect(slow.requests.map((request) => request.headers['webhook-id']).sort()).toEqual([1, 2, 3, 4].map(eventId));
    });

    it("drains a backlog at the endpoint's pace: a slot freed by a settled send claims again at once, not at the next round", async () => {
      // No scheduled round comes within the test: every delivery after the first round's two was claimed by a freed slot.
      const h = await harness({ pollIntervalMs: 3_600_000 });
      const hooks = await h.receiver(204);
      h.endpoint('partner', hooks, { maxInFlight: 2 });
      for (let n = 1; n <= 10; n += 1) await recordEvent(h.stores.events, h.clock, n, ['partner']);
      h.loop.start();
      await h.loop.runOnce(h.clock.now());
      await hooks.waitForRequests(10);
      await waitFor('the backlog settled', async () => (await h.stores.events.backlog(h.ref('partner'))).pending === 0);
      expect(new Set(hooks.requests.map((request) => request.headers['webhook-id']))).toEqual(new Set(Array.from({ length: 10 }, (_, n) => eventId(n + 1))));
    });

    it('claims for a new event without passing maxInFlight, however many claims run at once', async () => {
      const h = await harness();
      const slow = await h.receiver('hold');
      h.endpoint('slow', slow, { maxInFlight: 3 });
      for (let n = 1; n <= 8; n += 1) await recordEvent(h.stores.events, h.clock, n, ['slow']);
      // A round and two nudges at the same instant, as a poll meeting two new events.
      await Promise.all([h.loop.runOnce(h.clock.now()), h.loop.claimNow(), h.loop.claimNow()]);
      await slow.waitForHeld(3);
      await h.loop.claimNow();
      expect(slow.requests).toHaveLength(3);
      slow.release(200);
      await h.loop.idle();
    });

    it("a nudge claims only for the endpoints it names: another endpoint's due delivery waits for its round", async () => {
      const h = await harness({ pollIntervalMs: 3_600_000 });
      const named = await h.receiver(204);
      const other = await h.receiver(204);
      h.endpoint('named', named);
      h.endpoint('other', other);
      await recordEvent(h.stores.events, h.clock, 1, ['named', 'other']);
      h.loop.start();
      await h.loop.claimNow(new Set(['named']));
      await named.waitForRequests(1);
      await h.loop.idle();
      expect(other.requests).toHaveLength(0);
      expect((await h.stores.events.backlog(h.ref('other'))).pending).toBe(1);
      // Its round takes it.
      await h.loop.runOnce(h.clock.now());
      await other.waitForRequests(1);
      await h.loop.idle();
    });

    it('hands a delivery to another replica once the lease of one that died mid-send has ended', async () => {
      const h = await harness();
      const hooks = await h.receiver('hold');
      h.endpoint('partner', hooks);
      const event = await recordEvent(h.stores.events, h.clock, 1, ['partner']);
      const claimedAt = h.clock.now();
      await h.loop.runOnce(claimedAt);
      await hooks.waitForHeld(1);
      // The replica dies: it stops without settling, and its connection goes.
      await h.loop.stop(0);
      await h.sender.close();
      await h.loop.idle();
      expect(await h.stores.events.delivery(h.ref('partner'), event.id)).toMatchObject({ state: 'pending', attempts: 1, at: claimedAt + LEASE_MS });

      const other = h.replica();
      hooks.answer(200);
      h.clock.set(claimedAt + LEASE_MS - 1);
      await round(h, other.loop);
      expect(hooks.requests).toHaveLength(1);
      h.clock.set(claimedAt + LEASE_MS);
      await round(h, other.loop);
      expect(hooks.requests).toHaveLength(2);
      expect(hooks.requests[1]?.headers['webhook-id']).toBe(event.id);
      expect(await h.stores.events.delivery(h.ref('partner'), event.id)).toBeUndefined();
    });

    it('lets the late answer of a replica whose lease ended change nothing', async () => {
      const h = await harness();
      const hooks = await h.receiver('hold');
      h.endpoint('partner', hooks);
      const event = await recordEvent(h.stores.events, h.clock, 1, ['partner']);
      const claimedAt = h.clock.now();
      await h.loop.runOnce(claimedAt);
      await hooks.waitForHeld(1);
      const other = h.replica();
      h.clock.set(claimedAt + LEASE_MS);
      await other.loop.runOnce(h.clock.now());
      await hooks.waitForHeld(2);
      // The other replica's send is answered: delivered. Then the first one's, late and failed:
      // its settle is refused, and the delivery is not brought back.
      hooks.release(200, 1);
      hooks.release(200);
      await other.loop.idle();
      await h.loop.idle();
      expect(await h.stores.events.delivery(h.ref('partner'), event.id)).toBeUndefined();
      expect(h.log.lines.filter((line) => line.includes('after its lease ended'))).toHaveLength(1);
    });

    it('refuses the settlement of a replica whose lease ended: its late failure leaves the new claim alone', async () => {
      const h = await harness();
      const hooks = await h.receiver('hold');
      h.endpoint('partner', hooks);
      const event = await recordEvent(h.stores.events, h.clock, 1, ['partner']);
      const claimedAt = h.clock.now();
      await h.loop.runOnce(claimedAt);
      await hooks.waitForHeld(1);
      const other = h.replica();
      h.clock.set(claimedAt + LEASE_MS);
      await other.loop.runOnce(h.clock.now());
      await hooks.waitForHeld(2);
      // The late answer (first held) fails; the current owner's is still out.
      hooks.release(500, 1);
      await h.loop.idle();
      expect(await h.stores.events.delivery(h.ref('partner'), event.id)).toMatchObject({ state: 'pending', attempts: 2, at: h.clock.now() + LEASE_MS });
      hooks.release(200);
      await other.loop.idle();
      expect(await h.stores.events.delivery(h.ref('partner'), event.id)).toBeUndefined();
    });

    it('counts an address the egress guard refused as refused, and tries it again per the schedule', async () => {
      const h = await harness();
      const hooks = await h.receiver(200);
      h.endpoint('partner', hooks);
      const guarded = createWebhookSender({ guarded: true });
      const loop = new DeliveryLoop({
        store: h.stores.events,
        clock: h.clock,
        endpoints: () => h.endpoints,
        metrics: h.metrics,
        logger: h.log.logger,
        sender: guarded,
        retentionMs: RETENTION_MS,
        pollIntervalMs: 1000,
        random: () => 0.5,
      });
      closing.push(async () => {
        await loop.stop(0);
        await guarded.close();
      });
      const event = await recordEvent(h.stores.events, h.clock, 1, ['partner']);
      await round(h, loop);
      expect(hooks.connections()).toBe(0);
      expect(await h.stores.events.delivery(h.ref('partner'), event.id)).toEqual({
        eventId: event.id,
        state: 'pending',
        attempts: 1,
        at: h.clock.now() + 5_000,
        lastError: 'address refused by egress guard',
      });
      expect(await h.metric('gateway_event_deliveries_total', { endpoint: 'partner', outcome: 'refused' })).toBe(1);
      expect(await h.metric('gateway_event_deliveries_total', { endpoint: 'partner', outcome: 'retry' })).toBe(0);
    });

    it('runs on its own timer once started, and drains the sends in flight when stopped', async () => {
      const h = await harness();
      const hooks = await h.receiver(200);
      h.endpoint('partner', hooks);
      const loop = new DeliveryLoop({
        store: h.stores.events,
        clock: h.clock,
        endpoints: () => h.endpoints,
        metrics: new EventMetrics(new Registry()),
        logger: h.log.logger,
        sender: h.sender,
        retentionMs: RETENTION_MS,
        pollIntervalMs: 20,
      });
      loop.start();
      closing.push(() => loop.stop(0));
      const event = await recordEvent(h.stores.events, h.clock, 1, ['partner']);
      await hooks.waitForRequests(1);
      await loop.stop(60_000);
      expect(await h.stores.events.delivery(h.ref('partner'), event.id)).toBeUndefined();
    });

    it('stops waiting for the sends in flight after the drain bound, and leaves them to their lease', async () => {
      const h = await harness();
      const hooks = await h.receiver('hold');
      h.endpoint('partner', hooks);
      const event = await recordEvent(h.stores.events, h.clock, 1, ['partner']);
      await h.loop.runOnce(h.clock.now());
      await hooks.waitForHeld(1);
      await h.loop.stop(10);
      hooks.release(200);
      await h.loop.idle();
      expect(hooks.requests).toHaveLength(1);
      expect(await h.stores.events.delivery(h.ref('partner'), event.id)).toMatchObject({ state: 'pending', attempts: 1, at: h.clock.now() + LEASE_MS });
    });
  });
}
