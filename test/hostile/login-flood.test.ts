import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { PASSWORD, rawTestConfig, testCertificatePem, writeTestConfig } from '../support/gateway-fixture.js';
import { deleteKeysWithPrefix, keysWithPrefix, requireRedisUrl, uniquePrefix } from '../support/redis.js';
import { freePort } from '../support/ports.js';
import { builtEntryPoints, spawnEntry, type BuiltEntryPoints, type RunningProcess } from '../support/process.js';
import { call, expectCodedError, expectRetryAfter, INSIDER, LOGIN_PATH, SECOND_INSIDER, sleep, waitUntilHealthy, type HttpAnswer } from './support.js';

/**
 * Issue 8, attack 6 (D27): 256 concurrent logins with random usernames and 1000-character
 * passwords from one allowlisted address (127.0.0.2), over real TLS, while a legitimate client
 * (127.0.0.1) logs in. Before any hashing: a per-source-address limit (30 a minute by default)
 * and a cap on concurrent hashes (503 server_busy at once past it). The legitimate login stays
 * fast, and what the flood leaves in the store is bounded by the per-address limit, not by the
 * number of usernames tried. Old code: every attempt was hashed, the legitimate login took
 * ~10 s, and each random username left a lockout record and a limiter key behind.
 *
 * The gateway is the real entry point in its own process (so the flood's client work in this
 * process does not share an event loop with it), on the shared Redis under a unique prefix.
 */

const FLOOD = 256;
/** rateLimits.loginPerAddress default (D27). */
const PER_ADDRESS = 30;

describe('login flood from one allowlisted address (D27)', () => {
  let entry: BuiltEntryPoints;
  let ca: string;
  let redis: Redis;
  let gateway: RunningProcess | undefined;
  const prefixes: string[] = [];

  beforeAll(async () => {
    ca = await testCertificatePem();
    redis = new Redis(requireRedisUrl(), { maxRetriesPerRequest: 1, connectTimeout: 2000 });
    entry = await builtEntryPoints();
  }, 120_000);
  afterEach(async () => {
    await gateway?.kill();
    gateway = undefined;
    for (const prefix of prefixes.splice(0)) await deleteKeysWithPrefix(redis, prefix);
  });
  afterAll(() => {
    redis?.disconnect();
  });

  it('keeps a legitimate login fast, refuses the flood before hashing, and bounds what it leaves in the store', async () => {
    const prefix = uniquePrefix('hostile-login-flood');
    prefixes.push(prefix);
    const ports = { https: await freePort(), admin: await freePort() };
    const written = await writeTestConfig(
      await rawTestConfig({
        listeners: { https: { host: INSIDER, port: ports.https }, admin: { host: INSIDER, port: ports.admin } },
        trustedProxies: [],
        store: { kind: 'redis', redis: { url: requireRedisUrl(), keyPrefix: prefix } },
      }),
    );
    gateway = spawnEntry(entry.mainJs, written.file);
    await waitUntilHealthy(`http://${INSIDER}:${ports.admin}`, gateway);
    const loginUrl = `https://${INSIDER}:${ports.https}${LOGIN_PATH}`;
    const legitimateLogin = () =>
      call(loginUrl, { ca, localAddress: INSIDER, body: JSON.stringify({ username: 'full', password: PASSWORD }), timeoutMs: 30_000 });

    // The same login without a flood, for scale on a loaded machine.
    const baseline = await legitimateLogin();
    expect(baseline.status, baseline.body).toBe(200);
    const allowedMs = Math.max(1500, 5 * baseline.ms);

    // The flood: 256 at once, each on its own TLS connection from 127.0.0.2.
    let answered = 0;
    const flood = Array.from({ length: FLOOD }, () =>
      call(loginUrl, {
        ca,
        localAddress: SECOND_INSIDER,
        body: JSON.stringify({ username: `u-${randomBytes(8).toString('hex')}`, password: randomBytes(500).toString('hex') }),
        timeoutMs: 30_000,
      }).then(
        (answer) => {
          answered += 1;
          return answer;
        },
        (error: Error) => error.message,
      ),
    );

    // The legitimate login starts once the flood is being served (or after 300 ms at most).
    const waitStarted = performance.now();
    while (answered < 10 && performance.now() - waitStarted < 300) await sleep(5);
    const legitimate = await legitimateLogin();
    const outcomes = await Promise.all(flood);

    expect(legitimate.status, legitimate.body).toBe(200);
    expect(legitimate.ms, `legitimate login took ${Math.round(legitimate.ms)} ms during the flood, ${Math.round(baseline.ms)} ms without`).toBeLessThan(
      allowedMs,
    );

    const failures = outcomes.filter((outcome): outcome is string => typeof outcome === 'string');
    expect(failures.slice(0, 3), `${failures.length} flood requests got no answer`).toEqual([]);
    const answers = outcomes as HttpAnswer[];
    const byStatus = new Map<number, number>();
    for (const answer of answers) byStatus.set(answer.status, (byStatus.get(answer.status) ?? 0) + 1);
    // Hashed (401) at most the per-address limit's worth; the rest refused before hashing.
    expect(byStatus.get(401) ?? 0, JSON.stringify([...byStatus])).toBeLessThanOrEqual(PER_ADDRESS);
    for (const answer of answers) {
      if (answer.status === 401) expectCodedError(answer, 401, 'authentication_failed', 'Authentication failed');
      else if (answer.status === 429) expectRetryAfter(answer, expectCodedError(answer, 429, 'rate_limited', 'Rate limit exceeded, retry later'));
      else expectRetryAfter(answer, expectCodedError(answer, 503, 'server_busy', 'Too many logins in progress, retry shortly'), 1);
    }
    expect(byStatus.get(429) ?? 0).toBeGreaterThanOrEqual(FLOOD - PER_ADDRESS);

    // What the flood left behind: per-username limiter and lockout keys for at most the
    // attempts the per-address limit let through (plus the legitimate session), not 256 of each.
    const keys = await keysWithPrefix(redis, prefix);
    expect(keys.length, `keys under the prefix after the flood: ${keys.length}`).toBeLessThanOrEqual(2 * PER_ADDRESS + 10);
  }, 60_000);
});
