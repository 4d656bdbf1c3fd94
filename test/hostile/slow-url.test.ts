import { Agent } from 'node:https';
import { describe, expect, it } from 'vitest';
import { call, expectCodedError, listenTestGateway, perTestGateway, type HttpAnswer } from './support.js';

/**
 * Issue 8, attack 3 (D25): `GET /api/v1/issuing/cards?x=` + 'eyJ' x 5250 (a 16 KB URL, no
 * token). Every check that runs on every request must be linear in its input: the URL costs
 * about as much as any URL of the same length. Old code: ~98 ms CPU per request in the
 * token-in-URL regex (quadratic), against ~1 ms for a same-length URL without the pattern.
 * Also: URLs over 8192 bytes get 414 `url_too_long`.
 */

const CARDS_QUERY = '/api/v1/issuing/cards?x=';
const LIMIT = 8192;

/** A request target of exactly `length` bytes: the card route with `x=` + `unit` repeated, padded. */
function target(length: number, unit: string, base = CARDS_QUERY): string {
  const body = unit.repeat(Math.ceil((length - base.length) / unit.length)).slice(0, length - base.length);
  const url = base + body;
  if (Buffer.byteLength(url) !== length) throw new Error(`built a ${Buffer.byteLength(url)}-byte URL, wanted ${length}`);
  return url;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

describe('slow URL (D25)', () => {
  const suite = perTestGateway();

  async function start(): Promise<{ get: (url: string) => Promise<HttpAnswer> }> {
    const listening = (suite.listening = await listenTestGateway());
    // One kept-alive TLS connection: what is measured is the request, not the handshake.
    const usedAgent = (suite.agent = new Agent({ keepAlive: true, maxSockets: 1, ca: suite.ca }));
    const base = listening.httpsUrl;
    return { get: (url) => call(`${base}${url}`, { agent: usedAgent, timeoutMs: 10_000 }) };
  }

  /**
   * CPU time of this process (gateway and client live in it; CPU, unlike wall time, is not
   * inflated by other processes on a shared machine) per request, median of `rounds`
   * interleaved requests of each URL, and the statuses seen.
   */
  async function costOf(
    get: (url: string) => Promise<HttpAnswer>,
    attack: string,
    plain: string,
    rounds: number,
  ): Promise<{ attackMs: number; plainMs: number; statuses: number[] }> {
    const samples = { attack: [] as number[], plain: [] as number[] };
    const statuses = new Set<number>();
    for (let round = -2; round < rounds; round += 1) {
      for (const [kind, url] of [
        ['attack', attack],
        ['plain', plain],
      ] as const) {
        const before = process.cpuUsage();
        const answer = await get(url);
        const used = process.cpuUsage(before);
        statuses.add(answer.status);
        // The first two rounds warm up (JIT, the connection).
        if (round >= 0) samples[kind].push((used.user + used.system) / 1000);
      }
    }
    return { attackMs: median(samples.attack), plainMs: median(samples.plain), statuses: [...statuses] };
  }

  it("a 16 KB URL of 'eyJ' repeats costs no more than a small multiple of a same-length plain URL", async () => {
    const { get } = await start();
    // 16 KB, as in the attack: the request line stays under Node's 16 KiB header limit (no 431).
    const attack = CARDS_QUERY + 'eyJ'.repeat(5250);
    const plain = target(attack.length, 'a');
    expect(attack.length).toBe(plain.length);
    const { attackMs, plainMs, statuses } = await costOf(get, attack, plain, 9);
    // Both reach the gateway (Node's own 431 would mean the URL never did).
    expect(statuses).not.toContain(431);
    // 3x with a 20 ms floor: noise on a loaded 2-core machine cannot fail it; old code: ~98 ms vs ~1 ms.
    expect(attackMs, `attack ${attackMs.toFixed(1)} ms vs plain ${plainMs.toFixed(1)} ms CPU per request`).toBeLessThanOrEqual(Math.max(3 * plainMs, 20));
  });

  it('an 8192-byte URL (the longest not refused with 414) is scanned in linear time', async () => {
    const { get } = await start();
    // Here the token-in-URL check runs for certain. Old code: ~21 ms vs ~1 ms.
    const attack = target(LIMIT, 'eyJ');
    const plain = target(LIMIT, 'a');
    const { attackMs, plainMs, statuses } = await costOf(get, attack, plain, 9);
    expect(statuses).not.toContain(414);
    expect(statuses).not.toContain(431);
    expect(attackMs, `attack ${attackMs.toFixed(1)} ms vs plain ${plainMs.toFixed(1)} ms CPU per request`).toBeLessThanOrEqual(Math.max(3 * plainMs, 8));
  });

  it('answers 414 url_too_long for a URL of 8193 bytes and not for one of 8192', async () => {
    const { get } = await start();
    for (const base of [CARDS_QUERY, '/.well-known/jwks.json?x=']) {
      const inside = await get(target(LIMIT, 'a', base));
      expect(inside.status, `${base} at ${LIMIT} bytes`).not.toBe(414);
      const outside = await get(target(LIMIT + 1, 'a', base));
      expectCodedError(outside, 414, 'url_too_long', 'Request URL is too long');
    }
    // The attack URL itself is refused the same way, cheaply.
    expectCodedError(await get(CARDS_QUERY + 'eyJ'.repeat(5250)), 414, 'url_too_long', 'Request URL is too long');
  });
});
