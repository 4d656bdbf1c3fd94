import type { ConfigFile } from './config-schema.js';

/** A secret file and its permission bits, as the loader found it. */
export interface SecretFileMode {
  field: string;
  path: string;
  mode: number;
}

/** Levels that write more than `info`: request detail that production must not log (D32). */
const VERBOSE_LEVELS: ReadonlySet<string> = new Set(['debug', 'trace']);

/**
 * Settings that would put card data or credentials at risk in production (D32), as
 * `field: problem` pairs. Production refuses to start with any of them; sandbox and local log
 * them as warnings and start.
 */
export function unsafeSettings(raw: ConfigFile, secretFiles: readonly SecretFileMode[]): { field: string; problem: string }[] {
  const found: { field: string; problem: string }[] = [];
  if (raw.store.kind === 'memory') found.push({ field: 'store.kind', problem: 'memory keeps state in one process only; use redis' });
  if (raw.connector.url.startsWith('http://')) {
    found.push({ field: 'connector.url', problem: 'plain http:// would send PAN and CVC in clear text; use https://' });
  } else {
    const mutualTls = Boolean(raw.connector.tls?.cert && raw.connector.tls.key);
    if (!mutualTls && !raw.connector.sharedSecret) {
      found.push({
        field: 'connector',
        problem: 'the connector cannot authenticate the gateway: set connector.tls.cert and key (mutual TLS) or connector.sharedSecret',
      });
    }
  }
  for (const file of secretFiles) {
    if ((file.mode & 0o077) !== 0) {
      found.push({
        field: file.field,
        problem: `file ${file.path} is accessible to group or others (mode ${(file.mode & 0o777).toString(8).padStart(4, '0')}); chmod 600 it`,
      });
    }
  }
  if (VERBOSE_LEVELS.has(raw.logging.level)) found.push({ field: 'logging.level', problem: `${raw.logging.level} is below info; use info or higher` });
  return found;
}
