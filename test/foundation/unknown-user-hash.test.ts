import { describe, expect, it } from 'vitest';
import { DEFAULT_SCRYPT, unknownUserHash, type ParsedHash } from '../../src/foundation/password-hash.js';

/** A parsed hash of the given cost (its bytes do not matter here). */
const hashAt = (N: number, r = 8, p = 1, length = 32): ParsedHash => ({ N, r, p, salt: Buffer.alloc(16), hash: Buffer.alloc(length) });
const costOf = ({ N, r, p, hash }: ParsedHash) => ({ N, r, p, length: hash.length });

describe('the hash an unknown username is checked against', () => {
  it('has the cost most credentials have', () => {
    expect(costOf(unknownUserHash([hashAt(2048), hashAt(1024), hashAt(2048)]))).toEqual({ N: 2048, r: 8, p: 1, length: 32 });
    expect(costOf(unknownUserHash([hashAt(65536), hashAt(1024), hashAt(1024)]))).toEqual({ N: 1024, r: 8, p: 1, length: 32 });
    expect(costOf(unknownUserHash([hashAt(1024, 8, 1, 64), hashAt(1024, 8, 1, 64), hashAt(1024)]))).toEqual({ N: 1024, r: 8, p: 1, length: 64 });
  });

  it('takes the costlier on a tie, and the default cost with no credential', () => {
    expect(costOf(unknownUserHash([hashAt(1024), hashAt(4096)]))).toEqual({ N: 4096, r: 8, p: 1, length: 32 });
    expect(costOf(unknownUserHash([hashAt(4096), hashAt(1024)]))).toEqual({ N: 4096, r: 8, p: 1, length: 32 });
    expect(costOf(unknownUserHash([hashAt(1024, 16), hashAt(2048, 4)]))).toEqual({ N: 1024, r: 16, p: 1, length: 32 });
    expect(costOf(unknownUserHash([]))).toEqual({ ...DEFAULT_SCRYPT, length: 32 });
  });

  it('matches no password: a random salt and random bytes, new each time', () => {
    const [a, b] = [unknownUserHash([hashAt(1024)]), unknownUserHash([hashAt(1024)])];
    expect(a.salt).toHaveLength(16);
    expect(a.salt.equals(b.salt)).toBe(false);
    expect(a.hash.equals(b.hash)).toBe(false);
    expect(a.hash.equals(Buffer.alloc(32))).toBe(false);
  });
});
