import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { readDashboard, substituted } from '../deploy/dashboard.js';
import { promtool } from './promtool.js';

/** Every query of deploy/grafana/card-gateway.json is valid PromQL: promtool parses each as a recording rule. */
const scratch = mkdtempSync(join(tmpdir(), 'deploy-grafana-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('Grafana dashboard queries', () => {
  it('are valid PromQL (promtool check rules)', () => {
    const { queries } = readDashboard();
    expect(queries.length).toBeGreaterThan(30);
    const rules = queries.map((query, index) => ({ record: `dashboard:query_${index}`, expr: substituted(query.expr) }));
    writeFileSync(join(scratch, 'dashboard-queries.yml'), stringify({ groups: [{ name: 'dashboard', rules }] }));
    const result = promtool(['check', 'rules', 'dashboard-queries.yml'], { cwd: scratch });
    expect(result.status, result.output).toBe(0);
    expect(result.output).toContain(`SUCCESS: ${queries.length} rules found`);
  });
});
