import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { answersPing } from './redis-ping.js';
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
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  await new Promise<void>((resolve, reject) => {
    child.once('error', reject);
    child.once('spawn', () => resolve());
  });
  const url = `redis://127.0.0.1:${port}`;
  const deadline = performance.now() + 5_000;
  while (!(await answersPing(url, 300))) {
    if (child.exitCode !== null || performance.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`redis-server on port ${port} did not answer within 5 s`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return child;
}

async function killChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  // SIGKILL also ends a SIGSTOPped process.
  child.kill('SIGKILL');
  await exited;
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
      await killChild(child);
    },
    async restart() {
      await killChild(child);
      child = await launch(port);
    },
    async stop() {
      await killChild(child);
    },
  };
}
