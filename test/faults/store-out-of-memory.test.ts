import type { LightMyRequestResponse } from 'fastify';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STORE_LOG } from '../../src/observability/store-observer.js';
import { createRedisClient, waitUntilReady } from '../../src/store/redis/redis-client.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { metricValue, postLogin, postRefresh, RELAXED_LIMITS } from '../support/auth-requests.js';
import { cardRecordStored, createCard, validCardBody, type CardAnswer } from '../support/card-fixture.js';
import { expectContractError } from '../support/envelope.js';
import { PASSWORD, createTestGateway, login, type TestGateway } from '../support/gateway-fixture.js';
import { startPrivateRedis, type PrivateRedis } from '../support/private-redis.js';
import { adminConnection, fillUntilOutOfMemory, freeFillers, serverMemory, type ServerMemory } from '../support/redis-memory.js';
import { keysWithPrefix, TEST_COMMAND_TIMEOUT_MS, uniquePrefix } from '../support/redis.js';
import { FollowingClock, startCountingConnector, type CountingConnector } from './failover-load.js';
import { waitFor } from '../support/wait.js';

/**
 * D54 through the gateway: its Redis (a private redis-server) at `maxmemory` with `noeviction`
 * while card creations, logins and refreshes keep coming. Redis refuses each of the gateway's
 * writes before it writes, so its data does not grow: every request that must write answers
 * 503 `store_unavailable` with `retryAfter`, nothing reaches the connector, `/readyz` and the
 * metrics say `out_of_memory`, and one log line says so. Once memory is freed the same gateway
 * serves again, with every record from before intact: each requestId makes its card once (one
 * forward per Idempotency-Key, one card id per requestId) and the sessions from before refresh.
 */
const CARDS_DURING = 200;
const LOGINS_DURING = 20;
const REFRESHES_DURING = 20;
/**
 * Redis counts its connections' buffers in used_memory too (a few tens of KB here, whatever the
 * gateway writes); the card records alone of this run, had they been written past the limit
 * as before D54, would be about four times this.
 */
const BUFFER_ALLOWANCE = 64 * 1024;

describe('a Redis out of memory under load (D54)', () => {
  let redis: PrivateRedis;
  let admin: Redis;
  let connector: CountingConnector;
  let store: RedisStore;
  let gw: TestGateway;
  let prefix: string;

  beforeAll(async () => {
    [redis, connector] = await Promise.all([startPrivateRedis(), startCountingConnector()]);
    admin = adminConnection(redis.url);
    prefix = uniquePrefix('oom-load');
    // Generous deadlines, store and connector alike: what this test checks is the refusal of
    // writes by an out-of-memory Redis (an answer, not a wait), and afterwards 200 cards created
    // at once, which a busy machine must only slow down (a 2 s connector deadline gave 504s).
    const client = createRedisClient({ url: redis.url, commandTimeoutMs: TEST_COMMAND_TIMEOUT_MS, connectTimeoutMs: 5_000 });
    store = new RedisStore(client, prefix, { commandTimeoutMs: TEST_COMMAND_TIMEOUT_MS, deadlineMs: TEST_COMMAND_TIMEOUT_MS + 2_000 });
    expect(await waitUntilReady(client, 60_000)).toBe(true);
    gw = await createTestGateway({
      clock: new FollowingClock(),
      store,
      overrides: { rateLimits: RELAXED_LIMITS, connector: { url: connector.url, timeoutMs: 60_000 } },
    });
  });

  afterAll(async () => {
    await gw?.close();
    await store?.close();
    admin?.disconnect();
    await Promise.all([redis?.stop(), connector?.close()]);
  });

  const readiness = async () => {
    const response = await gw.gateway.admin.inject({ method: 'GET', url: '/readyz' });
    return { status: response.statusCode, body: response.json<{ status: string; checks: Record<string, string>; reasons?: Record<string, string> }>() };
  };
  const logLines = () => gw.logs.lines.map((line) => JSON.parse(line) as { msg?: string; reason?: string; detail?: string });
  /** How often each Idempotency-Key naming `requestId` reached the connector. */
  const forwardsOf = (requestId: unknown) => [...connector.posts].filter(([key]) => key.endsWith(`:${String(requestId)}`)).map(([, count]) => count);

  it('refuses every write with 503 store_unavailable, writes nothing, says why, and serves again with nothing lost', async () => {
    // Before: a session, a card.
    const session = await login(gw);
    const before = validCardBody();
    const made = await createCard(gw, session.accessToken, before);
    expect(made.statusCode, made.body).toBe(201);
    const cardBefore = made.json<CardAnswer>().cardId;
    // Its record in Redis, not on its way there: the replay below must meet the full store.
    await cardRecordStored(store, before, Date.now());
    expect((await readiness()).status).toBe(200);

    // A megabyte of headroom filled: once freed, it takes the records of every retry below.
    const { fillers } = await fillUntilOutOfMemory(admin, 1024 * 1024);
    const keysBefore = (await keysWithPrefix(admin, prefix)).sort();
    const postsBefore = new Map(connector.posts);
    const samples: ServerMemory[] = [await serverMemory(admin)];

    // The load, in waves of ten at once: new cards (each requestId once), logins, refreshes, and
    // a replay of the card from before. Used memory is sampled after each wave.
    const during = Array.from({ length: CARDS_DURING }, () => validCardBody());
    const requests: { kind: string; send: () => Promise<LightMyRequestResponse> }[] = [
      ...during.map((body) => ({ kind: 'card', send: () => createCard(gw, session.accessToken, body) })),
      ...Array.from({ length: LOGINS_DURING }, () => ({ kind: 'login', send: () => postLogin(gw, 'full', PASSWORD) })),
      ...Array.from({ length: REFRESHES_DURING }, () => ({ kind: 'refresh', send: () => postRefresh(gw, session.accessToken, session.refreshToken) })),
      { kind: 'replay', send: () => createCard(gw, session.accessToken, before) },
    ].sort(() => Math.random() - 0.5);
    const answers: { kind: string; answer: LightMyRequestResponse }[] = [];
    for (let wave = 0; wave < requests.length; wave += 10) {
      answers.push(...(await Promise.all(requests.slice(wave, wave + 10).map(async ({ kind, send }) => ({ kind, answer: await send() })))));
      samples.push(await serverMemory(admin));
    }

    for (const { kind, answer } of answers) {
      const envelope = expectContractError(answer, 503, 'store_unavailable', 'Service temporarily unavailable');
      expect({ kind, retryAfter: envelope.retryAfter, header: answer.headers['retry-after'] }).toEqual({ kind, retryAfter: 1, header: '1' });
    }
    // Nothing was written: the same keys, no new one; used memory stays at the limit (buffers aside).
    expect((await keysWithPrefix(admin, prefix)).sort()).toEqual(keysBefore);
    const limit = samples[0]!.max;
    expect(samples.map((sample) => sample.used - limit).filter((over) => over > BUFFER_ALLOWANCE)).toEqual([]);
    expect(samples.map((sample) => sample.keys)).toEqual(samples.map(() => samples[0]!.keys));
    // Nothing reached the connector.
    expect(connector.posts).toEqual(postsBefore);

    // Said: /readyz with the reason, the metrics, one log line for the change.
    const notReady = await readiness();
    expect(notReady.status).toBe(503);
    expect(notReady.body.checks['store']).toBe('unavailable');
    expect(notReady.body.reasons?.['store']).toMatch(/^out_of_memory: used memory \d+ of maxmemory \d+ bytes on 127\.0\.0\.1:\d+; writes are refused \(OOM\)$/);
    expect(await metricValue(gw, 'gateway_store_up')).toBe(0);
    expect(await metricValue(gw, 'gateway_store_down_reason', { reason: 'out_of_memory' })).toBe(1);
    expect(await metricValue(gw, 'gateway_store_down_reason')).toBe(1);
    expect(await metricValue(gw, 'gateway_store_operation_failures_total', { reason: 'out_of_memory' })).toBe(answers.length);
    expect(await metricValue(gw, 'gateway_store_unavailable_total')).toBe(answers.length);
    expect(logLines().filter((line) => line.msg === STORE_LOG.down)).toEqual([expect.objectContaining({ reason: 'out_of_memory' })]);

    // Memory freed: the same gateway serves again, by itself.
    await freeFillers(admin, fillers);
    await waitFor('/readyz to report ready once memory is freed', async () => (await readiness()).status === 200);
    expect(logLines().filter((line) => line.msg === STORE_LOG.up)).toHaveLength(1);
    expect(await metricValue(gw, 'gateway_store_down_reason')).toBe(0);

    // Every requestId tried during the outage makes its card now, once; the card from before is replayed.
    const retried = await Promise.all(during.map((body) => createCard(gw, session.accessToken, body)));
    for (const answer of retried) expect(answer.statusCode, answer.body).toBe(201);
    const again = await Promise.all(during.map((body) => createCard(gw, session.accessToken, body)));
    const cardIds = new Map(
      during.map((body, i) => [body['requestId'] as string, new Set([retried[i]!.json<CardAnswer>().cardId, again[i]!.json<CardAnswer>().cardId])]),
    );
    expect([...cardIds.values()].filter((seen) => seen.size !== 1)).toEqual([]);
    expect(new Set([...cardIds.values()].map((seen) => [...seen][0])).size).toBe(CARDS_DURING);
    expect(during.map((body) => forwardsOf(body['requestId']))).toEqual(during.map(() => [1]));
    const replay = await createCard(gw, session.accessToken, before);
    expect(replay.statusCode).toBe(201);
    expect(replay.json<CardAnswer>().cardId).toBe(cardBefore);
    expect(forwardsOf(before['requestId'])).toEqual([1]);

    // The session from before still refreshes, and logins work.
    expect((await postRefresh(gw, session.accessToken, session.refreshToken)).statusCode).toBe(200);
    expect((await postLogin(gw, 'full', PASSWORD)).statusCode).toBe(200);
  }, 60_000);
});
