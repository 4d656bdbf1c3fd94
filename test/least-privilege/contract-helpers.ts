import { afterAll, beforeAll } from 'vitest';
import type { Gateway } from '../../src/app.js';
import { startCardFixture, type CardFixture } from '../support/card-fixture.js';
import type { AnyResponse } from '../support/envelope.js';
import type { TestGateway } from '../support/gateway-fixture.js';

/**
 * Assertions and clients shared by the least-privilege suites (issue 9): the error envelope with
 * its new `code` (test/support/envelope.ts, contract-8-9.md) and the aggregated audit lines (raw
 * exchanges: test/transport/real-clients.ts).
 */

export { expectContractError, expectContractFieldError, UUID, type AnyResponse, type Envelope } from '../support/envelope.js';

export interface SuiteCardFixture {
  /** The sandbox connector and the gateway forwarding to it. */
  readonly f: CardFixture;
  /** An access token of `full`, from the real login route. */
  readonly token: string;
}

/**
 * A card fixture (test/support/card-fixture.ts) for the enclosing suite: started with a token of
 * `full` in its beforeAll, closed in its afterAll. Read `f` and `token` inside tests and hooks.
 */
export function cardFixtureForSuite(): SuiteCardFixture {
  let f: CardFixture | undefined;
  let token: string | undefined;
  beforeAll(async () => {
    f = await startCardFixture();
    token = await f.token('full');
  });
  afterAll(async () => {
    await f?.close();
  });
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('the card fixture is not started');
    return value;
  };
  return {
    get f() {
      return started(f);
    },
    get token() {
      return started(token);
    },
  };
}

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
