import { listenGateway, type RunningGateway } from '../../../src/server.js';
import { connectorStats, setConnectorMode, startCardFixture, type CardFixture, type CardFixtureOptions } from '../../../test/support/card-fixture.js';
import { PASSWORD, testCertificatePem, testKeys, type TestGateway } from '../../../test/support/gateway-fixture.js';
import { LIFECYCLE_CREDENTIALS } from '../../../test/support/lifecycle-fixture.js';
import { CardGatewayClient, type CardGatewayClientOptions, type CreateCardInput, type RetryEvent } from '../../src/index.js';

/**
 * The client's tests run against the real thing: a gateway from the repository's own test
 * fixture listening on a real TLS socket, forwarding to a real sandbox connector. Only time is
 * controlled: the gateway runs on a ManualClock, and the client's clock is the same clock, so
 * "the client waited 5 s" and "5 s passed at the gateway" are one event, as they are in life.
 */

export interface RealGateway {
  fixture: CardFixture;
  gw: TestGateway;
  running: RunningGateway;
  /** PEM of the gateway's self-signed certificate, for the client's `ca` option. */
  ca: string;
  /** Every wait a client made through `sleep`, in ms. */
  sleeps: number[];
  /** Every retry a client reported through `onRetry`. */
  retries: RetryEvent[];
  /**
   * Runs when a client sleeps, after the clock moved (a test's hook to change the world
   * between two attempts, e.g. mend the audit trail).
   */
  onSleep: (() => void) | undefined;
  /** A client of this gateway whose clock and sleep are the gateway's ManualClock. */
  client(options?: Partial<CardGatewayClientOptions>): CardGatewayClient;
  /** Audit events with this name, after flushing the per-minute refusal summaries. */
  auditEvents(name: string): ReturnType<TestGateway['audit']['events']>;
  /** The sum of a Prometheus series on the admin listener whose labels include `labels`. */
  metric(name: string, labels?: Record<string, string>): Promise<number>;
  connectorStats(): ReturnType<typeof connectorStats>;
  setConnectorMode(mode: Parameters<typeof setConnectorMode>[1]): Promise<void>;
  close(): Promise<void>;
}

/**
 * The test fixture's credentials plus the card lifecycle's (`life`: every card permission in
 * acct-eu, `reader`: cards:read only, `life-uk`: another issuing account).
 */
export async function startRealGateway(options: CardFixtureOptions = {}): Promise<RealGateway> {
  const fixture = await startCardFixture({ credentials: LIFECYCLE_CREDENTIALS, ...options });
  const { gw } = fixture;
  const running = await listenGateway(gw.gateway, { https: { host: '127.0.0.1', port: 0 }, admin: { host: '127.0.0.1', port: 0 } });
  const ca = await testCertificatePem();
  const clients: CardGatewayClient[] = [];
  const real: RealGateway = {
    fixture,
    gw,
    running,
    ca,
    sleeps: [],
    retries: [],
    onSleep: undefined,
    client: (clientOptions = {}) => {
      const client = new CardGatewayClient({
        baseUrl: running.httpsUrl,
        ca,
        now: () => gw.clock.now(),
        sleep: async (ms) => {
          real.sleeps.push(ms);
          gw.clock.advance(ms);
          real.onSleep?.();
        },
        onRetry: (event) => real.retries.push(event),
        ...clientOptions,
      });
      clients.push(client);
      return client;
    },
    auditEvents: (name) => {
      gw.gateway.flushAudit();
      return gw.audit.events().filter((event) => event.event === name);
    },
    metric: async (name, labels = {}) => {
      const response = await fetch(`${running.adminUrl}/metrics`);
      const text = await response.text();
      let sum = 0;
      for (const line of text.split('\n')) {
        const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
        if (!match || match[1] !== name) continue;
        const labelText = match[2] ?? '';
        if (Object.entries(labels).every(([key, value]) => labelText.includes(`${key}="${value}"`))) sum += Number(match[3]);
      }
      return sum;
    },
    connectorStats: () => connectorStats(fixture.connector),
    setConnectorMode: (mode) => setConnectorMode(fixture.connector, mode),
    close: async () => {
      await Promise.all(clients.map((client) => client.close()));
      await running.close();
      await fixture.close();
    },
  };
  return real;
}

/** The test fixture's credentials (test/support/gateway-fixture.ts DEFAULT_CREDENTIALS). */
export { PASSWORD };

/**
 * The environment a program run as its own process reads (the README's example and the package
 * check): this gateway's address and certificate file, and a credential (default `full`).
 */
export async function programEnvironment(g: RealGateway, username = 'full'): Promise<NodeJS.ProcessEnv> {
  return {
    ...process.env,
    GATEWAY_URL: g.running.httpsUrl,
    GATEWAY_CA_FILE: (await testKeys()).tlsCert,
    GATEWAY_USERNAME: username,
    GATEWAY_PASSWORD: PASSWORD,
  };
}

/** A valid card for the `acct-eu` credentials, without a requestId (the client makes one). */
export function cardInput(): CreateCardInput {
  return { cardLimit: 10_000, currency: 'EUR', config: { tolerance: { percentage: 5 } }, metadata: { card_name: 'Trip' } };
}

/** What an async call threw (fails the test when it resolved). */
export async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected the call to fail, it succeeded');
}
