import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { access, mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, isAbsolute, relative, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import selfsigned from 'selfsigned';
import { child } from './schema-parts.js';

/**
 * Where a local config's generated secrets go: the files its own references name, resolved from
 * the config file's folder like every other reference. Only `{ file: ... }` references are
 * generated; one read from the environment is the operator's.
 */
export interface LocalSecretPaths {
  tlsCert?: string;
  tlsKey?: string;
  signingKey?: string;
  cardRecordKey?: string;
  /** The audit file: its folder is made, the file is the audit trail's own. */
  auditFile?: string;
  /** `connector.eventsSecret` (D64) and every webhook endpoint's secrets (D65): random values. */
  connectorEventsSecret?: string;
  webhookSecrets?: string[];
}

/** The `{ file }` reference at `path` of the parsed config, resolved from `baseDir`. */
function fileAt(root: unknown, path: readonly string[], baseDir: string): string | undefined {
  const value = path.reduce<unknown>((node, key) => child(node, key), root);
  return typeof value === 'string' && value !== '' ? resolve(baseDir, value) : undefined;
}

/**
 * The secrets an `environment: local` config names, or undefined for any other environment (and
 * for a file that cannot be read: the loader reports that, with the file, field and reason).
 */
export async function localSecretPaths(configFile: string): Promise<LocalSecretPaths | undefined> {
  let root: unknown;
  try {
    root = parseYaml(await readFile(configFile, 'utf8'));
  } catch {
    return undefined;
  }
  if (child(root, 'environment') !== 'local') return undefined;
  const baseDir = dirname(configFile);
  const paths: LocalSecretPaths = {};
  const set = (key: Exclude<keyof LocalSecretPaths, 'webhookSecrets'>, path: readonly string[]) => {
    const file = fileAt(root, path, baseDir);
    if (file !== undefined) paths[key] = file;
  };
  set('tlsCert', ['tls', 'cert', 'file']);
  set('tlsKey', ['tls', 'key', 'file']);
  set('signingKey', ['tokens', 'signingKey', 'privateKey', 'file']);
  set('cardRecordKey', ['cards', 'encryptionKey', 'key', 'file']);
  set('auditFile', ['audit', 'file']);
  set('connectorEventsSecret', ['connector', 'eventsSecret', 'file']);
  const endpoints = child(child(root, 'events'), 'endpoints');
  const webhookSecrets = (Array.isArray(endpoints) ? endpoints : [])
    .flatMap((endpoint) => {
      const secrets = child(endpoint, 'secrets');
      return Array.isArray(secrets) ? secrets.map((secret) => fileAt(secret, ['file'], baseDir)) : [];
    })
    .filter((file): file is string => file !== undefined);
  if (webhookSecrets.length > 0) paths.webhookSecrets = webhookSecrets;
  return paths;
}

const missing = async (path: string): Promise<boolean> => {
  try {
    await access(path);
    return false;
  } catch {
    return true;
  }
};

/** Writes a secret file (0600) into a folder made for it (0700) if it does not exist yet. */
async function writeSecret(path: string, content: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  await writeFile(path, content, { mode: 0o600 });
}

/**
 * A local config needs a TLS certificate, a signing key and a card-record key that must never be
 * committed. The ones its references name that do not exist yet are generated there, once, and
 * reused afterwards, so tokens and idempotency records survive a restart. The shipped local
 * config names them in `.local/` beside itself (git-ignored); a copy of it elsewhere gets its own
 * `.local/` beside the copy. Returns the files written.
 */
export async function ensureLocalSecrets(paths: LocalSecretPaths): Promise<string[]> {
  const created: string[] = [];
  if (paths.auditFile !== undefined) await mkdir(dirname(paths.auditFile), { recursive: true, mode: 0o700 });
  // Both halves are checked (no short-circuit): a lone missing half regenerates the pair.
  if (paths.tlsCert !== undefined && paths.tlsKey !== undefined && ((await missing(paths.tlsCert)) || (await missing(paths.tlsKey)))) {
    const pems = await selfsigned.generate([{ name: 'commonName', value: 'localhost' }], {
      keyType: 'ec',
      curve: 'P-256',
      algorithm: 'sha256',
      notAfterDate: new Date(Date.now() + 365 * 24 * 3600 * 1000),
      extensions: [
        { name: 'basicConstraints', cA: false },
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
    await writeSecret(paths.tlsCert, pems.cert);
    await writeSecret(paths.tlsKey, pems.private);
    created.push(paths.tlsCert, paths.tlsKey);
  }
  if (paths.signingKey !== undefined && (await missing(paths.signingKey))) {
    const { privateKey } = generateKeyPairSync('ed25519');
    await writeSecret(paths.signingKey, privateKey.export({ type: 'pkcs8', format: 'pem' }).toString());
    created.push(paths.signingKey);
  }
  if (paths.cardRecordKey !== undefined && (await missing(paths.cardRecordKey))) {
    await writeSecret(paths.cardRecordKey, randomBytes(32).toString('base64'));
    created.push(paths.cardRecordKey);
  }
  if (paths.connectorEventsSecret !== undefined && (await missing(paths.connectorEventsSecret))) {
    await writeSecret(paths.connectorEventsSecret, randomBytes(32).toString('base64url'));
    created.push(paths.connectorEventsSecret);
  }
  for (const file of paths.webhookSecrets ?? []) {
    if (!(await missing(file))) continue;
    // Standard Webhooks' form: `whsec_` and the key in base64 (32 random bytes).
    await writeSecret(file, `whsec_${randomBytes(32).toString('base64')}`);
    created.push(file);
  }
  return created;
}

/**
 * For a local config only: generates what it names that is missing, and says so on stderr
 * (paths relative to the working folder). Start and `--check-config` both run this first, so a
 * fresh local config checks valid. Never anything for sandbox or production.
 */
export async function prepareLocalSecrets(configFile: string, say: (line: string) => void): Promise<void> {
  const paths = await localSecretPaths(configFile);
  if (paths === undefined) return;
  const created = await ensureLocalSecrets(paths);
  const shown = (path: string): string => {
    const from = relative(process.cwd(), path);
    return from.startsWith('..') || isAbsolute(from) ? path : from;
  };
  if (created.length > 0) say(`local config: generated ${created.map(shown).join(', ')} (keep them out of version control)`);
}
