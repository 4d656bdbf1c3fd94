/**
 * One server under test, in its own process so the orchestrator can pin it to a core:
 *   node dist/bench/serve.js connector
 *   node dist/bench/serve.js bare-proxy <connectorUrl> <benchDir>
 *   node dist/bench/serve.js gateway <memory|redis|redis-events-off|cluster> <benchDir>
 *   node dist/bench/serve.js receiver
 * Prints one JSON line `{"ready":true,...urls}` when listening (a gateway's connector listener as
 * `connector`, when it has one), then one
 * `{"stats":{heapUsed,rss,handles}}` line per second. Lines on stdin: `cpu` answers
 * `{"cpu":{...}}` (process CPU time in microseconds); `profile-start` starts V8's sampling
 * profiler and `profile-stop <file>` writes what it sampled since to `<file>` (a .cpuprofile)
 * and answers `{"profile":"<file>"}`, so a profile covers exactly a measured window; the
 * receiver answers `receiver-stats` with `{"answer":{...}}` (bench/webhook-receiver.ts) and
 * `receiver-reset` with `{"answer":true}`. Exits on
 * SIGTERM, and when stdin ends (the bench that started it is gone).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { join } from 'node:path';
import httpProxy from '@fastify/http-proxy';
import Fastify from 'fastify';
import { composeGateway } from '../src/compose.js';
import { loadConfig } from '../src/config/load-config.js';
import { startSandboxConnector } from '../src/connector/sandbox/sandbox-connector.js';
import { listenGateway } from '../src/server.js';
import { startWebhookReceiver } from './webhook-receiver.js';

const [role, ...args] = process.argv.slice(2);
const say = (message: object) => process.stdout.write(`${JSON.stringify(message)}\n`);
let close: () => Promise<void> = async () => {};
let receiver: Awaited<ReturnType<typeof startWebhookReceiver>> | undefined;

if (role === 'connector') {
  const connector = await startSandboxConnector({ host: '127.0.0.1', port: 0, controls: true });
  close = connector.close;
  say({ ready: true, url: connector.url });
} else if (role === 'bare-proxy') {
  const [connectorUrl, benchDir] = args as [string, string];
  // Baseline B: the same TLS listener, a pass-through to the connector, nothing else.
  const app = Fastify({
    https: { cert: readFileSync(join(benchDir, 'tls.crt')), key: readFileSync(join(benchDir, 'tls.key')) },
    logger: false,
  });
  await app.register(httpProxy, { upstream: connectorUrl, prefix: '/api/v1/issuing/cards', rewritePrefix: '/v1/cards' });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address() as { port: number };
  close = () => app.close();
  say({ ready: true, url: `https://127.0.0.1:${address.port}` });
} else if (role === 'gateway') {
  const [storeKind, benchDir] = args as [string, string];
  const config = await loadConfig(join(benchDir, `gateway-${storeKind}.yaml`), {});
  // Logs go to a file as they would in production (not to the orchestrator's pipe).
  const composed = await composeGateway(config, { logTo: join(benchDir, `gateway-${storeKind}.log`) });
  const running = await listenGateway(composed.gateway, config.listeners);
  close = async () => {
    await running.close();
    await composed.close();
  };
  say({ ready: true, url: running.httpsUrl, admin: running.adminUrl, ...(running.connectorUrl && { connector: running.connectorUrl }) });
} else if (role === 'receiver') {
  receiver = await startWebhookReceiver();
  close = receiver.close;
  say({ ready: true, url: receiver.url });
} else {
  process.stderr.write(`unknown role ${role}\n`);
  process.exit(2);
}

const stats = setInterval(() => {
  const memory = process.memoryUsage();
  say({ stats: { heapUsed: memory.heapUsed, rss: memory.rss, handles: process.getActiveResourcesInfo().length } });
}, 1000);
stats.unref();

let profiler: Session | undefined;
async function command(line: string): Promise<void> {
  const [word, argument] = line.trim().split(' ', 2);
  if (word === 'cpu') say({ cpu: process.cpuUsage() });
  else if (word === 'receiver-stats' && receiver) say({ answer: receiver.stats() });
  else if (word === 'receiver-reset' && receiver) {
    receiver.reset();
    say({ answer: true });
  } else if (word === 'profile-start') {
    profiler = new Session();
    profiler.connect();
    await profiler.post('Profiler.enable');
    await profiler.post('Profiler.start');
    say({ profiling: true });
  } else if (word === 'profile-stop' && profiler && argument) {
    const { profile } = await profiler.post('Profiler.stop');
    writeFileSync(argument, JSON.stringify(profile));
    profiler.disconnect();
    profiler = undefined;
    say({ profile: argument });
  }
}

process.stdin.setEncoding('utf8');
let pending = '';
process.stdin.on('data', (text: string) => {
  pending += text;
  const lines = pending.split('\n');
  pending = lines.pop() ?? '';
  for (const line of lines) void command(line);
});
process.stdin.on('end', () => {
  void close().then(() => process.exit(0));
});

process.on('SIGTERM', () => {
  void close().then(() => process.exit(0));
});
