import { unwatchFile, watchFile } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { buildGateway } from './app.js';
import { systemClock } from './clock.js';
import { startSandboxConnector, type RunningSandboxConnector } from './connector/sandbox/sandbox-connector.js';
import { ConfigError } from './config/config-error.js';
import { RELOADABLE } from './config/live-settings.js';
import { ensureLocalSecrets } from './config/local-secrets.js';
import { loadConfig, type GatewayConfig } from './config/load-config.js';
import { createFileAuditSink } from './observability/audit.js';
import { createLogDestination, createLogger } from './observability/logger.js';
import { listenGateway } from './server.js';
import { createStore } from './store/create-store.js';
import { waitUntilReady } from './store/redis/redis-client.js';
import { RedisStore } from './store/redis/redis-store.js';

/**
 * Entry point: `node dist/src/main.js [--config FILE]` (or GATEWAY_CONFIG). Without either,
 * the embedded local default `config/local.yaml` runs with generated secrets in `.local/`.
 */
function configPath(): string {
  const flag = process.argv.indexOf('--config');
  const fromFlag = flag === -1 ? undefined : process.argv[flag + 1];
  return resolve(fromFlag ?? process.env['GATEWAY_CONFIG'] ?? join(import.meta.dirname, '..', '..', 'config', 'local.yaml'));
}

async function prepareLocal(file: string): Promise<void> {
  let environment: unknown;
  try {
    environment = (parseYaml(await readFile(file, 'utf8')) as { environment?: unknown } | null)?.environment;
  } catch {
    return; // loadConfig reports the problem with the file, field and reason
  }
  if (environment === 'local') {
    const created = await ensureLocalSecrets(join(dirname(file), '..', '.local'));
    if (created.length > 0) process.stderr.write(`local default: generated ${created.join(', ')} in .local/ (kept out of git)\n`);
  }
}

async function load(file: string): Promise<GatewayConfig> {
  try {
    return await loadConfig(file);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(78); // EX_CONFIG
    }
    throw error;
  }
}

const file = configPath();
await prepareLocal(file);
const config = await load(file);
// Asynchronous, batched stdout: a slow log consumer must not stall requests (flushed on shutdown).
const logDestination = createLogDestination(1);
const logger = createLogger(config.logging.level, logDestination);
const store = createStore(config.store, () => systemClock.now());
if (store instanceof RedisStore) {
  // One line per change of state, not one per reconnect attempt.
  let healthy = true;
  store.client.on('error', (error: NodeJS.ErrnoException) => {
    if (healthy) logger.warn({ code: error.code }, 'store connection lost; store-backed requests answer 503 until it returns');
    healthy = false;
  });
  store.client.on('ready', () => {
    if (!healthy) logger.info('store connection restored');
    healthy = true;
  });
  if (!(await waitUntilReady(store.client, 3000))) logger.warn('store not reachable at start; /readyz reports not ready until it is');
}

let sandbox: RunningSandboxConnector | undefined;
if (config.connector.startSandbox) {
  const url = new URL(config.connector.url);
  sandbox = await startSandboxConnector({ host: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port || 80), ...(config.connector.sharedSecret && { sharedSecret: config.connector.sharedSecret }) });
}

const audit = createFileAuditSink(config.audit.file, systemClock, { fsync: config.audit.fsync });
const gateway = await buildGateway({ config, store, clock: systemClock, logger, audit });
const running = await listenGateway(gateway, config.listeners);
logger.info({ environment: config.environment, https: running.httpsUrl, plainHttp: running.plainUrl, admin: running.adminUrl, connector: config.connector.url, sandboxConnector: sandbox?.url }, 'gateway listening');

let reloading = false;
async function reload(trigger: string): Promise<void> {
  if (reloading) return;
  reloading = true;
  try {
    const next = await loadConfig(file);
    if (next.environment !== config.environment) throw new ConfigError([`${file}: environment: cannot change from ${config.environment} to ${next.environment} without a restart`]);
    gateway.reload(next);
    logger.info({ trigger, applied: RELOADABLE, credentials: next.credentials.size }, 'configuration reloaded; listeners, TLS, store, keys and connector settings apply at the next restart');
  } catch (error) {
    const problems = error instanceof ConfigError ? error.problems : [(error as Error).message];
    logger.error({ trigger, problems }, 'configuration reload refused; the running configuration stays');
  } finally {
    reloading = false;
  }
}
process.on('SIGHUP', () => void reload('SIGHUP'));
// Editors replace files rather than write them in place; stat polling survives that.
for (const watched of [file, config.credentialsFile]) watchFile(watched, { interval: 2000 }, (now, before) => {
  if (now.mtimeMs !== before.mtimeMs) void reload(`change of ${watched}`);
});

let stopping = false;
async function shutdown(signal: string): Promise<void> {
  if (stopping) {
    logger.warn({ signal }, 'second signal: exiting without waiting');
    process.exit(1);
  }
  stopping = true;
  logger.info({ signal }, 'draining in-flight requests');
  const force = setTimeout(() => {
    logger.error('drain took longer than 25 s; exiting');
    process.exit(1);
  }, 25_000);
  force.unref();
  for (const watched of [file, config.credentialsFile]) unwatchFile(watched);
  await running.close();
  await sandbox?.close();
  await store.close();
  await audit.close();
  logger.info('stopped');
  logDestination.flushSync();
  process.exitCode = 0;
}
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));
