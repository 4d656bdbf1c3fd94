import { createPrivateKey, createPublicKey, type KeyObject } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { Ajv } from 'ajv';
import { loadCredentials, type CredentialDirectory } from '../auth/credentials.js';
import { compileRanges, type AddressRanges } from '../edge/address-ranges.js';
import { ConfigError, describeAjvErrors } from './config-error.js';
import { readYamlFile } from './read-yaml-file.js';
import { ConfigFileSchema, type ConfigFile, type SecretRef } from './config-schema.js';

export interface VerificationKey {
  kid: string;
  key: KeyObject;
}

/** Everything the gateway needs, checked and with secrets resolved. Frozen after loading. */
export interface GatewayConfig {
  readonly file: string;
  readonly environment: ConfigFile['environment'];
  readonly listeners: ConfigFile['listeners'];
  readonly tls: { readonly cert: Buffer; readonly key: Buffer };
  readonly trustedProxies: AddressRanges;
  readonly allowlist: AddressRanges;
  readonly store:
    | { readonly kind: 'memory' }
    | { readonly kind: 'redis'; readonly url: string; readonly password: string | undefined; readonly keyPrefix: string; readonly commandTimeoutMs: number; readonly connectTimeoutMs: number };
  readonly connector: {
    readonly url: string;
    readonly timeoutMs: number;
    readonly connections: number;
    readonly tls: { readonly ca?: Buffer; readonly cert?: Buffer; readonly key?: Buffer } | undefined;
    readonly sharedSecret: string | undefined;
    readonly startSandbox: boolean;
  };
  readonly rateLimits: ConfigFile['rateLimits'];
  readonly tokens: Omit<ConfigFile['tokens'], 'signingKey' | 'verificationKeys'> & {
    readonly signingKey: { readonly kid: string; readonly key: KeyObject };
    /** The signing key's public half first, then the listed (older or upcoming) keys. */
    readonly verificationKeys: readonly VerificationKey[];
  };
  readonly credentialsFile: string;
  readonly credentials: CredentialDirectory;
  /** Issuing account -> enabled ISO 4217 currencies. */
  readonly issuingAccounts: ReadonlyMap<string, ReadonlySet<string>>;
  readonly cards: { readonly encryptionKey: Buffer; readonly idempotencyTtlSeconds: number; readonly bodyLimitBytes: number };
  readonly audit: { readonly file: string; readonly fsync: boolean };
  readonly logging: { readonly level: string };
}

// verbose: describeAjvErrors reads a schema's `description` to word some problems (SecretRef).
const validateFile = new Ajv({ allErrors: true, useDefaults: true, strict: false, verbose: true }).compile<ConfigFile>(ConfigFileSchema);

class Problems {
  readonly list: string[] = [];
  constructor(readonly file: string) {}
  add(field: string, problem: string): void {
    this.list.push(`${this.file}: ${field}: ${problem}`);
  }
  /** Runs `work`, turning a thrown error into a problem on `field`. */
  async capture<T>(field: string, work: () => T | Promise<T>): Promise<T | undefined> {
    try {
      return await work();
    } catch (error) {
      if (error instanceof ConfigError) this.list.push(...error.problems);
      else this.add(field, (error as Error).message);
      return undefined;
    }
  }
}

export type Environment = Readonly<Record<string, string | undefined>>;

async function readSecret(ref: SecretRef, baseDir: string, env: Environment): Promise<Buffer> {
  if (ref.env !== undefined) {
    const value = env[ref.env];
    if (value === undefined || value === '') throw new Error(`environment variable ${ref.env} is not set`);
    return Buffer.from(value, 'utf8');
  }
  const path = resolve(baseDir, ref.file ?? '');
  try {
    return await readFile(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new Error(code === 'ENOENT' ? `file ${path} not found` : `file ${path} cannot be read (${code ?? 'error'})`);
  }
}

function decodeEncryptionKey(raw: Buffer): Buffer {
  const text = raw.toString('utf8').trim();
  const key = /^[0-9a-fA-F]{64}$/.test(text) ? Buffer.from(text, 'hex') : Buffer.from(text, 'base64');
  if (key.length !== 32) throw new Error('must be 32 bytes, written as 64 hex digits or base64 (AES-256-GCM, D18)');
  return key;
}

function checkKeyType(key: KeyObject, algorithm: 'EdDSA' | 'ES256'): void {
  const ok = algorithm === 'EdDSA' ? key.asymmetricKeyType === 'ed25519' : key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1';
  if (!ok) throw new Error(`is a ${key.asymmetricKeyType ?? 'unknown'} key, but tokens.algorithm ${algorithm} needs ${algorithm === 'EdDSA' ? 'an Ed25519' : 'a P-256'} key`);
}

/** Reads, validates and resolves one environment's config file. Throws ConfigError listing every problem. */
export async function loadConfig(file: string, env: Environment = process.env): Promise<GatewayConfig> {
  const path = resolve(file);
  const baseDir = dirname(path);
  const data = await readYamlFile(path);
  if (!validateFile(data)) throw new ConfigError(describeAjvErrors(path, validateFile.errors ?? []));
  const raw = data;
  const problems = new Problems(path);
  const secret = (field: string, ref: SecretRef) => problems.capture(field, () => readSecret(ref, baseDir, env));

  const ranges = (field: string, entries: string[]) => {
    const bad: string[] = [];
    entries.forEach((entry, index) => {
      try {
        compileRanges([entry]);
      } catch (error) {
        bad.push(`${field}[${index}]: ${(error as Error).message}`);
      }
    });
    bad.forEach((line) => problems.list.push(`${path}: ${line}`));
    return bad.length === 0 ? compileRanges(entries) : undefined;
  };
  const trustedProxies = ranges('trustedProxies', raw.trustedProxies);
  const allowlist = ranges('allowlist', raw.allowlist);

  const tlsCert = await secret('tls.cert', raw.tls.cert);
  const tlsKey = await secret('tls.key', raw.tls.key);

  let store: GatewayConfig['store'] = { kind: 'memory' };
  if (raw.store.kind === 'redis') {
    if (!raw.store.redis) problems.add('store.redis', 'is required when store.kind is redis');
    else {
      const password = raw.store.redis.password ? (await secret('store.redis.password', raw.store.redis.password))?.toString('utf8').trim() : undefined;
      store = { kind: 'redis', ...raw.store.redis, password };
    }
  }

  const connectorTls = raw.connector.tls
    ? {
        ...(raw.connector.tls.ca && { ca: await secret('connector.tls.ca', raw.connector.tls.ca) }),
        ...(raw.connector.tls.cert && { cert: await secret('connector.tls.cert', raw.connector.tls.cert) }),
        ...(raw.connector.tls.key && { key: await secret('connector.tls.key', raw.connector.tls.key) }),
      }
    : undefined;
  if (raw.connector.tls && !raw.connector.url.startsWith('https:')) problems.add('connector.tls', 'needs an https:// connector.url');
  if (raw.connector.tls && Boolean(raw.connector.tls.cert) !== Boolean(raw.connector.tls.key)) problems.add('connector.tls', 'cert and key go together');
  if (raw.connector.startSandbox && raw.environment !== 'local') problems.add('connector.startSandbox', 'is only allowed when environment is local');
  const sharedSecret = raw.connector.sharedSecret ? (await secret('connector.sharedSecret', raw.connector.sharedSecret))?.toString('utf8').trim() : undefined;

  const algorithm = raw.tokens.algorithm;
  const signingPem = await secret('tokens.signingKey.privateKey', raw.tokens.signingKey.privateKey);
  const signingKey = signingPem
    ? await problems.capture('tokens.signingKey.privateKey', () => {
        let key: KeyObject;
        try {
          key = createPrivateKey(signingPem);
        } catch {
          throw new Error('is not a PEM private key');
        }
        checkKeyType(key, algorithm);
        return key;
      })
    : undefined;
  const verificationKeys: VerificationKey[] = signingKey ? [{ kid: raw.tokens.signingKey.kid, key: createPublicKey(signingKey) }] : [];
  for (const [index, entry] of raw.tokens.verificationKeys.entries()) {
    const field = `tokens.verificationKeys[${index}]`;
    if (verificationKeys.some((known) => known.kid === entry.kid)) {
      problems.add(`${field}.kid`, `duplicate kid "${entry.kid}"`);
      continue;
    }
    const pem = await secret(`${field}.publicKey`, entry.publicKey);
    if (!pem) continue;
    const key = await problems.capture(`${field}.publicKey`, () => {
      let parsed: KeyObject;
      try {
        parsed = createPublicKey(pem);
      } catch {
        throw new Error('is not a PEM public key');
      }
      checkKeyType(parsed, algorithm);
      return parsed;
    });
    if (key) verificationKeys.push({ kid: entry.kid, key });
  }

  const issuingAccounts = new Map<string, ReadonlySet<string>>();
  for (const [account, settings] of Object.entries(raw.issuingAccounts)) issuingAccounts.set(account, new Set(settings.currencies));

  const encryptionRaw = await secret('cards.encryptionKey', raw.cards.encryptionKey);
  const encryptionKey = encryptionRaw ? await problems.capture('cards.encryptionKey', () => decodeEncryptionKey(encryptionRaw)) : undefined;

  const credentialsFile = resolve(baseDir, raw.credentialsFile);
  const credentials = await problems.capture('credentialsFile', () => loadCredentials(credentialsFile, new Set(issuingAccounts.keys())));

  if (problems.list.length > 0 || !trustedProxies || !allowlist || !tlsCert || !tlsKey || !signingKey || !encryptionKey || !credentials) {
    throw new ConfigError(problems.list.length > 0 ? problems.list : [`${path}: (top level): incomplete configuration`]);
  }

  return Object.freeze({
    file: path,
    environment: raw.environment,
    listeners: raw.listeners,
    tls: { cert: tlsCert, key: tlsKey },
    trustedProxies,
    allowlist,
    store,
    connector: { url: raw.connector.url.replace(/\/$/, ''), timeoutMs: raw.connector.timeoutMs, connections: raw.connector.connections, tls: connectorTls, sharedSecret, startSandbox: raw.connector.startSandbox },
    rateLimits: raw.rateLimits,
    tokens: { ...raw.tokens, signingKey: { kid: raw.tokens.signingKey.kid, key: signingKey }, verificationKeys },
    credentialsFile,
    credentials,
    issuingAccounts,
    cards: { encryptionKey, idempotencyTtlSeconds: raw.cards.idempotencyTtlSeconds, bodyLimitBytes: raw.cards.bodyLimitBytes },
    audit: { file: resolve(baseDir, raw.audit.file), fsync: raw.audit.fsync },
    logging: { level: raw.logging.level },
  });
}
