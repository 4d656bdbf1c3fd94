import type { ChildProcess } from 'node:child_process';
import { killRedisServer, startLoopbackRedis } from '../../tools/launch/redis-server.js';
import { unusedPort } from './redis.js';

/**
 * A redis-server of the test's own, on a free loopback port, for fault injection (pause with
 * SIGSTOP, kill, restart). The shared Redis on 6379 is never paused or stopped.
 */
export interface PrivateRedis {
  readonly port: number;
  readonly url: string;
  readonly pid: number;
  /** SIGSTOP: the socket stays open but nothing answers (the worst kind of outage). */
  pause(): void;
  /** SIGCONT. */
  resume(): void;
  /** SIGKILL, and wait for the process to be gone. */
  kill(): Promise<void>;
  /** A new, empty server on the same port (after kill()). */
  restart(): Promise<void>;
  /** Kills whatever server is running; safe to call twice. */
  stop(): Promise<void>;
}

async function launch(port: number): Promise<ChildProcess> {
  return (await startLoopbackRedis(port)).child;
}

export async function startPrivateRedis(): Promise<PrivateRedis> {
  const port = await unusedPort();
  let child = await launch(port);
  const pid = (): number => {
    if (child.pid === undefined) throw new Error('redis-server has no pid');
    return child.pid;
  };
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    get pid() {
      return pid();
    },
    pause() {
      process.kill(pid(), 'SIGSTOP');
    },
    resume() {
      process.kill(pid(), 'SIGCONT');
    },
    async kill() {
      await killRedisServer(child);
    },
    async restart() {
      await killRedisServer(child);
      child = await launch(port);
    },
    async stop() {
      await killRedisServer(child);
    },
  };
}
