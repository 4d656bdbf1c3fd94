import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import selfsigned from 'selfsigned';
import { stringify } from 'yaml';
import { buildGateway, type Gateway, type GatewayDependencies } from '../../src/app.js';
import { hashPassword } from '../../src/foundation/password-hash.js';
import { ManualClock } from '../../src/foundation/clock.js';
import { loadConfig, type GatewayConfig } from '../../src/config/load-config.js';
import { MemoryAuditSink } from '../../src/observability/audit.js';
import { createLogger } from '../../src/observability/logger.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import type { GatewayStore } from '../../src/store/store-types.js';

/**
 * Builds real gateways for tests: a real config file written to a temp folder and loaded by
 * the real loader, real keys and certificates, a manual clock, and captured logs and audit.
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

export interface TestKeys {
  dir: string;
  tlsCert: string;
  tlsKey: string;
  signingKey: string;
  otherSigningKey: string;
  /** Public half of otherSigningKey, for rotation tests. */
  otherPublicKey: string;
  cardKey: string;
  /** A connector shared secret (mode 0600), for production-shaped configs. */
  connectorSecret: string;
  /** A Redis password (mode 0600), for production-shaped configs (D50). */
  redisPassword: string;
}

let keysPromise: Promise<TestKeys> | undefined;
const hashCache = new Map<string, Promise<string>>();

/** Keys and a certificate generated once per test worker. */
export function testKeys(): Promise<TestKeys> {
  keysPromise ??= (async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-keys-'));
    const pems = await selfsigned.generate([{ name: 'commonName', value: 'localhost' }], {
      keyType: 'ec',
      curve: 'P-256',
      algorithm: 'sha256',
      extensions: [
        {
          name: 'subjectAltName',
          altNames: [
            { type: 2, value: 'localhost' },
            { type: 7, ip: '127.0.0.1' },
            { type: 7, ip: '::1' },
          ],
        },
      ],
    });
    const write = (name: string, content: string) => {
      const path = join(dir, name);
      writeFileSync(path, content, { mode: 0o600 });
      return path;
    };
    const signing = generateKeyPairSync('ed25519');
    const other = generateKeyPairSync('ed25519');
    return {
      dir,
      tlsCert: write('tls.crt', pems.cert),
      tlsKey: write('tls.key', pems.private),
      signingKey: write('signing.key', signing.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()),
      otherSigningKey: write('other-signing.key', other.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()),
      otherPublicKey: write('other-signing.pub', other.publicKey.export({ type: 'spki', format: 'pem' }).toString()),
      cardKey: write('card.key', randomBytes(32).toString('base64')),
      connectorSecret: write('connector.secret', randomBytes(24).toString('base64url')),
      redisPassword: write('redis.password', randomBytes(24).toString('base64url')),
    };
  })();
  return keysPromise;
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
    limits: { perAddress: { requestsPerSecond: 1_000_000, inFlight: 100_000, connectionsPerSecond: 100_000 } },
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
    hash = hashPassword(password);
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

export interface TestGateway {
  gateway: Gateway;
  config: GatewayConfig;
  clock: ManualClock;
  store: GatewayStore;
  audit: MemoryAuditSink;
  logs: LogCapture;
  /** inject() as a client of the TLS listener behind the trusted test proxy. */
  inject(options: InjectOptions): Promise<LightMyRequestResponse>;
  close(): Promise<void>;
}

export interface TestGatewayOptions {
  config?: GatewayConfig;
  overrides?: RawConfig;
  credentials?: TestCredential[];
  store?: GatewayStore;
  clock?: ManualClock;
  extend?: GatewayDependencies['extend'];
  /** The connector port (an in-memory one); by default the undici client for the config's connector URL. */
  connector?: GatewayDependencies['connector'];
}

export async function createTestGateway(options: TestGatewayOptions = {}): Promise<TestGateway> {
  const config = options.config ?? (await testConfig(options.overrides, options.credentials));
  const clock = options.clock ?? new ManualClock(Date.now());
  const store = options.store ?? new MemoryStore(() => clock.now());
  const audit = new MemoryAuditSink(clock);
  const logs = new LogCapture();
  const gateway = await buildGateway({
    config,
    store,
    clock,
    logger: logs.logger,
    audit,
    ...(options.extend && { extend: options.extend }),
    ...(options.connector && { connector: options.connector }),
  });
  await gateway.app.ready();
  return {
    gateway,
    config,
    clock,
    store,
    audit,
    logs,
    inject: (injectOptions) => gateway.app.inject({ ...injectOptions, headers: { 'x-forwarded-proto': 'https', ...(injectOptions.headers ?? {}) } }),
    close: async () => {
      await gateway.app.close();
      await gateway.admin.close();
      if (!options.store) await store.close();
    },
  };
}

/** Logs in through inject and returns the parsed session tokens. */
export async function login(gw: TestGateway, username = 'full', password = PASSWORD, headers: Record<string, string> = {}) {
  const response = await gw.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { username, password }, headers });
  if (response.statusCode !== 200) throw new Error(`login failed: ${response.statusCode} ${response.body}`);
  return response.json<{
    accessToken: string;
    accessTokenExpiresAt: number;
    idToken: string;
    idTokenExpiresAt: number;
    refreshToken: string;
    refreshTokenExpiresAt: number;
  }>();
}

/** Every secret-looking value a test has seen, to scan captured output for. */
export function assertNoSecrets(text: string, secrets: readonly string[]): void {
  for (const secret of secrets) {
    if (secret.length >= 6 && text.includes(secret)) throw new Error(`captured output contains a secret: ${secret.slice(0, 6)}…`);
  }
}
