import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { answersPing } from './redis-ping.js';

/**
 * One way to run a redis-server of one's own, for the tests (private servers to pause or kill,
 * replicas, Sentinel, Cluster) and the benchmark (a server whose command counts are the
 * gateway's): started, waited for until it answers PING, killed.
 */

/** How long a new server may take to answer before the start fails: a hang guard, not a limit. */
export const REDIS_START_GUARD_MS = 60_000;

/** What a private server on loopback gets: no persistence, nothing but 127.0.0.1. */
export const loopbackServerArgs = (port: number): string[] => ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];

export interface StartedRedis {
  readonly child: ChildProcess;
  /** What it wrote to stderr so far (why it did not start). */
  stderr(): string;
}

/** `redis-server args...`, resolved once it answers PING at `url`; killed and failed if it exits or hangs first. */
export async function startRedisServer(args: readonly string[], url: string): Promise<StartedRedis> {
  const child = spawn('redis-server', [...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
  });
  await new Promise<void>((resolve, reject) => {
    child.once('error', (error) => reject(new Error(`redis-server could not be started (is it installed?): ${error.message}`)));
    child.once('spawn', () => resolve());
  });
  const deadline = performance.now() + REDIS_START_GUARD_MS;
  while (!(await answersPing(url, 1000))) {
    if (child.exitCode !== null || performance.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`redis-server at ${url} did not answer (hang guard ${REDIS_START_GUARD_MS} ms): ${stderr.trim()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { child, stderr: () => stderr };
}

/** A private server on a loopback port: {@link loopbackServerArgs} plus `extraArgs`. */
export function startLoopbackRedis(port: number, extraArgs: readonly string[] = []): Promise<StartedRedis> {
  return startRedisServer([...loopbackServerArgs(port), ...extraArgs], `redis://127.0.0.1:${port}`);
}

/** SIGKILL (which also ends a SIGSTOPped server) and wait for the exit; nothing if it is gone. */
export async function killRedisServer(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGKILL');
  await exited;
}
