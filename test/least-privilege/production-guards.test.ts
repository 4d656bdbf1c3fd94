import { chmodSync, copyFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/ports.js';
import { builtEntryPoints, killAll, spawnEntry, type BuiltEntryPoints, type RunningProcess } from '../support/process.js';
import { ConfigError } from '../../src/config/config-error.js';
import { loadConfig } from '../../src/config/load-config.js';
import { productionSafeOverrides, rawTestConfig, testKeys, writeTestConfig, type RawConfig } from '../support/gateway-fixture.js';

/**
 * Issue 9 row 8 (D32), through the real entry point: `environment: production` with the memory
 * store, an http:// connector (or an https one with neither mutual TLS nor a gateway secret),
 * secret files readable by group or others and `logging.level: debug` exits 78 listing every
 * problem as `file: field: problem`, and opens no listener. Sandbox with the same settings starts
 * and logs each finding as a warning.
 */

// The gateway's logger writes the level as its label.
const PINO_WARN = 'warn';

/** The unsafe settings of the row; secrets copied with loose modes into the config folder. */
async function unsafeSettings(dir: string, environment: 'production' | 'sandbox'): Promise<RawConfig> {
  const keys = await testKeys();
  const copy = (from: string, name: string, mode: number) => {
    const path = join(dir, name);
    copyFileSync(from, path);
    chmodSync(path, mode);
    return path;
  };
  const secretPath = join(dir, 'connector.secret');
  writeFileSync(secretPath, 'connector-shared-secret-value');
  chmodSync(secretPath, 0o644);
  return rawTestConfig({
    environment,
    listeners: { https: { host: '127.0.0.1', port: 0 }, admin: { host: '127.0.0.1', port: 0 } },
    tls: { cert: { file: keys.tlsCert }, key: { file: copy(keys.tlsKey, 'tls.key', 0o666) } },
    store: { kind: 'memory' },
    connector: { url: 'http://127.0.0.1:9', timeoutMs: 1000, sharedSecret: { file: secretPath } },
    tokens: {
      issuer: 'https://issuer.test/',
      audience: 'card-issuing-test',
      signingKey: { kid: 'k-1', privateKey: { file: copy(keys.signingKey, 'signing.key', 0o640) } },
    },
    cards: { encryptionKey: { kid: 'card-1', key: { file: copy(keys.cardKey, 'card.key', 0o604) } } },
    logging: { level: 'debug' },
  });
}

/** Every field the unsafe settings above get wrong. */
const UNSAFE_FIELDS = [
  'store.kind',
  'connector.url',
  'connector.sharedSecret',
  'tls.key',
  'tokens.signingKey.privateKey',
  'cards.encryptionKey.key',
  'logging.level',
];

describe('production refuses unsafe settings (D32)', () => {
  let entry: BuiltEntryPoints;

  beforeAll(async () => {
    entry = await builtEntryPoints();
  }, 120_000);
  afterEach(async () => {
    await killAll();
  });

  function run(file: string): RunningProcess {
    return spawnEntry(entry.mainJs, file);
  }

  /** Whichever comes first: the exit, or the "gateway listening" line. */
  async function outcome(gateway: RunningProcess): Promise<{ listening: true } | { listening: false; code: number | null }> {
    const listening = gateway
      .waitForLog((line) => line['msg'] === 'gateway listening', { timeoutMs: 20_000 })
      .then(
        () => ({ listening: true as const }),
        () => undefined,
      );
    const exited = gateway.exited.then(({ code }) => ({ listening: false as const, code }));
    const first = await Promise.race([listening, exited]);
    return first ?? (await exited);
  }

  it('exits 78 listing every unsafe setting as file: field: problem, without listening', async () => {
    const written = await writeTestConfig(await rawTestConfig());
    await written.write(await unsafeSettings(written.dir, 'production'));
    const gateway = run(written.file);
    const result = await outcome(gateway);
    expect(result, `production started with unsafe settings; stderr:\n${gateway.stderr()}`).toEqual({ listening: false, code: 78 });
    const stderr = gateway.stderr();
    for (const field of UNSAFE_FIELDS) {
      expect(stderr, `no problem listed for ${field}`).toMatch(new RegExp(`${escape(written.file)}: ${escape(field)}: \\S`));
    }
    expect(gateway.lines.filter((line) => line.includes('gateway listening'))).toEqual([]);
  }, 60_000);

  it('exits 78 for an https connector with neither mutual TLS nor a gateway secret', async () => {
    const written = await writeTestConfig(await rawTestConfig());
    await written.write(
      await rawTestConfig({
        environment: 'production',
        store: {
          kind: 'redis',
          redis: { url: `redis://127.0.0.1:${await freePort()}`, password: { file: (await testKeys()).redisPassword }, keyPrefix: 'gw-prod-test:' },
        },
        connector: { url: 'https://127.0.0.1:9', timeoutMs: 1000 },
        logging: { level: 'info' },
      }),
    );
    const gateway = run(written.file);
    const result = await outcome(gateway);
    expect(result, `production started with an unauthenticated connector; stderr:\n${gateway.stderr()}`).toEqual({ listening: false, code: 78 });
    expect(gateway.stderr()).toMatch(new RegExp(`${escape(written.file)}: connector(\\.[A-Za-z.]+)?: \\S`));
    // Only that problem: the other settings are safe.
    for (const field of [
      'store.kind',
      'store.redis.password',
      'connector.url',
      'logging.level',
      'tls.key',
      'cards.encryptionKey.key',
      'tokens.signingKey.privateKey',
    ]) {
      expect(gateway.stderr()).not.toContain(`${written.file}: ${field}: `);
    }
  }, 60_000);

  it('exits 78 for a Redis store whose password is not read from a file (D50), listed with the other problems', async () => {
    const written = await writeTestConfig(await rawTestConfig());
    const keys = await testKeys();
    await written.write(
      await rawTestConfig({
        environment: 'production',
        store: { kind: 'redis', redis: { url: `redis://127.0.0.1:${await freePort()}`, password: { env: 'REDIS_PASSWORD' }, keyPrefix: 'gw-prod-test:' } },
        connector: { url: 'https://127.0.0.1:9', timeoutMs: 1000, sharedSecret: { file: keys.connectorSecret } },
        logging: { level: 'debug' },
      }),
    );
    const gateway = spawnEntry(entry.mainJs, written.file, { env: { REDIS_PASSWORD: 'from-the-environment' } });
    const result = await outcome(gateway);
    expect(result, `production started with a Redis password from the environment; stderr:\n${gateway.stderr()}`).toEqual({ listening: false, code: 78 });
    expect(gateway.stderr()).toMatch(new RegExp(`${escape(written.file)}: store\\.redis\\.password: is read from the environment variable REDIS_PASSWORD`));
    expect(gateway.stderr()).toMatch(new RegExp(`${escape(written.file)}: logging\\.level: `));
    // No TLS to Redis is a warning, not a refusal, and the password itself is never printed.
    expect(gateway.stderr()).not.toContain('store.redis.tls');
    expect(gateway.stderr() + gateway.lines.join('\n')).not.toContain('from-the-environment');
  }, 60_000);

  it('starts a sandbox with the same settings and logs each finding as a warning', async () => {
    const written = await writeTestConfig(await rawTestConfig());
    await written.write(await unsafeSettings(written.dir, 'sandbox'));
    const gateway = run(written.file);
    const result = await outcome(gateway);
    expect(result, `sandbox did not start; stderr:\n${gateway.stderr()}`).toEqual({ listening: true });
    const warnings = gateway.lines
      .map((line) => {
        try {
          return JSON.parse(line) as Record<string, unknown>;
        } catch {
          return undefined;
        }
      })
      .filter((line): line is Record<string, unknown> => line !== undefined && line['level'] === PINO_WARN);
    const text = JSON.stringify(warnings);
    for (const field of UNSAFE_FIELDS) expect(text, `no warning names ${field}: ${text}`).toContain(field);
    gateway.child.kill('SIGTERM');
    expect((await gateway.exited).code).toBe(0);
  }, 60_000);
});

describe('D50: a Redis store must authenticate; production refuses a password not read from a file', () => {
  /** Loads a config whose store.redis is `redis` (production-shaped otherwise); the problems, or the warnings. */
  async function check(environment: 'production' | 'sandbox', redis: Record<string, unknown>, env: Record<string, string> = {}) {
    const safe = await productionSafeOverrides();
    const written = await writeTestConfig(await rawTestConfig({ ...safe, environment, store: { kind: 'redis', redis: { keyPrefix: 'test:d50:', ...redis } } }));
    try {
      const config = await loadConfig(written.file, env);
      return { file: written.file, problems: [] as string[], warnings: config.warnings };
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      return { file: written.file, problems: error.problems, warnings: [] as string[] };
    }
  }

  it('production: no password, one from the environment, or one in the url is refused, naming the field', async () => {
    const none = await check('production', { url: 'rediss://redis.test:6380' });
    expect(none.problems).toEqual([
      `${none.file}: store.redis.password: Redis without a password: anyone who reaches it reads and rewrites sessions and card records; set store.redis.password: { file: ... } (production refuses unsafe settings)`,
    ]);
    const fromEnv = await check('production', { url: 'rediss://redis.test:6380', password: { env: 'REDIS_PASSWORD' } }, { REDIS_PASSWORD: 'secret-in-env' });
    expect(fromEnv.problems).toHaveLength(1);
    expect(fromEnv.problems[0]).toMatch(new RegExp(`^${escape(fromEnv.file)}: store\\.redis\\.password: is read from the environment variable REDIS_PASSWORD`));
    const inUrl = await check('production', { url: 'rediss://:secret-in-url@redis.test:6380' });
    expect(inUrl.problems.map((line) => line.split(': ')[1])).toEqual(['store.redis.url', 'store.redis.password']);
    expect(inUrl.problems.join('\n')).not.toContain('secret-in-url');
  });

  it('production: a password from a file starts; without TLS with a warning, with TLS without one', async () => {
    const keys = await testKeys();
    const plain = await check('production', { url: 'redis://redis.test:6379', password: { file: keys.redisPassword } });
    expect(plain.problems).toEqual([]);
    expect(plain.warnings).toEqual([
      `${plain.file}: store.redis.tls: no TLS to Redis: its password and every session and card record cross the network in clear; use rediss:// (or store.redis.tls for Sentinel and Cluster)`,
    ]);
    const encrypted = await check('production', { url: 'rediss://redis.test:6380', password: { file: keys.redisPassword } });
    expect(encrypted).toMatchObject({ problems: [], warnings: [] });
    const cluster = await check('production', { cluster: { nodes: ['redis.test:6379'] }, password: { file: keys.redisPassword }, tls: {} });
    expect(cluster).toMatchObject({ problems: [], warnings: [] });
  });

  it('sandbox: warns about both, and starts', async () => {
    const result = await check('sandbox', { url: 'redis://redis.test:6379' });
    expect(result.problems).toEqual([]);
    expect(result.warnings.map((line) => line.split(': ')[1])).toEqual(['store.redis.password', 'store.redis.tls']);
  });
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}
