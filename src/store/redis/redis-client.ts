import { Redis } from 'ioredis';

export interface RedisClientOptions {
  url: string;
  password?: string | undefined;
  commandTimeoutMs: number;
  connectTimeoutMs: number;
}

/**
 * An ioredis client tuned to fail fast (D23, pitfalls.md): no offline queue (commands are
 * refused at once while disconnected instead of piling up), one retry, a command timeout so a
 * paused or stopped server cannot hold a request, and reconnection in the background so
 * service resumes by itself.
 */
export function createRedisClient(options: RedisClientOptions): Redis {
  const client = new Redis(options.url, {
    ...(options.password !== undefined && { password: options.password }),
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: options.commandTimeoutMs,
    connectTimeout: options.connectTimeoutMs,
    enableAutoPipelining: true,
    retryStrategy: (attempt) => Math.min(50 * attempt, 1000),
    // TCP keep-alive notices a peer that vanished (host down, cable cut). A paused server on a
    // live host (CLIENT PAUSE, SIGSTOP) still answers it: there commandTimeout gives the 503.
    keepAlive: 1000,
  });
  return client;
}

/** Resolves when the client is ready or `timeoutMs` passed; never rejects (the gateway starts not-ready). */
export function waitUntilReady(client: Redis, timeoutMs: number): Promise<boolean> {
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
