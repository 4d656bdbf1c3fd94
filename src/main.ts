import { randomUUID } from 'node:crypto';
import { unwatchFile, watchFile } from 'node:fs';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { buildInfo } from './build-info.js';
import { composeGateway } from './compose.js';
import { ConfigError } from './config/config-error.js';
import { RELOADABLE_SECTIONS } from './config/live-settings.js';
import { ENVIRONMENT_OVERRIDES } from './config/environment-overrides.js';
import { prepareLocalSecrets } from './config/local-secrets.js';
import type { GatewayConfig } from './config/config-types.js';
import { loadConfig } from './config/load-config.js';
import { restartNeeded } from './config/restart-only.js';
import { ListenError, listenGateway } from './server.js';

const USAGE = `Usage: node dist/src/main.js [option]

  --config FILE          run the gateway with FILE (default: GATEWAY_CONFIG, else the local
                         default config/local.yaml)
  --check-config FILE    check FILE and its credentials file completely (schema, secrets
                         readable, keys parse, ranges, production guards) without starting;
                         prints every problem; exit 0 when valid, 78 when not
  --version              print the version and the commit, exit 0
  --help                 print this text, exit 0

Environment overrides, the same in every environment (an empty one changes nothing):
${ENVIRONMENT_OVERRIDES.map(({ variable, field }) => `  ${variable.padEnd(25)}${field}`).join('\n')}

A config with environment: local gets the TLS certificate and keys it names generated where it
names them, if missing, before a start or a check (config/local.yaml: config/.local/).

Signals: SIGHUP reloads the config and credentials and reopens the audit file; SIGTERM (or
SIGINT) drains and stops. Exit codes: 0 done, 1 drain took too long, 64 bad command line,
69 a listener could not bind, 78 invalid configuration.
`;

/** sysexits.h: the codes supervisors and scripts can tell apart. */
const EXIT = { usage: 64, unavailable: 69, config: 78 } as const;

type Command = { kind: 'run'; file: string | undefined } | { kind: 'check'; file: string } | { kind: 'version' } | { kind: 'help' };

function parseArguments(args: readonly string[]): Command {
  const [first, second, ...rest] = args;
  if (first === undefined) return { kind: 'run', file: undefined };
  const takesFile = first === '--config' || first === '--check-config';
  if (rest.length > 0 || (!takesFile && second !== undefined)) throw new Error('one option at a time');
  switch (first) {
    case '--help':
    case '-h':
      return { kind: 'help' };
    case '--version':
      return { kind: 'version' };
    case '--config':
    case '--check-config':
      if (second === undefined || second.startsWith('-')) throw new Error(`${first} needs a FILE`);
      return first === '--config' ? { kind: 'run', file: second } : { kind: 'check', file: second };
    default:
      throw new Error(`unknown option ${first}`);
  }
}

function configPath(file: string | undefined): string {
  return resolve(file ?? process.env['GATEWAY_CONFIG'] ?? join(import.meta.dirname, '..', '..', 'config', 'local.yaml'));
}

/** A local config's secrets are generated where it names them, before a start or a check (never for other environments). */
const prepareLocal = (file: string): Promise<void> => prepareLocalSecrets(file, (line) => process.stderr.write(`${line}\n`));

/** Runs `work`; a ConfigError ends the process with its problems on stderr, exit 78. */
async function orExit<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(EXIT.config);
    }
    throw error;
  }
}

const loadOrExit = (file: string): Promise<GatewayConfig> => orExit(() => loadConfig(file));

let command: Command;
try {
  command = parseArguments(process.argv.slice(2));
} catch (error) {
  process.stderr.write(`card gateway: ${(error as Error).message}\n\n${USAGE}`);
  process.exit(EXIT.usage);
}

if (command.kind === 'help') {
  process.stdout.write(USAGE);
  process.exit(0);
}
if (command.kind === 'version') {
  const { version, commit } = buildInfo();
  process.stdout.write(`card-issuing-gateway ${version} (commit ${commit})\n`);
  process.exit(0);
}
if (command.kind === 'check') {
  const file = resolve(command.file);
  // A fresh local config names secrets it generates at its first start: a check generates them
  // the same way, so that it checks them (and passes) rather than report them missing.
  await prepareLocal(file);
  const config = await loadOrExit(file);
  for (const warning of config.warnings) process.stdout.write(`warning: ${warning}\n`);
  for (const override of config.overrides) process.stdout.write(`override: ${file}: ${override}\n`);
  process.stdout.write(
    `${file}: valid (environment ${config.environment}, ${config.credentials.size} credentials, ${config.issuingAccounts.size} issuing accounts)\n`,
  );
  process.exit(0);
}

const file = configPath(command.file);
await prepareLocal(file);
// The config the process started with: restart-only sections stay as they are until a restart.
const config = await loadOrExit(file);
// The store's own settings are checked once it answers (D54: production refuses an evicting policy).
// The local default's in-process sandbox connector binds here: a busy port is one line too.
const composed = await orExit(() => composeGateway(config)).catch((error: unknown) => {
  if (!(error instanceof ListenError)) throw error;
  process.stderr.write(`card gateway: ${error.message}\n`);
  process.exit(EXIT.unavailable);
});
const { gateway, logger, audit } = composed;

let running;
try {
  running = await listenGateway(gateway, config.listeners);
} catch (error) {
  if (error instanceof ListenError) {
    process.stderr.write(`card gateway: ${error.message}\n`);
    await composed.close();
    process.exit(EXIT.unavailable);
  }
  throw error;
}
const listening = running;
logger.info(
  {
    pid: process.pid,
    environment: config.environment,
    https: listening.httpsUrl,
    plainHttp: listening.plainUrl,
    admin: listening.adminUrl,
    ...(listening.connectorUrl && { connectorListener: listening.connectorUrl }),
    connector: config.connector.url,
    sandboxConnector: composed.sandboxUrl,
    ...(config.overrides.length > 0 && { overrides: config.overrides }),
    ...buildInfo(),
  },
  'gateway listening',
);

const signalContext = () => ({ correlationId: randomUUID(), clientAddress: 'local' });
/** Set at the first SIGTERM or SIGINT: from then on no file is watched. */
let stopping = false;

// Editors replace files rather than write them in place; stat polling survives that. The
// credentials file is watched at the path of the last applied config: a reload that names
// another file moves the watcher there.
const watchedFiles = new Map<string, (now: { mtimeMs: number }, before: { mtimeMs: number }) => void>();
function watchFiles(paths: readonly string[]): void {
  for (const [watched, listener] of watchedFiles) {
    if (paths.includes(watched)) continue;
    unwatchFile(watched, listener);
    watchedFiles.delete(watched);
  }
  for (const path of paths) {
    if (watchedFiles.has(path)) continue;
    const listener = (now: { mtimeMs: number }, before: { mtimeMs: number }) => {
      if (now.mtimeMs !== before.mtimeMs) void reload(`change of ${path}`);
    };
    watchFile(path, { interval: 2000 }, listener);
    watchedFiles.set(path, listener);
  }
}

/** Set while a reload runs; a trigger arriving meanwhile is kept here and reloads again after it. */
let reloading = false;
let rerunTrigger: string | undefined;
async function reload(trigger: string): Promise<void> {
  if (reloading) {
    // The running reload may have read the files before this change: read them once more after it.
    rerunTrigger = trigger;
    return;
  }
  reloading = true;
  try {
    let next: string | undefined = trigger;
    while (next !== undefined) {
      rerunTrigger = undefined;
      await reloadOnce(next);
      next = rerunTrigger;
    }
  } finally {
    reloading = false;
  }
}

async function reloadOnce(trigger: string): Promise<void> {
  try {
    const next = await loadConfig(file, process.env, { forReload: true });
    if (next.environment !== config.environment)
      throw new ConfigError([`${file}: environment: cannot change from ${config.environment} to ${next.environment} without a restart`]);
    const context = signalContext();
    // Applied at once; the promise is the shared store learning of ended sessions (D41), which
    // retries by itself while the store is away and must not hold the reload's bookkeeping.
    void gateway.reload(next, context);
    if (!stopping) watchFiles([file, next.credentialsFile]);
    const pending = restartNeeded(config, next);
    gateway.outcomes.record({ name: 'config.reloaded' }, context);
    // Said at every reload, as at the start: the operator is acting now (D51 certificates, D32).
    for (const warning of next.warnings) logger.warn({ trigger, problem: warning }, 'configuration warning');
    logger.info(
      {
        trigger,
        applied: [...RELOADABLE_SECTIONS],
        credentials: next.credentials.size,
        ...(pending.length > 0 && { restartNeededFor: pending }),
      },
      pending.length > 0 ? `configuration reloaded; changes to ${pending.join(', ')} apply only at the next restart` : 'configuration reloaded',
    );
  } catch (error) {
    const problems = error instanceof ConfigError ? error.problems : [(error as Error).message];
    gateway.outcomes.record({ name: 'config.reload_failed' }, signalContext());
    logger.error({ trigger, problems }, 'configuration reload refused; the running configuration stays');
  }
}
process.on('SIGHUP', () => {
  // Log rotation: the audit file is reopened at its path (D21, D22).
  void audit.reopen();
  void reload('SIGHUP');
});
watchFiles([file, config.credentialsFile]);

/** Set when the drain ran out of time: the exit code is 1 whichever path exits first. */
let forced = false;
/** Exits with `code` once the last log lines are handed on (the log sink is asynchronous, D26). */
function exitAfterLogs(code: number): void {
  void composed.flushLogs(500).finally(() => process.exit(code));
}
/**
 * D38: readiness turns 503 at once, the listeners keep serving for `shutdown.delaySeconds` while
 * load balancers notice, then stop accepting and drain in-flight requests (D22). A drain longer
 * than `shutdown.drainTimeoutSeconds` ends the process anyway.
 */
async function shutdown(signal: string): Promise<void> {
  if (stopping) {
    logger.warn({ signal }, 'second signal: exiting without waiting');
    exitAfterLogs(1);
    return;
  }
  stopping = true;
  const { delaySeconds, drainTimeoutSeconds } = config.shutdown;
  gateway.markDraining();
  logger.info({ signal, delaySeconds, drainTimeoutSeconds }, 'shutting down: /readyz answers 503');
  const force = setTimeout(
    () => {
      forced = true;
      logger.error(`drain took longer than ${drainTimeoutSeconds} s; exiting`);
      exitAfterLogs(1);
    },
    (delaySeconds + drainTimeoutSeconds) * 1000,
  );
  force.unref();
  watchFiles([]);
  if (delaySeconds > 0) await sleep(delaySeconds * 1000);
  logger.info('draining in-flight requests');
  await listening.close();
  logger.info('stopped');
  await composed.close();
  process.exit(forced ? 1 : 0);
}
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));
