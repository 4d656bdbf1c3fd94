import { Agent } from 'node:https';
import { describe, expect, it } from 'vitest';
import { urlCarriesToken } from '../../src/edge/url-checks.js';
import { call, expectCodedError, listenTestGateway, perTestGateway, type HttpAnswer } from './support.js';

/**
 * Issue 8, attack 3 (D25): `GET /api/v1/issuing/cards?x=` + 'eyJ' x 5250 (a 16 KB URL, no
 * token). Every check that runs on every request must be linear in its input: the checks count
 * the characters they look at, and the count is bounded by the URL's length. Old code: ~98 ms CPU per request in the
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

/** Characters the URL checks looked at for `url` (their own count of their work). */
function workOf(url: string): number {
  const work = { chars: 0 };
  urlCarriesToken(url, work);
  return work.chars;
}

describe('slow URL (D25)', () => {
  const suite = perTestGateway();

  async function start(): Promise<{ get: (url: string) => Promise<HttpAnswer> }> {
    const listening = (suite.listening = await listenTestGateway());
    // One kept-alive TLS connection: what is measured is the request, not the handshake.
    const usedAgent = (suite.agent = new Agent({ keepAlive: true, maxSockets: 1, ca: suite.ca }));
    const base = listening.httpsUrl;
    // No timeoutMs: call's hang guard (HANG_GUARD_MS); how long a URL takes is never what is checked.
    return { get: (url) => call(`${base}${url}`, { agent: usedAgent }) };
  }

  it("a 16 KB URL of 'eyJ' repeats reaches the gateway, and its checks look at each character a bounded number of times", async () => {
    const { get } = await start();
    // 16 KB, as in the attack: the request line stays under Node's 16 KiB header limit (no 431).
    const attack = CARDS_QUERY + 'eyJ'.repeat(5250);
    const plain = target(attack.length, 'a');
    expect(attack.length).toBe(plain.length);
    for (const url of [attack, plain]) expect((await get(url)).status, 'the URL reached the gateway').not.toBe(431);
    // Counted, not timed (the CPU figure is the benchmark's): at most 4 looks per character, for
    // the attack as for a plain URL of the same length. Old code: quadratic in the URL.
    expect(workOf(attack)).toBeLessThanOrEqual(4 * attack.length);
    expect(workOf(plain)).toBeLessThanOrEqual(4 * plain.length);
  });

  it('an 8192-byte URL (the longest not refused with 414) is scanned in linear time: twice the URL, twice the work', async () => {
    const { get } = await start();
    const attack = target(LIMIT, 'eyJ');
    const plain = target(LIMIT, 'a');
    for (const url of [attack, plain]) {
      const status = (await get(url)).status;
      expect(status).not.toBe(414);
      expect(status).not.toBe(431);
    }
    // Linear: the work of an 8 KiB URL is at most twice (plus a little) that of a 4 KiB one.
    const half = target(LIMIT / 2, 'eyJ');
    expect(workOf(attack)).toBeLessThanOrEqual(2 * workOf(half) + 64);
    expect(workOf(attack)).toBeLessThanOrEqual(4 * attack.length);
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
