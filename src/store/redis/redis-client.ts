import type { ConnectionOptions } from 'node:tls';
import type { Socket } from 'node:net';
import { Cluster, Redis, type Command, type RedisOptions } from 'ioredis';

import type { RedisTarget, RedisTls } from '../../config/store-config.js';

export type { HostPort, RedisTarget, RedisTls } from '../../config/store-config.js';

export interface StoreClientOptions {
  target: RedisTarget;
  password?: string | undefined;
  /** TLS to every node (and to the sentinels); a `rediss://` url turns it on by itself. */
  tls?: RedisTls | undefined;
  commandTimeoutMs: number;
  connectTimeoutMs: number;
}

/** The client of any topology: ioredis speaks the same commands to both. */
export type StoreClient = Redis | Cluster;

export interface RedisClientOptions {
  url: string;
  password?: string | undefined;
  commandTimeoutMs: number;
  connectTimeoutMs: number;
}

const uncork = (socket: Socket): void => socket.uncork();

/**
 * A connection to one server (standalone or the master Sentinel names) that sends the commands
 * of one turn of the event loop in one write: the first command corks the socket and the loop's
 * check phase (setImmediate, after the poll phase has run every request that arrived together)
 * uncorks it, so a card's claim is one write and, under load, so are many cards' commands. This
 * is what ioredis's auto-pipelining does (issue 20 measured it: one write per batch, not per
 * command), without its cost per command: a pipeline object per batch, a second promise and
 * callback per command and the results array, together about 30 µs of CPU per card in the
 * benchmark's store loop. Commands keep their order (cork only holds writes back), each still
 * has its own reply, promise and timeout, and a pipeline or MULTI sent meanwhile joins the same
 * write in order. A Cluster builds its node connections itself and keeps auto-pipelining.
 */
export class BatchingRedis extends Redis {
  override sendCommand(command: Command, stream?: Parameters<Redis['sendCommand']>[1]): unknown {
    const socket = this.stream as Socket | undefined;
    if (this.status === 'ready' && socket?.writable && socket.writableCorked === 0) {
      socket.cork();
      setImmediate(uncork, socket);
    }
    return super.sendCommand(command, stream);
  }
}

/**
 * Reconnection after a lost connection: quick at first, at most every half second, forever.
 * The cap is what bounds recovery however long the outage was (D55): the first attempt after
 * the store is back comes within half a second (plus at most one connect timeout).
 */
export const reconnectDelay = (attempt: number): number => Math.min(50 * attempt, 500);

/**
 * What every connection to a data node gets, whatever the topology (D23; ioredis's defaults hide outages): no
 * offline queue (commands are refused at once while disconnected instead of piling up), one
 * retry, a command timeout so a paused or stopped server cannot hold a request, and
 * reconnection in the background so service resumes by itself.
 */
function failFast(options: Omit<StoreClientOptions, 'target'>): RedisOptions {
  const tls: ConnectionOptions | undefined = options.tls
    ? { ...(options.tls.ca && { ca: options.tls.ca }), ...(options.tls.servername && { servername: options.tls.servername }) }
    : undefined;
  return {
    ...(options.password !== undefined && { password: options.password }),
    ...(tls && { tls }),
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    // A backstop only: the store's own deadline (deadline.ts) decides, and does not mistake a
    // busy event loop for a slow Redis.
    commandTimeout: options.commandTimeoutMs * 3,
    connectTimeout: options.connectTimeoutMs,
    // BatchingRedis batches the standalone and Sentinel connections itself; a Cluster's node
    // connections are built by ioredis, so it batches them (createStoreClient turns it on).
    enableAutoPipelining: false,
    // TCP keep-alive notices a peer that vanished (host down, cable cut). A paused server on a
    // live host (CLIENT PAUSE, SIGSTOP) still answers it: there commandTimeout gives the 503.
    keepAlive: 1000,
    // A master demoted behind our back (a failover while our connection stayed up) answers
    // writes with READONLY: drop the connection so that it is made again to the new master.
    // The failed command is not re-sent: its request has its 503 already.
    reconnectOnError: (error) => error.message.startsWith('READONLY'),
  };
}

/** One server by URL (the topology of `store.redis.url`); kept for callers that have only a URL. */
export function createRedisClient(options: RedisClientOptions): BatchingRedis {
  return new BatchingRedis(options.url, { ...failFast(options), retryStrategy: reconnectDelay });
}

/**
 * The ioredis client for `store.redis` (D35), fail-fast on every topology.
 *
 * Sentinel: the client asks the sentinels for the master and checks the server it reaches really
 * is one (`role`). A master that dies breaks the connection, and the reconnection asks the
 * sentinels again. A master demoted while alive is left by the store's sentinel follower, which
 * asks a sentinel every second (a write refused with READONLY drops the connection too).
 * ioredis's `failoverDetector` is left off: the sentinels announce `+switch-master` only once
 * the other replicas are reconfigured, about a second after the new master already serves,
 * and the detector then cuts the good connection (a burst of 503s, seen in the failover test).
 *
 * Cluster: per-node connections are made by ioredis from the slot map; a node that dies is not
 * reconnected to, its slots are retried on the others (which answer MOVED to the promoted
 * replica once the cluster has failed over). The redirection budget is small on purpose: past
 * the command deadline the gateway has answered 503 already, and re-sending a command to a
 * shard that is down only adds load.
 */
export function createStoreClient(options: StoreClientOptions): StoreClient {
  const { target } = options;
  const common = failFast(options);
  switch (target.topology) {
    case 'standalone':
      return new BatchingRedis(target.url, { ...common, retryStrategy: reconnectDelay });
    case 'sentinel':
      return new BatchingRedis({
        ...common,
        sentinels: target.nodes.map(({ host, port }) => ({ host, port })),
        name: target.masterName,
        role: 'master',
        ...(target.sentinelPassword !== undefined && { sentinelPassword: target.sentinelPassword }),
        ...(common.tls && { enableTLSForSentinelMode: true, sentinelTLS: common.tls }),
        sentinelCommandTimeout: options.connectTimeoutMs,
        sentinelRetryStrategy: reconnectDelay,
        retryStrategy: reconnectDelay,
      });
    case 'cluster':
      return new Cluster(
        target.nodes.map(({ host, port }) => ({ host, port })),
        {
          redisOptions: common,
          enableOfflineQueue: false,
          enableReadyCheck: true,
          enableAutoPipelining: true,
          scaleReads: 'master',
          maxRedirections: 6,
          retryDelayOnFailover: 100,
          retryDelayOnClusterDown: 100,
          retryDelayOnTryAgain: 100,
          slotsRefreshTimeout: options.connectTimeoutMs,
          // New nodes and moved slots are learnt from MOVED answers at once; this catches the rest.
          slotsRefreshInterval: 5000,
          clusterRetryStrategy: reconnectDelay,
          // With TLS the nodes are dialled by the addresses the cluster announces; the
          // certificate is checked against `tls.servername` when given.
          ...(common.tls && {
            dnsLookup: (address: string, callback: (error: NodeJS.ErrnoException | null, address: string, family?: number) => void) => callback(null, address),
          }),
        },
      );
  }
}

/** Resolves when the client is ready or `timeoutMs` passed; never rejects (the gateway starts not-ready). */
export function waitUntilReady(client: StoreClient, timeoutMs: number): Promise<boolean> {
  if (client.status === 'ready') return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => finish(false), timeoutMs);
    const onReady = () => finish(true);
    function finish(ready: boolean) {
      clearTimeout(timer);
      client.off('ready', onReady);
      resolve(ready);
    }
    client.on('ready', onReady);
  });
}
