import selfsigned from 'selfsigned';

export interface CertificatePems {
  cert: string;
  key: string;
}

/**
 * A self-signed P-256 certificate for the loopback names (localhost, 127.0.0.1, ::1): what the
 * tests' gateways and the benchmark's serve TLS with, and what their clients trust.
 */
export async function localhostCertificate(): Promise<CertificatePems> {
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
  return { cert: pems.cert, key: pems.private };
}
