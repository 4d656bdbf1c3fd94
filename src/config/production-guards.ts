import { ConfigFileSchema } from './config-schema.js';
import { openDoors } from './open-doors.js';
import { child, members, present } from './schema-parts.js';

const SCHEMA = ConfigFileSchema.properties;
const REDIS = SCHEMA.store.properties.redis;

/** A secret file and its permission bits, as the loader found it. */
export interface SecretFileMode {
  field: string;
  path: string;
  mode: number;
}

/** Levels that write more than `info`: request detail that production must not log (D32). */
const VERBOSE_LEVELS: ReadonlySet<string> = new Set(['debug', 'trace']);

/** One unsafe setting: production refuses it (`refuse`), or starts and warns (`warn`). */
export interface UnsafeSetting {
  field: string;
  problem: string;
  inProduction: 'refuse' | 'warn';
}

/**
 * Settings that would put card data or credentials at risk (D32, D50) or leave a door open to
 * anyone (D62, open-doors.ts), as `field: problem` pairs: the one list of them (the credentials
 * file's own, a shipped password hash, is judged where that file is read). Production refuses to start with any marked `refuse` and warns
 * about the others; sandbox and local log every one as a warning and start. `root` is the file
 * as read: each guard looks at the settings the schema accepts, whatever their siblings hold (D52).
 */
export function unsafeSettings(root: unknown, secretFiles: readonly SecretFileMode[]): UnsafeSetting[] {
  const found: UnsafeSetting[] = [];
  const refuse = (field: string, problem: string) => found.push({ field, problem, inProduction: 'refuse' });
  const store = child(root, 'store');
  const { kind } = members(SCHEMA.store, store);
  if (kind === 'memory') refuse('store.kind', 'memory keeps state in one process only; use redis');
  if (kind === 'redis' && present(store, 'redis')) found.push(...unsafeRedis(child(store, 'redis')));
  const connector = child(root, 'connector');
  const { url } = members(SCHEMA.connector, connector);
  if (url?.startsWith('http://')) {
    refuse('connector.url', 'plain http:// would send PAN and CVC in clear text; use https://');
  } else if (url) {
    const tls = child(connector, 'tls');
    const mutualTls = present(tls, 'cert') && present(tls, 'key');
    if (!mutualTls && !present(connector, 'sharedSecret')) {
      refuse('connector', 'the connector cannot authenticate the gateway: set connector.tls.cert and key (mutual TLS) or connector.sharedSecret');
    }
  }
  for (const file of secretFiles) {
    if ((file.mode & 0o077) !== 0) {
      refuse(file.field, `file ${file.path} is accessible to group or others (mode ${(file.mode & 0o777).toString(8).padStart(4, '0')}); chmod 600 it`);
    }
  }
  const { level } = members(SCHEMA.logging, child(root, 'logging'));
  if (level && VERBOSE_LEVELS.has(level)) refuse('logging.level', `${level} is below info; use info or higher`);
  found.push(...openDoors(root));
  return found;
}

/**
 * D50: Redis holds the sessions, lockouts and card records. Without a password anyone who reaches
 * its port reads and rewrites them; a password from the environment (or in the url) shows in
 * process listings, crash reports and `docker inspect`, where a file does not. Without TLS the
 * password and every record cross the network in clear: production warns, as the network may
 * be one the operator trusts.
 */
function unsafeRedis(raw: unknown): UnsafeSetting[] {
  const found: UnsafeSetting[] = [];
  const redis = members(REDIS, raw);
  let urlPassword = false;
  try {
    urlPassword = redis.url !== undefined && new URL(redis.url).password !== '';
  } catch {
    // the loader reports a url it cannot use
  }
  if (urlPassword) {
    found.push({
      field: 'store.redis.url',
      problem: 'carries a password; give it in a file instead (store.redis.password: { file: ... })',
      inProduction: 'refuse',
    });
  }
  if (!present(raw, 'password')) {
    found.push({
      field: 'store.redis.password',
      problem: 'Redis without a password: anyone who reaches it reads and rewrites sessions and card records; set store.redis.password: { file: ... }',
      inProduction: 'refuse',
    });
  } else if (redis.password && redis.password.file === undefined) {
    found.push({
      field: 'store.redis.password',
      problem: `is read from the environment variable ${redis.password.env ?? ''}, which process listings and crash reports show; read it from a file (store.redis.password: { file: ... })`,
      inProduction: 'refuse',
    });
  }
  const tls = present(raw, 'tls') || redis.url?.startsWith('rediss://') === true;
  if (!tls) {
    found.push({
      field: 'store.redis.tls',
      problem:
        'no TLS to Redis: its password and every session and card record cross the network in clear; use rediss:// (or store.redis.tls for Sentinel and Cluster)',
      inProduction: 'warn',
    });
  }
  return found;
}
