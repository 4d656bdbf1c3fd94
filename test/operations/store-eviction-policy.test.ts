import { randomBytes } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { STORE_LOG } from '../../src/observability/store-observer.js';
import { rawTestConfig, testKeys, writeTestConfig, type WrittenConfig } from '../support/gateway-fixture.js';
import { startPrivateRedis, type PrivateRedis } from '../support/private-redis.js';
import { adminConnection } from '../support/redis-memory.js';
import { builtEntryPoints, call, gatewayCli, killAll, metricSum, scrape, signalAndWait, startGateway, type GatewayProcess, type LogLine } from './support.js';

/**
 * D54 on the real process, against a private redis-server whose maxmemory-policy the test sets
 * (CONFIG SET on that server only): an evicting policy stops a production start (exit 78, the
 * problem named like the other production refusals) and makes a running production gateway not
 * ready with the reason until noeviction is back; sandbox starts and serves, warning once per
 * change. The server requires a password, read from a file, as production configs have it.
 */
const WARN = 'warn';

describe('the store maxmemory-policy (D54)', () => {
  let redis: PrivateRedis;
  let admin: Redis;
  let passwordFile: string;
  const written: WrittenConfig[] = [];

  beforeAll(async () => {
    [redis] = await Promise.all([startPrivateRedis(), builtEntryPoints()]);
    const password = randomBytes(18).toString('base64url');
    admin = adminConnection(redis.url);
    await admin.config('SET', 'requirepass', password);
    passwordFile = join((await testKeys()).dir, `redis-password-${redis.port}`);
    writeFileSync(passwordFile, password, { mode: 0o600 });
  }, 180_000);

  afterEach(async () => {
    await killAll();
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
  });

  afterAll(async () => {
    admin?.disconnect();
    await redis?.stop();
    for (const config of written) rmSync(config.dir, { recursive: true, force: true });
  });

  /** A config on the private server: production-shaped (https connector with a secret) or sandbox. */
  async function configFor(environment: 'production' | 'sandbox'): Promise<WrittenConfig> {
    const keys = await testKeys();
    const config = await writeTestConfig(
      await rawTestConfig({
        environment,
        store: { kind: 'redis', redis: { url: redis.url, keyPrefix: `test:policy:${environment}:`, password: { file: passwordFile } } },
        ...(environment === 'production' && { connector: { url: 'https://127.0.0.1:9', timeoutMs: 1000, sharedSecret: { file: keys.connectorSecret } } }),
      }),
    );
    written.push(config);
    return config;
  }

  const storeReadiness = async (gateway: GatewayProcess) => {
    const body = JSON.parse((await call(`${gateway.adminUrl}/readyz`)).body) as { checks: Record<string, string>; reasons?: Record<string, string> };
    return { check: body.checks['store'], reason: body.reasons?.['store'] };
  };
  /**
   * The log lines with this message, once every line written so far has arrived: log lines are
   * batched, so a reload's own line (SIGHUP) is waited for first, and those before it are in.
   */
  async function linesWith(gateway: GatewayProcess, msg: string): Promise<LogLine[]> {
    await signalAndWait(gateway, 'SIGHUP', (line) => line['msg'] === 'configuration reloaded');
    return gateway.lines.map((line) => JSON.parse(line) as LogLine).filter((line) => line['msg'] === msg);
  }
  /** Polls /readyz (each one runs a health check) until the store's check is `check`. */
  async function readinessBecomes(gateway: GatewayProcess, check: string): Promise<{ check: string | undefined; reason: string | undefined }> {
    for (let attempt = 0; attempt < 100; attempt += 1) {
      const state = await storeReadiness(gateway);
      if (state.check === check) return state;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`/readyz never reported the store ${check}`);
  }

  it('production refuses to start with an evicting policy: exit 78, the problem named with file and field', async () => {
    await admin.config('SET', 'maxmemory-policy', 'allkeys-lru');
    const { file } = await configFor('production');
    const result = await gatewayCli(['--config', file]);
    expect({ code: result.code, stderr: result.stderr }).toEqual({
      code: 78,
      stderr: `Invalid configuration:\n  ${file}: store.redis: maxmemory-policy is allkeys-lru on 127.0.0.1:${redis.port}; production needs noeviction (D54)\n`,
    });
    expect(result.stdout).not.toContain('gateway listening');
  });

  it('sandbox starts with an evicting policy, serves, and warns once', async () => {
    await admin.config('SET', 'maxmemory-policy', 'volatile-lru');
    const gateway = await startGateway((await configFor('sandbox')).file);
    for (let i = 0; i < 3; i += 1) expect(await storeReadiness(gateway)).toEqual({ check: 'ok', reason: undefined });
    const warnings = await linesWith(gateway, STORE_LOG.evictingPolicy);
    expect(warnings).toEqual([expect.objectContaining({ level: WARN, policy: `volatile-lru on 127.0.0.1:${redis.port}` })]);
  });

  it('a running production gateway turns not ready with the reason when the policy changes, and ready again with noeviction', async () => {
    const gateway = await startGateway((await configFor('production')).file);
    expect(await storeReadiness(gateway)).toEqual({ check: 'ok', reason: undefined });

    await admin.config('SET', 'maxmemory-policy', 'allkeys-lfu');
    expect(await readinessBecomes(gateway, 'unavailable')).toEqual({
      check: 'unavailable',
      reason: `evicting_policy: maxmemory-policy is allkeys-lfu on 127.0.0.1:${redis.port}; production needs noeviction (D54)`,
    });
    expect(metricSum(await scrape(gateway.adminUrl), 'gateway_store_down_reason', { reason: 'evicting_policy' })).toBe(1);
    expect(await linesWith(gateway, STORE_LOG.down)).toEqual([expect.objectContaining({ level: WARN, reason: 'evicting_policy' })]);

    await admin.config('SET', 'maxmemory-policy', 'noeviction');
    expect(await readinessBecomes(gateway, 'ok')).toEqual({ check: 'ok', reason: undefined });
    expect(await linesWith(gateway, STORE_LOG.down)).toHaveLength(1);
    expect(await linesWith(gateway, STORE_LOG.up)).toHaveLength(1);
    expect(await linesWith(gateway, STORE_LOG.evictingPolicy)).toEqual([]);
  });

  it('a running sandbox gateway warns once when the policy changes, stays ready, and says when noeviction is back', async () => {
    const gateway = await startGateway((await configFor('sandbox')).file);
    expect(await linesWith(gateway, STORE_LOG.evictingPolicy)).toEqual([]);

    await admin.config('SET', 'maxmemory-policy', 'allkeys-random');
    for (let i = 0; i < 3; i += 1) expect(await storeReadiness(gateway)).toEqual({ check: 'ok', reason: undefined });
    expect(await linesWith(gateway, STORE_LOG.evictingPolicy)).toEqual([
      expect.objectContaining({ level: WARN, policy: `allkeys-random on 127.0.0.1:${redis.port}` }),
    ]);

    await admin.config('SET', 'maxmemory-policy', 'noeviction');
    await storeReadiness(gateway);
    expect(await linesWith(gateway, STORE_LOG.noEvictionAgain)).toHaveLength(1);
    expect(await linesWith(gateway, STORE_LOG.evictingPolicy)).toHaveLength(1);
    expect(await linesWith(gateway, STORE_LOG.down)).toEqual([]);
  });
});
