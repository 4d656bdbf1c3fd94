import { beforeAll, describe, expect, it } from 'vitest';
import { PasswordHashGate } from '../../src/auth/password-hash-gate.js';
import { hashPassword, parsePasswordHash, type ParsedHash } from '../../src/foundation/password-hash.js';

/**
 * D27: the hash gate's caps, held deterministically. `tryVerify` decides at once, so hashes
 * started without awaiting them are in flight for every later call in the same tick: no timing
 * decides what is held. The login flood test (test/hostile/login-flood.test.ts) cannot hold the
 * flood's hashes at the moment the legitimate login arrives; this is where the per-address share
 * is proven.
 */
describe('password hash gate (D27)', () => {
  let stored: ParsedHash;

  beforeAll(async () => {
    // The smallest parameters the credentials file accepts: what is checked is admission, not cost.
    stored = parsePasswordHash(await hashPassword('the password', { N: 1024, r: 8, p: 1 }));
  });

  it('keeps one address to its share while another address still gets a hash, and counts only hashes that ran', async () => {
    const gate = new PasswordHashGate(4, 2);
    const flood = [gate.tryVerify('flood', 'wrong', stored), gate.tryVerify('flood', 'wrong', stored)];
    expect(flood.every((hash) => hash !== undefined)).toBe(true);
    // The flood's address holds its share: a third is refused, though two slots are free.
    expect(gate.tryVerify('flood', 'wrong', stored), 'a third hash for the same address').toBeUndefined();
    // Another address is admitted while the flood's hashes are still running.
    const legitimate = gate.tryVerify('legitimate', 'the password', stored);
    expect(legitimate, 'a hash for another address').toBeDefined();
    expect(gate.admitted, 'refused hashes are not counted').toBe(3);

    expect(await legitimate).toBe(true);
    expect(await Promise.all(flood)).toEqual([false, false]);
    // Released: the flood's address gets its share back.
    const again = gate.tryVerify('flood', 'wrong', stored);
    expect(again).toBeDefined();
    expect(await again).toBe(false);
  });

  it('refuses every address once the total cap is in flight, and admits again after a release', async () => {
    const gate = new PasswordHashGate(2, 2);
    const first = gate.tryVerify('a', 'x', stored);
    const second = gate.tryVerify('b', 'x', stored);
    expect(gate.tryVerify('c', 'x', stored), 'a third hash past the total cap').toBeUndefined();
    await Promise.all([first, second]);
    const after = gate.tryVerify('c', 'x', stored);
    expect(after).toBeDefined();
    expect(await after).toBe(false);
    expect(gate.admitted).toBe(3);
  });
});
