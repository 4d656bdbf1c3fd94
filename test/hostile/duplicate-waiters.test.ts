import type { LightMyRequestResponse } from 'fastify';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { startSandboxConnector } from '../../src/connector/sandbox/sandbox-connector.js';
import { createRedisClient, waitUntilReady } from '../../src/store/redis/redis-client.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { metricValue, RELAXED_LIMITS } from '../support/auth-requests.js';
import { connectorStats, createCard, startCardFixture, validCardBody } from '../support/card-fixture.js';
import { startHeldConnector } from '../support/held-connector.js';
import { startPrivateRedis } from '../support/private-redis.js';
import { TEST_COMMAND_TIMEOUT_MS, uniquePrefix } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

/**
 * Issue 8, attack 7: 2,000 concurrent duplicates of one requestId while the connector holds the
 * first one (a proxy in front of the real sandbox connector keeps it until the test releases
 * it, once every duplicate has been either admitted as a waiter or refused). Exactly one card
 * reaches the connector; concurrent duplicates in one process share one
 * wait (one store poll loop per key), at most cards.maxWaitersPerKey (default 100, set here) wait
 * and the rest get 409 at once, each counted in gateway_idempotency_waiters_refused_total; the
 * whole burst costs a bounded number of store commands, counted with
 * INFO commandstats on a private redis-server; nothing answers 503. Old code: one card, but
 * ~61,000 Redis commands (~30 per request, every waiter polls) and 73 answers 503.
 */

const DUPLICATES = 2000;
const MAX_WAITERS = 100;
/** A hang guard: the held card must be answered because the test released it, never by this. */
const CONNECTOR_TIMEOUT_MS = 120_000;

/** Total command calls in INFO commandstats, leaving out the test's own INFO and CONFIG. */
function commandCalls(info: string): { total: number; byCommand: Record<string, number> } {
  const byCommand: Record<string, number> = {};
  let total = 0;
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    const name = match[1] ?? '';
    if (name === 'info' || name.startsWith('config')) continue;
    const calls = Number(match[2]);
    byCommand[name] = calls;
    total += calls;
  }
  return { total, byCommand };
}

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

describe('2,000 concurrent duplicates of one requestId', () => {
  it('make one card, cost a bounded number of store commands, and answer only 201 (same card) or 409', async () => {
    const redisServer = await startPrivateRedis();
    closers.push(() => redisServer.stop());
    const admin = new Redis(redisServer.url, { maxRetriesPerRequest: 1 });
    closers.push(async () => admin.disconnect());
    const client = createRedisClient({ url: redisServer.url, commandTimeoutMs: TEST_COMMAND_TIMEOUT_MS, connectTimeoutMs: TEST_COMMAND_TIMEOUT_MS });
    client.on('error', () => undefined);
    // What is measured is store commands per request, not the store's deadline: the generous
    // test deadline keeps a machine busy with other suites from turning a slow Redis reply into a
    // 503 that says nothing here.
    const store = new RedisStore(client, uniquePrefix('hostile-duplicates'), {
      commandTimeoutMs: TEST_COMMAND_TIMEOUT_MS,
      deadlineMs: TEST_COMMAND_TIMEOUT_MS + 2_000,
    });
    closers.push(() => store.close());
    expect(await waitUntilReady(client, TEST_COMMAND_TIMEOUT_MS)).toBe(true);

    const connector = await startSandboxConnector({ host: '127.0.0.1', port: 0, controls: true });
    closers.push(() => connector.close());
    const held = await startHeldConnector(connector.url);
    closers.push(() => held.close());
    const fixture = await startCardFixture({
      store,
      connector,
      connectorUrl: held.url,
      connectorTimeoutMs: CONNECTOR_TIMEOUT_MS,
      overrides: { rateLimits: RELAXED_LIMITS, cards: { maxWaitersPerKey: MAX_WAITERS } },
    });
    expect(fixture.gw.config.cards.maxWaitersPerKey).toBe(MAX_WAITERS);
    closers.push(() => fixture.close());
    const token = await fixture.token('full');
    const body = validCardBody();
    // A failed assertion before the release must not leave the gateway waiting on the connector.
    closers.push(async () => held.release());

    const refusedBefore = await metricValue(fixture.gw, 'gateway_idempotency_waiters_refused_total');
    await admin.config('RESETSTAT');
    const answeredBeforeRelease: number[] = [];
    let released = false;
    const burst = Promise.all(
      Array.from({ length: DUPLICATES }, () =>
        createCard(fixture.gw, token, body).then((answer) => {
          if (!released) answeredBeforeRelease.push(answer.statusCode);
          return answer;
        }),
      ),
    );
    // The state before the release, reached by every duplicate: one forward held at the
    // connector, MAX_WAITERS waiting on it, every other duplicate refused at once.
    await held.waitForHeld(1);
    const refusedWhileHeld = DUPLICATES - 1 - MAX_WAITERS;
    // Accounted for: waiting on the held forward, or already answered. A waiter that gave up
    // before the release (on a timer of its own) counts as answered, so that such a bug fails the
    // assertions below by name instead of reaching the hang guard.
    let accounted = { waiting: 0, answered: 0, refused: 0 };
    await waitFor(
      () => `every duplicate waiting or answered (${JSON.stringify(accounted)} of ${DUPLICATES - 1})`,
      async () => {
        accounted = {
          waiting: await metricValue(fixture.gw, 'gateway_idempotency_waiters'),
          answered: answeredBeforeRelease.length,
          refused: (await metricValue(fixture.gw, 'gateway_idempotency_waiters_refused_total')) - refusedBefore,
        };
        return accounted.waiting + accounted.answered >= DUPLICATES - 1;
      },
    );
    const waitingWhileHeld = accounted.waiting;
    const answeredWhileHeld = [...answeredBeforeRelease];
    released = true;
    held.release();
    const answers: LightMyRequestResponse[] = await burst;
    const { total, byCommand } = commandCalls(await admin.info('commandstats'));

    const byStatus = new Map<number, number>();
    for (const answer of answers) byStatus.set(answer.statusCode, (byStatus.get(answer.statusCode) ?? 0) + 1);
    const summary = `statuses ${JSON.stringify([...byStatus])}, ${total} store commands ${JSON.stringify(byCommand)}`;

    // While the card was held: exactly MAX_WAITERS waited, the rest were refused (409) at once,
    // and no duplicate had a card yet: the waiters are woken by the release, not by a timeout.
    expect(waitingWhileHeld, summary).toBe(MAX_WAITERS);
    expect(accounted.refused, 'refused while held').toBe(refusedWhileHeld);
    expect(answeredWhileHeld.length).toBe(refusedWhileHeld);
    expect(new Set(answeredWhileHeld), 'answers before the release').toEqual(new Set([409]));
    expect(held.arrived()).toBe(1);

    // Exactly one card reached the connector.
    const stats = await connectorStats(connector);
    expect(stats.requestsReceived, summary).toBe(1);
    expect(stats.cardsCreated).toBe(1);

    // Only 201 (that card) or 409 (too many waiters, or still in progress); never 503.
    expect(byStatus.get(503) ?? 0, summary).toBe(0);
    expect(
      [...byStatus.keys()].every((status) => status === 201 || status === 409),
      summary,
    ).toBe(true);
    const created = answers.filter((answer) => answer.statusCode === 201).map((answer) => answer.json<{ cardId: string }>().cardId);
    expect(created.length, summary).toBeGreaterThanOrEqual(1);
    expect(new Set(created).size).toBe(1);
    for (const answer of answers.filter((a) => a.statusCode === 409)) {
      const envelope = answer.json<{ code?: string; message: string; retryAfter?: number }>();
      expect(envelope).toMatchObject({ code: 'idempotency_in_progress', message: 'A request with this requestId is still being processed' });
      expect(envelope.retryAfter).toBeGreaterThanOrEqual(1);
      expect(answer.headers['retry-after']).toBe(String(envelope.retryAfter));
    }

    // After the release: the request that forwarded and every one of the MAX_WAITERS waiters got
    // the card; every 409 is a waiter refused at once (gateway_idempotency_waiters_refused_total
    // counts nothing else).
    const refusedCount = byStatus.get(409) ?? 0;
    expect(created.length, summary).toBe(MAX_WAITERS + 1);
    expect(refusedCount, summary).toBe(DUPLICATES - created.length);
    expect(await metricValue(fixture.gw, 'gateway_idempotency_waiters_refused_total'), summary).toBe(refusedBefore + refusedCount);
    expect(await metricValue(fixture.gw, 'gateway_idempotency_waiters')).toBe(0);

    // Bounded store cost: at most 2 commands per request (old code: ~30).
    expect(total, summary).toBeLessThanOrEqual(2 * DUPLICATES);
  });
});
