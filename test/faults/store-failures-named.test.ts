import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { STORE_LOG } from '../../src/observability/store-observer.js';
import { createRedisClient, waitUntilReady } from '../../src/store/redis/redis-client.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import type { StoreFailureReason } from '../../src/store/store-types.js';
import { metricValue, postLogin, RELAXED_LIMITS } from '../support/auth-requests.js';
import { expectContractError } from '../support/envelope.js';
import { PASSWORD, assertNoSecrets, createTestGateway, type TestGateway } from '../support/gateway-fixture.js';
import { startPrivateRedis, type PrivateRedis } from '../support/private-redis.js';
import { adminConnection } from '../support/redis-memory.js';
import { uniquePrefix } from '../support/redis.js';
import { waitFor } from '../support/wait.js';

/**
 * D55 at runtime: each way a running gateway's Redis stops serving it, on a private
 * redis-server, is named the same in the one log line at the moment it happens, in `/readyz`,
 * in `gateway_store_down_reason` and in the failed request's count: a frozen server
 * (`timed_out`), a dead one (`unreachable`), a password changed under the gateway
 * (`authentication_refused`, not "Stream isn't writeable"), a master turned replica
 * (`read_only`). Each time the gateway serves again by itself, with one line saying so.
 */

interface Fault {
  reason: StoreFailureReason;
  /** Redis's or the connection's own words, as the detail gives them. */
  detail: RegExp;
  begin(redis: PrivateRedis, admin: Redis): Promise<void>;
  end(redis: PrivateRedis, admin: Redis): Promise<void>;
}

const PASSWORD_OF_REDIS = randomBytes(18).toString('base64url');
const OTHER_PASSWORD = randomBytes(18).toString('base64url');
let primary: PrivateRedis | undefined;

const FAULTS: Fault[] = [
  {
    reason: 'timed_out',
    detail: /^store command timed out$/,
    begin: async (redis) => redis.pause(),
    end: async (redis) => redis.resume(),
  },
  {
    reason: 'unreachable',
    detail: /^connect ECONNREFUSED 127\.0\.0\.1:\d+$/,
    begin: (redis) => redis.kill(),
    end: async (redis, admin) => {
      await redis.restart();
      await admin.config('SET', 'requirepass', PASSWORD_OF_REDIS);
    },
  },
  {
    reason: 'authentication_refused',
    // The old password refused; the NOAUTH answers to commands after it are named by it too.
    detail: /^WRONGPASS /,
    // A new password, and the gateway's connection cut: it reconnects with the old one.
    begin: async (_redis, admin) => {
      await admin.config('SET', 'requirepass', OTHER_PASSWORD);
      await admin.client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
    },
    end: async (_redis, admin) => {
      await admin.config('SET', 'requirepass', PASSWORD_OF_REDIS);
    },
  },
  {
    reason: 'read_only',
    detail: /^(READONLY |127\.0\.0\.1:\d+ is a replica)/,
    begin: async (_redis, admin) => {
      primary = await startPrivateRedis();
      await admin.config('SET', 'masterauth', '');
      await admin.call('REPLICAOF', '127.0.0.1', String(primary.port));
    },
    end: async (_redis, admin) => {
      await admin.call('REPLICAOF', 'NO', 'ONE');
      await primary?.stop();
    },
  },
];

describe('every store failure named, at the moment it happens (D55)', () => {
  let redis: PrivateRedis | undefined;
  let admin: Redis | undefined;
  let store: RedisStore | undefined;
  let gw: TestGateway | undefined;

  afterEach(async () => {
    try {
      if (redis) redis.resume();
    } catch {
      // already gone
    }
    await gw?.close();
    await store?.close();
    admin?.disconnect();
    await Promise.all([redis?.stop(), primary?.stop()]);
    [redis, admin, store, gw, primary] = [undefined, undefined, undefined, undefined, undefined];
  });

  const readiness = async () => {
    const response = await gw!.gateway.admin.inject({ method: 'GET', url: '/readyz' });
    const body = response.json<{ checks: Record<string, string>; reasons?: Record<string, string> }>();
    return { check: body.checks['store'], reason: body.reasons?.['store'] };
  };
  const logLines = () => gw!.logs.lines.map((line) => JSON.parse(line) as { msg?: string; reason?: string; detail?: string });

  for (const fault of FAULTS) {
    it(`${fault.reason}: one log line, /readyz, the metrics and the failed request name it; served again by itself`, async () => {
      redis = await startPrivateRedis();
      admin = adminConnection(redis.url);
      await admin.config('SET', 'requirepass', PASSWORD_OF_REDIS);
      const client = createRedisClient({ url: redis.url, password: PASSWORD_OF_REDIS, commandTimeoutMs: 300, connectTimeoutMs: 500 });
      store = new RedisStore(client, uniquePrefix('named'));
      expect(await waitUntilReady(client, 5_000)).toBe(true);
      gw = await createTestGateway({ store, overrides: { rateLimits: RELAXED_LIMITS } });
      expect((await postLogin(gw, 'full', PASSWORD)).statusCode).toBe(200);
      expect(await readiness()).toEqual({ check: 'ok', reason: undefined });

      await fault.begin(redis, admin);
      // The moment the store is known down, one line says why (for a closed connection: at the
      // first failed attempt to make it again, which names the cause).
      await waitFor(`the store to be reported down (${fault.reason})`, async () => logLines().some((line) => line.msg === STORE_LOG.down));
      // A request refused now is counted under that reason; /readyz (a health check of its own) says why.
      const refused = await postLogin(gw, 'full', PASSWORD);
      expectContractError(refused, 503, 'store_unavailable', 'Service temporarily unavailable');
      expect(await metricValue(gw, 'gateway_store_operation_failures_total', { reason: fault.reason })).toBeGreaterThanOrEqual(1);
      const notReady = await readiness();
      expect(notReady.check).toBe('unavailable');
      expect(notReady.reason?.startsWith(`${fault.reason}: `), notReady.reason).toBe(true);
      expect(notReady.reason?.slice(fault.reason.length + 2)).toMatch(fault.detail);
      expect(await metricValue(gw, 'gateway_store_down_reason', { reason: fault.reason })).toBe(1);
      expect(await metricValue(gw, 'gateway_store_up')).toBe(0);
      const down = logLines().filter((line) => line.msg === STORE_LOG.down);
      expect(down).toEqual([expect.objectContaining({ reason: fault.reason })]);
      expect(down[0]?.detail).toMatch(fault.detail);

      await fault.end(redis, admin);
      await waitFor(`login to work again after ${fault.reason}`, async () => (await postLogin(gw!, 'full', PASSWORD)).statusCode === 200);
      await waitFor('/readyz to report the store ok', async () => (await readiness()).check === 'ok');
      expect(logLines().filter((line) => line.msg === STORE_LOG.down)).toHaveLength(1);
      expect(logLines().filter((line) => line.msg === STORE_LOG.up)).toHaveLength(1);
      expect(await metricValue(gw, 'gateway_store_down_reason')).toBe(0);
      const text = gw.logs.text();
      expect(text).not.toContain("Stream isn't writeable");
      assertNoSecrets(text, [PASSWORD_OF_REDIS, OTHER_PASSWORD, PASSWORD]);
    }, 60_000);
  }
});
