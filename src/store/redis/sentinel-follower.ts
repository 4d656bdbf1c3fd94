import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { Redis } from 'ioredis';
import { withDeadline } from '../../foundation/deadline.js';
import { storeLate } from './server-state.js';

/**
 * Sentinel: a master that is demoted while alive (SENTINEL FAILOVER, a partition) keeps
 * accepting writes on the open connection until the sentinels reconfigure it, several seconds
 * after the promotion, and those writes are then lost. Every tick, one sentinel is asked which
 * server is the master; when it names another one, the connection is dropped and made again
 * through the sentinels. (ioredis's own failoverDetector waits for `+switch-master`, a second
 * after the promotion, and drops the connection even when it already reached the new master.)
 */
export class SentinelFollower {
  readonly #client: Redis;
  readonly #commandTimeoutMs: number;
  /** A connection to one sentinel, asked every tick which server is the master. */
  #sentinel: Redis | undefined;
  #sentinelIndex = 0;

  constructor(client: Redis, commandTimeoutMs: number) {
    this.#client = client;
    this.#commandTimeoutMs = commandTimeoutMs;
  }

  async follow(): Promise<void> {
    const client = this.#client;
    const { sentinels, name, sentinelUsername, sentinelPassword, sentinelTLS, enableTLSForSentinelMode } = client.options;
    if (!sentinels || sentinels.length === 0 || !name || client.status !== 'ready') return;
    if (!this.#sentinel) {
      const address = sentinels[this.#sentinelIndex % sentinels.length]!;
      this.#sentinel = new Redis({
        host: address.host ?? '127.0.0.1',
        port: address.port ?? 26379,
        ...(sentinelUsername && { username: sentinelUsername }),
        ...(sentinelPassword && { password: sentinelPassword }),
        ...(enableTLSForSentinelMode && sentinelTLS && { tls: sentinelTLS }),
        enableReadyCheck: false,
        enableOfflineQueue: true,
        maxRetriesPerRequest: 0,
        retryStrategy: () => null,
        connectTimeout: this.#commandTimeoutMs * 3,
        lazyConnect: true,
      });
      this.#sentinel.on('error', () => undefined);
    }
    try {
      const named = (await withDeadline(this.#sentinel.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name), this.#commandTimeoutMs, storeLate)) as
        [string, string] | null;
      const stream = client.stream;
      if (!named || stream.remotePort === undefined || stream.remoteAddress === undefined) return;
      const [host, port] = named;
      if (Number(port) !== stream.remotePort) return this.#reconnectToMaster();
      const current = stream.remoteAddress.replace(/^::ffff:/, '');
      const addresses = isIP(host) ? [host] : (await lookup(host, { all: true })).map((entry) => entry.address);
      if (!addresses.includes(current)) this.#reconnectToMaster();
    } catch {
      // This sentinel is away: the next tick asks the next one.
      this.#sentinel.disconnect();
      this.#sentinel = undefined;
      this.#sentinelIndex += 1;
    }
  }

  close(): void {
    this.#sentinel?.disconnect();
  }

  #reconnectToMaster(): void {
    if (this.#client.status === 'ready') this.#client.disconnect(true);
  }
}
