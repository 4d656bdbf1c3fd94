import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { buildGateway, type Gateway, type GatewayDependencies } from '../../src/app.js';
import { ManualClock } from '../../src/foundation/clock.js';
import type { GatewayConfig } from '../../src/config/load-config.js';
import { MemoryAuditSink } from '../../src/observability/audit.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import type { GatewayStore } from '../../src/store/store-types.js';
import type { SessionTokens } from '../../src/auth/session-service.js';
import { LogCapture, PASSWORD, testConfig, type RawConfig, type TestCredential } from './config-fixture.js';

/**
 * Builds real gateways for tests on the configs of config-fixture.ts (re-exported here): a
 * manual clock, the memory store unless given one, captured logs and audit.
 */
export * from './config-fixture.js';

export interface TestGateway {
  gateway: Gateway;
  config: GatewayConfig;
  clock: ManualClock;
  store: GatewayStore;
  audit: MemoryAuditSink;
  logs: LogCapture;
  /** inject() as a client of the TLS listener behind the trusted test proxy. */
  inject(options: InjectOptions): Promise<LightMyRequestResponse>;
  close(): Promise<void>;
}

export interface TestGatewayOptions {
  config?: GatewayConfig;
  overrides?: RawConfig;
  credentials?: TestCredential[];
  store?: GatewayStore;
  clock?: ManualClock;
  extend?: GatewayDependencies['extend'];
  /** The connector port (an in-memory one); by default the undici client for the config's connector URL. */
  connector?: GatewayDependencies['connector'];
  /** The password hash gate, to count the hashes logins ran (`admitted`). */
  hashGate?: GatewayDependencies['hashGate'];
  holdRefusal?: GatewayDependencies['holdRefusal'];
  firstRequestTimer?: GatewayDependencies['firstRequestTimer'];
}

export async function createTestGateway(options: TestGatewayOptions = {}): Promise<TestGateway> {
  const config = options.config ?? (await testConfig(options.overrides, options.credentials));
  const clock = options.clock ?? new ManualClock(Date.now());
  const store = options.store ?? new MemoryStore(() => clock.now());
  const audit = new MemoryAuditSink(clock);
  const logs = new LogCapture();
  const gateway = await buildGateway({
    config,
    store,
    clock,
    logger: logs.logger,
    audit,
    ...(options.extend && { extend: options.extend }),
    ...(options.connector && { connector: options.connector }),
    ...(options.hashGate && { hashGate: options.hashGate }),
    ...(options.holdRefusal && { holdRefusal: options.holdRefusal }),
    ...(options.firstRequestTimer && { firstRequestTimer: options.firstRequestTimer }),
  });
  await gateway.app.ready();
  return {
    gateway,
    config,
    clock,
    store,
    audit,
    logs,
    inject: (injectOptions) => gateway.app.inject({ ...injectOptions, headers: { 'x-forwarded-proto': 'https', ...(injectOptions.headers ?? {}) } }),
    close: async () => {
      await gateway.app.close();
      await gateway.admin.close();
      if (!options.store) await store.close();
    },
  };
}

/** Logs in through inject and returns the parsed session tokens. */
export async function login(gw: TestGateway, username = 'full', password = PASSWORD, headers: Record<string, string> = {}) {
  const response = await gw.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { username, password }, headers });
  if (response.statusCode !== 200) throw new Error(`login failed: ${response.statusCode} ${response.body}`);
  return response.json<SessionTokens>();
}

/** Every secret-looking value a test has seen, to scan captured output for. */
export function assertNoSecrets(text: string, secrets: readonly string[]): void {
  for (const secret of secrets) {
    if (secret.length >= 6 && text.includes(secret)) throw new Error(`captured output contains a secret: ${secret.slice(0, 6)}…`);
  }
}
