import { createHash, randomBytes } from 'node:crypto';
import type { TokenRef } from '../store/store-types.js';

/**
 * Refresh tokens are opaque (D3): `<family id>.<secret>`, 128 random bits of family id and 256
 * of secret, base64url. The family id is not secret; it lets every key of a family share one
 * Redis hash tag. Only the SHA-256 of the whole token is ever stored.
 */
const FORMAT = /^([A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{43})$/;

export function hashRefreshToken(token: string): string {
  return createHash('sha256').update(token).digest('base64url');
}

export function newRefreshToken(familyId = randomBytes(16).toString('base64url')): { token: string; ref: TokenRef } {
  const token = `${familyId}.${randomBytes(32).toString('base64url')}`;
  return { token, ref: { familyId, tokenHash: hashRefreshToken(token) } };
}

/** The store address of a presented token, or undefined when it cannot be one of ours. */
export function parseRefreshToken(token: string): TokenRef | undefined {
  const match = FORMAT.exec(token);
  if (!match?.[1]) return undefined;
  return { familyId: match[1], tokenHash: hashRefreshToken(token) };
}
