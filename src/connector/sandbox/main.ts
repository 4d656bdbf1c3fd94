#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { ListenError } from '../../foundation/listen-error.js';
import { startSandboxConnector, type EventsTarget, type RunningSandboxConnector } from './sandbox-connector.js';

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

function read(name: string, path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (error) {
    throw new SettingError(`${name}: cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
  }
}

/** HTTPS with SANDBOX_CONNECTOR_TLS_CERT and _KEY (PEM files); mutual TLS when SANDBOX_CONNECTOR_TLS_CLIENT_CA names the CA of the gateway's client certificate. */
function tlsFromEnv(): { cert: Buffer; key: Buffer; ca?: Buffer } | undefined {
  const [cert, key, ca] = ['SANDBOX_CONNECTOR_TLS_CERT', 'SANDBOX_CONNECTOR_TLS_KEY', 'SANDBOX_CONNECTOR_TLS_CLIENT_CA'].map((name) => env[name] || undefined);
  if (!cert && !key && !ca) return undefined;
  if (!cert || !key) throw new SettingError('SANDBOX_CONNECTOR_TLS_CERT and SANDBOX_CONNECTOR_TLS_KEY go together');
  return {
    cert: read('SANDBOX_CONNECTOR_TLS_CERT', cert),
    key: read('SANDBOX_CONNECTOR_TLS_KEY', key),
    ...(ca && { ca: read('SANDBOX_CONNECTOR_TLS_CLIENT_CA', ca) }),
  };
}

/**
 * The gateway's connector listener, where simulated events go (D64): SANDBOX_CONNECTOR_EVENTS_URL
 * (its base URL), _SECRET (`X-Connector-Secret`), _CA (PEM file of the CA that signed the
 * listener's certificate), _CLIENT_CERT and _CLIENT_KEY (PEM files, for mutual TLS).
 */
function eventsTargetFromEnv(): EventsTarget | undefined {
  const [url, secret, ca, cert, key] = ['URL', 'SECRET', 'CA', 'CLIENT_CERT', 'CLIENT_KEY'].map((name) => env[`SANDBOX_CONNECTOR_EVENTS_${name}`] || undefined);
  if (!url) {
    if (secret || ca || cert || key) throw new SettingError('SANDBOX_CONNECTOR_EVENTS_URL is required with the other SANDBOX_CONNECTOR_EVENTS_ settings');
    return undefined;
  }
  if (!/^https?:\/\/[^/?#]+\/?$/.test(url)) throw new SettingError(`SANDBOX_CONNECTOR_EVENTS_URL: not an http(s) base URL: ${url}`);
  if (!cert !== !key) throw new SettingError('SANDBOX_CONNECTOR_EVENTS_CLIENT_CERT and SANDBOX_CONNECTOR_EVENTS_CLIENT_KEY go together');
  return {
    url,
    ...(secret && { secret }),
    ...(ca && { ca: read('SANDBOX_CONNECTOR_EVENTS_CA', ca) }),
    ...(cert && { cert: read('SANDBOX_CONNECTOR_EVENTS_CLIENT_CERT', cert) }),
    ...(key && { key: read('SANDBOX_CONNECTOR_EVENTS_CLIENT_KEY', key) }),
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
    eventsTarget: eventsTargetFromEnv(),
  };
}

let options: ReturnType<typeof settings>;
try {
  options = settings();
} catch (error) {
  if (error instanceof SettingError) fail(EXIT.config, error.message);
  throw error;
}
const { tls, eventsTarget, ...rest } = options;

let connector: RunningSandboxConnector;
try {
  connector = await startSandboxConnector({ ...rest, ...(tls && { tls }), ...(eventsTarget && { eventsTarget }) });
} catch (error) {
  if (error instanceof ListenError) fail(EXIT.unavailable, error.message);
  throw error;
}
process.stdout.write(`sandbox connector listening on ${connector.url}${tls?.ca ? ' (mutual TLS: client certificates required)' : ''}\n`);
if (eventsTarget) process.stdout.write(`sandbox connector posts events to ${eventsTarget.url}\n`);

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
