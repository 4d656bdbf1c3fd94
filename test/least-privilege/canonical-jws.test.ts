import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RELAXED_LIMITS, WHOAMI, whoamiRoute } from '../support/auth-requests.js';
import { createTestGateway, login, type TestGateway } from '../support/gateway-fixture.js';
import { expectContractError } from './contract-helpers.js';

/**
 * Issue 9 row 10 (D33): a bearer JWS whose base64url text is not the canonical encoding of its
 * bytes (non-zero padding bits in a segment's last character) is refused like any bad token:
 * 401 token_invalid. Every variant of every segment is tried; the original keeps working.
 */

const BASE64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

/** Every other last character that decodes to the same bytes (what a lenient decoder accepts). */
function sameBytesVariants(segment: string): string[] {
  const bytes = Buffer.from(segment, 'base64url');
  const last = segment.at(-1);
  return [...BASE64URL]
    .filter((candidate) => candidate !== last)
    .map((candidate) => `${segment.slice(0, -1)}${candidate}`)
    .filter((variant) => Buffer.from(variant, 'base64url').equals(bytes));
}

describe('canonical JWS text (D33)', () => {
  let gw: TestGateway;

  beforeAll(async () => {
    gw = await createTestGateway({ extend: whoamiRoute, overrides: { rateLimits: RELAXED_LIMITS } });
  });
  afterAll(async () => {
    await gw?.close();
  });

  const whoami = (token: string) => gw.inject({ method: 'GET', url: WHOAMI, headers: { authorization: `Bearer ${token}` } });

  it("refuses every non-canonical spelling of a valid token's segments with 401 token_invalid; the original still works", async () => {
    const token = (await login(gw, 'full')).accessToken;
    expect((await whoami(token)).statusCode).toBe(200);

    const segments = token.split('.');
    expect(segments).toHaveLength(3);
    const variants: { where: string; token: string }[] = [];
    segments.forEach((segment, index) => {
      for (const variant of sameBytesVariants(segment)) {
        const parts = [...segments];
        parts[index] = variant;
        variants.push({ where: ['header', 'payload', 'signature'][index] ?? String(index), token: parts.join('.') });
      }
    });
    // An Ed25519 signature is 64 bytes: its last character carries 4 padding bits, 15 other spellings.
    expect(variants.filter((variant) => variant.where === 'signature')).toHaveLength(15);

    const answers = await Promise.all(variants.map(async (variant) => ({ ...variant, response: await whoami(variant.token) })));
    const accepted = answers.filter(({ response }) => response.statusCode !== 401).map(({ where, token: t }) => `${where} ...${t.slice(-6)}`);
    expect(accepted, `${accepted.length} of ${answers.length} non-canonical variants were not refused`).toEqual([]);
    for (const { response } of answers) expectContractError(response, 401, 'token_invalid', 'Access token is invalid');

    // The canonical token is unaffected (and was not evicted by the refusals).
    expect((await whoami(token)).json()).toEqual({ credential: 'cred-full' });
  });
});
