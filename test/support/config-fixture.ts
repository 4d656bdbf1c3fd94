import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { inject } from 'vitest';
import { stringify } from 'yaml';
import { hashPassword } from '../../src/foundation/password-hash.js';
import { loadConfig, type GatewayConfig } from '../../src/config/load-config.js';
import { createLogger } from '../../src/observability/logger.js';
import type { TestKeys } from './test-keys.js';

export type { TestKeys } from './test-keys.js';

/**
 * Configs for tests, without Fastify: a real config file written to a temp folder and loaded by
 * the real loader, the run's keys and certificate (made once, in global setup), credentials and
 * captured logs. test/core builds services from these alone; gateway-fixture.ts adds the app.
 */

export interface TestCredential {
  id: string;
  username: string;
  password: string;
  issuingAccount: string;
  permissions: string[];
  addressRanges?: string[];
  active?: boolean;
}

export const PASSWORD = 'correct horse battery staple';

export const DEFAULT_CREDENTIALS: TestCredential[] = [
  { id: 'cred-full', username: 'full', password: PASSWORD, issuingAccount: 'acct-eu', permissions: ['cards:create', 'cards:reveal'] },
  { id: 'cred-create', username: 'create-only', password: PASSWORD, issuingAccount: 'acct-eu', permissions: ['cards:create'] },
  { id: 'cred-none', username: 'no-perms', password: PASSWORD, issuingAccount: 'acct-eu', permissions: [] },
  { id: 'cred-uk', username: 'uk', password: PASSWORD, issuingAccount: 'acct-uk', permissions: ['cards:create', 'cards:reveal'] },
  { id: 'cred-ranged', username: 'ranged', password: PASSWORD, issuingAccount: 'acct-eu', permissions: ['cards:create'], addressRanges: ['10.9.0.0/16'] },
  { id: 'cred-off', username: 'inactive', password: PASSWORD, issuingAccount: 'acct-eu', permissions: ['cards:create'], active: false },
];

const hashCache = new Map<string, Promise<string>>();

/**
 * The test credentials' scrypt cost: the least the config accepts. Tests check which hash runs,
 * against what and how often, never its cost; at the default cost (N = 2^14) each of the suite's
 * thousand-odd logins took about 60 ms of a core. Unknown usernames still meet the real dummy
 * hash at the default cost.
 */
export const TEST_SCRYPT = { N: 1024, r: 8, p: 1 } as const;

/** Keys and a certificate made once per run by global-setup.ts, shared by every test file. */
export function testKeys(): Promise<TestKeys> {
  return Promise.resolve(inject('testKeys'));
}

/** The PEM of the test CA/cert, for `fetch`/https clients that must trust the gateway. */
export async function testCertificatePem(): Promise<string> {
  const { readFileSync } = await import('node:fs');
  return readFileSync((await testKeys()).tlsCert, 'utf8');
}

export type RawConfig = Record<string, unknown>;

/** A raw (file-shaped) config; `overrides` are merged one level deep per top-level key. */
export async function rawTestConfig(overrides: RawConfig = {}): Promise<RawConfig> {
  const keys = await testKeys();
  const base: RawConfig = {
    environment: 'sandbox',
    listeners: { https: { host: '127.0.0.1', port: 0 }, admin: { host: '127.0.0.1', port: 0 } },
    tls: { cert: { file: keys.tlsCert }, key: { file: keys.tlsKey } },
    // inject() comes from 127.0.0.1 over no TLS: tests speak "https" through a trusted proxy header.
    trustedProxies: ['127.0.0.1/32'],
    allowlist: ['127.0.0.0/8', '::1/128', '10.0.0.0/8', '2001:db8::/32'],
    store: { kind: 'memory' },
    connector: { url: 'http://127.0.0.1:9', timeoutMs: 1000 },
    tokens: {
      issuer: 'https://sandbox.test/',
      audience: 'card-issuing-sandbox',
      signingKey: { kid: 'sbx-1', privateKey: { file: keys.signingKey } },
    },
    credentialsFile: 'credentials.yaml',
    issuingAccounts: { 'acct-eu': { currencies: ['EUR', 'USD'] }, 'acct-uk': { currencies: ['GBP'] } },
    cards: { encryptionKey: { kid: 'card-1', key: { file: keys.cardKey } } },
    audit: { file: 'audit.jsonl' },
    logging: { level: 'info' },
    // Tests send hundreds of requests from 127.0.0.1 within one second of a clock that stands
    // still: the per-address budgets (D53) are out of their way unless a test sets them.
    limits: { perAddress: { requestsPerSecond: 1_000_000, inFlight: 100_000, connectionsPerSecond: 100_000, connections: 100_000 } },
    // A test may open a connection and send on it only after other work on a busy machine: the
    // first-request deadline (D59) is as long as the headers deadline, unless a test sets it.
    edge: { firstRequestTimeoutMs: 10_000 },
  };
  for (const [key, value] of Object.entries(overrides)) {
    const current = base[key];
    base[key] =
      value && typeof value === 'object' && !Array.isArray(value) && current && typeof current === 'object' && !Array.isArray(current)
        ? { ...(current as RawConfig), ...(value as RawConfig) }
        : value;
  }
  return base;
}

/**
 * What `environment: production` insists on (D32, D50): a Redis store with its password from a
 * file, and a connector reached over https that can authenticate the gateway. Tests that inject their own store and never reach
 * the connector merge these into a production config.
 */
export async function productionSafeOverrides(): Promise<RawConfig> {
  const keys = await testKeys();
  return {
    environment: 'production',
    store: { kind: 'redis', redis: { url: 'redis://127.0.0.1:6379', password: { file: keys.redisPassword }, keyPrefix: 'test:production-shaped:' } },
    connector: { url: 'https://127.0.0.1:9', timeoutMs: 1000, sharedSecret: { file: keys.connectorSecret } },
  };
}

function hashFor(password: string): Promise<string> {
  let hash = hashCache.get(password);
  if (!hash) {
    hash = hashPassword(password, TEST_SCRYPT);
    hashCache.set(password, hash);
  }
  return hash;
}

export async function credentialsYaml(credentials: TestCredential[]): Promise<string> {
  const entries = await Promise.all(
    credentials.map(async (c) => ({
      id: c.id,
      username: c.username,
      passwordHash: await hashFor(c.password),
      issuingAccount: c.issuingAccount,
      permissions: c.permissions,
      addressRanges: c.addressRanges ?? [],
      active: c.active ?? true,
    })),
  );
  return stringify({ credentials: entries });
}

export interface WrittenConfig {
  dir: string;
  file: string;
  credentialsFile: string;
  /** Rewrites the files (for reload tests). */
  write(raw: RawConfig, credentials?: TestCredential[]): Promise<void>;
}

/** Writes config + credentials files into a fresh temp folder. */
export async function writeTestConfig(raw: RawConfig, credentials: TestCredential[] = DEFAULT_CREDENTIALS): Promise<WrittenConfig> {
  const dir = mkdtempSync(join(tmpdir(), 'gw-config-'));
  const file = join(dir, 'gateway.yaml');
  const credentialsFile = join(dir, 'credentials.yaml');
  const write = async (nextRaw: RawConfig, nextCredentials: TestCredential[] = credentials) => {
    writeFileSync(file, stringify(nextRaw));
    writeFileSync(credentialsFile, await credentialsYaml(nextCredentials));
  };
  await write(raw, credentials);
  return { dir, file, credentialsFile, write };
}

export async function testConfig(overrides: RawConfig = {}, credentials: TestCredential[] = DEFAULT_CREDENTIALS): Promise<GatewayConfig> {
  const written = await writeTestConfig(await rawTestConfig(overrides), credentials);
  return loadConfig(written.file, {});
}

/** Captures every log line written by a logger made with the production options (redaction). */
export class LogCapture {
  readonly lines: string[] = [];
  readonly stream = new Writable({
    write: (chunk: Buffer, _encoding, callback) => {
      this.lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      callback();
    },
  });
  readonly logger = createLogger('trace', this.stream);
  text(): string {
    return this.lines.join('\n');
  }
}
