import type { TString } from '@sinclair/typebox';
import { checkCaExpiry, parseCertificates } from '../certificates.js';
import { ConfigFileSchema } from '../config-schema.js';
import type { ResolvedConfig } from '../config-types.js';
import type { SectionContext } from '../load-context.js';
import { accept, child, entries, members, present } from '../schema-parts.js';
import { parseNode, type HostPort, type RedisTarget } from '../store-config.js';

const STORE = ConfigFileSchema.properties.store;
const REDIS = STORE.properties.redis;
const SENTINEL = REDIS.properties.sentinel;
const CLUSTER = REDIS.properties.cluster;
const TOPOLOGIES = ['url', 'sentinel', 'cluster'] as const;

/** `host:port` entries (the schema's pattern) whose port is a real one; each bad port named by index. */
function nodes(context: SectionContext, field: string, raw: unknown, schema: TString): HostPort[] {
  return entries(raw).flatMap((entry, index) => {
    const text = accept(schema, entry);
    if (text === undefined) return []; // not host:port at all: the schema said so
    const node = parseNode(text);
    if (!node) context.problems.add(`${field}[${index}]`, `"${text}" is not host:port with a port from 1 to 65535`);
    return node ? [node] : [];
  });
}

/**
 * `store`: memory, or Redis in one of three topologies (D35) with its secrets read and its CA
 * parsed. Each part is checked whatever its siblings hold (D52).
 */
export async function loadStore(raw: unknown, context: SectionContext): Promise<ResolvedConfig['store'] | undefined> {
  const { problems } = context;
  const { kind } = members(STORE, raw);
  const redisRaw = child(raw, 'redis');
  if (kind === 'memory') return { kind: 'memory' };
  if (kind === 'redis' && redisRaw === undefined) problems.add('store.redis', 'is required when store.kind is redis');
  // A mistyped kind beside a redis block: the block is still checked.
  if (redisRaw === undefined) return undefined;

  const redis = members(REDIS, redisRaw);
  const sentinel = members(SENTINEL, child(redisRaw, 'sentinel'));
  // D35: one topology. Each names its nodes; the rest of the section applies to all three.
  const named = TOPOLOGIES.filter((field) => present(redisRaw, field));
  if (named.length !== 1)
    problems.add('store.redis', `needs exactly one of url, sentinel or cluster (D35); found ${named.length === 0 ? 'none' : named.join(' and ')}`);
  const sentinelNodes = nodes(context, 'store.redis.sentinel.nodes', child(child(redisRaw, 'sentinel'), 'nodes'), SENTINEL.properties.nodes.items);
  const clusterNodes = nodes(context, 'store.redis.cluster.nodes', child(child(redisRaw, 'cluster'), 'nodes'), CLUSTER.properties.nodes.items);
  // A brace in the prefix would become every key's hash tag: on a Cluster all of them in one slot.
  if (redis.keyPrefix && /[{}]/.test(redis.keyPrefix))
    problems.add('store.redis.keyPrefix', "must not contain { or } (Redis Cluster hash tags are the store's own)");
  if (present(redisRaw, 'tls') && redis.url?.startsWith('redis://')) problems.add('store.redis.tls', 'needs a rediss:// url');
  const password = (await context.secret('store.redis.password', redis.password, 'private'))?.toString('utf8').trim();
  const sentinelPassword = (await context.secret('store.redis.sentinel.password', sentinel.password, 'private'))?.toString('utf8').trim();
  const ca = await context.secret('store.redis.tls.ca', redis.tls?.ca, 'public');
  const caBundle = ca ? await problems.capture('store.redis.tls.ca', () => parseCertificates(ca)) : undefined;
  if (caBundle && redis.tls?.ca) checkCaExpiry(context, 'store.redis.tls.ca', context.where(redis.tls.ca), caBundle);

  const whole = accept(REDIS, redisRaw);
  const target: RedisTarget | undefined = whole?.url
    ? { topology: 'standalone', url: whole.url }
    : whole?.sentinel
      ? { topology: 'sentinel', masterName: whole.sentinel.masterName, nodes: sentinelNodes, sentinelPassword }
      : whole?.cluster
        ? { topology: 'cluster', nodes: clusterNodes }
        : undefined;
  if (!whole || !target) return undefined;
  return {
    kind: 'redis',
    target,
    password,
    tls: whole.tls || whole.url?.startsWith('rediss://') ? { ca, servername: whole.tls?.servername } : undefined,
    keyPrefix: whole.keyPrefix,
    commandTimeoutMs: whole.commandTimeoutMs,
    connectTimeoutMs: whole.connectTimeoutMs,
    replicasToAck: whole.replicasToAck,
  };
}
