import { connect, type Socket } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/foundation/clock.js';
import { createRedisClient } from '../../src/store/redis/redis-client.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { postLogin, postLogout, postRefresh } from '../support/auth-requests.js';
import { createCard, startCardFixture, validCardBody, type CardFixture } from '../support/card-fixture.js';
import { DEFAULT_CREDENTIALS, PASSWORD, testConfig } from '../support/gateway-fixture.js';
import { startPrivateRedis, type PrivateRedis } from '../support/private-redis.js';
import { TEST_COMMAND_TIMEOUT_MS, uniquePrefix } from '../support/redis.js';
import { CountingStore } from '../support/counting-store.js';
import { recordSends } from '../support/redis-sends.js';
import { waitFor } from '../support/wait.js';

/**
 * What each request type costs the store (README "Running at scale"): Redis commands per
 * request and the Redis CPU they take, read from INFO commandstats on a redis-server of this
 * file's own (nothing else talks to it). The counts are asserted, so the README's capacity
 * table cannot drift from the code; the CPU figures are printed.
 *
 * A card is counted three ways: the calls it makes through the store port (CountingStore),
 * the round trips they take (the client's sends to Redis, counted at its socket: commands
 * issued in one turn of the event loop go out in one write and are awaited together), and
 * every command Redis runs for it, those inside scripts included (what the benchmark's "store
 * commands per request" counts with INFO commandstats).
 */

/**
 * Commands of this test's own admin connection, of the store's health monitor and of the
 * periodic read of the credentials' not-before instants (HGETALL, D41), not of requests.
 */
const NOT_REQUESTS = new Set(['info', 'config', 'ping', 'client', 'hello', 'select', 'command', 'script', 'hgetall']);

interface Usage {
  calls: Map<string, number>;
  usec: number;
}

/**
 * MONITOR on a plain socket: each line is `+<time> [<db> <client address or lua>] "<command>" ...`.
 * (ioredis's own monitor() can take the first lines for replies when they arrive together with
 * MONITOR's OK.) Resolves once Redis has acknowledged MONITOR.
 */
function monitor(port: number, onCommand: (source: string, name: string) => void): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write('MONITOR\r\n'));
    let buffered = '';
    let acknowledged = false;
    socket.on('error', reject);
    socket.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('utf8');
      const lines = buffered.split('\r\n');
      buffered = lines.pop() ?? '';
      for (const line of lines) {
        if (!acknowledged && line === '+OK') {
          acknowledged = true;
          resolve(socket);
          continue;
        }
        const match = /^\+[\d.]+ \[\d+ ([^\]]+)\] "([^"]+)"/.exec(line);
        if (match) onCommand(match[1] === 'lua' ? 'lua' : 'client', match[2]!.toLowerCase());
      }
    });
  });
}

async function commandStats(admin: Redis): Promise<Usage> {
  const text = await admin.info('commandstats');
  const calls = new Map<string, number>();
  let usec = 0;
  for (const match of text.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
    const name = match[1]!;
    if (NOT_REQUESTS.has(name)) continue;
    calls.set(name, Number(match[2]));
    usec += Number(match[3]);
  }
  return { calls, usec };
}

describe('store commands per request type (INFO commandstats)', () => {
  let redis: PrivateRedis;
  let admin: Redis;
  let store: RedisStore;
  let counting: CountingStore;
  /** The client's sends to Redis (one round trip each when awaited), with the commands in each. */
  let socketSends: ReturnType<typeof recordSends>;
  // The store's health monitor pings once a second: not a request's cost (PING is excluded).
  let fixture: CardFixture;
  const rows: string[] = [];

  beforeAll(async () => {
    redis = await startPrivateRedis();
    admin = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    admin.on('error', () => undefined);
    // The test's generous deadline: nothing here is a fault, and a 300 ms one answered a refresh
    // 503 once on a busy machine.
    const client = createRedisClient({ url: redis.url, commandTimeoutMs: TEST_COMMAND_TIMEOUT_MS, connectTimeoutMs: 5_000 });
    store = new RedisStore(client, uniquePrefix('command-counts'), { commandTimeoutMs: TEST_COMMAND_TIMEOUT_MS, deadlineMs: TEST_COMMAND_TIMEOUT_MS + 2_000 });
    counting = new CountingStore(store);
    await waitFor('the store to answer', () =>
      store.ping().then(
        () => true,
        () => false,
      ),
    );
    // Counted at the socket, as the client really batches (one turn of the event loop, one write).
    socketSends = recordSends(client);
    // Real limits are raised only so that the measured loops are never refused.
    fixture = await startCardFixture({
      store: counting,
      clock: new ManualClock(Date.now()),
      overrides: {
        rateLimits: {
          login: { points: 10_000, windowSeconds: 60 },
          refresh: { points: 10_000, windowSeconds: 60 },
          loginPerAddress: { points: 10_000, windowSeconds: 60 },
          // the wrong-password loops fail a known username many times: no lockout is what they measure
          loginLockout: { maxConsecutiveFailures: 10_000, lockoutSeconds: 60 },
        },
      },
    });
  });

  afterAll(async () => {
    if (rows.length > 0) console.info(`[store commands per request]\n${rows.join('\n')}`);
    await fixture?.close();
    await store?.close();
    admin?.disconnect();
    await redis?.stop();
  });

  /**
   * Runs `request` 2n times after one warm-up (which loads the scripts): n under MONITOR, for
   * the commands the gateway sends (each a round trip, pipelined or not) and those its scripts
   * run inside Redis; n with fresh INFO commandstats, for the Redis CPU they take (MONITOR
   * would add its own cost). Returns the commands sent per request, by name.
   */
  async function measure(label: string, n: number, request: (i: number) => Promise<void>): Promise<Record<string, number>> {
    return (await measureAll(label, n, request)).sent;
  }

  /**
   * A card's record and event are made a turn after its answer (card-idempotency.ts): each
   * request's calls are let in and answered before the next one starts, so that every request is
   * counted alone, in round trips of its own.
   */
  async function settled(): Promise<void> {
    await new Promise((resolve) => setImmediate(resolve));
    await waitFor("the request's store calls to settle", () => counting.inFlight === 0);
  }

  /** What `measure` counts, and per request: the commands run inside scripts, the round trips and the store port's calls. */
  async function measureAll(
    label: string,
    n: number,
    request: (i: number) => Promise<void>,
  ): Promise<{ sent: Record<string, number>; inScripts: Record<string, number>; roundTrips: number; portCalls: Record<string, number> }> {
    await request(-1);
    // A card is answered before its record is written: the warm-up's write (and its script
    // load) must not land in the count.
    await settled();
    const scripted = new Map<string, number>();
    counting.reset();
    socketSends.clear();
    const sent = new Map<string, number>();
    let inScripts = 0;
    const watcher = await monitor(redis.port, (source, name) => {
      if (source === 'lua') {
        inScripts += 1;
        scripted.set(name, (scripted.get(name) ?? 0) + 1);
      } else if (!NOT_REQUESTS.has(name)) sent.set(name, (sent.get(name) ?? 0) + 1);
    });
    for (let i = 0; i < n; i += 1) {
      await request(i);
      await settled();
    }
    // MONITOR lines arrive after the replies they describe: let the last ones in.
    await new Promise((resolve) => setTimeout(resolve, 100));
    watcher.destroy();
    // A send of the health monitor's or this test's own commands alone is not a request's.
    const roundTrips = socketSends.sends.filter((names) => names.some((name) => !NOT_REQUESTS.has(name))).length / n;
    const portCalls = Object.fromEntries(Object.entries(counting.counted()).map(([name, count]) => [name, count / n]));

    await admin.call('CONFIG', 'RESETSTAT');
    for (let i = n; i < 2 * n; i += 1) {
      await request(i);
      await settled();
    }
    const { usec } = await commandStats(admin);

    const perRequest: Record<string, number> = {};
    let total = 0;
    for (const [name, count] of [...sent].sort()) {
      perRequest[name] = Math.round((count / n) * 100) / 100;
      total += count;
    }
    rows.push(
      `${label}: ${Math.round((total / n) * 100) / 100} commands sent (${Object.entries(perRequest)
        .map(([name, count]) => `${name} ${count}`)
        .join(', ')}), ` + `${Math.round((inScripts / n) * 100) / 100} run inside scripts, ${(usec / n).toFixed(1)} µs of Redis CPU`,
    );
    const inScriptsPerRequest = Object.fromEntries([...scripted].sort().map(([name, count]) => [name, count / n]));
    rows.push(`${label}: ${roundTrips} round trips; store port calls ${JSON.stringify(portCalls)}`);
    return { sent: perRequest, inScripts: inScriptsPerRequest, roundTrips, portCalls };
  }

  const N = 25;

  it('login (success): 2 round trips, the per-address limit, then the per-username limit, the lockout read and the new family together', async () => {
    const cost = await measureAll('login (success)', N, async () => {
      expect((await postLogin(fixture.gw, 'full', PASSWORD)).statusCode).toBe(200);
    });
    // evalsha: the two limiters; hmget: the lockout; multi..exec: the family (one key). No reset:
    // no failure was counted for the username. (5 round trips before issue 35.)
    expect(cost.sent).toEqual({ evalsha: 2, hmget: 1, multi: 1, hset: 1, pexpire: 1, exec: 1 });
    expect(cost.roundTrips).toBe(2);
    expect(cost.portCalls).toEqual({ 'limiter.consume': 2, 'lockouts.read': 1, 'sessions.createFamily': 1 });
  });

  it('login (success after a failure): one more round trip, the reset of the failures counted', async () => {
    const cost = await measureAll('login (success after a failure)', N, async () => {
      expect((await postLogin(fixture.gw, 'full', 'wrong password')).statusCode).toBe(401);
      expect((await postLogin(fixture.gw, 'full', PASSWORD)).statusCode).toBe(200);
    });
    // per pair: the failure (limit, batch, count and family removal), then the success (limit, batch, reset)
    expect(cost.roundTrips).toBe(3 + 3);
    expect(cost.portCalls).toEqual({
      'limiter.consume': 4,
      'lockouts.read': 2,
      'lockouts.recordFailure': 1,
      'lockouts.reset': 1,
      'sessions.createFamily': 2,
      'sessions.discardFamily': 1,
    });
  });

  it('login (wrong password): the two limiter scripts, the lockout read and the family, then the failure count and its removal', async () => {
    const cost = await measureAll('login (wrong password)', N, async () => {
      expect((await postLogin(fixture.gw, 'full', 'wrong')).statusCode).toBe(401);
    });
    // the third script counts the failure towards the lockout; del removes the family the login wrote
    expect(cost.sent).toEqual({ evalsha: 3, hmget: 1, multi: 1, hset: 1, pexpire: 1, exec: 1, del: 1 });
    expect(cost.roundTrips).toBe(3);
  });

  it('login (unknown username): no family is written', async () => {
    const cost = await measureAll('login (unknown username)', N, async (i) => {
      // A different username each time: no lockout is reached.
      expect((await postLogin(fixture.gw, `nobody-${i}`, 'wrong')).statusCode).toBe(401);
    });
    expect(cost.sent).toEqual({ evalsha: 3, hmget: 1 });
    expect(cost.roundTrips).toBe(3);
  });

  it('refresh: 2 round trips, the limiter script and the rotation script', async () => {
    let session = (await postLogin(fixture.gw, 'full', PASSWORD)).json<{ accessToken: string; refreshToken: string }>();
    const cost = await measureAll('refresh', N, async () => {
      const response = await postRefresh(fixture.gw, session.accessToken, session.refreshToken);
      expect(response.statusCode).toBe(200);
      session = response.json<typeof session>();
    });
    expect(cost.sent).toEqual({ evalsha: 2 });
    expect(cost.roundTrips).toBe(2);
    // the rotation script reads the family and rewrites it: one HMGET, one HSET, one PEXPIRE
    expect(cost.inScripts).toMatchObject({ hmget: 1, hset: 1, pexpire: 1 });
  });

  it('logout: the revocation script', async () => {
    const sessions: { accessToken: string; refreshToken: string }[] = [];
    for (let i = 0; i < 2 * N + 1; i += 1) {
      const response = await postLogin(fixture.gw, 'full', PASSWORD);
      expect(response.statusCode).toBe(200);
      sessions.push(response.json<{ accessToken: string; refreshToken: string }>());
    }
    const counts = await measure('logout', N, async (i) => {
      const session = sessions[i + 1]!;
      expect((await postLogout(fixture.gw, session.accessToken, session.refreshToken)).statusCode).toBe(200);
    });
    expect(counts).toEqual({ evalsha: 1 });
  });

  it('card creation (new requestId): 2 round trips, the claim (SET NX GET, PEXPIRE), then the record and its card.created event sent together (D64)', async () => {
    const token = await fixture.token();
    const cost = await measureAll('card creation', N, async () => {
      expect((await createCard(fixture.gw, token, validCardBody())).statusCode).toBe(201);
    });
    // The port: one claim, one completion, one event; no limiter, lockout or peek on a card's way.
    expect(cost.portCalls).toEqual({ 'events.record': 1, 'idempotency.complete': 1, 'idempotency.reserve': 1 });
    // The event is written in the same turn as the record: it adds no round trip (D64).
    expect(cost.roundTrips).toBe(2);
    expect(cost.sent).toEqual({ set: 1, pexpire: 1, evalsha: 2 });
    // The record's SET; the event script's: the dedupe check (EXISTS, GET) and key, the account's
    // sequence (INCR), the event (SET), its place in the log (ZADD) and the log's lifetime (PTTL,
    // ZSCORE, ZRANGE: extended only when it runs short). No endpoint is configured: no delivery.
    expect(cost.inScripts).toEqual({ set: 3, exists: 1, get: 1, incr: 1, zadd: 1, pttl: 1, zscore: 1, zrange: 1 });
  });

  it('card creation with events disabled: 4 store commands in 2 round trips, the claim (SET NX GET, PEXPIRE) and the record (a script running one SET)', async () => {
    await fixture.gw.gateway.reload(await testConfig({ events: { enabled: false } }));
    const token = await fixture.token();
    const cost = await measureAll('card creation, events disabled', N, async () => {
      expect((await createCard(fixture.gw, token, validCardBody())).statusCode).toBe(201);
    });
    expect(cost.portCalls).toEqual({ 'idempotency.complete': 1, 'idempotency.reserve': 1 });
    expect(cost.roundTrips).toBe(2);
    expect(cost.sent).toEqual({ set: 1, pexpire: 1, evalsha: 1 });
    expect(cost.inScripts).toEqual({ set: 1 });
    // Every command Redis runs for the card, as INFO commandstats counts them (11 before issue 20:
    // two scripts running TIME, HMGET twice, DEL twice, HSET twice and PEXPIRE twice).
    const total = [...Object.values(cost.sent), ...Object.values(cost.inScripts)].reduce((a, b) => a + b, 0);
    expect(total).toBe(4);
    await fixture.gw.gateway.reload(await testConfig());
  });

  it('card creation after its credential was deactivated and reactivated (D41): still 2 round trips, the not-before check is in memory', async () => {
    const { gw } = fixture;
    const withActive = (active: boolean) => DEFAULT_CREDENTIALS.map((credential) => (credential.id === 'cred-full' ? { ...credential, active } : credential));
    gw.clock.advance(60_000);
    await gw.gateway.reload(await testConfig({}, withActive(false)));
    gw.clock.advance(60_000);
    await gw.gateway.reload(await testConfig({}, withActive(true)));
    gw.clock.advance(60_000);
    const token = await fixture.token();
    const cost = await measureAll('card creation (credential with a not-before instant)', N, async () => {
      expect((await createCard(fixture.gw, token, validCardBody())).statusCode).toBe(201);
    });
    expect(cost.sent).toEqual({ set: 1, pexpire: 1, evalsha: 2 });
    expect(cost.roundTrips).toBe(2);
  });

  it('card replay (known requestId): the claim answers with the record, one round trip of two commands', async () => {
    const token = await fixture.token();
    const body = validCardBody();
    expect((await createCard(fixture.gw, token, body)).statusCode).toBe(201);
    const cost = await measureAll('card replay', N, async () => {
      expect((await createCard(fixture.gw, token, body)).statusCode).toBe(201);
    });
    expect(cost.portCalls).toEqual({ 'idempotency.reserve': 1 });
    expect(cost.roundTrips).toBe(1);
    expect(cost.sent).toEqual({ set: 1, pexpire: 1 });
    expect(cost.inScripts).toEqual({});
  });
});
