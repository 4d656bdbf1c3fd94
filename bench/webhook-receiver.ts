/**
 * The partner's webhook endpoint of the events scenario (I), served by bench/serve.ts as the
 * `receiver` role: plain HTTP on loopback, 204 to every delivery at once, and for each one the
 * time from the event's `createdAt` (the gateway's clock, at recording) to its arrival here (this
 * process's clock; both read the machine's wall clock). `createdAt` has milliseconds only, so a
 * latency reads up to 1 ms long. It verifies no signature: its core is the load generator's, and
 * the signing is tested elsewhere.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { percentile } from './yardstick.js';

export interface ReceiverStats {
  /** Deliveries answered since the last reset. */
  received: number;
  /** Of them, distinct `webhook-id`s: fewer means some were delivered again. */
  unique: number;
  /** Wall-clock milliseconds of the first and the last arrival (0: none). */
  firstAtMs: number;
  lastAtMs: number;
  /** Recorded (createdAt) to received, µs. */
  p50Us: number;
  p99Us: number;
  p999Us: number;
  maxUs: number;
}

const wallMicros = (): number => (performance.timeOrigin + performance.now()) * 1000;

export async function startWebhookReceiver(): Promise<{ url: string; stats(): ReceiverStats; reset(): void; close(): Promise<void> }> {
  let received = 0;
  let latencies: number[] = [];
  let ids = new Set<string>();
  let firstAtMs = 0;
  let lastAtMs = 0;
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const arrived = wallMicros();
      response.writeHead(204).end();
      received += 1;
      const id = request.headers['webhook-id'];
      if (typeof id === 'string') ids.add(id);
      try {
        const { createdAt } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { createdAt?: string };
        const created = Date.parse(createdAt ?? '');
        if (Number.isFinite(created)) latencies.push(arrived - created * 1000);
      } catch {
        // Not an event: answered and counted, no latency.
      }
      lastAtMs = arrived / 1000;
      if (firstAtMs === 0) firstAtMs = lastAtMs;
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const at = (p: number) => (latencies.length === 0 ? 0 : Math.round(percentile(latencies, p)));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`,
    stats() {
      return {
        received,
        unique: ids.size,
        firstAtMs: Math.round(firstAtMs),
        lastAtMs: Math.round(lastAtMs),
        p50Us: at(50),
        p99Us: at(99),
        p999Us: at(99.9),
        maxUs: Math.round(latencies.reduce((max, value) => Math.max(max, value), 0)),
      };
    },
    reset() {
      received = 0;
      latencies = [];
      ids = new Set();
      firstAtMs = 0;
      lastAtMs = 0;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
