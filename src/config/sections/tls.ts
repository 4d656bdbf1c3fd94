import { loadCertifiedKey } from '../certificates.js';
import { ConfigFileSchema } from '../config-schema.js';
import type { TlsSettings } from '../config-types.js';
import type { SectionContext } from '../load-context.js';
import { members } from '../schema-parts.js';

/**
 * `tls`: the API listener's certificate and key, read and parsed here so that --check-config
 * refuses what the TLS listener would fail on (D40), and judged for expiry (D51). A misspelled
 * sibling setting does not stop the files being checked (D52).
 */
export async function loadTls(raw: unknown, context: SectionContext): Promise<TlsSettings | undefined> {
  const { cert, key } = members(ConfigFileSchema.properties.tls, raw);
  const pair = await loadCertifiedKey(context, { cert: 'tls.cert', key: 'tls.key' }, { cert, key });
  return pair && { cert: pair.cert, key: pair.key, certificateExpiresAt: pair.expiresAt };
}
