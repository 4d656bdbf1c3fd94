import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { arr, obj, readYaml, repoPath } from '../deploy/support.js';
import { promtool } from './promtool.js';

/**
 * deploy/prometheus through promtool: the alert rules pass `promtool check rules`, their unit
 * tests pass `promtool test rules`, and both scrape configs pass `promtool check config`.
 */
const PROMETHEUS_DIR = repoPath('deploy', 'prometheus');
const RULES_FILE = join('rules', 'card-gateway.rules.yml');
const TESTS_FILE = join('tests', 'card-gateway.rules.test.yml');

const scratch = mkdtempSync(join(tmpdir(), 'deploy-prometheus-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('alert rules', () => {
  it('pass promtool check rules', () => {
    const result = promtool(['check', 'rules', RULES_FILE], { cwd: PROMETHEUS_DIR });
    expect(result.output).toContain('SUCCESS');
    expect(result.status, result.output).toBe(0);
  });

  it('pass their unit tests (promtool test rules)', () => {
    const result = promtool(['test', 'rules', TESTS_FILE], { cwd: PROMETHEUS_DIR });
    expect(result.output).toContain('SUCCESS');
    expect(result.status, result.output).toBe(0);
  });
});

describe('scrape configs', () => {
  it('the compose one passes promtool check config (rules included)', () => {
    const result = promtool(['check', 'config', 'prometheus.yml'], { cwd: PROMETHEUS_DIR });
    expect(result.status, result.output).toBe(0);
    expect(result.output).toContain('SUCCESS: 1 rule files found');
  });

  it('the Kubernetes one passes promtool check config apart from its service discovery', () => {
    // Debian builds Prometheus without Kubernetes service discovery, so its promtool does not
    // know kubernetes_sd_configs. Everything else (relabelling regexes, paths, rules) is checked
    // by swapping the discovery block for a static target.
    const config = obj(readYaml('deploy', 'prometheus', 'prometheus-kubernetes.yml'), 'prometheus-kubernetes.yml');
    const jobs = arr(config['scrape_configs'], 'scrape_configs').map((job, index) => {
      const fields = { ...obj(job, `scrape_configs[${index}]`) };
      expect(fields['kubernetes_sd_configs'], `scrape_configs[${index}]`).toBeDefined();
      delete fields['kubernetes_sd_configs'];
      return { ...fields, static_configs: [{ targets: ['pod.invalid:8442'] }] };
    });
    cpSync(join(PROMETHEUS_DIR, 'rules'), join(scratch, 'rules'), { recursive: true });
    writeFileSync(join(scratch, 'prometheus-kubernetes.yml'), stringify({ ...config, scrape_configs: jobs }));
    const result = promtool(['check', 'config', 'prometheus-kubernetes.yml'], { cwd: scratch });
    expect(result.status, result.output).toBe(0);
  });
});
