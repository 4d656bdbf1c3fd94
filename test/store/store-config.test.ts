import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/config-error.js';
import { loadConfig, type Environment, type GatewayConfig } from '../../src/config/load-config.js';
import { rawTestConfig, testCertificatePem, writeTestConfig } from '../support/gateway-fixture.js';

/**
 * D35: `store.redis` as an operator writes it. Exactly one of url, sentinel or cluster; the
 * rest (password, TLS, keyPrefix, fail-fast bounds, replicasToAck) applies to all three; every
 * mistake is one `file: field: problem` line.
 */

async function load(redis: Record<string, unknown>, env: Environment = {}, files: Record<string, string> = {}): Promise<GatewayConfig['store']> {
  const written = await writeTestConfig(await rawTestConfig({ store: { kind: 'redis', redis } }));
  for (const [name, content] of Object.entries(files)) writeFileSync(join(written.dir, name), content, { mode: 0o600 });
  return (await loadConfig(written.file, env)).store;
}

async function problems(redis: Record<string, unknown>): Promise<string[]> {
  const error = await load(redis).then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(ConfigError);
  // Drop the `file: ` in front: the field and the problem are what these tests are about.
  return (error as ConfigError).problems.map((line) => line.slice(line.indexOf(': ') + 2));
}

describe('store.redis (D35)', () => {
  it('url: one server, with the defaults of every topology', async () => {
    expect(await load({ url: 'redis://cache:6379', keyPrefix: 'p:' })).toEqual({
      kind: 'redis',
      target: { topology: 'standalone', url: 'redis://cache:6379' },
      password: undefined,
      tls: undefined,
      keyPrefix: 'p:',
      commandTimeoutMs: 300,
      connectTimeoutMs: 500,
      replicasToAck: 0,
    });
  });

  it('sentinel: master name, host:port nodes (IPv6 in brackets), both passwords from secret refs, replicasToAck', async () => {
    const store = await load(
      {
        sentinel: { masterName: 'cards', nodes: ['sentinel-a:26379', '10.0.0.2:26380', '[2001:db8::7]:26379'], password: { file: 'sentinel.secret' } },
        password: { env: 'REDIS_PASSWORD' },
        keyPrefix: 'p:',
        replicasToAck: 2,
      },
      { REDIS_PASSWORD: 'data-secret' },
      { 'sentinel.secret': 'sentinel-secret\n' },
    );
    expect(store).toMatchObject({
      target: {
        topology: 'sentinel',
        masterName: 'cards',
        nodes: [
          { host: 'sentinel-a', port: 26379 },
          { host: '10.0.0.2', port: 26380 },
          { host: '2001:db8::7', port: 26379 },
        ],
        sentinelPassword: 'sentinel-secret',
      },
      password: 'data-secret',
      replicasToAck: 2,
    });
  });

  it('cluster: startup nodes, TLS with a CA and a server name', async () => {
    const ca = await testCertificatePem();
    const store = await load(
      { cluster: { nodes: ['redis-0:6379', 'redis-1:6379'] }, tls: { ca: { env: 'REDIS_CA' }, servername: 'redis.internal' }, keyPrefix: 'p:' },
      { REDIS_CA: ca },
    );
    expect(store).toMatchObject({
      target: {
        topology: 'cluster',
        nodes: [
          { host: 'redis-0', port: 6379 },
          { host: 'redis-1', port: 6379 },
        ],
      },
      tls: { ca: Buffer.from(ca), servername: 'redis.internal' },
    });
  });

  it('refuses a TLS CA that holds no certificate, as check-config would', async () => {
    const error = await load({ url: 'rediss://cache:6380', tls: { ca: { env: 'REDIS_CA' } }, keyPrefix: 'p:' }, { REDIS_CA: 'PEM' }).then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems.map((line) => line.slice(line.indexOf(': ') + 2))).toEqual(['store.redis.tls.ca: is not a PEM certificate']);
  });

  it('a rediss:// url turns TLS on by itself', async () => {
    expect(await load({ url: 'rediss://cache:6380', keyPrefix: 'p:' })).toMatchObject({ tls: { ca: undefined, servername: undefined } });
  });

  it('refuses none and refuses two of url, sentinel and cluster', async () => {
    expect(await problems({ keyPrefix: 'p:' })).toContain('store.redis: needs exactly one of url, sentinel or cluster (D35); found none');
    expect(await problems({ url: 'redis://a:1', cluster: { nodes: ['b:2'] }, keyPrefix: 'p:' })).toContain(
      'store.redis: needs exactly one of url, sentinel or cluster (D35); found url and cluster',
    );
  });

  it('refuses nodes that are not host:port, ports out of range, and an empty node list', async () => {
    expect((await problems({ cluster: { nodes: ['redis-0'] }, keyPrefix: 'p:' })).join('\n')).toMatch(/store\.redis\.cluster\.nodes\[0\]/);
    expect(await problems({ cluster: { nodes: ['redis-0:70000'] }, keyPrefix: 'p:' })).toContain(
      'store.redis.cluster.nodes[0]: "redis-0:70000" is not host:port with a port from 1 to 65535',
    );
    expect((await problems({ sentinel: { masterName: 'm', nodes: [] }, keyPrefix: 'p:' })).join('\n')).toMatch(/store\.redis\.sentinel\.nodes/);
  });

  it('refuses a key prefix with a hash-tag brace, TLS settings on a redis:// url, and replicasToAck above 5', async () => {
    expect(await problems({ cluster: { nodes: ['a:1'] }, keyPrefix: '{gw}:' })).toContain(
      "store.redis.keyPrefix: must not contain { or } (Redis Cluster hash tags are the store's own)",
    );
    expect(await problems({ url: 'redis://a:1', tls: { servername: 'x' }, keyPrefix: 'p:' })).toContain('store.redis.tls: needs a rediss:// url');
    expect((await problems({ url: 'redis://a:1', keyPrefix: 'p:', replicasToAck: 6 })).join('\n')).toMatch(/store\.redis\.replicasToAck/);
  });
});
