import { createHash, randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

/**
 * Passwords are stored as scrypt hashes, a memory-hard function in node:crypto, with a
 * per-credential salt: `scrypt$<N>$<r>$<p>$<salt base64>$<hash base64>`. node:crypto's async
 * scrypt runs on the libuv pool, off the event loop.
 */
export interface ScryptParameters {
  N: number;
  r: number;
  p: number;
}

export const DEFAULT_SCRYPT: ScryptParameters = { N: 16384, r: 8, p: 1 };
const KEY_LENGTH = 32;

export interface ParsedHash extends ScryptParameters {
  salt: Buffer;
  hash: Buffer;
}

function derive(password: string, salt: Buffer, params: ScryptParameters, length: number): Promise<Buffer> {
  const options: ScryptOptions = { N: params.N, r: params.r, p: params.p, maxmem: 256 * params.N * params.r + 1024 * 1024 };
  return new Promise((resolve, reject) => {
    scrypt(password.normalize('NFC'), salt, length, options, (error, key) => (error ? reject(error) : resolve(key)));
  });
}

export async function hashPassword(password: string, params: ScryptParameters = DEFAULT_SCRYPT): Promise<string> {
  const salt = randomBytes(16);
  const hash = await derive(password, salt, params, KEY_LENGTH);
  return ['scrypt', params.N, params.r, params.p, salt.toString('base64'), hash.toString('base64')].join('$');
}

/** Throws a TypeError naming the problem: used when loading the credentials file. */
export function parsePasswordHash(text: string): ParsedHash {
  const parts = text.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') throw new TypeError('must be "scrypt$N$r$p$salt$hash" (use npm run hash-password)');
  const [N, r, p] = [Number(parts[1]), Number(parts[2]), Number(parts[3])];
  if (!Number.isInteger(N) || N < 1024 || (N & (N - 1)) !== 0) throw new TypeError('scrypt N must be a power of two of at least 1024');
  if (!Number.isInteger(r) || r < 1 || r > 32 || !Number.isInteger(p) || p < 1 || p > 16) throw new TypeError('scrypt r or p is out of range');
  const salt = Buffer.from(parts[4] ?? '', 'base64');
  const hash = Buffer.from(parts[5] ?? '', 'base64');
  if (salt.length < 16) throw new TypeError('salt must be at least 16 bytes');
  if (hash.length < 16) throw new TypeError('hash must be at least 16 bytes');
  return { N, r, p, salt, hash };
}

/**
 * D41: what access tokens and sessions carry of the credential's secret, so that a new
 * `passwordHash` ends them. The first 16 bytes of a SHA-256 over a domain prefix and the hash
 * line, base64url: it tells two hash lines apart and says nothing of the hash (which never
 * leaves the credentials file) or the salt needed to test a password against it.
 */
export function passwordHashFingerprint(hashLine: string): string {
  return createHash('sha256').update('card-gateway credential secret v1\0').update(hashLine).digest().subarray(0, 16).toString('base64url');
}

export async function verifyPassword(password: string, stored: ParsedHash): Promise<boolean> {
  const candidate = await derive(password, stored.salt, stored, stored.hash.length);
  return timingSafeEqual(candidate, stored.hash);
}

/**
 * What an unknown username is verified against, so that it costs what a known username's wrong
 * password costs: the scrypt parameters and hash length most of `known` use (the costlier on a
 * tie), a random salt and random hash bytes. No password derives those bytes, and nothing about
 * it is malformed, so the check runs in full and fails. Taken from the credentials themselves: a
 * fixed cost would tell unknown usernames from known ones hashed at another cost.
 */
export function unknownUserHash(known: readonly ParsedHash[]): ParsedHash {
  const shapes = new Map<string, { shape: ScryptParameters & { length: number }; count: number }>();
  for (const { N, r, p, hash } of known) {
    const id = `${N}:${r}:${p}:${hash.length}`;
    const seen = shapes.get(id);
    if (seen) seen.count += 1;
    else shapes.set(id, { shape: { N, r, p, length: hash.length }, count: 1 });
  }
  const cost = ({ N, r, p }: ScryptParameters) => N * r * p;
  let chosen: (ScryptParameters & { length: number }) | undefined;
  let most = 0;
  for (const { shape, count } of shapes.values()) {
    if (count > most || (count === most && chosen !== undefined && cost(shape) > cost(chosen))) {
      chosen = shape;
      most = count;
    }
  }
  const { N, r, p, length } = chosen ?? { ...DEFAULT_SCRYPT, length: KEY_LENGTH };
  return { N, r, p, salt: randomBytes(16), hash: randomBytes(length) };
}
