import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { buildAdminServer } from '../../src/edge/admin-server.js';
import { registerEventAdminRoutes } from '../../src/edge/routes/event-admin-routes.js';
import { DeliveryLoop, type DeliveryEndpoint } from '../../src/events/delivery/delivery-loop.js';
import { createWebhookSender } from '../../src/events/delivery/webhook-sender.js';
import { ManualClock } from '../../src/foundation/clock.js';
import { MemoryAuditSink } from '../../src/observability/audit.js';
import { EventMetrics } from '../../src/observability/event-metrics.js';
import { GatewayMetrics } from '../../src/observability/metrics.js';
import { OutcomeRecorder } from '../../src/observability/outcomes.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { LogCapture } from '../support/config-fixture.js';
import { FaultyStore } from '../support/faulty-store.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';
import { ACCOUNT, eventId, recordEvent, SECRET } from './delivery-loop.js';

const closing: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closing.splice(0).reverse()) await close();
});

interface Admin {
  admin: FastifyInstance;
  clock: ManualClock;
  store: FaultyStore;
  audit: MemoryAuditSink;
  loop: DeliveryLoop;
  endpoints: DeliveryEndpoint[];
  partner: WebhookReceiver;
  other: WebhookReceiver;
  /** Fails the partner's deliveries until each is failed (eight attempts). */
  failAll(): Promise<void>;
}

async function adminWithEvents(): Promise<Admin> {
  const clock = new ManualClock();
  const store = new FaultyStore(new MemoryStore(() => clock.now()));
  const metrics = new GatewayMetrics({ defaultMetrics: false });
  const log = new LogCapture();
  const audit = new MemoryAuditSink(clock);
  const partner = await startWebhookReceiver(500);
  const other = await startWebhookReceiver(410);
  const endpoints: DeliveryEndpoint[] = [
    { id: 'partner', issuingAccount: ACCOUNT, url: `${partner.url}?token=abc`, secrets: [SECRET], timeoutMs: 10_000, maxInFlight: 8 },
    { id: 'other', issuingAccount: ACCOUNT, url: other.url, secrets: [SECRET], timeoutMs: 10_000, maxInFlight: 8 },
  ];
  const sender = createWebhookSender({ guarded: false });
  const loop = new DeliveryLoop({
    store: store.events,
    clock,
    endpoints: () => endpoints,
    metrics: new EventMetrics(metrics.registry),
    logger: log.logger,
    sender,
    retentionMs: 7 * 86_400_000,
    pollIntervalMs: 1000,
    random: () => 0.5,
  });
  const admin = buildAdminServer({ metrics, probes: [], logger: log.logger, openapi: () => ({}) });
  registerEventAdminRoutes(admin, {
    store: store.events,
    endpoints: () => endpoints,
    loop,
    clock,
    outcomes: new OutcomeRecorder(metrics, audit, log.logger),
    auditWritable: () => audit.writable,
  });
  closing.push(async () => {
    await admin.close();
    await loop.stop(0);
    await sender.close();
    await partner.close();
    await other.close();
    await audit.close();
  });
  const round = async () => {
    await loop.runOnce(clock.now());
    await loop.idle();
  };
  return {
    admin,
    clock,
    store,
    audit,
    loop,
    endpoints,
    partner,
    other,
    failAll: async () => {
      await round();
      for (let attempt = 2; attempt <= 8; attempt += 1) {
        const pending = await store.events.deliveries({ issuingAccount: ACCOUNT, endpointId: 'partner' }, { state: 'pending', limit: 100 });
        if (pending.length === 0) break;
        clock.set(Math.max(...pending.map((record) => record.at)));
        await round();
      }
    },
  };
}

const json = (response: { body: string }) => JSON.parse(response.body) as Record<string, unknown>;

/** The gateway's envelope with this status, code and message. */
function expectEnvelope(response: { statusCode: number; body: string }, status: number, code: string, message: string): Record<string, unknown> {
  expect(response.statusCode, response.body).toBe(status);
  const body = json(response);
  expect(body).toMatchObject({ status, code, message });
  // A 503 adds when to come back.
  const keys = ['code', 'correlationId', 'details', 'message', 'status', 'timestamp', ...(status === 503 ? ['retryAfter'] : [])];
  expect(Object.keys(body).sort()).toEqual(keys.sort());
  return body;
}

describe('the event admin routes (D65)', () => {
  it('lists the endpoints with their URL host only, whether stopped, and their backlog', async () => {
    const h = await adminWithEvents();
    await recordEvent(h.store.events, h.clock, 1, ['partner', 'other']);
    await recordEvent(h.store.events, h.clock, 2, ['partner']);
    await h.loop.runOnce(h.clock.now());
    await h.loop.idle();
    const response = await h.admin.inject({ method: 'GET', url: '/events/endpoints' });
    expect(response.statusCode).toBe(200);
    expect(json(response)).toEqual({
      endpoints: [
        {
          id: 'partner',
          issuingAccount: ACCOUNT,
          host: new URL(h.partner.url).host,
          stopped: false,
          backlog: { pending: 2, failed: 0, oldestDueAt: new Date(h.clock.now() + 5_000).toISOString() },
        },
        {
          id: 'other',
          issuingAccount: ACCOUNT,
          host: new URL(h.other.url).host,
          stopped: true,
          backlog: { pending: 1, failed: 0, oldestDueAt: new Date(h.clock.now()).toISOString() },
        },
      ],
    });
    expect(response.body).not.toContain('token=abc');
    expect(response.body).not.toContain('/hooks/gateway');
  });

  it('lists failed deliveries by default and pending ones when asked, up to the limit', async () => {
    const h = await adminWithEvents();
    for (let n = 1; n <= 3; n += 1) await recordEvent(h.store.events, h.clock, n, ['partner']);
    await h.failAll();
    const failedAt = h.clock.now();
    await recordEvent(h.store.events, h.clock, 4, ['partner']);

    const failed = await h.admin.inject({ method: 'GET', url: '/events/endpoints/partner/deliveries' });
    expect(failed.statusCode).toBe(200);
    expect(json(failed)).toEqual({
      endpointId: 'partner',
      state: 'failed',
      deliveries: [1, 2, 3].map((n) => ({
        eventId: eventId(n),
        state: 'failed',
        attempts: 8,
        failedAt: new Date(failedAt).toISOString(),
        lastError: 'status 500',
      })),
    });
    const two = await h.admin.inject({ method: 'GET', url: '/events/endpoints/partner/deliveries?state=failed&limit=2' });
    expect((json(two)['deliveries'] as unknown[]).length).toBe(2);
    const pending = await h.admin.inject({ method: 'GET', url: '/events/endpoints/partner/deliveries?state=pending&limit=1000' });
    expect(json(pending)).toEqual({
      endpointId: 'partner',
      state: 'pending',
      deliveries: [{ eventId: eventId(4), state: 'pending', attempts: 0, nextAttemptAt: new Date(h.clock.now()).toISOString() }],
    });
  });

  it('refuses a bad query with the envelope naming the parameter, and an unknown endpoint with 404', async () => {
    const h = await adminWithEvents();
    const field = async (query: string) => {
      const response = await h.admin.inject({ method: 'GET', url: `/events/endpoints/partner/deliveries?${query}` });
      const body = expectEnvelope(response, 400, 'validation_failed', 'Request validation failed');
      return (body['details'] as { fields: { path: string; message: string }[] }).fields;
    };
    expect(await field('limit=0')).toEqual([{ path: 'query.limit', message: 'must be >= 1' }]);
    expect(await field('limit=1001')).toEqual([{ path: 'query.limit', message: 'must be <= 1000' }]);
    expect(await field('limit=ten')).toEqual([{ path: 'query.limit', message: 'must be integer' }]);
    expect(await field('state=delivered')).toContainEqual({ path: 'query.state', message: expect.stringMatching(/^must be/) as unknown as string });
    expect(await field('status=failed')).toEqual([{ path: 'query.status', message: 'is not a known parameter' }]);
    expect((await h.admin.inject({ method: 'GET', url: '/events/endpoints/partner/deliveries?limit=1' })).statusCode).toBe(200);

    expectEnvelope(await h.admin.inject({ method: 'GET', url: '/events/endpoints/nobody/deliveries' }), 404, 'not_found', 'No webhook endpoint has this id');
    expectEnvelope(
      await h.admin.inject({ method: 'GET', url: `/events/endpoints/nobody/deliveries/${eventId(1)}` }),
      404,
      'not_found',
      'No webhook endpoint has this id',
    );
    expectEnvelope(
      await h.admin.inject({ method: 'POST', url: '/events/endpoints/nobody/redeliver-failed' }),
      404,
      'not_found',
      'No webhook endpoint has this id',
    );
  });

  it('shows one delivery, and answers 404 for an event the endpoint has no delivery of, 400 for a malformed id', async () => {
    const h = await adminWithEvents();
    await recordEvent(h.store.events, h.clock, 1, ['partner']);
    await h.loop.runOnce(h.clock.now());
    await h.loop.idle();
    const one = await h.admin.inject({ method: 'GET', url: `/events/endpoints/partner/deliveries/${eventId(1)}` });
    expect(one.statusCode).toBe(200);
    expect(json(one)).toEqual({
      eventId: eventId(1),
      state: 'pending',
      attempts: 1,
      nextAttemptAt: new Date(h.clock.now() + 5_000).toISOString(),
      lastError: 'status 500',
    });
    expectEnvelope(
      await h.admin.inject({ method: 'GET', url: `/events/endpoints/partner/deliveries/${eventId(2)}` }),
      404,
      'not_found',
      'The endpoint has no delivery of this event',
    );
    expectEnvelope(
      await h.admin.inject({ method: 'GET', url: `/events/endpoints/other/deliveries/${eventId(1)}` }),
      404,
      'not_found',
      'The endpoint has no delivery of this event',
    );
    const malformed = await h.admin.inject({ method: 'GET', url: '/events/endpoints/partner/deliveries/evt_1' });
    expect(json(malformed)['details']).toEqual({ fields: [{ path: 'eventId', message: expect.stringMatching(/^must match pattern/) as unknown as string }] });
    expect(malformed.statusCode).toBe(400);
  });

  it('redelivers one failed delivery, audited, and the loop sends it again from its first attempt', async () => {
    const h = await adminWithEvents();
    await recordEvent(h.store.events, h.clock, 1, ['partner']);
    await recordEvent(h.store.events, h.clock, 2, ['partner']);
    await h.failAll();
    h.clock.advance(60_000);
    const response = await h.admin.inject({ method: 'POST', url: `/events/endpoints/partner/deliveries/${eventId(1)}/redeliver` });
    expect(response.statusCode).toBe(200);
    expect(json(response)).toEqual({ redelivered: 1, endpointStopped: false });
    expect(await h.store.events.delivery({ issuingAccount: ACCOUNT, endpointId: 'partner' }, eventId(1))).toEqual({
      eventId: eventId(1),
      state: 'pending',
      attempts: 0,
      at: h.clock.now(),
      lastError: 'status 500',
    });
    expect(h.audit.events().filter((line) => line.event === 'event.redelivered')).toEqual([
      expect.objectContaining({
        event: 'event.redelivered',
        outcome: 'success',
        endpointId: 'partner',
        eventId: eventId(1),
        redelivered: 1,
        clientAddress: '127.0.0.1',
      }),
    ]);
    h.partner.answer(200);
    const before = h.partner.requests.length;
    await h.loop.runOnce(h.clock.now());
    await h.loop.idle();
    expect(h.partner.requests.slice(before).map((request) => request.headers['webhook-id'])).toEqual([eventId(1)]);

    // Not found: nothing redelivered, nothing audited.
    expectEnvelope(
      await h.admin.inject({ method: 'POST', url: `/events/endpoints/partner/deliveries/${eventId(1)}/redeliver` }),
      404,
      'not_found',
      'The endpoint has no delivery of this event',
    );
    expect(h.audit.events().filter((line) => line.event === 'event.redelivered')).toHaveLength(1);
  });

  it('redelivers every failed delivery of an endpoint in one request, audited with the count', async () => {
    const h = await adminWithEvents();
    for (let n = 1; n <= 3; n += 1) await recordEvent(h.store.events, h.clock, n, ['partner']);
    await h.failAll();
    await recordEvent(h.store.events, h.clock, 4, ['other']);
    await h.loop.runOnce(h.clock.now());
    await h.loop.idle();
    const response = await h.admin.inject({ method: 'POST', url: '/events/endpoints/partner/redeliver-failed' });
    expect(json(response)).toEqual({ redelivered: 3, endpointStopped: false });
    expect((await h.store.events.backlog({ issuingAccount: ACCOUNT, endpointId: 'partner' })).failed).toBe(0);
    const again = await h.admin.inject({ method: 'POST', url: '/events/endpoints/partner/redeliver-failed' });
    expect(json(again)).toEqual({ redelivered: 0, endpointStopped: false });
    // The stopped endpoint says so: its deliveries wait for a reload.
    expect(json(await h.admin.inject({ method: 'POST', url: '/events/endpoints/other/redeliver-failed' }))).toEqual({ redelivered: 0, endpointStopped: true });
    const lines = h.audit.events().filter((line) => line.event === 'event.redelivered');
    expect(lines.map(({ endpointId, eventId: id, redelivered }) => ({ endpointId, eventId: id, redelivered }))).toEqual([
      { endpointId: 'partner', eventId: undefined, redelivered: 3 },
      { endpointId: 'partner', eventId: undefined, redelivered: 0 },
      { endpointId: 'other', eventId: undefined, redelivered: 0 },
    ]);
  });

  it('answers 503 and redelivers nothing while the audit trail cannot be written, or the store does not answer', async () => {
    const h = await adminWithEvents();
    await recordEvent(h.store.events, h.clock, 1, ['partner']);
    await h.failAll();
    h.audit.setWritable(false);
    expectEnvelope(
      await h.admin.inject({ method: 'POST', url: '/events/endpoints/partner/redeliver-failed' }),
      503,
      'audit_unavailable',
      expect.any(String) as unknown as string,
    );
    expect((await h.store.events.backlog({ issuingAccount: ACCOUNT, endpointId: 'partner' })).failed).toBe(1);
    h.audit.setWritable(true);
    await h.store.with('events', 'unavailable', async () => {
      expectEnvelope(await h.admin.inject({ method: 'GET', url: '/events/endpoints' }), 503, 'store_unavailable', expect.any(String) as unknown as string);
      expectEnvelope(
        await h.admin.inject({ method: 'POST', url: '/events/endpoints/partner/redeliver-failed' }),
        503,
        'store_unavailable',
        expect.any(String) as unknown as string,
      );
    });
    expect(h.audit.events().filter((line) => line.event === 'event.redelivered')).toHaveLength(0);
  });
});
