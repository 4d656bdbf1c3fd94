#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { ListenError } from '../../foundation/listen-error.js';
import { startSandboxConnector, type RunningSandboxConnector } from './sandbox-connector.js';

// Standalone entry of the sandbox processor-connector for the local run and the benchmarks.
// What stops it is one line on stderr, never a stack trace (as for the gateway, D40): a setting
// it cannot use exits 78, a port it cannot bind 69 (sysexits.h).
const EXIT = { unavailable: 69, config: 78 } as const;

/** A setting of the environment the connector cannot start with. */
class SettingError extends Error {}

function fail(code: number, message: string): never {
  process.stderr.write(`sandbox connector: ${message}\n`);
  process.exit(code);
}

const env = process.env;

/** HTTPS with SANDBOX_CONNECTOR_TLS_CERT and _KEY (PEM files); mutual TLS when SANDBOX_CONNECTOR_TLS_CLIENT_CA names the CA of the gateway's client certificate. */
function tlsFromEnv(): { cert: Buffer; key: Buffer; ca?: Buffer } | undefined {
  const [cert, key, ca] = ['SANDBOX_CONNECTOR_TLS_CERT', 'SANDBOX_CONNECTOR_TLS_KEY', 'SANDBOX_CONNECTOR_TLS_CLIENT_CA'].map((name) => env[name] || undefined);
  if (!cert && !key && !ca) return undefined;
  if (!cert || !key) throw new SettingError('SANDBOX_CONNECTOR_TLS_CERT and SANDBOX_CONNECTOR_TLS_KEY go together');
  const read = (name: string, path: string): Buffer => {
    try {
      return readFileSync(path);
    } catch (error) {
      throw new SettingError(`${name}: cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
    }
  };
  return {
    cert: read('SANDBOX_CONNECTOR_TLS_CERT', cert),
    key: read('SANDBOX_CONNECTOR_TLS_KEY', key),
    ...(ca && { ca: read('SANDBOX_CONNECTOR_TLS_CLIENT_CA', ca) }),
  };
}

function settings() {
  const host = env['SANDBOX_CONNECTOR_HOST'] ?? '127.0.0.1';
  const portText = env['SANDBOX_CONNECTOR_PORT'] ?? '9700';
  const port = Number(portText);
  if (!/^\d+$/.test(portText) || port > 65_535) throw new SettingError(`SANDBOX_CONNECTOR_PORT: not a port number: ${portText}`);
  const secret = env['SANDBOX_CONNECTOR_SECRET'];
  return {
    host,
    port,
    controls: env['SANDBOX_CONNECTOR_CONTROLS'] === 'true',
    ...(secret !== undefined && secret !== '' ? { sharedSecret: secret } : {}),
    tls: tlsFromEnv(),
  };
}

let options: ReturnType<typeof settings>;
try {
  options = settings();
} catch (error) {
  if (error instanceof SettingError) fail(EXIT.config, error.message);
  throw error;
}
const { tls, ...rest } = options;

let connector: RunningSandboxConnector;
try {
  connector = await startSandboxConnector({ ...rest, ...(tls && { tls }) });
} catch (error) {
  if (error instanceof ListenError) fail(EXIT.unavailable, error.message);
  throw error;
}
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
