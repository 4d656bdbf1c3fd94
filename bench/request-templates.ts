/**
 * What each load scenario sends, written once for every load generator of the bench (wrk's Lua
 * script, the Node generator, the interleaved pairs): a method, a path, headers and a body in
 * which `{{requestId}}` stands for a fresh UUID-shaped requestId per request, and optionally one
 * `X-Forwarded-For` address per request from a rotating range. So wrk and Node send the same
 * bytes, and what is measured is what is tested (the body is tools/card-request-body.ts's).
 */
import { randomBytes } from 'node:crypto';
import { CONNECTOR_EVENTS_PATH, CONNECTOR_SECRET_HEADER, type ConnectorEvent } from '../src/connector/connector-events-contract.js';
import { SANDBOX_MERCHANT } from '../src/connector/sandbox/event-control-routes.js';
import { cardRequestBody } from '../tools/card-request-body.js';

/** Where a request's own requestId goes in a template's body and header values. */
export const REQUEST_ID = '{{requestId}}';

export interface RequestTemplate {
  method: 'GET' | 'POST';
  /** Path and query, as sent. */
  path: string;
  headers: Record<string, string>;
  body?: string;
  /**
   * Requests take turns to come from this many client addresses (10.100.0.0/16), sent as
   * X-Forwarded-For by 127.0.0.1, which the bench gateways trust as their load balancer: one
   * address stands for one partner, and the per-address budgets (D53) hold each to its share as
   * in production. Absent: no header.
   */
  clientAddresses?: number;
}

export type TemplateScenario = 'connector-create' | 'gateway-create' | 'gateway-replay' | 'connector-read' | 'gateway-read';

export const CARD_LIMIT = 125000;
export const CARDS_PATH = '/api/v1/issuing/cards';
/**
 * Client addresses the card loads take turns to come from: at the default 200 requests a second
 * per address (D53) 256 of them carry up to 51 200/s, far above what one core serves, so no
 * legitimate request is refused.
 */
export const CLIENT_ADDRESSES = Number(process.env['BENCH_CLIENT_ADDRESSES'] ?? 256);
export const BENCH_ACCOUNT = 'acct-bench-eu';
/** The one requestId the replay scenario repeats. */
export const REPLAYED_REQUEST_ID = '00000000-0000-4000-8000-00000000beef';

/** POST /api/v1/issuing/cards's body for `requestId`. */
export const publicCardBody = (requestId: string): string => JSON.stringify(cardRequestBody(requestId, CARD_LIMIT));

/** What the gateway forwards for that body (its limit with D15's 5 % tolerance), sent straight to the connector. */
export function connectorCardBody(requestId: string): string {
  const { config, metadata } = cardRequestBody(requestId, CARD_LIMIT);
  return JSON.stringify({ requestId, issuingAccount: BENCH_ACCOUNT, requestedCardLimit: CARD_LIMIT, cardLimit: 131250, currency: 'EUR', config, metadata });
}

/** The request of `scenario` at `path` (and query); the token for the gateway's scenarios. */
export function requestTemplate(scenario: TemplateScenario, path: string, options: { token?: string; clientAddresses?: number }): RequestTemplate {
  const gatewayHeaders = { authorization: `Bearer ${options.token ?? ''}` };
  const fromPartners = options.clientAddresses ? { clientAddresses: options.clientAddresses } : {};
  switch (scenario) {
    case 'connector-create':
      return {
        method: 'POST',
        path,
        headers: { 'content-type': 'application/json', 'idempotency-key': `${BENCH_ACCOUNT}:${REQUEST_ID}`, 'x-correlation-id': REQUEST_ID },
        body: connectorCardBody(REQUEST_ID),
      };
    case 'gateway-create':
      return { method: 'POST', path, headers: { 'content-type': 'application/json', ...gatewayHeaders }, body: publicCardBody(REQUEST_ID), ...fromPartners };
    case 'gateway-replay':
      return {
        method: 'POST',
        path,
        headers: { 'content-type': 'application/json', ...gatewayHeaders },
        body: publicCardBody(REPLAYED_REQUEST_ID),
        ...fromPartners,
      };
    // A GET of the path as given (one card, or a page of the list): straight to the connector
    // (through the bare proxy, the account in the query), or through the gateway with the token.
    case 'connector-read':
      return { method: 'GET', path, headers: { 'x-correlation-id': REQUEST_ID } };
    case 'gateway-read':
      return { method: 'GET', path, headers: gatewayHeaders, ...fromPartners };
  }
}

/**
 * UUID-shaped requestIds from a counter: `pppppppp-cccc-4ccc-8ccc-cccccccccccc`, the prefix drawn
 * once per generator (8 random hex digits), the rest the counter's hex digits. Unique across
 * generators and runs without a random draw per request, and the same shape in Lua (bench/wrk.ts).
 */
export function requestIds(prefix = randomBytes(4).toString('hex')): () => string {
  let counter = 0;
  return () => {
    counter += 1;
    const hex = counter.toString(16).padStart(22, '0');
    return `${prefix}-${hex.slice(0, 4)}-4${hex.slice(4, 7)}-8${hex.slice(7, 10)}-${hex.slice(10)}`;
  };
}

/** The `index`-th client address of the rotating range (10.100.0.0/16). */
export const clientAddress = (index: number): string => `10.100.${(index >> 8) & 255}.${index & 255}`;

export interface ExpandedRequest {
  method: 'GET' | 'POST';
  path: string;
  headers: Record<string, string>;
  body?: string;
}

/** A function that makes the template's next request: its own requestId, the next client address. */
export function requestMaker(template: RequestTemplate, nextId: () => string = requestIds()): () => ExpandedRequest {
  const bodyParts = template.body?.split(REQUEST_ID);
  const headerParts = Object.entries(template.headers).map(([name, value]) => [name, value.split(REQUEST_ID)] as const);
  let client = 0;
  return () => {
    const id = nextId();
    const headers: Record<string, string> = {};
    for (const [name, parts] of headerParts) headers[name] = parts.join(id);
    if (template.clientAddresses) {
      client = (client + 1) % template.clientAddresses;
      headers['x-forwarded-for'] = clientAddress(client);
    }
    return { method: template.method, path: template.path, headers, ...(bodyParts && { body: bodyParts.join(id) }) };
  };
}

/**
 * The events scenario's request (I): a `transaction.authorized` event as the connector posts it
 * to the gateway's connector listener (`POST /v1/events`, D64), its eventId and transactionId
 * made of the request's own requestId, so no two are the same event.
 */
export function connectorEventTemplate(secret: string, cardId: string): RequestTemplate {
  const event: ConnectorEvent = {
    eventId: `bench_evt_${REQUEST_ID}`,
    type: 'transaction.authorized',
    occurredAt: new Date().toISOString(),
    issuingAccount: BENCH_ACCOUNT,
    data: { transactionId: `txn_${REQUEST_ID}`, cardId, amount: 18_450, currency: 'EUR', merchant: SANDBOX_MERCHANT },
  };
  return {
    method: 'POST',
    path: CONNECTOR_EVENTS_PATH,
    headers: { 'content-type': 'application/json', [CONNECTOR_SECRET_HEADER]: secret },
    body: JSON.stringify(event),
  };
}
