#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { startSandboxConnector } from './sandbox-connector.js';

// Standalone entry of the sandbox processor-connector for the local run and the benchmarks.
const env = process.env;
const host = env['SANDBOX_CONNECTOR_HOST'] ?? '127.0.0.1';
const portText = env['SANDBOX_CONNECTOR_PORT'] ?? '9700';
const port = Number(portText);
if (!/^\d+$/.test(portText) || port > 65_535) {
  throw new TypeError(`SANDBOX_CONNECTOR_PORT: not a port number: ${portText}`);
}
const secret = env['SANDBOX_CONNECTOR_SECRET'];

/** HTTPS with SANDBOX_CONNECTOR_TLS_CERT and _KEY (PEM files); mutual TLS when SANDBOX_CONNECTOR_TLS_CLIENT_CA names the CA of the gateway's client certificate. */
function tlsFromEnv(): { cert: Buffer; key: Buffer; ca?: Buffer } | undefined {
  const [cert, key, ca] = ['SANDBOX_CONNECTOR_TLS_CERT', 'SANDBOX_CONNECTOR_TLS_KEY', 'SANDBOX_CONNECTOR_TLS_CLIENT_CA'].map((name) => env[name] || undefined);
  if (!cert && !key && !ca) return undefined;
  if (!cert || !key) throw new TypeError('SANDBOX_CONNECTOR_TLS_CERT and SANDBOX_CONNECTOR_TLS_KEY go together');
  return { cert: readFileSync(cert), key: readFileSync(key), ...(ca && { ca: readFileSync(ca) }) };
}
const tls = tlsFromEnv();

const connector = await startSandboxConnector({
  host,
  port,
  controls: env['SANDBOX_CONNECTOR_CONTROLS'] === 'true',
  ...(secret !== undefined && secret !== '' ? { sharedSecret: secret } : {}),
  ...(tls && { tls }),
});
process.stdout.write(`sandbox connector listening on ${connector.url}${tls?.ca ? ' (mutual TLS: client certificates required)' : ''}\n`);

let closing = false;
const shutdown = (): void => {
  if (closing) return;
  closing = true;
  connector.close().then(
    () => {
      process.exitCode = 0;
    },
    (error: unknown) => {
      process.stderr.write(`sandbox connector: close failed: ${error instanceof Error ? error.message : String(error)}\n`);
      process.exitCode = 1;
    },
  );
};
process.once('SIGTERM', shutdown);
process.once('SIGINT', shutdown);
