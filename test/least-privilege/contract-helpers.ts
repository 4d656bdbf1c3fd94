import type { Gateway } from '../../src/app.js';
import type { AnyResponse } from '../support/envelope.js';
import type { TestGateway } from '../support/gateway-fixture.js';

/**
 * Assertions and clients shared by the least-privilege suites (issue 9): the error envelope with
 * its new `code` (test/support/envelope.ts, contract-8-9.md) and the aggregated audit lines (raw
 * exchanges: test/transport/real-clients.ts).
 */

export { expectContractError, expectContractFieldError, UUID, type AnyResponse, type Envelope } from '../support/envelope.js';

/** Every audit line the gateway wrote so far, as parsed JSON (aggregated lines have extra fields). */
export function auditRecords(gw: TestGateway): Record<string, unknown>[] {
  return gw.audit.lines.map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** `gateway.flushAudit()` (contract: writes every open aggregation window at once). */
export async function flushAudit(gateway: Gateway): Promise<void> {
  const flush = (gateway as Gateway & { flushAudit?: () => unknown }).flushAudit;
  if (typeof flush !== 'function') throw new Error('gateway.flushAudit() does not exist: aggregated denial lines cannot be flushed');
  await flush.call(gateway);
}

/** The aggregated `access.denied` lines (those with a `count`). */
export function aggregatedDenials(gw: TestGateway): Record<string, unknown>[] {
  return auditRecords(gw).filter((record) => record['event'] === 'access.denied' && record['count'] !== undefined);
}

/** Headers of an answer without the ones that differ per request by design. */
export function stableHeaders(headers: AnyResponse['headers'], volatile: readonly string[] = ['x-correlation-id', 'date']): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || volatile.includes(name.toLowerCase())) continue;
    out[name.toLowerCase()] = Array.isArray(value) ? value.join(', ') : String(value);
  }
  return out;
}
