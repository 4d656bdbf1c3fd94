import { randomBytes } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { STORE_LOG } from '../../src/observability/store-observer.js';
import { assertNoSecrets, rawTestConfig, writeTestConfig, type WrittenConfig } from '../support/gateway-fixture.js';
import { startPrivateRedis, type PrivateRedis } from '../support/private-redis.js';
import { adminConnection } from '../support/redis-memory.js';
import { builtEntryPoints, call, killAll, startGateway, type GatewayProcess, type LogLine } from './support.js';
import { waitFor } from '../support/wait.js';

/**
 * D55 at start, on the real process: a gateway started with a wrong Redis password, or with
 * none where the server requires one, says so in its first line about the store (NOAUTH /
 * WRONGPASS as Redis words it), and `/readyz` gives the same reason; never ioredis's "Stream
 * isn't writeable". When the server's password comes to match, the gateway serves by itself.
 */
describe('a store that refuses the gateway at start (D55)', () => {
  let redis: PrivateRedis;
  let admin: Redis;
  let serverPassword: string;
  const written: WrittenConfig[] = [];

  beforeAll(async () => {
    [redis] = await Promise.all([startPrivateRedis(), builtEntryPoints()]);
    serverPassword = randomBytes(18).toString('base64url');
    admin = adminConnection(redis.url);
    await admin.config('SET', 'requirepass', serverPassword);
  }, 180_000);

  afterEach(async () => {
    await killAll();
    await admin.config('SET', 'requirepass', serverPassword);
  });

  afterAll(async () => {
    admin?.disconnect();
    await redis?.stop();
    for (const config of written) rmSync(config.dir, { recursive: true, force: true });
  });

  async function startWith(password: string | undefined): Promise<GatewayProcess> {
    // Generous store deadlines: under load a short one times out before Redis can refuse the password.
    const redisSection: Record<string, unknown> = { url: redis.url, keyPrefix: 'test:auth-at-start:', commandTimeoutMs: 5000, connectTimeoutMs: 10_000 };
    const config = await writeTestConfig(await rawTestConfig({ store: { kind: 'redis', redis: redisSection } }));
    written.push(config);
    if (password !== undefined) {
      const file = join(config.dir, 'redis-password');
      writeFileSync(file, password, { mode: 0o600 });
      redisSection['password'] = { file };
      await config.write(await rawTestConfig({ store: { kind: 'redis', redis: redisSection } }));
    }
    return startGateway(config.file);
  }

  const logLines = (gateway: GatewayProcess): LogLine[] => gateway.lines.map((line) => JSON.parse(line) as LogLine);
  const storeReadiness = async (gateway: GatewayProcess) => {
    const body = JSON.parse((await call(`${gateway.adminUrl}/readyz`)).body) as { checks: Record<string, string>; reasons?: Record<string, string> };
    return { check: body.checks['store'], reason: body.reasons?.['store'] };
  };

  for (const [name, password, words] of [
    ['a wrong password', 'not-the-password', /^WRONGPASS /],
    ['no password', undefined, /^NOAUTH /],
  ] as const) {
    it(`started with ${name}: the first line about the store names the refusal; /readyz too; served once the password matches`, async () => {
      const gateway = await startWith(password);
      const first = logLines(gateway).find((line) => String(line['msg']).includes('store'));
      expect(first).toMatchObject({ level: 'warn', msg: STORE_LOG.downAtStart, reason: 'authentication_refused' });
      expect(String(first?.['detail'])).toMatch(words);
      const inUse = logLines(gateway).find((line) => line['msg'] === STORE_LOG.inUse);
      expect(inUse).toMatchObject({ up: false, reason: 'authentication_refused' });

      const notReady = await storeReadiness(gateway);
      expect(notReady.check).toBe('unavailable');
      // After a refused AUTH the server answers the connection's next commands NOAUTH; /readyz
      // still names the refused password.
      expect(notReady.reason).toMatch(new RegExp(`^authentication_refused: ${words.source.slice(1)}`));

      // The server's password changes to the gateway's (or is dropped): it reconnects and serves.
      await admin.config('SET', 'requirepass', password ?? '');
      await gateway.waitForLog((line) => line['msg'] === STORE_LOG.up, { timeoutMs: 10_000 });
      // Readiness follows the store's probes. Without a password, a connection whose ready check
      // was refused just before the change can answer one probe (up) and then close with that
      // NOAUTH (down for one reconnection): the next probe clears it.
      await waitFor('/readyz to report the store ok', async () => (await storeReadiness(gateway)).check === 'ok');
      expect(await storeReadiness(gateway)).toEqual({ check: 'ok', reason: undefined });

      const output = `${gateway.stdout()}\n${gateway.stderr()}`;
      expect(output).not.toContain("Stream isn't writeable");
      assertNoSecrets(output, [serverPassword, ...(password ? [password] : [])]);
    });
  }
});
