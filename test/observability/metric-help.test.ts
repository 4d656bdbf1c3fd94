import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createTestGateway } from '../support/gateway-fixture.js';

/**
 * docs/operations/metrics.md lists every `gateway_*` metric a gateway exposes, each with its
 * `# HELP` line word for word: the help an operator reads in Prometheus and the page say the same
 * (the help of gateway_connector_errors_total once listed five kinds of six).
 */

const page = readFileSync(new URL('../../docs/operations/metrics.md', import.meta.url), 'utf8');

/** The first table of the page: metric name -> help cell. */
function documented(): Map<string, string> {
  const rows = new Map<string, string>();
  const lines = page.split('\n');
  const start = lines.findIndex((line) => line.startsWith('| metric | type | labels | help'));
  expect(start, 'the metrics table').toBeGreaterThanOrEqual(0);
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith('|')) break;
    const cells = line.split(' | ');
    const name = /^\| `(gateway_[a-z_]+)`$/.exec(cells[0] ?? '')?.[1];
    if (name === undefined) continue;
    expect(rows.has(name), `${name} listed twice`).toBe(false);
    rows.set(name, (cells.at(-1) ?? '').replace(/ \|$/, ''));
  }
  return rows;
}

describe('the metrics page and /metrics', () => {
  it('lists every gateway metric once, with its help text word for word, and no metric the gateway lacks', async () => {
    const gw = await createTestGateway();
    try {
      const exposed = new Map(
        (await gw.gateway.metrics.registry.getMetricsAsJSON())
          .filter((metric) => metric.name.startsWith('gateway_'))
          .map((metric) => [metric.name, metric.help]),
      );
      const rows = documented();
      expect([...rows.keys()].sort()).toEqual([...exposed.keys()].sort());
      for (const [name, help] of exposed) expect(rows.get(name), name).toBe(help);
    } finally {
      await gw.close();
    }
  });
});
