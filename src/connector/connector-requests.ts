import { CONNECTOR_HEADERS, CONNECTOR_PATHS, type ConnectorListQuery, type ConnectorStatusChange } from './connector-contract.js';
import type { ConnectorCallMeta } from './connector-port.js';
import type { ConnectorRequest, ConnectorSettings } from './connector-transport.js';

/**
 * The lifecycle calls' requests (D43-D45), built from the contract's fields only: never the
 * client's URL, query or headers. No Idempotency-Key: the calls are safe to repeat.
 */

type Query = ReadonlyArray<readonly [name: string, value: string | number | undefined]>;

/** `?a=1&b=2`, every name and value encoded, absent values left out, in the order given. */
function queryString(query: Query): string {
  const parts: string[] = [];
  for (const [name, value] of query) if (value !== undefined) parts.push(`${encodeURIComponent(name)}=${encodeURIComponent(String(value))}`);
  return parts.length === 0 ? '' : `?${parts.join('&')}`;
}

function headers(settings: ConnectorSettings, meta: ConnectorCallMeta, body?: string): Record<string, string> {
  return {
    accept: 'application/json',
    ...(body !== undefined && { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) }),
    [CONNECTOR_HEADERS.correlationId]: meta.correlationId,
    ...(settings.sharedSecret !== undefined && { [CONNECTOR_HEADERS.gatewaySecret]: settings.sharedSecret }),
  };
}

export function getCardRequest(settings: ConnectorSettings, issuingAccount: string, cardId: string, meta: ConnectorCallMeta): ConnectorRequest {
  return { method: 'GET', path: CONNECTOR_PATHS.card(cardId) + queryString([['issuingAccount', issuingAccount]]), headers: headers(settings, meta) };
}

export function listCardsRequest(settings: ConnectorSettings, query: ConnectorListQuery, meta: ConnectorCallMeta): ConnectorRequest {
  const path =
    CONNECTOR_PATHS.listCards +
    queryString([
      ['issuingAccount', query.issuingAccount],
      ['limit', query.limit],
      ['cursor', query.cursor],
      ['status', query.status],
      ['createdAfter', query.createdAfter],
      ['createdBefore', query.createdBefore],
    ]);
  return { method: 'GET', path, headers: headers(settings, meta) };
}

export function setCardStatusRequest(settings: ConnectorSettings, cardId: string, change: ConnectorStatusChange, meta: ConnectorCallMeta): ConnectorRequest {
  // Member by member: a caller's object with more members must not send them upstream.
  const body = JSON.stringify({
    issuingAccount: change.issuingAccount,
    status: change.status,
    ...(change.reason !== undefined && { reason: change.reason }),
  });
  return { method: 'POST', path: CONNECTOR_PATHS.cardStatus(cardId), headers: headers(settings, meta, body), body };
}
