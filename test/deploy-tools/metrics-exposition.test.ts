import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rawTestConfig, writeTestConfig, type WrittenConfig } from '../support/gateway-fixture.js';
import { killAll, scrape, startGateway } from '../operations/support.js';
import { promtool } from './promtool.js';

/**
 * A real gateway process's /metrics through `promtool check metrics` (Prometheus's own parser
 * and linter). `npm test` reads the same exposition with a strict Node parser and the Node
 * form of the name lint (test/operations/metrics-and-audit.test.ts).
 */
const checkMetrics = (text: string) => promtool(['check', 'metrics'], { input: text });

describe('the exposition, as promtool reads it', () => {
  let written: WrittenConfig | undefined;
  let text = '';

  beforeAll(async () => {
    written = await writeTestConfig(await rawTestConfig({ trustedProxies: [] }));
    const gateway = await startGateway(written.file);
    text = await scrape(gateway.adminUrl);
  });
  afterAll(async () => {
    await killAll();
    if (written) rmSync(written.dir, { recursive: true, force: true });
  });

  it('passes promtool check metrics without a remark', () => {
    expect(text).toContain('# TYPE gateway_http_requests_total counter');
    expect(checkMetrics(text)).toEqual({ status: 0, output: '' });
  });

  it('promtool flags a gauge named like a counter (the check can fail)', () => {
    expect(checkMetrics('# HELP a_total A.\n# TYPE a_total gauge\na_total 1\n').status).toBe(3);
    expect(checkMetrics('# HELP a_total A.\n# TYPE a_total counter\na_total{x="1"} 2\n')).toEqual({ status: 0, output: '' });
  });
});
