/** A Redis node or sentinel address. */
export interface HostPort {
  host: string;
  port: number;
}

/** Where the shared store lives (D35): exactly one of one server, a Sentinel group or a Cluster. */
export type RedisTarget =
  | { readonly topology: 'standalone'; readonly url: string }
  | { readonly topology: 'sentinel'; readonly masterName: string; readonly nodes: readonly HostPort[]; readonly sentinelPassword?: string | undefined }
  | { readonly topology: 'cluster'; readonly nodes: readonly HostPort[] };

export interface RedisTls {
  readonly ca?: Buffer | undefined;
  readonly servername?: string | undefined;
}

/** `store.redis` resolved (D35): one topology, secrets read, fail-fast bounds. */
export interface RedisStoreConfig {
  readonly kind: 'redis';
  readonly target: RedisTarget;
  readonly password: string | undefined;
  readonly tls: RedisTls | undefined;
  readonly keyPrefix: string;
  readonly commandTimeoutMs: number;
  readonly connectTimeoutMs: number;
  /** Replicas that must acknowledge a card's idempotency record before it is answered (0: none). */
  readonly replicasToAck: number;
}

/** `host:port` (IPv6 in brackets) as the schema admits it; the port must be a real one. */
export function parseNode(text: string): HostPort | undefined {
  const at = text.lastIndexOf(':');
  const port = Number(text.slice(at + 1));
  if (!Number.isInteger(port) || port < 1 || port > 65535) return undefined;
  return { host: text.slice(0, at).replace(/^\[|\]$/g, ''), port };
}
