import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { AUTH_USERS, httpsJson, PASSWORD, root, runChild, type Server } from './bench-servers.js';
import type { LoadOptions, LoadResult } from './load.js';
import { CARDS_PATH, CLIENT_ADDRESSES, requestTemplate } from './request-templates.js';

export type Started = (name: string, cpu: number, args: string[]) => Promise<Server>;
const runLoad = (options: LoadOptions) => runChild<LoadResult>('load.js', options, 'load generator');

/** `npm run bench -- --soak`: 5 minutes of mixed traffic on the Redis gateway; heap and handles sampled every second. */
export async function soak(started: Started, dir: string, ca: Buffer): Promise<void> {
  const minutes = Number(process.env['BENCH_SOAK_MINUTES'] ?? 5);
  const gateway = await started('C-gateway-redis', 0, ['gateway', 'redis', dir]);
  const tokens = await httpsJson(gateway.url, '/api/v1/auth/login', { username: 'bench', password: PASSWORD }, ca);
  const token = String(tokens['accessToken']);
  const caText = ca.toString('utf8');
  const seconds = minutes * 60;
  process.stderr.write(`bench: soak for ${seconds} s on the Redis gateway\n`);
  const [create, replay, auth] = await Promise.all([
    runLoad({
      origin: gateway.url,
      template: requestTemplate('gateway-create', CARDS_PATH, { token, clientAddresses: CLIENT_ADDRESSES }),
      ca: caText,
      connections: 8,
      durationSeconds: seconds,
      overallRate: 300,
    }),
    runLoad({
      origin: gateway.url,
      template: requestTemplate('gateway-replay', CARDS_PATH, { token, clientAddresses: CLIENT_ADDRESSES }),
      ca: caText,
      connections: 4,
      durationSeconds: seconds,
      overallRate: 100,
    }),
    runLoad({
      origin: gateway.url,
      authMix: { usernamePrefix: 'auth-', usernameCount: AUTH_USERS, password: PASSWORD },
      ca: caText,
      connections: 2,
      durationSeconds: seconds,
      overallRate: 10,
    }),
  ]);
  const samples = gateway.stats;
  const minuteOf = (index: number) => samples.slice(Math.max(0, index), index + 60);
  const avg = (list: typeof samples, key: 'heapUsed' | 'handles') => list.reduce((sum, s) => sum + s[key], 0) / Math.max(1, list.length);
  const first = minuteOf(30); // after a 30 s warm-up
  const last = minuteOf(samples.length - 60);
  const soakResult = {
    date: new Date().toISOString(),
    seconds,
    traffic: { create, replay, auth },
    heapMiB: { firstMinute: +(avg(first, 'heapUsed') / 1048576).toFixed(1), lastMinute: +(avg(last, 'heapUsed') / 1048576).toFixed(1) },
    handles: { firstMinute: +avg(first, 'handles').toFixed(1), lastMinute: +avg(last, 'handles').toFixed(1) },
    // Every minute's average, so a slow rise can be told from the old generation settling.
    heapMiBPerMinute: Array.from({ length: Math.floor(samples.length / 60) }, (_, m) => +(avg(minuteOf(m * 60), 'heapUsed') / 1048576).toFixed(1)),
    samples: samples.length,
  };
  writeFileSync(join(root, 'bench', 'soak-results.json'), `${JSON.stringify(soakResult, null, 2)}\n`);
  process.stdout.write(`${JSON.stringify(soakResult, null, 2)}\nwrote bench/soak-results.json\n`);
}
