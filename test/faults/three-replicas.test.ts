import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/foundation/clock.js';
import { startSandboxConnector, type RunningSandboxConnector } from '../../src/connector/sandbox/sandbox-connector.js';
import { listenGateway, type RunningGateway } from '../../src/server.js';
import { T0 } from '../support/auth-requests.js';
import { CARDS, connectorStats, FIXTURE_CONNECTOR_TIMEOUT_MS, setConnectorMode, validCardBody, type CardAnswer } from '../support/card-fixture.js';
import { createTestGateway, PASSWORD, testCertificatePem, testConfig, type TestGateway } from '../support/gateway-fixture.js';
import { createTestRedisStore, openReplicaStore, type TestRedisStore } from '../support/redis.js';
import { realRequest, type RealResponse } from '../transport/real-clients.js';

/**
 * Three gateway replicas as production runs them: each with its own Redis client on one shared
 * namespace, one connector behind them, one clock, each listening for real on its own TLS port
 * and called over real HTTPS sockets. What one replica does, the other two see (D5, D11, D17).
 */

const LOGIN = '/api/v1/auth/login';
const REFRESH = '/api/v1/auth/refresh';
const LOGOUT = '/api/v1/auth/logout';

interface Replica {
  gw: TestGateway;
  running: RunningGateway;
}

interface Session {
  accessToken: string;
  refreshToken: string;
}

describe('three replicas on one Redis, over real HTTPS', () => {
  const closers: (() => Promise<void>)[] = [];
  const replicas: Replica[] = [];
  let ca: string;
  let connector: RunningSandboxConnector;
  const clock = new ManualClock(T0);

  beforeAll(async () => {
    ca = await testCertificatePem();
    connector = await startSandboxConnector({ host: '127.0.0.1', port: 0, controls: true });
    closers.push(() => connector.close());
    const shared: TestRedisStore = await createTestRedisStore('three-replicas');
    closers.push(() => shared.cleanup());
    // One config for all three, as one deployment. D11's login limit stays at its default (5 per
    // minute); refresh is raised so that the reuse checks below can try every token on every
    // replica without meeting it.
    const config = await testConfig({
      // Generous: 200 TLS requests on a busy machine must never meet the connector deadline nor a
      // duplicate's wait for the first (deadline + 1 s); nothing here tests either.
      connector: { url: connector.url, timeoutMs: FIXTURE_CONNECTOR_TIMEOUT_MS },
      rateLimits: { refresh: { points: 1000, windowSeconds: 60 } },
    });
    for (let index = 0; index < 3; index += 1) {
      let store = shared.store;
      if (index > 0) {
        const own = await openReplicaStore(shared.prefix);
        closers.push(() => own.close());
        store = own;
      }
      const gw = await createTestGateway({ config, clock, store });
      closers.push(() => gw.close());
      const running = await listenGateway(gw.gateway, { https: { host: '127.0.0.1', port: 0 }, admin: { host: '127.0.0.1', port: 0 } });
      closers.push(() => running.close());
      replicas.push({ gw, running });
    }
  }, 30_000);

  afterAll(async () => {
    for (const close of closers.splice(0).reverse()) {
      try {
        await close();
      } catch {
        // keep closing the rest
      }
    }
  });

  const replica = (index: number): Replica => {
    const found = replicas[index % replicas.length];
    if (!found) throw new Error('replicas not started');
    return found;
  };

  function post(index: number, path: string, body: unknown, token?: string): Promise<RealResponse> {
    return realRequest(`${replica(index).running.httpsUrl}${path}`, {
      ca,
      method: 'POST',
      body: JSON.stringify(body),
      headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
    });
  }

  async function loginOn(index: number, username = 'full'): Promise<Session> {
    const response = await post(index, LOGIN, { username, password: PASSWORD });
    expect(response.status, response.body).toBe(200);
    return JSON.parse(response.body) as Session;
  }

  it('200 concurrent identical card creations, round-robin over the three, make exactly one card and all answer it with 201', async () => {
    const tokens = await Promise.all([0, 1, 2].map(async (index) => (await loginOn(index)).accessToken));
    // Makes duplicates likely to meet the first in flight; whether they do or come after it, the
    // outcome asserted is the same.
    await setConnectorMode(connector, { mode: 'delay', delayMs: 100 });
    const before = await connectorStats(connector);
    const body = validCardBody({ config: { tolerance: { percentage: 5 } } });

    const responses = await Promise.all(Array.from({ length: 200 }, (_, i) => post(i, CARDS, body, tokens[i % 3])));

    for (const response of responses) expect(response.status, response.body).toBe(201);
    const cards = responses.map((response) => JSON.parse(response.body) as CardAnswer);
    const first = cards[0]!;
    expect(first.cardId).toMatch(/^card_/);
    for (const card of cards) expect(card).toEqual(first);
    // the card is masked: no 16-digit PAN in any of the 200 answers
    for (const response of responses) expect(response.body).not.toMatch(/\d{16}/);
    expect(responses.filter((response) => response.headers['idempotent-replayed'] === undefined)).toHaveLength(1);
    expect(responses.filter((response) => response.headers['idempotent-replayed'] === 'true')).toHaveLength(199);

    const stats = await connectorStats(connector);
    expect(stats.cardsCreated - before.cardsCreated).toBe(1);
    expect(stats.requestsReceived - before.requestsReceived).toBe(1);
    expect(stats.keys).toContain(`acct-eu:${String(body['requestId'])}`);
    await setConnectorMode(connector, { mode: 'normal' });
  }, 60_000);

  it('parallel refreshes of one token across the replicas all succeed within the grace; after it, the original is reuse and the family dies on every replica (D5)', async () => {
    const session = await loginOn(0, 'uk');
    // two refreshes of the same token on each replica, all at once
    const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => post(i, REFRESH, { refreshToken: session.refreshToken }, session.accessToken)));
    for (const answer of answers) expect(answer.status, answer.body).toBe(200);
    const rotated = answers.map((answer) => JSON.parse(answer.body) as Session);
    // one of them rotated; every other one, on any replica, was answered the token it issued (D5)
    expect(new Set(rotated.map((r) => r.refreshToken)).size).toBe(1);
    expect(new Set(rotated.map((r) => r.accessToken)).size).toBe(6);
    expect(rotated.map((r) => r.refreshToken)).not.toContain(session.refreshToken);

    clock.advance(60_000);
    try {
      const reuse = await post(1, REFRESH, { refreshToken: session.refreshToken }, session.accessToken);
      expect(reuse.status, reuse.body).toBe(401);
      expect(JSON.parse(reuse.body)).toMatchObject({ status: 401, message: 'Refresh token is revoked', details: {} });

      // every token the family ever had is dead, on every replica, for refresh and logout alike
      const family = [session.refreshToken, ...rotated.map((r) => r.refreshToken)];
      const attempts = family.flatMap((refreshToken) => [0, 1, 2].map((index) => post(index, REFRESH, { refreshToken }, rotated[0]!.accessToken)));
      for (const attempt of await Promise.all(attempts)) {
        expect(attempt.status, attempt.body).toBe(401);
        expect(JSON.parse(attempt.body)).toMatchObject({ message: 'Refresh token is revoked' });
      }
      for (const index of [0, 1, 2]) {
        const logout = await post(index, LOGOUT, { refreshToken: rotated[index]!.refreshToken }, rotated[0]!.accessToken);
        expect(logout.status, logout.body).toBe(401);
      }
      // one replica's audit recorded the reuse
      const reuseEvents = replicas.flatMap(({ gw }) => gw.audit.lines.filter((line) => line.includes('"refresh.reuse_detected"')));
      expect(reuseEvents).toHaveLength(1);
    } finally {
      clock.set(T0);
    }
  }, 60_000);

  it('holds the login limit across the replicas: 5 logins for one username spread over three are answered, the 6th on any replica is 429 (D11)', async () => {
    // A username no one has used (known or not, it counts the same): the window starts empty.
    const username = `probe-${randomUUID()}`;
    const first = await Promise.all([0, 1, 2, 0, 1].map((index) => post(index, LOGIN, { username, password: 'wrong password' })));
    for (const response of first) {
      expect(response.status, response.body).toBe(401);
      expect(response.headers['ratelimit-limit']).toBe('5');
    }
    expect(first.map((response) => Number(response.headers['ratelimit-remaining'])).sort()).toEqual([0, 1, 2, 3, 4]);

    for (const index of [0, 1, 2]) {
      const refused = await post(index, LOGIN, { username, password: PASSWORD });
      expect(refused.status, refused.body).toBe(429);
      const body = JSON.parse(refused.body) as { retryAfter: number; status: number };
      expect(body.status).toBe(429);
      expect(Number.isInteger(body.retryAfter) && body.retryAfter >= 1).toBe(true);
      expect(refused.headers['retry-after']).toBe(String(body.retryAfter));
    }

    // a known username: 5 answered (wrong passwords and a right one alike), the 6th refused everywhere
    const known = ['wrong', 'wrong', PASSWORD, 'wrong', PASSWORD];
    const answered = await Promise.all(known.map((password, i) => post(i + 1, LOGIN, { username: 'no-perms', password })));
    expect(answered.map((response) => response.status).sort()).toEqual([200, 200, 401, 401, 401]);
    for (const index of [2, 0, 1]) expect((await post(index, LOGIN, { username: 'no-perms', password: PASSWORD })).status).toBe(429);
  }, 60_000);
});
