import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rmSync } from 'node:fs';
import { ConfigError } from '../../src/config/config-error.js';
import { ENVIRONMENT_OVERRIDES } from '../../src/config/environment-overrides.js';
import { loadConfig } from '../../src/config/load-config.js';
import { productionSafeOverrides, rawTestConfig, writeTestConfig, type RawConfig } from '../support/gateway-fixture.js';
import { freePort } from '../support/ports.js';
import { requireRedisUrl, uniquePrefix } from '../support/redis.js';
import { adminGet, metricSum } from '../hostile/support.js';
import { builtEntryPoints, gatewayCli, killAll, startGateway } from './support.js';

/**
 * The listener ports and the Redis address change without editing a config: GATEWAY_HTTPS_PORT,
 * GATEWAY_PLAIN_HTTP_PORT, GATEWAY_ADMIN_PORT and GATEWAY_REDIS_URL, the same in every
 * environment, shown by --help, applied before every check (schema, production guards) and said
 * at start; a value that is not one, or a setting the config does not have, is a
 * `file: field: problem`.
 */

const dirs: string[] = [];
afterAll(async () => {
  await killAll();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});
beforeAll(async () => {
  await builtEntryPoints();
}, 180_000);

async function written(overrides: RawConfig) {
  const config = await writeTestConfig(await rawTestConfig(overrides));
  dirs.push(config.dir);
  return config;
}

async function load(file: string, env: Record<string, string>) {
  try {
    const config = await loadConfig(file, env);
    return { problems: [] as string[], config };
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    return { problems: [...error.problems], config: undefined };
  }
}

const LISTENERS = {
  https: { host: '127.0.0.1', port: 8443 },
  plainHttp: { host: '127.0.0.1', port: 8080 },
  admin: { host: '127.0.0.1', port: 8442 },
};

describe('environment overrides', () => {
  it('--help lists every variable with the setting it replaces', async () => {
    const result = await gatewayCli(['--help']);
    expect(result.code).toBe(0);
    for (const { variable, field } of ENVIRONMENT_OVERRIDES) expect(result.stdout).toMatch(new RegExp(`^  ${variable} +${field.replace(/\./g, '\\.')}$`, 'm'));
  });

  it('starts a sandbox on the ports and the Redis the environment names, not the ones its file names, and says so', async () => {
    const { file } = await written({
      listeners: LISTENERS,
      store: { kind: 'redis', redis: { url: 'redis://127.0.0.1:1', keyPrefix: uniquePrefix('overrides') } },
    });
    const [https, plain, admin] = [await freePort(), await freePort(), await freePort()];
    const gateway = await startGateway(file, {
      env: {
        GATEWAY_HTTPS_PORT: String(https),
        GATEWAY_PLAIN_HTTP_PORT: String(plain),
        GATEWAY_ADMIN_PORT: String(admin),
        GATEWAY_REDIS_URL: requireRedisUrl(),
      },
    });
    expect(new URL(gateway.httpsUrl).port).toBe(String(https));
    expect(new URL(gateway.plainUrl ?? '').port).toBe(String(plain));
    expect(new URL(gateway.adminUrl).port).toBe(String(admin));
    expect(gateway.listening['overrides']).toEqual([
      'listeners.https.port from GATEWAY_HTTPS_PORT',
      'listeners.plainHttp.port from GATEWAY_PLAIN_HTTP_PORT',
      'listeners.admin.port from GATEWAY_ADMIN_PORT',
      'store.redis.url from GATEWAY_REDIS_URL',
    ]);
    // The store the environment named answers (the file's, port 1, never would).
    expect(metricSum((await adminGet(gateway.adminUrl, '/metrics')).body, 'gateway_store_up')).toBe(1);
    await gateway.kill();
  }, 120_000);

  it('is the same in production: --check-config applies them before the production guards', async () => {
    const { file } = await written({ ...(await productionSafeOverrides()), listeners: LISTENERS });
    const check = await gatewayCli(['--check-config', file], { env: { GATEWAY_HTTPS_PORT: '9443', GATEWAY_REDIS_URL: 'rediss://redis.internal:6380' } });
    expect(check.code, check.stderr).toBe(0);
    expect(check.stdout).toContain(`override: ${file}: listeners.https.port from GATEWAY_HTTPS_PORT\n`);
    expect(check.stdout).toContain(`override: ${file}: store.redis.url from GATEWAY_REDIS_URL\n`);
    // rediss:// now: the file's redis:// warning is gone.
    expect(check.stdout).not.toContain('store.redis.tls');
    const loaded = await load(file, { GATEWAY_HTTPS_PORT: '9443' });
    expect(loaded.config?.listeners.https.port).toBe(9443);
    // A password in the url is refused as if the file held it, and never printed.
    const refused = await gatewayCli(['--check-config', file], { env: { GATEWAY_REDIS_URL: 'rediss://:hunter2-secret@redis.internal:6380' } });
    expect(refused.code).toBe(78);
    expect(refused.stderr).toContain(`${file}: store.redis.url: carries a password`);
    expect(refused.stderr + refused.stdout).not.toContain('hunter2-secret');
  }, 60_000);

  it('refuses a value that is not one, and a setting the config does not have, as file: field: problem', async () => {
    const { file } = await written({ listeners: { https: LISTENERS.https, admin: LISTENERS.admin } });
    const result = await load(file, {
      GATEWAY_HTTPS_PORT: '65536',
      GATEWAY_ADMIN_PORT: 'eighty',
      GATEWAY_PLAIN_HTTP_PORT: '8080',
      GATEWAY_REDIS_URL: 'redis://127.0.0.1:6379',
    });
    expect(result.problems).toEqual([
      `${file}: listeners.https.port: GATEWAY_HTTPS_PORT=65536 is not a port number (0 to 65535)`,
      `${file}: listeners.plainHttp.port: GATEWAY_PLAIN_HTTP_PORT is set, but the config has no listeners.plainHttp to set the port of`,
      `${file}: listeners.admin.port: GATEWAY_ADMIN_PORT=eighty is not a port number (0 to 65535)`,
      `${file}: store.redis.url: GATEWAY_REDIS_URL is set, but store.kind is "memory", not redis`,
    ]);
    // Just inside: 65535 and 0 are ports; an empty variable changes nothing.
    const inside = await load(file, { GATEWAY_HTTPS_PORT: '65535', GATEWAY_ADMIN_PORT: '0', GATEWAY_REDIS_URL: '' });
    expect(inside.problems).toEqual([]);
    expect(inside.config?.listeners).toMatchObject({ https: { port: 65535 }, admin: { port: 0 } });
    expect(inside.config?.overrides).toEqual(['listeners.https.port from GATEWAY_HTTPS_PORT', 'listeners.admin.port from GATEWAY_ADMIN_PORT']);
    const cluster = await written({ store: { kind: 'redis', redis: { cluster: { nodes: ['127.0.0.1:7000'] }, keyPrefix: 'x:' } } });
    expect((await load(cluster.file, { GATEWAY_REDIS_URL: 'redis://127.0.0.1:6379' })).problems).toEqual([
      `${cluster.file}: store.redis.url: GATEWAY_REDIS_URL is set, but store.redis uses cluster: its nodes are in the config, not in a url`,
    ]);
  });
});
