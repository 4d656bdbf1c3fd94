import { createHash, createPrivateKey, createPublicKey, X509Certificate, type Hash, type KeyObject } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { Ajv } from 'ajv';
import { loadCredentials, type CredentialDirectory } from './credentials-file.js';
import { compileRanges, type AddressRanges } from '../foundation/address-ranges.js';
import { parseNode, type HostPort, type RedisStoreConfig, type RedisTarget } from './store-config.js';
import { ConfigError, describeAjvErrors } from './config-error.js';
import { readYamlFile } from './read-yaml-file.js';
import { deepFreeze, readonlyMap, readonlySet, type DeepReadonly } from '../foundation/deep-freeze.js';
import { ConfigFileSchema, type ConfigFile, type SecretRef } from './config-schema.js';
import { unsafeSettings, type SecretFileMode } from './production-guards.js';
import { RELOADABLE_SECTIONS } from './live-settings.js';

export interface VerificationKey {
  kid: string;
  key: KeyObject;
}

/** A card-record key (D37): the id sealed records carry, and 32 bytes for AES-256-GCM. */
export interface CardRecordKey {
  readonly kid: string;
  readonly key: Buffer;
}

/**
 * Everything the gateway needs, checked and with secrets resolved: the file's own sections as
 * the schema types them, except where a secret reference became its value or a list became a
 * compiled matcher. Deep-frozen after loading.
 */
export type GatewayConfig = DeepReadonly<{
  file: string;
  environment: ConfigFile['environment'];
  listeners: ConfigFile['listeners'];
  /** `certificateExpiresAt`: the leaf certificate's notAfter, Unix seconds (parsed once, here). */
  tls: { cert: Buffer; key: Buffer; certificateExpiresAt: number };
  edge: ConfigFile['edge'];
  trustedProxies: AddressRanges;
  allowlist: AddressRanges;
  store: { kind: 'memory' } | RedisStoreConfig;
  connector: Omit<ConfigFile['connector'], 'tls' | 'sharedSecret'> & {
    tls: { ca?: Buffer; cert?: Buffer; key?: Buffer } | undefined;
    sharedSecret: string | undefined;
  };
  rateLimits: ConfigFile['rateLimits'];
  passwordHashing: Required<ConfigFile['passwordHashing']>;
  tokens: Omit<ConfigFile['tokens'], 'signingKey' | 'verificationKeys'> & {
    signingKey: { kid: string; key: KeyObject };
    /** The signing key's public half first, then the listed (older or upcoming) keys. */
    verificationKeys: VerificationKey[];
  };
  credentialsFile: string;
  credentials: CredentialDirectory;
  /** Issuing account -> enabled ISO 4217 currencies. */
  issuingAccounts: ReadonlyMap<string, ReadonlySet<string>>;
  cards: Omit<ConfigFile['cards'], 'encryptionKey' | 'previousEncryptionKeys'> & { encryptionKey: CardRecordKey; previousEncryptionKeys: CardRecordKey[] };
  audit: ConfigFile['audit'];
  logging: ConfigFile['logging'];
  shutdown: ConfigFile['shutdown'];
  /** Unsafe settings tolerated outside production (D32): logged as warnings at start. */
  warnings: string[];
  /** A digest per section that only a restart applies; a reload names the ones that changed. */
  restartOnly: Record<string, string>;
}>;

/** libuv's thread pool size: scrypt runs there, so more concurrent hashes than this only queue. */
const threadPoolSize = (): number => {
  const configured = Number(process.env['UV_THREADPOOL_SIZE']);
  return Number.isInteger(configured) && configured > 0 ? configured : 4;
};

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

async function readSecret(ref: SecretRef, baseDir: string, env: Environment, onFile?: (path: string, mode: number) => void): Promise<Buffer> {
  if (ref.env !== undefined) {
    const value = env[ref.env];
    if (value === undefined || value === '') throw new Error(`environment variable ${ref.env} is not set`);
    return Buffer.from(value, 'utf8');
  }
  const path = resolve(baseDir, ref.file ?? '');
  try {
    const content = await readFile(path);
    onFile?.(path, (await stat(path)).mode);
    return content;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new Error(code === 'ENOENT' ? `file ${path} not found` : `file ${path} cannot be read (${code ?? 'error'})`, { cause: error });
  }
}

function decodeEncryptionKey(raw: Buffer): Buffer {
  const text = raw.toString('utf8').trim();
  const key = /^[0-9a-fA-F]{64}$/.test(text) ? Buffer.from(text, 'hex') : Buffer.from(text, 'base64');
  if (key.length !== 32) throw new Error('must be 32 bytes, written as 64 hex digits or base64 (AES-256-GCM, D18)');
  return key;
}

function checkKeyType(key: KeyObject, algorithm: 'EdDSA' | 'ES256'): void {
  const ok =
    algorithm === 'EdDSA' ? key.asymmetricKeyType === 'ed25519' : key.asymmetricKeyType === 'ec' && key.asymmetricKeyDetails?.namedCurve === 'prime256v1';
  if (!ok)
    throw new Error(
      `is a ${key.asymmetricKeyType ?? 'unknown'} key, but tokens.algorithm ${algorithm} needs ${algorithm === 'EdDSA' ? 'an Ed25519' : 'a P-256'} key`,
    );
}

/**
 * The top-level sections a schema problem is in: their own checks are skipped, everything else
 * still runs. An unknown top-level key (a misspelled section) breaks no section: it is reported
 * and the others are checked in the same pass (D40). `*` (nothing can be checked) is left for a
 * problem with the root itself.
 */
function brokenSections(errors: readonly { instancePath: string; keyword: string; params: Record<string, unknown> }[]): Set<string> {
  const broken = new Set<string>();
  for (const error of errors) {
    if (error.instancePath === '' && error.keyword === 'additionalProperties') continue;
    const top = error.instancePath.split('/')[1] ?? (typeof error.params['missingProperty'] === 'string' ? error.params['missingProperty'] : undefined);
    broken.add(top ?? '*');
  }
  return broken;
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;

/** The certificates of a PEM file (a chain, leaf first, or a CA bundle), each parsed. */
function parseCertificates(pem: Buffer): X509Certificate[] {
  const blocks = pem.toString('utf8').match(PEM_CERTIFICATE) ?? [];
  if (blocks.length === 0) throw new Error('is not a PEM certificate');
  return blocks.map((block, index) => {
    try {
      return new X509Certificate(block);
    } catch {
      throw new Error(`certificate ${index + 1} of the file does not parse`);
    }
  });
}

function parsePrivateKey(pem: Buffer): KeyObject {
  try {
    return createPrivateKey(pem);
  } catch {
    if (/-----BEGIN ENCRYPTED PRIVATE KEY-----|Proc-Type: 4,ENCRYPTED/.test(pem.toString('utf8')))
      throw new Error('is an encrypted private key; the gateway needs it unencrypted');
    throw new Error('is not a PEM private key');
  }
}

/** The top-level section a dotted field is in: `connector.tls.key` -> `connector`. */
const sectionOf = (field: string): string => field.split(/[.[]/)[0] ?? field;

const digest = (value: unknown, secrets?: Hash): string =>
  createHash('sha256')
    .update(JSON.stringify(value ?? null))
    .update(secrets ? secrets.digest() : '')
    .digest('base64url')
    .slice(0, 16);

/**
 * Reads, validates and resolves one environment's config file. Throws ConfigError listing every
 * problem at once: schema problems, and the checks of every section the schema did accept
 * (secrets readable, keys parse, ranges, credentials, production guards), in one pass (D40).
 */
export async function loadConfig(file: string, env: Environment = process.env): Promise<GatewayConfig> {
  const path = resolve(file);
  const baseDir = dirname(path);
  const data = await readYamlFile(path);
  const schemaOk = validateFile(data);
  const schemaProblems = schemaOk ? [] : describeAjvErrors(path, validateFile.errors ?? []);
  if (data === null || typeof data !== 'object' || Array.isArray(data)) throw new ConfigError(schemaProblems);
  const broken = schemaOk ? new Set<string>() : brokenSections(validateFile.errors ?? []);
  if (broken.has('*')) throw new ConfigError(schemaProblems);
  // Sections the schema accepted are fully typed; only those are resolved further.
  const raw = data as ConfigFile;
  const usable = (...sections: (keyof ConfigFile)[]) => sections.every((section) => !broken.has(section) && raw[section] !== undefined);

  const problems = new Problems(path);
  // Files holding private keys and secrets: their permissions are checked (D32); certificates and public keys are not secret.
  const SENSITIVE = new Set([
    'tls.key',
    'store.redis.password',
    'store.redis.sentinel.password',
    'connector.tls.key',
    'connector.sharedSecret',
    'tokens.signingKey.privateKey',
  ]);
  const sensitive = (field: string) => SENSITIVE.has(field) || (field.startsWith('cards.') && field.endsWith('.key'));
  const secretFiles: SecretFileMode[] = [];
  // Per section, a hash of the bytes its secrets read: a certificate or key rotated in place
  // (same path) is a change of its section, which a reload then names as restart-only.
  const secretBytes = new Map<string, Hash>();
  const secret = async (field: string, ref: SecretRef) => {
    const bytes = await problems.capture(field, () =>
      readSecret(ref, baseDir, env, sensitive(field) ? (filePath, mode) => secretFiles.push({ field, path: filePath, mode }) : undefined),
    );
    if (bytes) {
      const section = sectionOf(field);
      const hash = secretBytes.get(section) ?? createHash('sha256');
      secretBytes.set(section, hash.update(`${field}\0${bytes.length}\0`).update(bytes));
    }
    return bytes;
  };
  /** A certificate (chain) and its private key: both parse, and the key is the leaf certificate's. */
  const certificateAndKey = async (certField: string, keyField: string, cert: Buffer | undefined, key: Buffer | undefined) => {
    const chain = cert ? await problems.capture(certField, () => parseCertificates(cert)) : undefined;
    const privateKey = key ? await problems.capture(keyField, () => parsePrivateKey(key)) : undefined;
    const leaf = chain?.[0];
    if (leaf && privateKey) {
      const matches = await problems.capture(keyField, () => leaf.checkPrivateKey(privateKey));
      if (matches === false) problems.add(keyField, `does not match the certificate in ${certField}`);
      if (!matches) return undefined;
    }
    return leaf;
  };

  const ranges = (field: string, entries: readonly string[]) => {
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
  const trustedProxies = usable('trustedProxies') ? ranges('trustedProxies', raw.trustedProxies) : undefined;
  const allowlist = usable('allowlist') ? ranges('allowlist', raw.allowlist) : undefined;

  const tlsCert = usable('tls') ? await secret('tls.cert', raw.tls.cert) : undefined;
  const tlsKey = usable('tls') ? await secret('tls.key', raw.tls.key) : undefined;
  // Parsed here, so that --check-config refuses what the TLS listener would fail on (D40).
  const tlsCertificate = await certificateAndKey('tls.cert', 'tls.key', tlsCert, tlsKey);

  let store: GatewayConfig['store'] | undefined;
  if (usable('store')) {
    store = { kind: 'memory' };
    const redis = raw.store.redis;
    if (raw.store.kind === 'redis' && !redis) problems.add('store.redis', 'is required when store.kind is redis');
    else if (raw.store.kind === 'redis' && redis) {
      // D35: one topology. Each names its nodes; the rest of the section applies to all three.
      const named = (['url', 'sentinel', 'cluster'] as const).filter((field) => redis[field] !== undefined);
      if (named.length !== 1)
        problems.add('store.redis', `needs exactly one of url, sentinel or cluster (D35); found ${named.length === 0 ? 'none' : named.join(' and ')}`);
      const nodes = (field: string, list: readonly string[]): HostPort[] =>
        list.flatMap((entry, index) => {
          const node = parseNode(entry);
          if (!node) problems.add(`${field}[${index}]`, `"${entry}" is not host:port with a port from 1 to 65535`);
          return node ? [node] : [];
        });
      // A brace in the prefix would become every key's hash tag: on a Cluster all of them in one slot.
      if (/[{}]/.test(redis.keyPrefix)) problems.add('store.redis.keyPrefix', "must not contain { or } (Redis Cluster hash tags are the store's own)");
      if (redis.tls && redis.url?.startsWith('redis://')) problems.add('store.redis.tls', 'needs a rediss:// url');
      const password = redis.password ? (await secret('store.redis.password', redis.password))?.toString('utf8').trim() : undefined;
      const sentinelPassword = redis.sentinel?.password
        ? (await secret('store.redis.sentinel.password', redis.sentinel.password))?.toString('utf8').trim()
        : undefined;
      const ca = redis.tls?.ca ? await secret('store.redis.tls.ca', redis.tls.ca) : undefined;
      if (ca) await problems.capture('store.redis.tls.ca', () => parseCertificates(ca));
      const target: RedisTarget | undefined = redis.url
        ? { topology: 'standalone', url: redis.url }
        : redis.sentinel
          ? { topology: 'sentinel', masterName: redis.sentinel.masterName, nodes: nodes('store.redis.sentinel.nodes', redis.sentinel.nodes), sentinelPassword }
          : redis.cluster
            ? { topology: 'cluster', nodes: nodes('store.redis.cluster.nodes', redis.cluster.nodes) }
            : undefined;
      if (target) {
        store = {
          kind: 'redis',
          target,
          password,
          tls: redis.tls || redis.url?.startsWith('rediss://') ? { ca, servername: redis.tls?.servername } : undefined,
          keyPrefix: redis.keyPrefix,
          commandTimeoutMs: redis.commandTimeoutMs,
          connectTimeoutMs: redis.connectTimeoutMs,
          replicasToAck: redis.replicasToAck,
        };
      }
    }
  }

  let connector: GatewayConfig['connector'] | undefined;
  if (usable('connector')) {
    const tls = raw.connector.tls
      ? {
          ...(raw.connector.tls.ca && { ca: await secret('connector.tls.ca', raw.connector.tls.ca) }),
          ...(raw.connector.tls.cert && { cert: await secret('connector.tls.cert', raw.connector.tls.cert) }),
          ...(raw.connector.tls.key && { key: await secret('connector.tls.key', raw.connector.tls.key) }),
        }
      : undefined;
    if (tls?.ca) {
      const ca = tls.ca;
      await problems.capture('connector.tls.ca', () => parseCertificates(ca));
    }
    if (tls?.cert || tls?.key) await certificateAndKey('connector.tls.cert', 'connector.tls.key', tls.cert, tls.key);
    if (raw.connector.tls && !raw.connector.url.startsWith('https:')) problems.add('connector.tls', 'needs an https:// connector.url');
    if (raw.connector.tls && Boolean(raw.connector.tls.cert) !== Boolean(raw.connector.tls.key)) problems.add('connector.tls', 'cert and key go together');
    if (raw.connector.startSandbox && raw.environment !== 'local') problems.add('connector.startSandbox', 'is only allowed when environment is local');
    // compose.ts starts the in-process sandbox without TLS: an https:// url would never reach it.
    if (raw.connector.startSandbox && raw.connector.url.startsWith('https:'))
      problems.add('connector.url', 'the in-process sandbox connector (connector.startSandbox) listens on plain http://; use an http:// url with it');
    const sharedSecret = raw.connector.sharedSecret ? (await secret('connector.sharedSecret', raw.connector.sharedSecret))?.toString('utf8').trim() : undefined;
    connector = {
      ...raw.connector,
      url: raw.connector.url.replace(/\/$/, ''),
      tls: tls as { ca?: Buffer; cert?: Buffer; key?: Buffer } | undefined,
      sharedSecret,
    };
  }

  let tokens: GatewayConfig['tokens'] | undefined;
  if (usable('tokens')) {
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
      if (entry.kid === raw.tokens.signingKey.kid || verificationKeys.some((known) => known.kid === entry.kid)) {
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
    if (signingKey) tokens = { ...raw.tokens, signingKey: { kid: raw.tokens.signingKey.kid, key: signingKey }, verificationKeys };
  }

  const issuingAccounts = usable('issuingAccounts')
    ? readonlyMap(Object.entries(raw.issuingAccounts).map(([account, settings]) => [account, readonlySet(settings.currencies)] as const))
    : undefined;

  let cards: GatewayConfig['cards'] | undefined;
  if (usable('cards')) {
    const cardKey = async (field: string, entry: { kid: string; key: SecretRef }): Promise<CardRecordKey | undefined> => {
      const bytes = await secret(`${field}.key`, entry.key);
      const key = bytes ? await problems.capture(`${field}.key`, () => decodeEncryptionKey(bytes)) : undefined;
      return key ? { kid: entry.kid, key } : undefined;
    };
    const encryptionKey = await cardKey('cards.encryptionKey', raw.cards.encryptionKey);
    const previousEncryptionKeys: CardRecordKey[] = [];
    for (const [index, entry] of raw.cards.previousEncryptionKeys.entries()) {
      const field = `cards.previousEncryptionKeys[${index}]`;
      if (entry.kid === raw.cards.encryptionKey.kid || raw.cards.previousEncryptionKeys.findIndex((other) => other.kid === entry.kid) !== index) {
        problems.add(`${field}.kid`, `duplicate kid "${entry.kid}"`);
        continue;
      }
      const previous = await cardKey(field, entry);
      if (previous) previousEncryptionKeys.push(previous);
    }
    if (encryptionKey) cards = { ...raw.cards, encryptionKey, previousEncryptionKeys };
  }

  const credentialsFile = usable('credentialsFile') ? resolve(baseDir, raw.credentialsFile) : undefined;
  const credentials =
    credentialsFile && issuingAccounts
      ? await problems.capture('credentialsFile', () => loadCredentials(credentialsFile, new Set(issuingAccounts.keys())))
      : undefined;

  const warnings: string[] = [];
  if (usable('environment', 'store', 'connector', 'logging')) {
    for (const { field, problem, inProduction } of unsafeSettings(raw, secretFiles)) {
      if (raw.environment === 'production' && inProduction === 'refuse') problems.add(field, `${problem} (production refuses unsafe settings)`);
      else warnings.push(`${path}: ${field}: ${problem}`);
    }
  }

  const all = [...schemaProblems, ...problems.list];
  if (
    all.length > 0 ||
    !trustedProxies ||
    !allowlist ||
    !tlsCert ||
    !tlsKey ||
    !tlsCertificate ||
    !store ||
    !connector ||
    !tokens ||
    !issuingAccounts ||
    !cards ||
    !credentialsFile ||
    !credentials
  ) {
    throw new ConfigError(all.length > 0 ? all : [`${path}: (top level): incomplete configuration`]);
  }

  const maxConcurrent = raw.passwordHashing.maxConcurrent ?? threadPoolSize();
  // Every section the schema knows that a reload does not apply: its settings, and for the
  // sections with secrets the bytes those secrets read.
  const restartOnly = Object.fromEntries(
    (Object.keys(ConfigFileSchema.properties) as (keyof ConfigFile)[])
      .filter((section) => !RELOADABLE_SECTIONS.has(section))
      .map((section) => [section, digest(raw[section], secretBytes.get(section))]),
  );
  return deepFreeze({
    file: path,
    environment: raw.environment,
    listeners: raw.listeners,
    tls: { cert: tlsCert, key: tlsKey, certificateExpiresAt: Math.floor(Date.parse(tlsCertificate.validTo) / 1000) },
    edge: raw.edge,
    trustedProxies,
    allowlist,
    store,
    connector,
    rateLimits: raw.rateLimits,
    passwordHashing: { maxConcurrent, maxConcurrentPerAddress: raw.passwordHashing.maxConcurrentPerAddress ?? Math.max(1, Math.floor(maxConcurrent / 2)) },
    tokens,
    credentialsFile,
    credentials,
    issuingAccounts,
    cards,
    audit: { ...raw.audit, file: resolve(baseDir, raw.audit.file) },
    logging: raw.logging,
    shutdown: raw.shutdown,
    warnings,
    restartOnly,
  });
}

/** Sections whose change a reload cannot apply: they take effect at the next restart. */
export function restartNeeded(running: GatewayConfig, next: GatewayConfig): string[] {
  const sections = new Set([...Object.keys(running.restartOnly), ...Object.keys(next.restartOnly)]);
  return [...sections].filter((section) => running.restartOnly[section] !== next.restartOnly[section]).sort();
}
