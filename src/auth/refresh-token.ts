import { createHash, createHmac, randomBytes } from 'node:crypto';
import type { TokenRef } from '../store/store-types.js';

/*
 * Refresh tokens are opaque (D3): `<family id>.<generation>.<secret>`, 128 random bits of family
 * id, the token's generation in its family (0 at login, one more at each rotation) and 256
 * random bits of secret, base64url. The family id and generation are not secret: they let every
 * key of a family share one Redis hash tag, and let the family record know a token of an older
 * generation (reuse, D5) without keeping one. Only the SHA-256 of the whole token is stored.
 *
 * A rotation also stores the new token's secret sealed under the token it replaces (XOR with an
 * HMAC-SHA256 of the replaced token): a refresh that presents the replaced token again within
 * its grace (a concurrent request on another replica, a retry whose answer was lost) opens it
 * and is answered the same new token, so concurrent refreshes all succeed and no second branch
 * of the family exists (docs/operations/redis.md, "How a session is kept"). The seal opens only
 * with the replaced token, which the store never holds.
 *
 * Tokens of the format before issue 35 (`<family id>.<secret>`, no generation) are still read:
 * the Redis store serves them from the records that format wrote until their sessions end.
 */
const FORMAT = /^([A-Za-z0-9_-]{22})\.(0|[1-9][0-9]{0,8})\.([A-Za-z0-9_-]{43})$/;
const LEGACY_FORMAT = /^([A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{43})$/;
const SECRET_BYTES = 32;

export function hashRefreshToken(token: string): string {
  return createHash('sha256').update(token).digest('base64url');
}

const tokenOf = (familyId: string, generation: number, secret: Buffer): string => `${familyId}.${generation}.${secret.toString('base64url')}`;

/** The one-time pad sealing generation `generation`'s secret under the token it replaces. */
const padOf = (replaced: string, ref: TokenRef, generation: number): Buffer =>
  createHmac('sha256', replaced).update(`refresh-successor|${ref.familyId}|${generation}`).digest();

const xor = (a: Buffer, b: Buffer): Buffer => {
  const out = Buffer.alloc(a.length);
  for (let i = 0; i < a.length; i += 1) out[i] = a[i]! ^ b[i]!;
  return out;
};

/** A login's first token: a new family, generation 0. */
export function newRefreshToken(familyId = randomBytes(16).toString('base64url')): { token: string; ref: TokenRef } {
  const token = tokenOf(familyId, 0, randomBytes(SECRET_BYTES));
  return { token, ref: { familyId, generation: 0, tokenHash: hashRefreshToken(token) } };
}

/** The store address of a presented token, or undefined when it cannot be one of ours. */
export function parseRefreshToken(token: string): TokenRef | undefined {
  const match = FORMAT.exec(token);
  if (match?.[1]) return { familyId: match[1], generation: Number(match[2]), tokenHash: hashRefreshToken(token) };
  const legacy = LEGACY_FORMAT.exec(token);
  if (legacy?.[1]) return { familyId: legacy[1], tokenHash: hashRefreshToken(token) };
  return undefined;
}

/**
 * The token that replaces `presented` if its rotation goes through: the next generation, with a
 * new random secret, and that secret sealed under `presented` for the store to keep. A token of
 * the earlier format is replaced by one of the same format (its family's records are of that
 * format); the seal is then unused.
 */
export function successorOf(presented: string, ref: TokenRef): { token: string; ref: TokenRef; sealed: string } {
  const secret = randomBytes(SECRET_BYTES);
  if (ref.generation === undefined) {
    const token = `${ref.familyId}.${secret.toString('base64url')}`;
    return { token, ref: { familyId: ref.familyId, tokenHash: hashRefreshToken(token) }, sealed: '' };
  }
  const generation = ref.generation + 1;
  const token = tokenOf(ref.familyId, generation, secret);
  return {
    token,
    ref: { familyId: ref.familyId, generation, tokenHash: hashRefreshToken(token) },
    sealed: xor(secret, padOf(presented, ref, generation)).toString('base64url'),
  };
}

/**
 * The successor a rotation of `presented` stored sealed (a sibling answer, D5), or undefined
 * when the seal does not open to a token whose hash is `tokenHash`.
 */
export function openSuccessor(presented: string, ref: TokenRef, sealed: string, tokenHash: string): string | undefined {
  if (ref.generation === undefined) return undefined;
  const bytes = Buffer.from(sealed, 'base64url');
  if (bytes.length !== SECRET_BYTES) return undefined;
  const generation = ref.generation + 1;
  const token = tokenOf(ref.familyId, generation, xor(bytes, padOf(presented, ref, generation)));
  return hashRefreshToken(token) === tokenHash ? token : undefined;
}
