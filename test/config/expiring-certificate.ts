import { X509Certificate } from 'node:crypto';
import selfsigned from 'selfsigned';

const DAY = 86_400_000;

/** A self-signed certificate for localhost and 127.0.0.1, as PEM, and its end as it carries it. */
export interface ExpiringCertificate {
  cert: string;
  key: string;
  /** notAfter, Unix milliseconds (whole seconds, as the certificate stores it). */
  end: number;
  /** notAfter as the gateway writes it: `2026-11-25T12:00:00Z`. */
  endText: string;
}

/** A certificate valid from 30 days before `notAfter` until then (D51 tests: in 3 days, yesterday). */
export async function certificateUntil(notAfter: number): Promise<ExpiringCertificate> {
  const pems = await selfsigned.generate([{ name: 'commonName', value: 'localhost' }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notBeforeDate: new Date(notAfter - 30 * DAY),
    notAfterDate: new Date(notAfter),
    extensions: [
      {
        name: 'subjectAltName',
        altNames: [
          { type: 2, value: 'localhost' },
          { type: 7, ip: '127.0.0.1' },
        ],
      },
    ],
  });
  const end = Date.parse(new X509Certificate(pems.cert).validTo);
  return { cert: pems.cert, key: pems.private, end, endText: new Date(end).toISOString().replace('.000Z', 'Z') };
}
