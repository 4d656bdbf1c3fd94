import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ALL_ERROR_CODES, type ErrorCode } from '../../src/foundation/error-catalogue.js';
import { GatewayMetrics } from '../../src/observability/metrics.js';

/**
 * Issue 21, one vocabulary: the label values that say why a request was refused are the error
 * codes the client got, except a short list of finer causes (each sharing its code with a
 * sibling), and the table of codes in docs/operations/metrics.md says where each code is counted.
 */

/** Refusal labels whose values must be codes or one of FINER_CAUSES. */
const REFUSAL_LABELS = [
  { metric: 'gateway_access_denied_total', label: 'reason' },
  { metric: 'gateway_token_failures_total', label: 'reason' },
  { metric: 'gateway_client_errors_total', label: 'kind' },
] as const;

/** Causes finer than a code, with the code each is answered with (`tls`: no HTTP answer at all). */
const FINER_CAUSES: Record<string, ErrorCode | undefined> = {
  address_malformed: 'address_not_allowed',
  unknown_credential: 'token_invalid',
  address: 'permission_denied',
  reveal_not_creator: 'permission_denied',
  first_request_timeout: 'request_timeout',
  tls: undefined,
};

const metricsPage = readFileSync(new URL('../../docs/operations/metrics.md', import.meta.url), 'utf8');

/** The rows of the metrics page's table of codes and metrics, by code. */
function codeTable(): Map<string, string> {
  const lines = metricsPage.split('\n');
  const start = lines.indexOf('## Error codes and the metrics that count them');
  expect(start).toBeGreaterThanOrEqual(0);
  const rows = new Map<string, string>();
  for (const line of lines.slice(start + 1)) {
    if (line.startsWith('#') || (rows.size > 0 && !line.startsWith('|'))) break;
    const row = /^\| `([a-z_]+)` \((\d{3})\) \| (.*) \|$/.exec(line);
    if (row) rows.set(row[1] ?? '', row[3] ?? '');
  }
  return rows;
}

async function labelValues(metric: string, label: string): Promise<string[]> {
  const metrics = new GatewayMetrics({ defaultMetrics: false });
  const found = (await metrics.registry.getMetricsAsJSON()).find((entry) => entry.name === metric);
  expect(found, metric).toBeDefined();
  return (found?.values ?? []).map((value) => String((value.labels as Record<string, unknown>)[label]));
}

describe('one vocabulary for error codes and metric labels', () => {
  it('names every refusal by its error code, or by one of the few finer causes', async () => {
    for (const { metric, label } of REFUSAL_LABELS) {
      const values = await labelValues(metric, label);
      expect(values.length, metric).toBeGreaterThan(0);
      for (const value of values) expect(ALL_ERROR_CODES.includes(value as ErrorCode) || value in FINER_CAUSES, `${metric}{${label}="${value}"}`).toBe(true);
    }
  });

  it("lists every code in the metrics page's table, in catalogue order, each row naming the label values that count it", async () => {
    const table = codeTable();
    expect([...table.keys()]).toEqual([...ALL_ERROR_CODES]);
    for (const { metric, label } of REFUSAL_LABELS) {
      for (const value of await labelValues(metric, label)) {
        const code = ALL_ERROR_CODES.includes(value as ErrorCode) ? value : FINER_CAUSES[value];
        if (code === undefined) continue;
        expect(table.get(code), `${metric}{${label}="${value}"} in the row of ${code}`).toContain(`${label}="${value}"`);
      }
    }
    // The limiter names are the RateLimit-Policy names (D49).
    for (const limiter of await labelValues('gateway_rate_limited_total', 'limiter')) expect(table.get('rate_limited')).toContain(`\`${limiter}\``);
  });
});
