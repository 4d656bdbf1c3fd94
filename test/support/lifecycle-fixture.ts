import type { LightMyRequestResponse } from 'fastify';
import { ManualClock } from '../../src/foundation/clock.js';
import type { GatewayStore } from '../../src/store/store-types.js';
import { RELAXED_LIMITS, T0 } from './auth-requests.js';
import { CARDS, createCard, mintToken, validCardBody } from './card-fixture.js';
import { createTestGateway, DEFAULT_CREDENTIALS, PASSWORD, type RawConfig, type TestCredential, type TestGateway } from './gateway-fixture.js';
import { MemoryConnector } from './memory-connector.js';

/**
 * The card lifecycle (D43-D48) at inject level: a gateway on the in-memory connector port
 * (memory-connector.ts), credentials holding the new permissions in the combinations the rules
 * need, and one helper per operation.
 */

export const LIFECYCLE_CREDENTIALS: TestCredential[] = [
  ...DEFAULT_CREDENTIALS,
  {
    id: 'cred-life',
    username: 'life',
    password: PASSWORD,
    issuingAccount: 'acct-eu',
    permissions: ['cards:create', 'cards:reveal', 'cards:read', 'cards:update'],
  },
  {
    id: 'cred-peer',
    username: 'peer',
    password: PASSWORD,
    issuingAccount: 'acct-eu',
    permissions: ['cards:create', 'cards:reveal', 'cards:read', 'cards:update'],
  },
  { id: 'cred-reader', username: 'reader', password: PASSWORD, issuingAccount: 'acct-eu', permissions: ['cards:read'] },
  { id: 'cred-updater', username: 'updater', password: PASSWORD, issuingAccount: 'acct-eu', permissions: ['cards:update'] },
  { id: 'cred-life-uk', username: 'life-uk', password: PASSWORD, issuingAccount: 'acct-uk', permissions: ['cards:create', 'cards:read', 'cards:update'] },
  { id: 'cred-events', username: 'events', password: PASSWORD, issuingAccount: 'acct-eu', permissions: ['events:read'] },
  { id: 'cred-events-uk', username: 'events-uk', password: PASSWORD, issuingAccount: 'acct-uk', permissions: ['events:read'] },
];

export const CARD = (cardId: string): string => `${CARDS}/${encodeURIComponent(cardId)}`;

export interface LifecycleFixture {
  gw: TestGateway;
  connector: MemoryConnector;
  clock: ManualClock;
  token(username: string): Promise<string>;
  get(token: string, cardId: string, query?: string): Promise<LightMyRequestResponse>;
  list(token: string, query?: string): Promise<LightMyRequestResponse>;
  patch(token: string, cardId: string, body: unknown): Promise<LightMyRequestResponse>;
  /** Creates a card through the gateway (POST) and returns its id. */
  create(token: string, body?: Record<string, unknown>): Promise<string>;
  close(): Promise<void>;
}

export async function startLifecycleFixture(options: { store?: GatewayStore; clock?: ManualClock; overrides?: RawConfig } = {}): Promise<LifecycleFixture> {
  const clock = options.clock ?? new ManualClock(T0);
  const connector = new MemoryConnector(() => clock.now());
  const { rateLimits, ...rest } = options.overrides ?? {};
  const gw = await createTestGateway({
    clock,
    connector,
    credentials: LIFECYCLE_CREDENTIALS,
    ...(options.store && { store: options.store }),
    overrides: { rateLimits: { ...RELAXED_LIMITS, ...(rateLimits as RawConfig | undefined) }, ...rest },
  });
  const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
  return {
    gw,
    connector,
    clock,
    token: (username) => mintToken(gw, username),
    get: (token, cardId, query) => gw.inject({ method: 'GET', url: query ? `${CARD(cardId)}?${query}` : CARD(cardId), headers: bearer(token) }),
    list: (token, query) => gw.inject({ method: 'GET', url: query ? `${CARDS}?${query}` : CARDS, headers: bearer(token) }),
    patch: (token, cardId, body) =>
      gw.inject({
        method: 'PATCH',
        url: CARD(cardId),
        headers: { ...bearer(token), 'content-type': 'application/json' },
        payload: typeof body === 'string' ? body : JSON.stringify(body),
      }),
    create: async (token, body = validCardBody()) => {
      const response = await createCard(gw, token, body);
      if (response.statusCode !== 201) throw new Error(`create failed: ${response.statusCode} ${response.body}`);
      return response.json<{ cardId: string }>().cardId;
    },
    close: () => gw.close(),
  };
}

/** The audit lines of the fixture's gateway, parsed. */
export const auditEvents = (fixture: LifecycleFixture): Record<string, unknown>[] =>
  fixture.gw.audit.lines.map((line) => JSON.parse(line) as Record<string, unknown>);
