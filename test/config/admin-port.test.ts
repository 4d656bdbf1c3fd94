import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';

/**
 * Issue 21: the admin listener of every example and deploy config sits on one port that none of
 * a gateway's usual neighbours takes by default, so that Prometheus (9090) and the gateway can
 * share a host. The deploy kit's own tests check that its probes, scrape targets, network
 * policy and health checks follow the configs.
 */

const REPO = join(import.meta.dirname, '..', '..');
/** Default ports of what runs beside a gateway: the Prometheus stack, Grafana, exporters, OpenTelemetry, proxies. */
const NEIGHBOURS = new Map<number, string>([
  [9090, 'Prometheus'],
  [9091, 'Pushgateway'],
  [9093, 'Alertmanager'],
  [9094, 'Alertmanager cluster'],
  [9100, 'node_exporter'],
  [3000, 'Grafana'],
  [3100, 'Loki'],
  [8080, 'cAdvisor, the gateway plain listener'],
  [8443, 'the gateway API'],
  [9464, 'OpenTelemetry SDK Prometheus exporter'],
  [8888, 'OpenTelemetry Collector metrics'],
  [8889, 'OpenTelemetry Collector Prometheus exporter'],
  [9901, 'Envoy admin'],
]);

type Config = { listeners: { admin: { port: number }; https: { port: number } } };
const yamlFile = (...path: string[]): Config => parse(readFileSync(join(REPO, ...path), 'utf8')) as Config;
const configMap = parse(readFileSync(join(REPO, 'deploy', 'kubernetes', 'configmap-config.yaml'), 'utf8')) as { data: Record<string, string> };

const CONFIGS: Record<string, Config> = {
  'config/local.yaml': yamlFile('config', 'local.yaml'),
  'config/sandbox.yaml': yamlFile('config', 'sandbox.yaml'),
  'config/production.yaml': yamlFile('config', 'production.yaml'),
  'deploy/compose/config/gateway.yaml': yamlFile('deploy', 'compose', 'config', 'gateway.yaml'),
  'deploy/kubernetes/configmap-config.yaml': parse(configMap.data['gateway.yaml'] ?? '') as Config,
};

describe('the admin port of the example and deploy configs', () => {
  it('is one port in all of them', () => {
    const ports = Object.entries(CONFIGS).map(([name, config]) => [name, config.listeners.admin.port] as const);
    expect(new Set(ports.map(([, port]) => port)).size, JSON.stringify(ports)).toBe(1);
  });

  it("is none of the usual neighbours' ports, outside the exporters' range, and not an API port", () => {
    for (const [name, config] of Object.entries(CONFIGS)) {
      const port = config.listeners.admin.port;
      expect(NEIGHBOURS.get(port), `${name}: admin port ${port}`).toBeUndefined();
      expect(port >= 9100 && port <= 9999, `${name}: admin port ${port} is in the range Prometheus allocates to exporters`).toBe(false);
      expect(port, name).not.toBe(config.listeners.https.port);
    }
  });
});
