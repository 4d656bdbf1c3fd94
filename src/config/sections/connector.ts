import { checkCaExpiry, loadCertifiedKey, parseCertificates } from '../certificates.js';
import { ConfigFileSchema } from '../config-schema.js';
import type { ConnectorSettings } from '../config-types.js';
import type { SectionContext } from '../load-context.js';
import { accept, child, isRecord, members, present } from '../schema-parts.js';

const CONNECTOR = ConfigFileSchema.properties.connector;

/**
 * `connector`: the processor-connector's URL and pool, its CA, the client certificate for mutual
 * TLS (parsed, matched and judged for expiry, D51) and the shared secret. Each part is checked
 * whatever its siblings hold (D52).
 */
export async function loadConnector(raw: unknown, context: SectionContext): Promise<ConnectorSettings | undefined> {
  const { problems } = context;
  const { url, startSandbox, sharedSecret: sharedSecretRef, eventsSecret: eventsSecretRef } = members(CONNECTOR, raw);
  const tlsRaw = child(raw, 'tls');
  const tlsRefs = members(CONNECTOR.properties.tls, tlsRaw);
  const ca = await context.secret('connector.tls.ca', tlsRefs.ca, 'public');
  const caBundle = ca ? await problems.capture('connector.tls.ca', () => parseCertificates(ca)) : undefined;
  if (caBundle && tlsRefs.ca) checkCaExpiry(context, 'connector.tls.ca', context.where(tlsRefs.ca), caBundle);
  const client =
    tlsRefs.cert || tlsRefs.key
      ? await loadCertifiedKey(context, { cert: 'connector.tls.cert', key: 'connector.tls.key' }, { cert: tlsRefs.cert, key: tlsRefs.key })
      : undefined;
  if (isRecord(tlsRaw) && url && !url.startsWith('https:')) problems.add('connector.tls', 'needs an https:// connector.url');
  if (isRecord(tlsRaw) && present(tlsRaw, 'cert') !== present(tlsRaw, 'key')) problems.add('connector.tls', 'cert and key go together');
  if (startSandbox && context.environment !== undefined && context.environment !== 'local')
    problems.add('connector.startSandbox', 'is only allowed when environment is local');
  // compose.ts starts the in-process sandbox without TLS: an https:// url would never reach it.
  if (startSandbox && url?.startsWith('https:'))
    problems.add('connector.url', 'the in-process sandbox connector (connector.startSandbox) listens on plain http://; use an http:// url with it');
  const sharedSecret = (await context.secret('connector.sharedSecret', sharedSecretRef, 'private'))?.toString('utf8').trim();
  const eventsSecret = (await context.secret('connector.eventsSecret', eventsSecretRef, 'private'))?.toString('utf8').trim();
  if (eventsSecret !== undefined && eventsSecret.length < 32) problems.add('connector.eventsSecret', 'is shorter than 32 characters');

  const whole = accept(CONNECTOR, raw);
  if (!whole) return undefined;
  return {
    ...whole,
    url: whole.url.replace(/\/$/, ''),
    tls: whole.tls && {
      ...(ca && { ca }),
      ...(client && { cert: client.cert, key: client.key, certificateExpiresAt: client.expiresAt }),
    },
    sharedSecret,
    eventsSecret,
  };
}
