import type { RevokeOutcome, RotateResult, SessionStore, TokenRef } from '../store-types.js';
import { ttlFor, type RecordContext } from './record-context.js';
import { notStale } from './scripts.js';

/**
 * Refresh-token families (D3-D6, D41): a family hash `fam:{familyId}` and one hash per token
 * `rt:{familyId}:<hash>`, sharing the family's hash tag so that one script sees them all.
 */
export function redisSessions({ redis, prefix, guarded, deadline }: RecordContext): SessionStore {
  const familyKey = (familyId: string): string => `${prefix}fam:{${familyId}}`;
  const tokenKey = (token: TokenRef): string => `${prefix}rt:{${token.familyId}}:${token.tokenHash}`;
  return {
    createFamily: ({ token, credentialId, fingerprint, expiresAt, endsAt, now }) =>
      guarded(true, async () => {
        const ttl = ttlFor(expiresAt, now);
        // Both keys share the family's hash tag: one slot, so MULTI works on a Cluster too.
        await redis
          .multi()
          .hset(familyKey(token.familyId), 'cred', credentialId, 'revoked', '0', 'fp', fingerprint, 'login', String(now), 'end', String(endsAt))
          .pexpire(familyKey(token.familyId), ttl)
          .hset(tokenKey(token), 'exp', String(expiresAt))
          .pexpire(tokenKey(token), ttl)
          .exec();
      }),
    rotate: ({ token, credentialId, newTokenHash, newExpiresAt, now, graceMs, fingerprint, notBefore }) =>
      guarded(true, async (): Promise<RotateResult> => {
        const [outcome, expiresAt] = notStale<[Exclude<RotateResult['outcome'], 'rotated'> | 'rotated', string?]>(
          await redis.rotateRefresh(
            familyKey(token.familyId),
            tokenKey(token),
            tokenKey({ familyId: token.familyId, tokenHash: newTokenHash }),
            credentialId,
            String(now),
            String(graceMs),
            String(newExpiresAt),
            String(ttlFor(newExpiresAt, now)),
            fingerprint,
            String(notBefore),
            String(deadline()),
          ),
        );
        return outcome === 'rotated' ? { outcome, expiresAt: Number(expiresAt) } : { outcome };
      }),
    revokeFamily: ({ token, credentialId, now, graceMs, fingerprint, notBefore }) =>
      guarded(true, async () =>
        notStale<RevokeOutcome>(
          await redis.revokeFamily(
            familyKey(token.familyId),
            tokenKey(token),
            credentialId,
            String(now),
            String(graceMs),
            fingerprint,
            String(notBefore),
            String(deadline()),
          ),
        ),
      ),
  };
}
