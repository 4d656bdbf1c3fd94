// A type only: erased, the sandbox's code is still loaded only when the local default starts it.
import type { RunningSandboxConnector } from './connector/sandbox/sandbox-connector.js';
import type { Logger } from 'pino';
import { buildGateway, type Gateway } from './app.js';
import { ConfigError } from './config/config-error.js';
import type { GatewayConfig } from './config/config-types.js';
import { systemClock, type Clock } from './foundation/clock.js';
import { createFileAuditSink, type AuditSink } from './observability/audit.js';
import { createLogDestination, createLogger, type LogDestination } from './observability/logger.js';
import { GatewayMetrics } from './observability/metrics.js';
import { STORE_LOG } from './observability/store-observer.js';
import { createStore, waitForStore } from './store/create-store.js';
import type { GatewayStore } from './store/store-types.js';

export interface ComposeOptions {
  clock?: Clock;
  /** Where log lines go: a file descriptor (1 = stdout) or a file path. Default stdout. */
  logTo?: number | string;
  /** Replace parts (the OpenAPI command needs no Redis and no audit file). */
  logger?: Logger;
  store?: GatewayStore;
  audit?: AuditSink;
}

export interface ComposedGateway {
  readonly gateway: Gateway;
  readonly config: GatewayConfig;
  readonly logger: Logger;
  readonly audit: AuditSink;
  /** The sandbox connector started in-process (`connector.startSandbox`, local only). */
  readonly sandboxUrl: string | undefined;
  /** Closes what composition opened, in order: sandbox, store, audit file, log sink (bounded). */
  close(): Promise<void>;
  /** Hands the buffered log lines to the sink, waiting at most `timeoutMs`: before an exit that skips close(). */
  flushLogs(timeoutMs: number): Promise<void>;
}

/**
 * The one wiring of a runnable gateway from a loaded config: logger, metrics, store, audit
 * trail, the in-process sandbox connector of the local default, and the app. The entry point,
 * the benchmark's servers and the OpenAPI command all compose through here. Throws ConfigError
 * when a production store runs an evicting maxmemory-policy (D54).
 */
export async function composeGateway(config: GatewayConfig, options: ComposeOptions = {}): Promise<ComposedGateway> {
  const clock = options.clock ?? systemClock;
  let logDestination: LogDestination | undefined;
  let logger = options.logger;
  if (!logger) {
    // Asynchronous, batched, and dropping lines rather than ever waiting on a broken reader (D26).
    logDestination = createLogDestination(options.logTo ?? 1);
    logger = createLogger(config.logging.level, logDestination);
  }
  const log = logger;
  // Unsafe settings tolerated here (D32) and certificates near or past their end (D51).
  for (const warning of config.warnings) log.warn({ problem: warning }, 'configuration warning');
  const metrics = new GatewayMetrics();
  const drops = logDestination;
  if (drops) metrics.observeLogDrops(() => drops.dropped);

  const store = options.store ?? createStore(config.store, () => clock.now(), { evictingPolicy: config.environment === 'production' ? 'refuse' : 'warn' });
  // Each change of the store's state or master is logged once (observability/store-observer.ts);
  // this is the line for the state it starts in, with its reason (D55).
  if (!options.store && !(await waitForStore(store, 3000))) {
    const { topology, failure } = store.describe();
    if (failure?.reason === 'evicting_policy') {
      // D54 in D32's list: a production start refused, exit 78, the problem named like the others.
      await store.close();
      throw new ConfigError([`${config.file}: store.redis: ${failure.detail}`]);
    }
    log.warn({ topology, ...(failure && { reason: failure.reason, detail: failure.detail }) }, STORE_LOG.downAtStart);
  }

  // The sandbox is a development tool: loaded only when the local default asks for it, never
  // imported by the production entry point's code paths.
  let sandbox: RunningSandboxConnector | undefined;
  if (config.connector.startSandbox) {
    const { startSandboxConnector } = await import('./connector/sandbox/sandbox-connector.js');
    const url = new URL(config.connector.url);
    try {
      sandbox = await startSandboxConnector({
        host: url.hostname.replace(/^\[|\]$/g, ''),
        port: Number(url.port || 80),
        ...(config.connector.sharedSecret && { sharedSecret: config.connector.sharedSecret }),
        // The simulation routes (/__control: fault modes, transactions, processor-side changes) on loopback only.
        controls: ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname),
        // The local default's whole event flow: the sandbox posts what it simulates to this gateway's connector listener.
        ...(config.listeners.connector && config.listeners.connector.port !== 0 && { eventsTarget: localEventsTarget(config, config.listeners.connector) }),
      });
    } catch (error) {
      // A busy port is the entry point's one line (ListenError); what composition opened is closed first.
      if (!options.store) await store.close();
      await logDestination?.close(1000);
      throw error;
    }
  }

  const audit = options.audit ?? fileAudit(config, clock, log, metrics);
  const gateway = await buildGateway({
    config,
    store,
    clock,
    logger: log,
    audit,
    metrics,
  });
  return {
    gateway,
    config,
    logger: log,
    audit,
    sandboxUrl: sandbox?.url,
    close: async () => {
      await sandbox?.close();
      if (!options.store) await store.close();
      await audit.close();
      // Bounded: a log reader that went away must not keep the process alive (D26).
      await logDestination?.close(1000);
    },
    flushLogs: async (timeoutMs) => {
      await logDestination?.close(timeoutMs);
    },
  };
}

/** The connector listener as the in-process sandbox reaches it: loopback, the gateway's own certificate as its CA, the events secret. */
function localEventsTarget(config: GatewayConfig, listener: { host: string; port: number }): { url: string; ca: Buffer; secret?: string } {
  const host = ['0.0.0.0', '::', '127.0.0.1'].includes(listener.host) ? '127.0.0.1' : listener.host === '::1' ? '[::1]' : listener.host;
  return {
    url: `https://${host}:${listener.port}`,
    ca: config.tls.cert,
    ...(config.connector.eventsSecret !== undefined && { secret: config.connector.eventsSecret }),
  };
}

/**
 * The audit file (D21). While it cannot be written, audited requests answer 503 (D26): one log
 * line per change of state, and a reminder at most once a minute while it lasts.
 */
function fileAudit(config: GatewayConfig, clock: Clock, logger: Logger, metrics: GatewayMetrics): AuditSink {
  let reminder: NodeJS.Timeout | undefined;
  return createFileAuditSink(config.audit.file, clock, {
    fsync: config.audit.fsync,
    maxDenialLinesPerMinute: config.audit.maxDenialLinesPerMinute,
    onState: (state) => {
      metrics.auditWritable.set(state.writable ? 1 : 0);
      clearInterval(reminder);
      if (state.writable) {
        logger.info('audit trail writable again; audited requests are served');
        return;
      }
      metrics.auditWriteFailures.inc();
      const report = () =>
        logger.error(
          { code: state.code, file: config.audit.file },
          'audit trail cannot be written; login, refresh, logout and card creation answer 503 until it can',
        );
      report();
      reminder = setInterval(report, 60_000);
      reminder.unref();
    },
    onDropped: (lines) => metrics.auditLinesDropped.inc(lines),
  });
}
