import { request as httpsRequest } from 'node:https';
import type { IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { ConnectorEventDraft } from '../../src/connector/connector-events-contract.js';
import { buildConnectorListener, type ConnectorEventOutcome, type ConnectorListenerSettings } from '../../src/edge/connector-listener.js';
import { ManualClock } from '../../src/foundation/clock.js';
import { EventIds } from '../../src/foundation/event-ids.js';
import type { RecordedEvent } from '../../src/store/event-store.js';
import { MemoryEvents } from '../../src/store/memory/events.js';
import { StoreUnavailableError } from '../../src/store/store-types.js';
import { LogCapture } from './config-fixture.js';
import { connectorCertificates } from './connector-certificates.js';

/**
 * A connector listener for tests: the real listener over a recorder of the tests' own (the
 * listener takes a function port), which writes the envelope the way the design says (head +
 * sequence + tail) into the memory event store. `storeDown` makes it reject as an outage does.
 */
export interface ListenerFixture {
  app: FastifyInstance;
  clock: ManualClock;
  store: MemoryEvents;
  /** Every draft the listener handed the recorder, in order (repeats included). */
  drafts: ConnectorEventDraft[];
  outcomes: ConnectorEventOutcome[];
  logs: LogCapture;
  /** How many next record() calls reject with StoreUnavailableError. */
  storeDown: { calls: number };
  /** Set once listening. */
  url: string;
  /** The stored JSON of every event of the account, oldest first. */
  stored(issuingAccount: string): Promise<string[]>;
  close(): Promise<void>;
}

export const KNOWN_ACCOUNTS = new Set(['acct-eu', 'acct-uk']);

export async function connectorListener(options: { secret?: string; clientCa?: string; listen?: boolean } = {}): Promise<ListenerFixture> {
  const pems = await connectorCertificates();
  const clock = new ManualClock();
  const store = new MemoryEvents(() => clock.now());
  const ids = new EventIds(() => clock.now());
  const drafts: ConnectorEventDraft[] = [];
  const outcomes: ConnectorEventOutcome[] = [];
  const logs = new LogCapture();
  const storeDown = { calls: 0 };

  const record = async (draft: ConnectorEventDraft): Promise<RecordedEvent> => {
    drafts.push(draft);
    if (storeDown.calls > 0) {
      storeDown.calls -= 1;
      throw new StoreUnavailableError();
    }
    const id = ids.next();
    const now = clock.now();
    const head = `{"id":${JSON.stringify(id)},"type":${JSON.stringify(draft.type)},"createdAt":${JSON.stringify(new Date(now).toISOString())},"issuingAccount":${JSON.stringify(draft.issuingAccount)},"sequence":`;
    const tail = `,"data":${JSON.stringify(draft.data)}}`;
    return store.record(
      draft.issuingAccount,
      { id, type: draft.type, cardId: draft.cardId, createdAt: now, head, tail, dedupe: draft.dedupe, endpoints: [] },
      { now, expiresAt: now + 7 * 86_400_000 },
    );
  };

  const config: ConnectorListenerSettings = {
    tls: { cert: Buffer.from(pems.server.cert), key: Buffer.from(pems.server.key) },
    listeners: { connector: options.clientCa === undefined ? undefined : { clientCa: Buffer.from(options.clientCa) } },
    connector: { eventsSecret: options.secret },
  };
  const app = buildConnectorListener({
    config,
    record,
    logger: logs.logger,
    metrics: { connectorEvents: (outcome) => outcomes.push(outcome) },
    clock,
    knownAccounts: () => KNOWN_ACCOUNTS,
  });
  const fixture: ListenerFixture = {
    app,
    clock,
    store,
    drafts,
    outcomes,
    logs,
    storeDown,
    url: '',
    stored: async (issuingAccount) => (await store.scan(issuingAccount, { limit: 1000 })).reverse().map((event) => event.json),
    close: () => app.close(),
  };
  if (options.listen !== false) {
    await app.listen({ host: '127.0.0.1', port: 0 });
    fixture.url = `https://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  }
  return fixture;
}

export interface PostAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  body: Record<string, unknown>;
}

/** One POST over a fresh TLS connection, trusting the test CA; `cert`/`key`: a client certificate. */
export async function postOverTls(
  url: string,
  body: unknown,
  options: { headers?: Record<string, string>; cert?: string; key?: string; path?: string } = {},
): Promise<PostAnswer> {
  const { ca } = await connectorCertificates();
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      `${url}${options.path ?? '/v1/events'}`,
      {
        method: 'POST',
        ca,
        agent: false,
        ...(options.cert !== undefined && { cert: options.cert, key: options.key }),
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...options.headers },
      },
      (res) => {
        let answer = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (answer += chunk));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: answer === '' ? {} : (JSON.parse(answer) as Record<string, unknown>) }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(text);
  });
}
