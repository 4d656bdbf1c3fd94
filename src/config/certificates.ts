import { X509Certificate } from 'node:crypto';
import type { SecretRef } from './config-schema.js';
import { parsePrivateKey } from './keys.js';
import { refuseInProduction, type SectionContext } from './load-context.js';

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;

/** D51: a certificate this close to its end is a warning at load and reload. */
export const EXPIRY_WARNING_DAYS = 14;
const DAY_MS = 86_400_000;
const RUNBOOK = 'docs/runbooks/rotate-tls-certificate.md';

/** The certificates of a PEM file (a chain, leaf first, or a CA bundle), each parsed. */
export function parseCertificates(pem: Buffer): X509Certificate[] {
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

/** `2026-11-25T12:00:00Z`: the instant a certificate ends, as an operator reads it. */
const instant = (ms: number): string => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

/**
 * D51: a certificate that has ended stops a production start and is a warning elsewhere (and at
 * a reload); one that ends within 14 days is a warning. Both name the certificate's file and its
 * end. Returns the end as Unix seconds (for the expiry metric).
 */
export function checkExpiry(context: SectionContext, field: string, source: string, leaf: X509Certificate): number {
  const notAfter = Date.parse(leaf.validTo);
  if (notAfter < context.now) {
    const problem = `certificate ${source} expired on ${instant(notAfter)}; renew it (${RUNBOOK})`;
    if (context.refuseExpired) refuseInProduction(context, field, problem, 'production refuses an expired certificate');
    else context.problems.warn(field, problem);
  } else if (notAfter - context.now <= EXPIRY_WARNING_DAYS * DAY_MS) {
    context.problems.warn(field, `certificate ${source} expires on ${instant(notAfter)}, within ${EXPIRY_WARNING_DAYS} days; renew it (${RUNBOOK})`);
  }
  return Math.floor(notAfter / 1000);
}

/**
 * D51 for a CA file (the connector's, Redis'): each certificate of the bundle that has ended or
 * ends within 14 days is a warning naming the file, its place in the bundle and its end. Only a
 * bundle whose certificates have all ended stops a production start: then no peer can verify,
 * while an ended certificate beside a valid one is the normal overlap of a CA rotation.
 */
export function checkCaExpiry(context: SectionContext, field: string, source: string, bundle: readonly X509Certificate[]): void {
  const ends = bundle.map((certificate) => Date.parse(certificate.validTo));
  const allEnded = ends.every((end) => end < context.now);
  ends.forEach((end, index) => {
    const which = bundle.length > 1 ? `CA certificate ${index + 1} of ${source}` : `CA certificate ${source}`;
    if (end < context.now) {
      const problem = `${which} expired on ${instant(end)}; renew it (${RUNBOOK})`;
      if (allEnded && context.refuseExpired) refuseInProduction(context, field, problem, 'production refuses a CA file whose certificates have all expired');
      else context.problems.warn(field, problem);
    } else if (end - context.now <= EXPIRY_WARNING_DAYS * DAY_MS) {
      context.problems.warn(field, `${which} expires on ${instant(end)}, within ${EXPIRY_WARNING_DAYS} days; renew it (${RUNBOOK})`);
    }
  });
}

export interface CertifiedKey {
  cert: Buffer;
  key: Buffer;
  /** The leaf certificate's notAfter, Unix seconds. */
  expiresAt: number;
}

/**
 * A certificate (chain) and its private key, from their references (either may be absent; the
 * caller says whether that is allowed): both read and parsed, the key the leaf certificate's,
 * the leaf's expiry judged (D51). The pair when all of that holds.
 */
export async function loadCertifiedKey(
  context: SectionContext,
  fields: { cert: string; key: string },
  refs: { cert?: SecretRef | undefined; key?: SecretRef | undefined },
): Promise<CertifiedKey | undefined> {
  const { problems } = context;
  const cert = await context.secret(fields.cert, refs.cert, 'public');
  const key = await context.secret(fields.key, refs.key, 'private');
  const chain = cert ? await problems.capture(fields.cert, () => parseCertificates(cert)) : undefined;
  const privateKey = key ? await problems.capture(fields.key, () => parsePrivateKey(key)) : undefined;
  const leaf = chain?.[0];
  const expiresAt = leaf && refs.cert ? checkExpiry(context, fields.cert, context.where(refs.cert), leaf) : undefined;
  if (!leaf || !privateKey || !cert || !key || expiresAt === undefined) return undefined;
  const matches = await problems.capture(fields.key, () => leaf.checkPrivateKey(privateKey));
  if (matches === false) problems.add(fields.key, `does not match the certificate in ${fields.cert}`);
  return matches ? { cert, key, expiresAt } : undefined;
}
