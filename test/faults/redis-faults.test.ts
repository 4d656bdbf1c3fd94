import { randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/foundation/clock.js';
import { startSandboxConnector, type RunningSandboxConnector } from '../../src/connector/sandbox/sandbox-connector.js';
import { createRedisClient, waitUntilReady } from '../../src/store/redis/redis-client.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { PASSWORD, createTestGateway, login, type TestGateway } from '../support/gateway-fixture.js';
import { startPrivateRedis, type PrivateRedis } from '../support/private-redis.js';
import { uniquePrefix } from '../support/redis.js';
import { RELAXED_LIMITS, postLogin, postLogout, postRefresh } from '../support/auth-requests.js';
import { cardRecordStored, connectorStats, createCard, validCardBody, type CardAnswer } from '../support/card-fixture.js';
import { waitFor } from '../support/wait.js';

/**
 * D23 under three kinds of Redis fault, on a redis-server of this file's own (the shared one on
 * 6379 is never touched): frozen (SIGSTOP: the socket stays open, nothing answers), killed and
 * restarted empty on the same port, and slow (CLIENT PAUSE from another connection: commands
 * queue inside Redis and run when the pause ends). While the fault lasts every store-backed
 * request answers 503 with retryAfter, fast; nothing reaches the connector; the gateway recovers
 * by itself; and what was revoked before the fault stays revoked after it.
 *
 * test/auth/redis-outage.test.ts covers login/refresh/logout under SIGSTOP and kill one request
 * at a time; this file adds the slow fault, card creation and idempotency, concurrent bursts,
 * revocations that must survive the fault, and the connector's view.
 */

/**
 * Follows real time (leases taken by commands that ran late must expire on their own, as in
 * production) and can still jump ahead, to pass the refresh grace without waiting a minute.
 */
class FollowingClock extends ManualClock {
  #offset = 0;
  override now(): number {
    return Date.now() + this.#offset;
  }
  override advance(ms: number): void {
    this.#offset += ms;
  }
  override set(ms: number): void {
    this.#offset = ms - Date.now();
  }
}

interface Fault {
  name: string;
  /** Starts the fault; resolves once it is in effect. */
  begin(redis: PrivateRedis): Promise<void>;
  /** Ends it (or waits for it to end by itself). */
  end(redis: PrivateRedis): Promise<void>;
}

/**
 * How long the slow fault pauses Redis. It cannot be ended early (CLIENT UNPAUSE is paused too),
 * so it is long against what runs inside it (one burst of requests and a readiness check, sent
 * at once): a busy machine would have to hold them back for seconds to miss the pause.
 */
const PAUSE_MS = 8_000;
let pauseEndsAt = 0;

/** Runs one command on a connection of its own (the store's may be the one held up). */
async function adminCall(redis: PrivateRedis, ...args: string[]): Promise<unknown> {
  const admin = new Redis(redis.url, { maxRetriesPerRequest: 0, connectTimeout: 10_000, lazyConnect: true });
  admin.on('error', () => undefined);
  try {
    await admin.connect();
    return await admin.call(args[0]!, ...args.slice(1));
  } finally {
    admin.disconnect();
  }
}

const FAULTS: Fault[] = [
  {
    name: 'frozen (SIGSTOP, then SIGCONT)',
    begin: async (redis) => {
      process.kill(redis.pid, 'SIGSTOP');
    },
    end: async (redis) => {
      process.kill(redis.pid, 'SIGCONT');
    },
  },
  {
    name: 'killed (SIGKILL, then a new empty server on the same port)',
    begin: (redis) => redis.kill(),
    end: (redis) => redis.restart(),
  },
  {
    name: `slow (CLIENT PAUSE ${PAUSE_MS} ALL from another connection)`,
    begin: async (redis) => {
      expect(await adminCall(redis, 'CLIENT', 'PAUSE', String(PAUSE_MS), 'ALL')).toBe('OK');
      pauseEndsAt = performance.now() + PAUSE_MS;
    },
    // The pause ends by itself; recovery is then polled for like every other fault.
    end: async () => {
      const left = pauseEndsAt - performance.now();
      if (left > 0) await new Promise((resolve) => setTimeout(resolve, left));
    },
  },
];

interface Labelled {
  label: string;
  response: LightMyRequestResponse;
}

/** Runs `request`. A request that never settles is a hang: the test's hang guard fails it. */
async function labelled(label: string, request: () => Promise<LightMyRequestResponse>): Promise<Labelled> {
  return { label, response: await request() };
}

/**
 * "Fails fast" as an outcome: the store that does not answer is refused with 503 and Retry-After
 * (a request that waited for Redis instead would hang while it is frozen or paused, and the hang
 * guard fails the test; one that got through would not be a 503).
 */
function expectUnavailable({ label, response }: Labelled): void {
  const { statusCode, body, headers } = response;
  expect({ label, statusCode, body }).toMatchObject({ label, statusCode: 503 });
  const envelope = JSON.parse(body) as Record<string, unknown>;
  expect(envelope).toMatchObject({
    status: 503,
    message: 'Service temporarily unavailable',
    retryAfter: 1,
    details: {},
    correlationId: headers['x-correlation-id'],
  });
  expect(headers['retry-after']).toBe('1');
}

describe('Redis faults: 503 while they last, recovery without a restart (D23)', () => {
  let connector: RunningSandboxConnector;
  let redis: PrivateRedis | undefined;
  let store: RedisStore | undefined;
  let gw: TestGateway | undefined;
  let clock: FollowingClock;

  beforeAll(async () => {
    connector = await startSandboxConnector({ host: '127.0.0.1', port: 0, controls: true });
  });

  afterAll(async () => {
    await connector?.close();
  });

  beforeEach(async () => {
    redis = await startPrivateRedis();
    const client = createRedisClient({ url: redis.url, commandTimeoutMs: 300, connectTimeoutMs: 500 });
    client.on('error', () => undefined);
    store = new RedisStore(client, uniquePrefix('redis-faults'));
    expect(await waitUntilReady(client, 5_000)).toBe(true);
    clock = new FollowingClock();
    gw = await createTestGateway({
      clock,
      store,
      overrides: { rateLimits: RELAXED_LIMITS, connector: { url: connector.url, timeoutMs: 1000 } },
    });
  });

  afterEach(async () => {
    try {
      await gw?.close();
    } finally {
      // A frozen server would hold QUIT until the command timeout: let it answer first.
      try {
        if (redis) process.kill(redis.pid, 'SIGCONT');
      } catch {
        // already gone
      }
      await store?.close();
      await redis?.stop();
      gw = undefined;
      store = undefined;
      redis = undefined;
    }
  });

  const readiness = async () => {
    const response = await gw!.gateway.admin.inject({ method: 'GET', url: '/readyz' });
    return { status: response.statusCode, body: response.json<{ status: string; checks: Record<string, string> }>() };
  };

  for (const fault of FAULTS) {
    it(`${fault.name}: login, refresh, logout and card creation answer 503 while it lasts, then everything works again`, async () => {
      const g = gw!;
      const r = redis!;

      // Before the fault: a live session, a session logged out, a family killed by reuse, a card.
      const live = await login(g);
      const loggedOut = await login(g);
      expect((await postLogout(g, loggedOut.accessToken, loggedOut.refreshToken)).statusCode).toBe(200);
      const reused = await login(g);
      const reusedNext = (await postRefresh(g, reused.accessToken, reused.refreshToken)).json<{ accessToken: string; refreshToken: string }>();
      clock.advance(60_000);
      expect((await postRefresh(g, reused.accessToken, reused.refreshToken)).statusCode).toBe(401);
      const cardBefore = validCardBody();
      const created = await createCard(g, live.accessToken, cardBefore);
      expect(created.statusCode, created.body).toBe(201);
      const cardId = created.json<CardAnswer>().cardId;
      // Its record in Redis, not on its way there: the replay below must meet the fault.
      await cardRecordStored(store!, cardBefore, clock.now());
      expect((await readiness()).status).toBe(200);
      const statsBefore = await connectorStats(connector);

      const duringFault = validCardBody();
      await fault.begin(r);
      let ended = false;
      try {
        // Every kind at once, several times over: none may hang, none may be anything but 503.
        const burst = await Promise.all([
          ...[0, 1].flatMap((i) => [
            labelled(`login ${i}`, () => postLogin(g, 'full', PASSWORD)),
            labelled(`login of an unknown user ${i}`, () => postLogin(g, `nobody-${randomUUID()}`, 'wrong')),
            labelled(`refresh ${i}`, () => postRefresh(g, live.accessToken, live.refreshToken)),
            labelled(`logout ${i}`, () => postLogout(g, live.accessToken, live.refreshToken)),
            labelled(`new card ${i}`, () => createCard(g, live.accessToken, duringFault)),
            labelled(`replayed card ${i}`, () => createCard(g, live.accessToken, cardBefore)),
            labelled(`revealed card ${i}`, () => createCard(g, live.accessToken, validCardBody(), 'revealDetails=true')),
          ]),
        ]);
        for (const attempt of burst) expectUnavailable(attempt);

        const notReady = await readiness();
        expect(notReady.status).toBe(503);
        expect(notReady.body).toMatchObject({ status: 'not ready', checks: { store: 'unavailable', connector: 'ok' } });

        const statsDuring = await connectorStats(connector);
        expect(statsDuring.requestsReceived).toBe(statsBefore.requestsReceived);
        expect(statsDuring.cardsCreated).toBe(statsBefore.cardsCreated);

        await fault.end(r);
        ended = true;
      } finally {
        if (!ended) await fault.end(r).catch(() => undefined);
      }

      // Recovery, by itself: the same gateway instance and client, never restarted.
      await waitFor(`login to work again after: ${fault.name}`, async () => (await postLogin(g, 'full', PASSWORD)).statusCode === 200);
      await waitFor('/readyz to report ready again', async () => (await readiness()).status === 200);
      const fresh = await login(g);
      const rotated = await postRefresh(g, fresh.accessToken, fresh.refreshToken);
      expect(rotated.statusCode, rotated.body).toBe(200);
      const next = rotated.json<{ accessToken: string; refreshToken: string }>();
      expect((await postLogout(g, next.accessToken, next.refreshToken)).statusCode).toBe(200);

      // Revoked before the fault, still dead after it (on a restarted, empty Redis: unknown).
      expect((await postRefresh(g, fresh.accessToken, loggedOut.refreshToken)).statusCode).toBe(401);
      expect((await postRefresh(g, reusedNext.accessToken, reusedNext.refreshToken)).statusCode).toBe(401);
      expect((await postRefresh(g, reusedNext.accessToken, reused.refreshToken)).statusCode).toBe(401);

      // The requestId tried during the fault now makes its card, once, at the first retry.
      const made = await createCard(g, fresh.accessToken, duringFault);
      expect(made.statusCode, made.body).toBe(201);
      expect(made.headers['idempotent-replayed']).toBeUndefined();
      const newCard = made.json<CardAnswer>();
      const again = await createCard(g, fresh.accessToken, duringFault);
      expect(again.statusCode).toBe(201);
      expect(again.json<CardAnswer>().cardId).toBe(newCard.cardId);
      const replayed = await createCard(g, fresh.accessToken, cardBefore);
      expect(replayed.statusCode, replayed.body).toBe(201);
      expect(replayed.json<CardAnswer>().cardId).toBe(cardId);

      const statsAfter = await connectorStats(connector);
      expect(statsAfter.cardsCreated - statsBefore.cardsCreated).toBe(1);
      expect(statsAfter.keys.filter((key) => key.endsWith(String(duringFault['requestId'])))).toHaveLength(1);
      expect(statsAfter.keys.filter((key) => key.endsWith(String(cardBefore['requestId'])))).toHaveLength(1);
    });
  }

  it('regression: a card request refused with 503 while Redis was frozen leaves no claim behind, so its retry after recovery creates the card at once', async () => {
    const g = gw!;
    const r = redis!;
    const token = (await login(g)).accessToken;
    const body = validCardBody();
    const recordKey = `acct-eu:${String(body['requestId'])}`;
    const statsBefore = await connectorStats(connector);

    process.kill(r.pid, 'SIGSTOP');
    try {
      expectUnavailable(await labelled('card creation while frozen', () => createCard(g, token, body)));
    } finally {
      process.kill(r.pid, 'SIGCONT');
    }
    // The timed-out reserve is still in the socket and runs now; a PING behind it on the same
    // connection answers only after everything sent before it has run.
    await waitFor('Redis to answer again', async () => (await store!.client.ping().catch(() => '')) === 'PONG');
    const claims = await store!.idempotency.peek(recordKey, clock.now());
    expect(claims.state, 'a claim left by the request that was answered 503').toBe('reserved');

    const retried = await createCard(g, token, body);
    // Not a wait on the dead claim: that ends in 409 (after the connector timeout + 1 s).
    expect(retried.statusCode, retried.body).toBe(201);
    expect((await connectorStats(connector)).cardsCreated - statsBefore.cardsCreated).toBe(1);
  });
});
