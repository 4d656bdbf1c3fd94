/**
 * The one-connection latency tax, in its own process (pinned apart from the servers):
 *   node dist/bench/pairs.js '<json options>'
 * Sends requests in pairs, one to the baseline and one to the subject, each alone (the next one
 * leaves a millisecond after the last answer, so a server's work after its answer, such as a
 * card's record, does not fall on the other's request), on one kept-alive connection to each,
 * alternating which of the two goes first. A slow spell of the machine then falls on both sides
 * of many pairs alike. Prints one JSON line: per repeat, each side's p50 and p99 and the median
 * of the pairs' differences, in microseconds.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from 'undici';
import { requestMaker, type RequestTemplate } from './request-templates.js';
import { median, percentile } from './yardstick.js';

export interface PairTarget {
  origin: string;
  template: RequestTemplate;
  /** PEM of the CA the server's certificate comes from (TLS targets). */
  ca?: string;
}

export interface PairsOptions {
  baseline: PairTarget;
  subject: PairTarget;
  pairs: number;
  repeats: number;
  /** Pairs sent first and not counted (connections, JIT). */
  warmupPairs: number;
  /** Pause after each answer before the next request, in milliseconds. */
  gapMs: number;
}

export interface PairsRepeat {
  baseline: { p50Us: number; p99Us: number };
  subject: { p50Us: number; p99Us: number };
  /** Subject minus baseline: the p50s, the p99s, and the median of each pair's difference. */
  taxP50Us: number;
  taxP99Us: number;
  pairedMedianUs: number;
}

export interface PairsResult {
  repeats: PairsRepeat[];
  /** Requests sent to each side, warm-up included (the orchestrator divides store counts by them). */
  sent: number;
  non2xx: number;
  errors: number;
}

const options = JSON.parse(process.argv[2] ?? '{}') as PairsOptions;

function side(target: PairTarget) {
  const client = new Client(target.origin, { pipelining: 1, ...(target.ca && { connect: { ca: target.ca } }) });
  const next = requestMaker(target.template);
  return {
    client,
    /** One request alone: its latency in microseconds and its status (0 for a failure). */
    async once(): Promise<{ us: number; status: number }> {
      const request = next();
      const started = performance.now();
      try {
        const response = await client.request({ method: request.method, path: request.path, headers: request.headers, body: request.body });
        await response.body.arrayBuffer();
        return { us: (performance.now() - started) * 1000, status: response.statusCode };
      } catch {
        return { us: (performance.now() - started) * 1000, status: 0 };
      }
    },
  };
}

const baseline = side(options.baseline);
const subject = side(options.subject);
let sent = 0;
let non2xx = 0;
let errors = 0;

async function pair(index: number): Promise<[number, number]> {
  const order = index % 2 === 0 ? [baseline, subject] : [subject, baseline];
  const latencies = new Map<typeof baseline, number>();
  for (const target of order) {
    const { us, status } = await target.once();
    if (status === 0) errors += 1;
    else if (status < 200 || status >= 300) non2xx += 1;
    latencies.set(target, us);
    await sleep(options.gapMs);
  }
  sent += 1;
  return [latencies.get(baseline)!, latencies.get(subject)!];
}

for (let i = 0; i < options.warmupPairs; i += 1) await pair(i);
const repeats: PairsRepeat[] = [];
for (let r = 0; r < options.repeats; r += 1) {
  const b: number[] = [];
  const s: number[] = [];
  const differences: number[] = [];
  for (let i = 0; i < options.pairs; i += 1) {
    const [baselineUs, subjectUs] = await pair(i);
    b.push(baselineUs);
    s.push(subjectUs);
    differences.push(subjectUs - baselineUs);
  }
  const p50 = { baseline: percentile(b, 50), subject: percentile(s, 50) };
  const p99 = { baseline: percentile(b, 99), subject: percentile(s, 99) };
  repeats.push({
    baseline: { p50Us: Math.round(p50.baseline), p99Us: Math.round(p99.baseline) },
    subject: { p50Us: Math.round(p50.subject), p99Us: Math.round(p99.subject) },
    taxP50Us: Math.round(p50.subject - p50.baseline),
    taxP99Us: Math.round(p99.subject - p99.baseline),
    pairedMedianUs: Math.round(median(differences)),
  });
}
await Promise.all([baseline.client.close(), subject.client.close()]);
const result: PairsResult = { repeats, sent, non2xx, errors };
process.stdout.write(`${JSON.stringify(result)}\n`);
