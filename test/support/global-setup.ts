import './provided-context.js';
import { spawn, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import type { TestProject } from 'vitest/node';
import { freePort } from './ports.js';
import { answersPing } from './redis-ping.js';
import { makeTestKeys } from './test-keys.js';

/**
 * Finds a Redis for the suites that need one: REDIS_URL (default 127.0.0.1:6379), or else a
 * private redis-server on a free loopback port. Under CI=true a missing Redis fails the run
 * instead of silently skipping the Redis suites.
 */
let privateServer: ChildProcess | undefined;

async function startPrivateRedis(): Promise<string | undefined> {
  const port = await freePort();
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  const spawned = await new Promise<boolean>((resolve) => {
    child.once('error', () => resolve(false));
    child.once('spawn', () => resolve(true));
  });
  if (!spawned) return undefined;
  privateServer = child;
  const url = `redis://127.0.0.1:${port}`;
  for (let attempt = 0; attempt < 50; attempt += 1) {
    if (await answersPing(url)) return url;
    await new Promise((r) => setTimeout(r, 100));
  }
  return undefined;
}

export default async function setup(project: TestProject): Promise<() => void> {
  const wanted = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379';
  let url: string | undefined = (await answersPing(wanted)) ? wanted : await startPrivateRedis();
  if (!url) {
    const message = `No Redis answers at ${wanted} and no redis-server could be started: the Redis suites cannot run.`;
    if (process.env['CI'] === 'true') throw new Error(message);
    process.stderr.write(`${message}\n`);
    url = '';
  }
  project.provide('redisUrl', url);
  // Certificates and keys once per run, not once per test file.
  const keys = await makeTestKeys();
  project.provide('testKeys', keys);
  return () => {
    privateServer?.kill('SIGTERM');
    rmSync(keys.dir, { recursive: true, force: true });
  };
}
