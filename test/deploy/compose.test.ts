import { execFile } from 'node:child_process';
import { createPrivateKey, scrypt, timingSafeEqual, X509Certificate } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, posix, resolve } from 'node:path';
import { connect, createServer, type TLSSocket } from 'node:tls';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { arr, DRAIN_LIMIT_SECONDS, isObject, num, obj, readYaml, REPO, repoPath, secretReferences, str, type Json, type JsonObject } from './support.js';

/**
 * deploy/compose: Docker does not run here, so the compose file is checked by reading it: its
 * services, networks, volumes and published ports, and that every file and variable the
 * gateway config references is mounted or set. make-secrets.sh runs for real in a scratch
 * folder, and what it makes is checked the way the stack would use it (certificates verify,
 * mutual TLS completes, keys parse, the password matches its hash).
 */
const COMPOSE_DIR = repoPath('deploy', 'compose');
const compose = obj(readYaml('deploy', 'compose', 'compose.yaml'), 'compose.yaml');
const services = obj(compose['services'], 'services');
const service = (name: string): JsonObject => obj(services[name], `services.${name}`);
const GATEWAYS = ['gateway-a', 'gateway-b'];
const gatewayConfig = obj(readYaml('deploy', 'compose', 'config', 'gateway.yaml'), 'config/gateway.yaml');
const listeners = obj(gatewayConfig['listeners'], 'listeners');
const adminPort = num(obj(listeners['admin'], 'listeners.admin')['port'], 'admin port');
const httpsPort = num(obj(listeners['https'], 'listeners.https')['port'], 'https port');

interface Mount {
  source: string;
  target: string;
  readOnly: boolean;
}

/** Short-syntax volume entries: `source:target[:ro]`. */
function mountsOf(name: string): Mount[] {
  return arr(service(name)['volumes'] ?? [], `${name}.volumes`).map((entry) => {
    const [source = '', target = '', mode] = str(entry, `${name}.volumes[]`).split(':');
    return { source, target, readOnly: mode === 'ro' };
  });
}

function mountFor(name: string, path: string): Mount | undefined {
  return mountsOf(name).find((mount) => path === mount.target || path.startsWith(`${mount.target}/`));
}

/** Where a container path of `name` comes from on the host, for bind mounts (`./x`, `../x`). */
function hostPath(name: string, path: string): string | undefined {
  const mount = mountFor(name, path);
  if (!mount || !mount.source.startsWith('.')) return undefined;
  return resolve(COMPOSE_DIR, mount.source, posix.relative(mount.target, path));
}

function listOf(value: Json | undefined, path: string): string[] {
  return arr(value ?? [], path).map((item) => str(item, path));
}

/** A service's networks, whether listed or given as a map (with per-network settings). */
function networksOf(name: string): string[] {
  const networks = service(name)['networks'];
  return isObject(networks) ? Object.keys(networks) : listOf(networks, `${name}.networks`);
}

/** Compose durations as used here: `40s`, `1m30s`. */
function seconds(duration: string): number {
  const match = /^(?:(\d+)m)?(?:(\d+)s)?$/.exec(duration);
  if (!match) throw new Error(`not a duration: ${duration}`);
  return Number(match[1] ?? 0) * 60 + Number(match[2] ?? 0);
}

describe('compose file', () => {
  it('runs two gateway replicas, Redis, the connector, Prometheus and Grafana', () => {
    expect(Object.keys(services).sort()).toEqual(['connector', 'gateway-a', 'gateway-b', 'grafana', 'prometheus', 'redis', 'secrets-init']);
  });

  it('builds the gateway and the connector from the repository Dockerfile', () => {
    for (const name of [...GATEWAYS, 'connector', 'secrets-init']) {
      const build = obj(service(name)['build'], `${name}.build`);
      expect(resolve(COMPOSE_DIR, str(build['context'], 'context')), name).toBe(REPO);
      expect(existsSync(join(REPO, str(build['dockerfile'], 'dockerfile'))), name).toBe(true);
      expect(service(name)['image'], name).toBe('card-gateway:sandbox');
    }
    // The package's `bin` command, which the Dockerfile links onto the image's PATH.
    expect(service('connector')['entrypoint']).toEqual(['card-gateway-connector']);
    const bin = (JSON.parse(readFileSync(repoPath('package.json'), 'utf8')) as { bin: Record<string, string> }).bin;
    expect(bin['card-gateway-connector']).toBe('dist/src/connector/sandbox/main.js');
    // A command on the PATH runs by its first line: every bin's source starts with node's.
    for (const [name, file] of Object.entries(bin)) {
      const source = repoPath(...file.replace(/^dist\//, '').replace(/\.js$/, '.ts').split('/'));
      expect(readFileSync(source, 'utf8').split('\n')[0], name).toBe('#!/usr/bin/env node');
    }
    expect(readFileSync(repoPath('Dockerfile'), 'utf8')).toMatch(/^RUN node -e .*require\("\.\/package\.json"\)\.bin.*symlinkSync\(`\/app\/\$\{file\}`, `\/usr\/local\/bin\/\$\{name\}`\)/m);
    expect(existsSync(repoPath('src', 'connector', 'sandbox', 'main.ts'))).toBe(true);
  });

  it('starts each gateway on the config in config/, read-only', () => {
    for (const name of GATEWAYS) {
      const [flag, file = ''] = listOf(service(name)['command'], `${name}.command`);
      expect(flag).toBe('--config');
      expect(hostPath(name, file)).toBe(join(COMPOSE_DIR, 'config', 'gateway.yaml'));
      expect(mountFor(name, file)?.readOnly).toBe(true);
    }
  });

  it('publishes the API ports on loopback only, and never an admin listener, Redis or the connector', () => {
    const published: string[] = [];
    for (const [name, value] of Object.entries(services)) {
      for (const port of listOf(obj(value, name)['ports'], `${name}.ports`)) {
        expect(port, name).toMatch(/^127\.0\.0\.1:\d+:\d+$/);
        published.push(`${name}:${port.split(':')[2] ?? ''}`);
      }
    }
    expect(published.sort()).toEqual([`gateway-a:${httpsPort}`, `gateway-b:${httpsPort}`, 'grafana:3000', 'prometheus:9090']);
    // Prometheus's own 9090 is its UI; the gateways' admin port is published nowhere.
    expect(published.filter((entry) => entry.startsWith('gateway') && entry.endsWith(`:${adminPort}`))).toEqual([]);
  });

  it('keeps Redis and the connector on an internal network, and the admin listeners on one Prometheus shares', () => {
    const networks = obj(compose['networks'], 'networks');
    expect(obj(networks['backend'], 'backend')['internal']).toBe(true);
    expect(obj(networks['metrics'], 'metrics')['internal']).toBe(true);
    for (const name of GATEWAYS) expect(networksOf(name).sort()).toEqual(['backend', 'edge', 'metrics']);
    expect(networksOf('redis')).toEqual(['backend']);
    expect(networksOf('connector')).toEqual(['backend']);
    expect(networksOf('prometheus')).toContain('metrics');
    expect(networksOf('grafana')).not.toContain('metrics');
    // Host clients arrive from the edge network's gateway address, which must be allowlisted.
    const edge = obj(arr(obj(obj(networks['edge'], 'edge')['ipam'], 'ipam')['config'], 'ipam.config')[0], 'ipam.config[0]');
    expect(listOf(gatewayConfig['allowlist'], 'allowlist')).toContain(`${str(edge['gateway'], 'edge gateway')}/32`);
  });

  it("binds each admin listener to its gateway's own address on the metrics network, which clients on edge cannot reach", () => {
    // Issue 16: on 0.0.0.0 the admin listener (/metrics, /readyz, the OpenAPI document) answered
    // on the edge network too, where clients come from.
    const host = str(obj(listeners['admin'], 'listeners.admin')['host'], 'listeners.admin.host');
    expect(host).not.toMatch(/^(0\.0\.0\.0|::|\*)$/);
    const networks = obj(compose['networks'], 'networks');
    const subnetOf = (network: string) => str(obj(arr(obj(obj(networks[network], network)['ipam'], `${network}.ipam`)['config'], 'ipam.config')[0], 'ipam.config[0]')['subnet'], 'subnet');
    const within = (address: string, subnet: string) => {
      const [base = '', bits = '32'] = subnet.split('/');
      const toNumber = (ip: string) => ip.split('.').reduce((n, part) => n * 256 + Number(part), 0);
      const mask = 2 ** 32 - 2 ** (32 - Number(bits));
      return (toNumber(address) & mask) >>> 0 === (toNumber(base) & mask) >>> 0;
    };
    const addresses = GATEWAYS.map((name) => {
      // The name resolves, inside this gateway only, to its fixed address on `metrics`.
      const mapped = listOf(service(name)['extra_hosts'], `${name}.extra_hosts`).find((entry) => entry.startsWith(`${host}:`));
      expect(mapped, `${name} maps ${host}`).toBeDefined();
      const address = (mapped ?? '').slice(host.length + 1);
      const metrics = obj(obj(service(name)['networks'], `${name}.networks`)['metrics'], `${name}.networks.metrics`);
      expect(metrics['ipv4_address'], name).toBe(address);
      expect(within(address, subnetOf('metrics')), `${address} in metrics`).toBe(true);
      expect(within(address, subnetOf('edge')), `${address} not in edge`).toBe(false);
      // The health check asks the admin listener where it listens.
      expect(obj(service(name)['environment'], `${name}.environment`)['HEALTHCHECK_URL']).toBe(`http://${host}:${adminPort}/healthz`);
      return address;
    });
    expect(new Set(addresses).size).toBe(GATEWAYS.length);
  });

  it('points the gateway config at the compose services', () => {
    const store = obj(obj(gatewayConfig['store'], 'store')['redis'], 'store.redis');
    expect(new URL(str(store['url'], 'store.redis.url')).host).toBe('redis:6379');
    const connectorUrl = new URL(str(obj(gatewayConfig['connector'], 'connector')['url'], 'connector.url'));
    expect(connectorUrl.protocol).toBe('https:');
    expect(connectorUrl.hostname).toBe('connector');
    const connectorEnv = obj(service('connector')['environment'], 'connector.environment');
    expect(connectorEnv['SANDBOX_CONNECTOR_PORT']).toBe(connectorUrl.port);
  });

  it('lets Prometheus scrape every gateway admin listener and load the rules', () => {
    const mount = mountsOf('prometheus').find((m) => m.target === '/etc/prometheus');
    expect(mount && resolve(COMPOSE_DIR, mount.source)).toBe(repoPath('deploy', 'prometheus'));
    const prometheus = obj(readYaml('deploy', 'prometheus', 'prometheus.yml'), 'prometheus.yml');
    const job = obj(arr(prometheus['scrape_configs'], 'scrape_configs')[0], 'scrape_configs[0]');
    const targets = listOf(obj(arr(job['static_configs'], 'static_configs')[0], 'static_configs[0]')['targets'], 'targets');
    expect(targets.sort()).toEqual(GATEWAYS.map((name) => `${name}:${adminPort}`));
    for (const name of GATEWAYS) expect(service(name)['hostname']).toBe(name);
    expect(listOf(service('prometheus')['command'], 'prometheus.command')).toContain('--config.file=/etc/prometheus/prometheus.yml');
  });

  it('provisions the dashboard into Grafana', () => {
    const environment = obj(service('grafana')['environment'], 'grafana.environment');
    const home = str(environment['GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH'], 'home dashboard');
    expect(hostPath('grafana', home)).toBe(repoPath('deploy', 'grafana', 'card-gateway.json'));
    const provider = obj(readYaml('deploy', 'grafana', 'provisioning', 'dashboards', 'card-gateway.yaml'), 'dashboard provider');
    const path = str(obj(obj(arr(provider['providers'], 'providers')[0], 'providers[0]')['options'], 'options')['path'], 'provider path');
    expect(hostPath('grafana', join(path, 'card-gateway.json'))).toBe(repoPath('deploy', 'grafana', 'card-gateway.json'));
    const datasources = obj(readYaml('deploy', 'grafana', 'provisioning', 'datasources', 'prometheus.yaml'), 'datasources');
    const url = new URL(str(obj(arr(datasources['datasources'], 'datasources')[0], 'datasources[0]')['url'], 'url'));
    expect(url.hostname).toBe('prometheus');
  });

  it('gives SIGTERM time for the shutdown delay and the drain (D38)', () => {
    const delay = num(obj(gatewayConfig['shutdown'], 'shutdown')['delaySeconds'], 'shutdown.delaySeconds');
    expect(delay).toBe(5);
    for (const name of GATEWAYS) {
      expect(service(name)['stop_signal']).toBe('SIGTERM');
      expect(seconds(str(service(name)['stop_grace_period'], `${name}.stop_grace_period`))).toBeGreaterThanOrEqual(delay + DRAIN_LIMIT_SECONDS + 5);
    }
  });

  it('declares every named volume it uses, uses every one it declares, and hardens the gateways', () => {
    const declared = Object.keys(obj(compose['volumes'], 'volumes')).sort();
    const used = Object.keys(services).flatMap((name) => mountsOf(name).filter((m) => !m.source.startsWith('.')).map((m) => m.source));
    expect([...new Set(used)].sort()).toEqual(declared);
    for (const name of [...GATEWAYS, 'connector', 'redis', 'prometheus']) {
      expect(service(name)['read_only'], name).toBe(true);
      expect(service(name)['cap_drop'], name).toEqual(['ALL']);
    }
    // Each replica its own audit trail.
    const audits = GATEWAYS.map((name) => mountFor(name, str(obj(gatewayConfig['audit'], 'audit')['file'], 'audit.file'))?.source);
    expect(new Set(audits).size).toBe(2);
    for (const [name, value] of Object.entries(services)) {
      const dependsOn = obj(value, name)['depends_on'];
      const names = Array.isArray(dependsOn) ? dependsOn.map((d) => str(d, 'depends_on')) : isObject(dependsOn) ? Object.keys(dependsOn) : [];
      for (const dependency of names) expect(Object.keys(services), `${name} depends on ${dependency}`).toContain(dependency);
    }
  });
});

describe('make-secrets.sh', () => {
  const state = mkdtempSync(join(tmpdir(), 'deploy-compose-state-'));
  let firstRun = '';
  let secondRun = '';

  function run(): Promise<string> {
    return new Promise((done, fail) => {
      execFile('bash', [join(COMPOSE_DIR, 'make-secrets.sh'), state], { cwd: REPO, timeout: 170_000 }, (error, stdout, stderr) =>
        error ? fail(new Error(`make-secrets.sh failed: ${error.message}\n${stdout}${stderr}`)) : done(stdout),
      );
    });
  }

  beforeAll(async () => {
    // The first run hashes the password with `npm run hash-password`, which compiles what changed in src/.
    firstRun = await run();
    secondRun = await run();
  }, 180_000);
  afterAll(() => rmSync(state, { recursive: true, force: true }));

  const read = (...parts: string[]) => readFileSync(join(state, ...parts));
  const certificate = (...parts: string[]) => new X509Certificate(read(...parts));

  it('makes everything once, and nothing the second time', () => {
    expect(firstRun).toContain('sandbox credential: sandbox-demo / ');
    expect(secondRun).toContain('nothing to make');
  });

  it('makes every file the gateway config references, where the compose file mounts it from', () => {
    const env = readFileSync(join(state, 'gateway.env'), 'utf8');
    // Redis reads its password from the environment (requirepass); the gateways only from a file (D50).
    expect(service('redis')['env_file']).toBe('state/gateway.env');
    for (const name of GATEWAYS) expect(service(name)['env_file'], name).toBeUndefined();
    const secretsInit = mountsOf('secrets-init');
    for (const reference of secretReferences(gatewayConfig)) {
      if (reference.env !== undefined) expect(env, reference.field).toMatch(new RegExp(`^${reference.env}=\\S+$`, 'm'));
      if (reference.file === undefined) continue;
      for (const name of GATEWAYS) {
        const mount = mountFor(name, reference.file);
        expect(mount, `${name}: ${reference.field}`).toBeDefined();
        expect(mount?.readOnly, `${name}: ${reference.field}`).toBe(true);
        if (mount?.source === 'gateway-secrets') {
          // Filled by secrets-init from ./state/secrets/gateway.
          const into = secretsInit.find((m) => m.source === 'gateway-secrets');
          const from = secretsInit.find((m) => m.source === './state/secrets');
          expect(into && from, 'secrets-init mounts').toBeTruthy();
          expect(existsSync(join(state, 'secrets', posix.basename(into?.target ?? ''), posix.relative(mount.target, reference.file))), reference.field).toBe(true);
        }
      }
    }
    expect(existsSync(join(state, 'credentials', posix.basename(str(gatewayConfig['credentialsFile'], 'credentialsFile'))))).toBe(true);
    // The connector's TLS files, through its own volume.
    const connectorEnv = obj(service('connector')['environment'], 'connector.environment');
    for (const variable of ['SANDBOX_CONNECTOR_TLS_CERT', 'SANDBOX_CONNECTOR_TLS_KEY', 'SANDBOX_CONNECTOR_TLS_CLIENT_CA']) {
      const path = str(connectorEnv[variable], variable);
      expect(mountFor('connector', path)?.source, variable).toBe('connector-secrets');
      expect(existsSync(join(state, 'secrets', 'connector', posix.basename(path))), variable).toBe(true);
    }
  });

  it('keeps secrets to their owner and the credentials file readable by the gateway', () => {
    for (const file of [
      'secrets/gateway/tls.key',
      'secrets/gateway/signing-sbx-compose-1.key',
      'secrets/gateway/card-record-sbx-card-1.key',
      'secrets/gateway/redis-password',
      'secrets/connector/tls.key',
      'ca/ca.key',
      'gateway.env',
      'sandbox-demo.password',
    ]) {
      expect(statSync(join(state, file)).mode & 0o077, file).toBe(0);
    }
    expect(statSync(join(state, 'credentials', 'credentials.yaml')).mode & 0o777).toBe(0o644);
  });

  it('issues certificates that verify against the sandbox CA with the right names and purposes', () => {
    const ca = certificate('ca', 'ca.crt');
    expect(ca.ca).toBe(true);
    const serverAuth = '1.3.6.1.5.5.7.3.1';
    const clientAuth = '1.3.6.1.5.5.7.3.2';
    const api = certificate('secrets', 'gateway', 'tls.crt');
    expect(api.verify(ca.publicKey)).toBe(true);
    for (const name of ['localhost', 'gateway-a', 'gateway-b']) expect(api.checkHost(name), name).toBe(name);
    expect(api.checkIP('127.0.0.1')).toBe('127.0.0.1');
    expect(api.keyUsage).toEqual([serverAuth]);
    expect(api.checkPrivateKey(createPrivateKey(read('secrets', 'gateway', 'tls.key')))).toBe(true);
    const connector = certificate('secrets', 'connector', 'tls.crt');
    expect(connector.verify(ca.publicKey)).toBe(true);
    expect(connector.checkHost('connector')).toBe('connector');
    const client = certificate('secrets', 'gateway', 'connector-client.crt');
    expect(client.verify(ca.publicKey)).toBe(true);
    expect(client.keyUsage).toEqual([clientAuth]);
    expect(read('secrets', 'gateway', 'connector-ca.crt').equals(read('ca', 'ca.crt'))).toBe(true);
    expect(read('secrets', 'connector', 'client-ca.crt').equals(read('ca', 'ca.crt'))).toBe(true);
  });

  /** A TLS server with the connector's files, and a client with the gateway's: the handshake's outcome. */
  async function handshake(withClientCertificate: boolean): Promise<{ client: string; serverSawAuthorized: boolean }> {
    let serverSawAuthorized = false;
    const server = createServer(
      { key: read('secrets', 'connector', 'tls.key'), cert: read('secrets', 'connector', 'tls.crt'), ca: read('secrets', 'connector', 'client-ca.crt'), requestCert: true, rejectUnauthorized: true },
      (socket: TLSSocket) => {
        serverSawAuthorized = socket.authorized;
        socket.end('ok');
      },
    );
    server.on('tlsClientError', () => undefined);
    await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
    const { port } = server.address() as AddressInfo;
    try {
      const client = await new Promise<string>((done) => {
        const socket = connect({
          host: '127.0.0.1',
          port,
          servername: 'connector',
          ca: read('secrets', 'gateway', 'connector-ca.crt'),
          ...(withClientCertificate ? { cert: read('secrets', 'gateway', 'connector-client.crt'), key: read('secrets', 'gateway', 'connector-client.key') } : {}),
        });
        let body = '';
        socket.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
        socket.on('end', () => done(body === 'ok' ? 'answered' : 'closed'));
        socket.on('error', (error: NodeJS.ErrnoException) => done(`error ${error.code ?? error.message}`));
        socket.setTimeout(5000, () => socket.destroy(new Error('timeout')));
      });
      return { client, serverSawAuthorized };
    } finally {
      await new Promise((closed) => server.close(closed));
    }
  }

  it('lets the gateway and the connector complete mutual TLS, and the connector refuse a client without a certificate', async () => {
    expect(await handshake(true)).toEqual({ client: 'answered', serverSawAuthorized: true });
    const refused = await handshake(false);
    expect(refused.client).not.toBe('answered');
  });

  it('makes an Ed25519 signing key, a 32-byte card-record key and a Redis password', () => {
    expect(createPrivateKey(read('secrets', 'gateway', 'signing-sbx-compose-1.key')).asymmetricKeyType).toBe('ed25519');
    expect(read('secrets', 'gateway', 'card-record-sbx-card-1.key').toString('utf8')).toMatch(/^[0-9a-f]{64}$/);
    expect(read('gateway.env').toString('utf8')).toMatch(/^REDIS_PASSWORD=[0-9a-f]{48}\n$/);
    // The gateways' copy, as a file (D50): the same password Redis requires.
    expect(`REDIS_PASSWORD=${read('secrets', 'gateway', 'redis-password').toString('utf8')}\n`).toBe(read('gateway.env').toString('utf8'));
  });

  it('makes one active credential whose password verifies against its hash', async () => {
    const file = obj(parse(read('credentials', 'credentials.yaml').toString('utf8')) as Json, 'credentials.yaml');
    const [entry, ...others] = arr(file['credentials'], 'credentials').map((c, i) => obj(c, `credentials[${i}]`));
    expect(others).toEqual([]);
    expect(entry?.['username']).toBe('sandbox-demo');
    expect(entry?.['active']).toBe(true);
    expect(Object.keys(obj(gatewayConfig['issuingAccounts'], 'issuingAccounts'))).toContain(entry?.['issuingAccount']);
    const [scheme, n, r, p, salt = '', hash = ''] = str(entry?.['passwordHash'], 'passwordHash').split('$');
    expect(scheme).toBe('scrypt');
    const expected = Buffer.from(hash, 'base64');
    const password = read('sandbox-demo.password').toString('utf8').trim();
    expect(password.length).toBeGreaterThanOrEqual(12);
    const derived = await new Promise<Buffer>((done, fail) =>
      scrypt(password, Buffer.from(salt, 'base64'), expected.length, { N: Number(n), r: Number(r), p: Number(p) }, (error, key) => (error ? fail(error) : done(key))),
    );
    expect(timingSafeEqual(derived, expected)).toBe(true);
  });
});
