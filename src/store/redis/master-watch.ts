import { Cluster } from 'ioredis';
import type { StoreTopology } from '../store-types.js';
import { mastersOf, shardChanges, shardRanges, type ShardRange } from './cluster-slots.js';
import type { StoreClient } from './redis-client.js';
import { SentinelFollower } from './sentinel-follower.js';
import { parseServerInfo, type ServerState } from './server-state.js';
import type { StoreEvents } from './store-events.js';

export type RedisTopology = Exclude<StoreTopology, 'memory'>;

/** Servers whose INFO a health check reads, for the state of each (D54): memory, policy, role. */
const INFO_SECTIONS = ['memory', 'replication'] as const;

/** The topology a client speaks to, by its kind: a Cluster, a Redis given sentinels, or one server. */
export const topologyOf = (client: StoreClient): RedisTopology =>
  client instanceof Cluster ? 'cluster' : (client.options.sentinels?.length ?? 0) > 0 ? 'sentinel' : 'standalone';

const addressOf = (host: string | undefined, port: number | undefined): string => `${host ?? '127.0.0.1'}:${port ?? 6379}`;

/**
 * The masters serving now (Sentinel's from the connection, the Cluster's per slot range), each
 * change announced once (`master-changed`), and every master's INFO for the health check.
 */
export class MasterWatch {
  readonly kind: RedisTopology;
  readonly #client: StoreClient;
  readonly #events: StoreEvents;
  readonly #follower: SentinelFollower | undefined;
  #masters: readonly string[] = [];
  #ranges: ShardRange[] = [];
  #changes = 0;

  constructor(client: StoreClient, kind: RedisTopology, events: StoreEvents, commandTimeoutMs: number) {
    this.#client = client;
    this.kind = kind;
    this.#events = events;
    if (kind === 'standalone' && !(client instanceof Cluster)) this.#masters = [addressOf(client.options.host, client.options.port)];
    this.#follower = kind === 'sentinel' && !(client instanceof Cluster) ? new SentinelFollower(client, commandTimeoutMs) : undefined;
  }

  /** `host:port` of the master(s) serving now: one, or one per Cluster shard. */
  get masters(): readonly string[] {
    return this.#masters;
  }

  /** Master changes seen since start. */
  get changes(): number {
    return this.#changes;
  }

  /**
   * Sentinel, (re)connected: the server this connection reached is the master at the time of
   * connecting. False when the connection has no address (nothing to say yet).
   */
  sentinelConnected(): boolean {
    if (this.#client instanceof Cluster) return false;
    const { remoteAddress, remotePort } = this.#client.stream;
    if (remoteAddress === undefined || remotePort === undefined) return false;
    const master = remoteAddress.includes(':') ? `[${remoteAddress}]:${remotePort}` : `${remoteAddress}:${remotePort}`;
    const previous = this.#masters[0];
    this.#masters = [master];
    if (previous !== undefined && previous !== master) {
      this.#changes += 1;
      this.#events.emit({ kind: 'master-changed', from: previous, to: master });
    }
    return true;
  }

  /**
   * A new Cluster slot map: one event per slot range whose master changed (a shard's failover).
   * True when it replaced an earlier map (worth a health check).
   */
  slotsRefreshed(): boolean {
    if (!(this.#client instanceof Cluster)) return false;
    const ranges = shardRanges(this.#client);
    if (ranges.length === 0) return false;
    const previous = this.#ranges;
    this.#ranges = ranges;
    this.#masters = mastersOf(ranges).sort();
    if (previous.length === 0) return false;
    for (const change of shardChanges(previous, ranges)) {
      this.#changes += 1;
      this.#events.emit({ kind: 'master-changed', ...change });
    }
    return true;
  }

  /** Sentinel: a master demoted while alive is left at once (sentinel-follower.ts); elsewhere nothing to do. */
  async follow(): Promise<void> {
    await this.#follower?.follow();
  }

  /**
   * Every master's INFO memory and replication (Cluster: every shard's). INFO is answered under
   * OOM, where PING would say nothing of the refused writes, and by managed services that refuse
   * CONFIG; ioredis sends it at once, never behind an automatic pipeline that waits for a paused
   * server.
   */
  async probe(): Promise<ServerState[]> {
    const client = this.#client;
    if (!(client instanceof Cluster)) {
      const address = this.#masters[0] ?? addressOf(client.options.host, client.options.port);
      return [parseServerInfo(address, await client.info(...INFO_SECTIONS))];
    }
    const masters = mastersOf(shardRanges(client));
    if (masters.length === 0) throw new Error('no cluster slot map yet');
    const nodes = new Map(client.nodes('all').map((node) => [`${node.options.host ?? ''}:${node.options.port ?? 0}`, node]));
    const missing = masters.filter((master) => !nodes.has(master));
    if (missing.length > 0) {
      // A dead master's connection is gone; a fresh slot map names its successor once promoted.
      client.refreshSlotsCache();
      throw new Error(`no connection to master ${missing.join(', ')}`);
    }
    return Promise.all(masters.map(async (master) => parseServerInfo(master, await nodes.get(master)!.info(...INFO_SECTIONS))));
  }

  close(): void {
    this.#follower?.close();
  }
}
