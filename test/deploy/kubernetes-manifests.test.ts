import { readdirSync, readFileSync } from 'node:fs';
import { posix } from 'node:path';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { unknownFieldProblems } from './kubernetes-strict-fields.js';
import { arr, DRAIN_LIMIT_SECONDS, isObject, num, obj, readYaml, readYamlDocuments, repoPath, secretReferences, str, type Json, type JsonObject } from './support.js';

/**
 * deploy/kubernetes: every object passes the Kubernetes API schema of the `kubernetes-models`
 * package (a maintained npm package generated from the Kubernetes OpenAPI document) and has no
 * unknown field; then the objects are checked against each other and against the gateway
 * config they carry (ports, probes, selectors, mounts, grace period). No cluster runs here.
 */
const DIR = 'deploy/kubernetes';
const NAMESPACE = 'card-gateway-sandbox';

/** Validators by `apiVersion/kind`: a kind not listed here fails the test until it is added. */
const KINDS: Record<string, { module: string; typeName: string; validate(value: Json): void }> = {
  'v1/ConfigMap': { module: 'kubernetes-models/v1/ConfigMap', typeName: 'IConfigMap', validate: (v) => new ConfigMap(v as ConstructorParameters<typeof ConfigMap>[0]).validate() },
  'v1/Namespace': { module: 'kubernetes-models/v1/Namespace', typeName: 'INamespace', validate: (v) => new Namespace(v as ConstructorParameters<typeof Namespace>[0]).validate() },
  'v1/Service': { module: 'kubernetes-models/v1/Service', typeName: 'IService', validate: (v) => new Service(v as ConstructorParameters<typeof Service>[0]).validate() },
  'v1/ServiceAccount': { module: 'kubernetes-models/v1/ServiceAccount', typeName: 'IServiceAccount', validate: (v) => new ServiceAccount(v as ConstructorParameters<typeof ServiceAccount>[0]).validate() },
  'apps/v1/Deployment': { module: 'kubernetes-models/apps/v1/Deployment', typeName: 'IDeployment', validate: (v) => new Deployment(v as ConstructorParameters<typeof Deployment>[0]).validate() },
  'policy/v1/PodDisruptionBudget': { module: 'kubernetes-models/policy/v1/PodDisruptionBudget', typeName: 'IPodDisruptionBudget', validate: (v) => new PodDisruptionBudget(v as ConstructorParameters<typeof PodDisruptionBudget>[0]).validate() },
  'networking.k8s.io/v1/NetworkPolicy': { module: 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy', typeName: 'INetworkPolicy', validate: (v) => new NetworkPolicy(v as ConstructorParameters<typeof NetworkPolicy>[0]).validate() },
};

interface Manifest {
  file: string;
  kind: string;
  name: string;
  key: string;
  value: JsonObject;
}

const manifestFiles = readdirSync(repoPath(DIR)).filter((name) => name.endsWith('.yaml') && name !== 'kustomization.yaml').sort();
const manifests: Manifest[] = manifestFiles.flatMap((file) =>
  readYamlDocuments(DIR, file)
    .filter((document) => document !== null)
    .map((document, index) => {
      const value = obj(document, `${file}[${index}]`);
      const kind = str(value['kind'], `${file}: kind`);
      const name = str(obj(value['metadata'], `${file}: metadata`)['name'], `${file}: metadata.name`);
      return { file, kind, name, key: `${str(value['apiVersion'], `${file}: apiVersion`)}/${kind}`, value };
    }),
);

function only(kind: string): Manifest {
  const found = manifests.filter((manifest) => manifest.kind === kind);
  expect(found.map((manifest) => manifest.name), kind).toHaveLength(1);
  return found[0] as Manifest;
}

function matchLabels(selector: Json | undefined, path: string): JsonObject {
  return obj(obj(selector, path)['matchLabels'], `${path}.matchLabels`);
}

function configMapText(name: string, key: string): string {
  const configMap = manifests.find((manifest) => manifest.kind === 'ConfigMap' && manifest.name === name);
  if (!configMap) throw new Error(`no ConfigMap ${name}`);
  return str(obj(configMap.value['data'], `${name}.data`)[key], `${name}.data.${key}`);
}

const deployment = only('Deployment').value;
const podTemplate = obj(obj(deployment['spec'], 'spec')['template'], 'spec.template');
const podLabels = obj(obj(podTemplate['metadata'], 'template.metadata')['labels'], 'template.metadata.labels');
const podSpec = obj(podTemplate['spec'], 'template.spec');
const containers = arr(podSpec['containers'], 'containers').map((c, i) => obj(c, `containers[${i}]`));
const initContainers = arr(podSpec['initContainers'] ?? [], 'initContainers').map((c, i) => obj(c, `initContainers[${i}]`));
const gateway = containers.find((container) => container['name'] === 'gateway') ?? obj(null, 'container "gateway"');
const gatewayConfig = obj(parse(configMapText('card-gateway-config', 'gateway.yaml')) as Json, 'gateway.yaml');
const listeners = obj(gatewayConfig['listeners'], 'listeners');
const adminPort = num(obj(listeners['admin'], 'listeners.admin')['port'], 'listeners.admin.port');
const httpsPort = num(obj(listeners['https'], 'listeners.https')['port'], 'listeners.https.port');

function containerPort(name: string): number {
  const port = arr(gateway['ports'], 'gateway.ports').map((p, i) => obj(p, `ports[${i}]`)).find((p) => p['name'] === name);
  return num(port?.['containerPort'], `gateway port ${name}`);
}

function mounts(container: JsonObject): JsonObject[] {
  return arr(container['volumeMounts'] ?? [], `${String(container['name'])}.volumeMounts`).map((m, i) => obj(m, `volumeMounts[${i}]`));
}

/** The mount of the gateway container that holds `path`, if any. */
function mountFor(path: string): JsonObject | undefined {
  return mounts(gateway).find((mount) => {
    const at = str(mount['mountPath'], 'mountPath');
    return path === at || path.startsWith(`${at}/`);
  });
}

describe('Kubernetes manifests', () => {
  it('are all listed in the kustomization, which lists nothing else', () => {
    const kustomization = obj(readYaml(DIR, 'kustomization.yaml'), 'kustomization.yaml');
    expect(arr(kustomization['resources'], 'resources').map((r) => str(r, 'resources[]')).sort()).toEqual(manifestFiles);
    expect(kustomization['namespace']).toBe(NAMESPACE);
  });

  it('pass the Kubernetes API schema (kubernetes-models)', () => {
    expect(manifests.length).toBeGreaterThanOrEqual(8);
    for (const manifest of manifests) {
      const kind = KINDS[manifest.key];
      expect(kind, `${manifest.file}: ${manifest.key} has no validator here`).toBeDefined();
      expect(() => kind?.validate(manifest.value), `${manifest.file}: ${manifest.kind} ${manifest.name}`).not.toThrow();
    }
  });

  it('have no unknown fields (what kubectl --validate=strict refuses)', () => {
    const typed = manifests.map((manifest) => {
      const kind = KINDS[manifest.key];
      if (!kind) throw new Error(`${manifest.file}: ${manifest.key} has no validator here`);
      return { label: `${manifest.file}: ${manifest.kind} ${manifest.name}`, module: kind.module, typeName: kind.typeName, value: manifest.value };
    });
    expect(unknownFieldProblems(typed)).toEqual([]);
  }, 60_000);

  it('catch an unknown field (the strict check works)', () => {
    const broken = structuredClone(only('Service').value);
    obj(broken['spec'], 'spec')['externalTraficPolicy'] = 'Local';
    const problems = unknownFieldProblems([{ label: 'broken Service', module: 'kubernetes-models/v1/Service', typeName: 'IService', value: broken }]);
    expect(problems.join('\n')).toContain('externalTraficPolicy');
  }, 60_000);

  it('live in the environment namespace', () => {
    for (const manifest of manifests) {
      const metadata = obj(manifest.value['metadata'], 'metadata');
      if (manifest.kind === 'Namespace') expect(manifest.name).toBe(NAMESPACE);
      else expect(metadata['namespace'], `${manifest.file}: ${manifest.kind} ${manifest.name}`).toBe(NAMESPACE);
    }
  });

  it('select the gateway pods with the Service, the PodDisruptionBudget and the NetworkPolicy', () => {
    const selector = matchLabels(obj(deployment['spec'], 'spec')['selector'], 'Deployment selector');
    for (const [key, value] of Object.entries(selector)) expect(podLabels[key], `pod label ${key}`).toBe(value);
    const selects = (labels: JsonObject) => Object.entries(labels).every(([key, value]) => podLabels[key] === value);
    expect(selects(obj(obj(only('Service').value['spec'], 'spec')['selector'], 'Service selector'))).toBe(true);
    expect(selects(matchLabels(obj(only('PodDisruptionBudget').value['spec'], 'spec')['selector'], 'PDB selector'))).toBe(true);
    expect(selects(matchLabels(obj(only('NetworkPolicy').value['spec'], 'spec')['podSelector'], 'NetworkPolicy podSelector'))).toBe(true);
    const replicas = num(obj(deployment['spec'], 'spec')['replicas'], 'replicas');
    const maxUnavailable = num(obj(only('PodDisruptionBudget').value['spec'], 'spec')['maxUnavailable'], 'maxUnavailable');
    expect(maxUnavailable).toBeLessThan(replicas);
  });

  it('expose the API port in the Service and the admin port nowhere but to Prometheus', () => {
    expect(containerPort('https')).toBe(httpsPort);
    expect(containerPort('admin')).toBe(adminPort);
    const ports = arr(obj(only('Service').value['spec'], 'spec')['ports'], 'Service ports').map((p, i) => obj(p, `ports[${i}]`));
    expect(ports.map((port) => port['targetPort'])).toEqual(['https']);

    const spec = obj(only('NetworkPolicy').value['spec'], 'spec');
    expect(spec['policyTypes']).toEqual(['Ingress', 'Egress']);
    const rules = arr(spec['ingress'], 'ingress').map((r, i) => obj(r, `ingress[${i}]`));
    for (const rule of rules) {
      const rulePorts = arr(rule['ports'], 'ingress ports').map((p) => obj(p, 'port')['port']);
      if (rulePorts.includes(adminPort) || rulePorts.includes('admin')) {
        // The admin port: only from Prometheus pods, and never together with the API port.
        const peers = arr(rule['from'], 'admin rule from').map((p, i) => obj(p, `from[${i}]`));
        expect(peers.length).toBeGreaterThan(0);
        for (const peer of peers) expect(matchLabels(peer['podSelector'], 'admin peer podSelector')['app.kubernetes.io/name']).toBe('prometheus');
        expect(rulePorts).toEqual([adminPort]);
      } else {
        expect(rulePorts).toEqual([httpsPort]);
      }
    }
    const annotations = obj(obj(podTemplate['metadata'], 'template.metadata')['annotations'], 'annotations');
    expect(annotations['prometheus.io/scrape']).toBe('true');
    expect(annotations['prometheus.io/port']).toBe(String(adminPort));
    expect(annotations['prometheus.io/path']).toBe('/metrics');
  });

  it('probe readiness and liveness on the admin listener', () => {
    const probe = (name: string) => obj(obj(gateway[name], name)['httpGet'], `${name}.httpGet`);
    expect(probe('readinessProbe')).toEqual({ path: '/readyz', port: 'admin' });
    expect(probe('livenessProbe')).toEqual({ path: '/healthz', port: 'admin' });
    expect(probe('startupProbe')).toEqual({ path: '/healthz', port: 'admin' });
    // The admin listener must listen on the pod's address for kubelet and Prometheus.
    expect(obj(listeners['admin'], 'listeners.admin')['host']).toBe('0.0.0.0');
  });

  it('give SIGTERM time for the shutdown delay and the drain (D38)', () => {
    const delay = num(obj(gatewayConfig['shutdown'], 'shutdown')['delaySeconds'], 'shutdown.delaySeconds');
    expect(delay).toBe(5);
    const grace = num(podSpec['terminationGracePeriodSeconds'], 'terminationGracePeriodSeconds');
    // A preStop hook runs before SIGTERM, inside the same grace period.
    const preStop = isObject(gateway['lifecycle']) ? obj(gateway['lifecycle'], 'lifecycle')['preStop'] : undefined;
    const preStopSeconds = isObject(preStop) && isObject(preStop['sleep']) ? num(preStop['sleep']['seconds'], 'preStop.sleep.seconds') : 0;
    expect(isObject(preStop) && preStop['exec'] !== undefined, 'a preStop exec has no bounded length').toBe(false);
    expect(grace).toBeGreaterThanOrEqual(preStopSeconds + delay + DRAIN_LIMIT_SECONDS + 5);
  });

  it('run every container as non-root with a read-only root filesystem and no capabilities', () => {
    const pod = obj(podSpec['securityContext'], 'pod securityContext');
    expect(pod['runAsNonRoot']).toBe(true);
    expect(num(pod['runAsUser'], 'runAsUser')).toBeGreaterThan(0);
    expect(obj(pod['seccompProfile'], 'seccompProfile')['type']).toBe('RuntimeDefault');
    expect(podSpec['automountServiceAccountToken']).toBe(false);
    for (const container of [...initContainers, ...containers]) {
      const name = str(container['name'], 'name');
      const context = obj(container['securityContext'], `${name}.securityContext`);
      expect(context['readOnlyRootFilesystem'], name).toBe(true);
      expect(context['allowPrivilegeEscalation'], name).toBe(false);
      expect(obj(context['capabilities'], `${name}.capabilities`)['drop'], name).toEqual(['ALL']);
      const resources = obj(container['resources'], `${name}.resources`);
      expect(Object.keys(obj(resources['requests'], `${name}.requests`)).sort(), name).toEqual(['cpu', 'memory']);
      expect(obj(resources['limits'], `${name}.limits`)['memory'], name).toBeDefined();
    }
  });

  it('mount every volume it declares, and declare every volume it mounts', () => {
    const declared = arr(podSpec['volumes'], 'volumes').map((v, i) => str(obj(v, `volumes[${i}]`)['name'], 'volume name'));
    const mounted = [...initContainers, ...containers].flatMap((container) => mounts(container).map((mount) => str(mount['name'], 'mount name')));
    expect([...new Set(mounted)].sort()).toEqual([...declared].sort());
    // Only folder mounts see ConfigMap updates; a subPath mount would never reload.
    for (const mount of mounts(gateway)) expect(mount['subPath'], String(mount['name'])).toBeUndefined();
  });

  it('mount or set everything the gateway config references', () => {
    const env = arr(gateway['env'] ?? [], 'env').map((e, i) => str(obj(e, `env[${i}]`)['name'], 'env name'));
    const secretFiles: string[] = [];
    for (const reference of secretReferences(gatewayConfig)) {
      if (reference.env !== undefined) expect(env, reference.field).toContain(reference.env);
      if (reference.file !== undefined) {
        const mount = mountFor(reference.file);
        expect(mount, `${reference.field}: ${reference.file}`).toBeDefined();
        if (mount?.['name'] === 'secrets') secretFiles.push(posix.basename(reference.file));
      }
    }
    // Every secret file is a key of one of the Secrets deploy/README.md tells operators to create.
    const readme = readFileSync(repoPath('deploy', 'README.md'), 'utf8');
    for (const file of secretFiles) expect(readme, `deploy/README.md names ${file}`).toContain(`\`${file}\``);

    const credentials = mountFor(str(gatewayConfig['credentialsFile'], 'credentialsFile'));
    expect(credentials?.['name']).toBe('credentials');
    const audit = mountFor(str(obj(gatewayConfig['audit'], 'audit')['file'], 'audit.file'));
    expect(audit?.['name']).toBe('audit');
    expect(audit?.['readOnly']).toBeUndefined();
    expect(arr(gateway['args'], 'args')).toEqual(['--config', '/etc/card-gateway/config/gateway.yaml']);
    expect(mountFor('/etc/card-gateway/config/gateway.yaml')?.['name']).toBe('config');
  });

  it('copy the Secrets into the volume the config reads, as files of the gateway user only', () => {
    const init = initContainers.find((container) => container['name'] === 'secret-files') ?? obj(null, 'init container secret-files');
    const script = arr(init['args'], 'init args').map((a) => str(a, 'arg')).join('\n');
    expect(script).toContain('install -m 0400');
    const paths = mounts(init).map((mount) => str(mount['mountPath'], 'mountPath'));
    expect(paths).toContain(str(mountFor('/run/card-gateway/secrets/tls.crt')?.['mountPath'], 'secrets mount'));
    const volumes = arr(podSpec['volumes'], 'volumes').map((v, i) => obj(v, `volumes[${i}]`));
    const source = volumes.find((volume) => volume['name'] === 'secrets-source') ?? obj(null, 'volume secrets-source');
    const sources = arr(obj(source['projected'], 'projected')['sources'], 'sources').map((s, i) => str(obj(obj(s, `sources[${i}]`)['secret'], 'secret')['name'], 'secret name'));
    expect(sources.sort()).toEqual(['card-gateway-connector', 'card-gateway-keys', 'card-gateway-redis', 'card-gateway-tls']);
    // No secret in the environment (D50: the Redis password is one of the files).
    expect(gateway['env']).toBeUndefined();
    const copy = volumes.find((volume) => volume['name'] === 'secrets') ?? obj(null, 'volume secrets');
    expect(obj(copy['emptyDir'], 'secrets.emptyDir')['medium']).toBe('Memory');
  });

  it('ship a credentials file the gateway can read', () => {
    const credentials = obj(parse(configMapText('card-gateway-credentials', 'credentials.yaml')) as Json, 'credentials.yaml');
    expect(Array.isArray(credentials['credentials'])).toBe(true);
    expect(Object.keys(credentials)).toEqual(['credentials']);
  });
});
