/**
 * The attacker of the "under attack" scenario, in its own process:
 *   node dist/bench/attack.js '<json options>'
 * Runs, for `durationSeconds`, the two floods the hostile-traffic work was measured against,
 * each from its own allowlisted loopback address so the per-address limits see one source each:
 * - a login flood from 127.0.0.2: random usernames, 1000-character passwords;
 * - a slow-URL flood from 127.0.0.3: GET with a URL just under 8 KiB of `eyJ` repeats, no token.
 * Each keeps `concurrency` requests in flight. Prints one JSON line with the answers by status.
 */
import { randomBytes } from 'node:crypto';
import { Agent, request } from 'node:https';

export interface AttackOptions {
  url: string;
  ca: string;
  durationSeconds: number;
  concurrency: number;
}

const options = JSON.parse(process.argv[2] ?? '{}') as AttackOptions;
const target = new URL(options.url);
const until = Date.now() + options.durationSeconds * 1000;
const statuses: Record<string, number> = {};
const count = (key: string) => (statuses[key] = (statuses[key] ?? 0) + 1);

const SLOW_URL = `/api/v1/issuing/cards?x=${'eyJ'.repeat(2700)}`;
const LONG_PASSWORD = 'p'.repeat(1000);

function send(agent: Agent, method: string, path: string, body?: string): Promise<void> {
  return new Promise((resolve) => {
    const req = request(
      {
        host: target.hostname,
        port: target.port,
        method,
        path,
        agent,
        ca: options.ca,
        headers: body ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } : {},
      },
      (res) => {
        res.resume();
        res.on('end', () => {
          count(String(res.statusCode));
          resolve();
        });
      },
    );
    req.on('error', () => {
      count('error');
      resolve();
    });
    req.end(body);
  });
}

async function flood(localAddress: string, next: (agent: Agent) => Promise<void>): Promise<void> {
  const agent = new Agent({ keepAlive: true, localAddress, maxSockets: options.concurrency, ca: options.ca });
  const worker = async () => {
    while (Date.now() < until) await next(agent);
  };
  await Promise.all(Array.from({ length: options.concurrency }, worker));
  agent.destroy();
}

await Promise.all([
  flood('127.0.0.2', (agent) =>
    send(agent, 'POST', '/api/v1/auth/login', JSON.stringify({ username: randomBytes(12).toString('hex'), password: LONG_PASSWORD })),
  ),
  flood('127.0.0.3', (agent) => send(agent, 'GET', SLOW_URL)),
]);
process.stdout.write(`${JSON.stringify({ statuses })}\n`);
