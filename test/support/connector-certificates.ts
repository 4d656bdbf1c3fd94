import selfsigned from 'selfsigned';

/** PEMs for a connector served over mutual TLS: a CA, the connector's certificate (127.0.0.1) and the gateway's client certificate. */
export interface ConnectorCertificates {
  ca: string;
  server: { cert: string; key: string };
  client: { cert: string; key: string };
  /** A CA that signed none of the above. */
  otherCa: string;
}

let certificates: Promise<ConnectorCertificates> | undefined;

/** Made once per test file (EC keys, a few milliseconds each). */
export function connectorCertificates(): Promise<ConnectorCertificates> {
  certificates ??= (async () => {
    const ca = await selfsigned.generate([{ name: 'commonName', value: 'Test connector CA' }], {
      keyType: 'ec',
      algorithm: 'sha256',
      extensions: [
        { name: 'basicConstraints', cA: true, critical: true },
        { name: 'keyUsage', keyCertSign: true, digitalSignature: true, critical: true },
      ],
    });
    const signer = { key: ca.private, cert: ca.cert };
    const server = await selfsigned.generate([{ name: 'commonName', value: '127.0.0.1' }], {
      keyType: 'ec',
      algorithm: 'sha256',
      ca: signer,
      extensions: [{ name: 'subjectAltName', altNames: [{ type: 7, ip: '127.0.0.1' }] }],
    });
    const client = await selfsigned.generate([{ name: 'commonName', value: 'card-gateway' }], { keyType: 'ec', algorithm: 'sha256', ca: signer });
    const stranger = await selfsigned.generate([{ name: 'commonName', value: 'Unrelated CA' }], { keyType: 'ec', algorithm: 'sha256' });
    return {
      ca: ca.cert,
      server: { cert: server.cert, key: server.private },
      client: { cert: client.cert, key: client.private },
      otherCa: stranger.cert,
    };
  })();
  return certificates;
}
