import type { RevokeOutcome, RotateResult, SessionStore, TokenRef } from '../store-types.js';
import { ttlFor, type RecordContext } from './record-context.js';
import { notStale } from './scripts.js';

type RotateAnswer = [RotateResult['outcome'], string?, string?, string?];

/**
 * Refresh-token families (D3-D6, D41): one hash `ses:{familyId}` per family, of constant size
 * however often it rotates (its fields: scripts.ts, rotateRefresh). Tokens issued before issue 35
 * carry no generation; theirs are the records of that version, a family hash `fam:{familyId}`
 * and one hash per token `rt:{familyId}:<hash>`, served by its scripts until those sessions end.
 */
export function redisSessions({ redis, prefix, guarded, deadline }: RecordContext): SessionStore {
  const familyKey = (familyId: string): string => `${prefix}ses:{${familyId}}`;
  const legacyFamilyKey = (familyId: string): string => `${prefix}fam:{${familyId}}`;
  const legacyTokenKey = (familyId: string, tokenHash: string): string => `${prefix}rt:{${familyId}}:${tokenHash}`;

  const rotate: SessionStore['rotate'] = ({ token, credentialId, next, newExpiresAt, now, graceMs, fingerprint, notBefore }) =>
    guarded(true, async (): Promise<RotateResult> => {
      const ttl = String(ttlFor(newExpiresAt, now));
      const [outcome, expiresAt, sealed, tokenHash] = notStale<RotateAnswer>(
        token.generation === undefined
          ? await redis.rotateLegacyRefresh(
              legacyFamilyKey(token.familyId),
              legacyTokenKey(token.familyId, token.tokenHash),
              legacyTokenKey(token.familyId, next.tokenHash),
              credentialId,
              String(now),
              String(graceMs),
              String(newExpiresAt),
              ttl,
              fingerprint,
              String(notBefore),
              String(deadline()),
            )
          : await redis.rotateRefresh(
              familyKey(token.familyId),
              credentialId,
              String(now),
              String(graceMs),
              String(newExpiresAt),
              ttl,
              fingerprint,
              String(notBefore),
              String(token.generation),
              token.tokenHash,
              next.tokenHash,
              next.sealed,
              String(deadline()),
            ),
      );
      if (outcome === 'rotated') return { outcome, expiresAt: Number(expiresAt) };
      if (outcome === 'sibling') return { outcome, expiresAt: Number(expiresAt), sealed: sealed ?? '', tokenHash: tokenHash ?? '' };
      return { outcome };
    });

  const revokeFamily: SessionStore['revokeFamily'] = ({ token, credentialId, now, graceMs, fingerprint, notBefore }) =>
    guarded(true, async () =>
      notStale<RevokeOutcome>(
        token.generation === undefined
          ? await redis.revokeLegacyFamily(
              legacyFamilyKey(token.familyId),
              legacyTokenKey(token.familyId, token.tokenHash),
              credentialId,
              String(now),
              String(graceMs),
              fingerprint,
              String(notBefore),
              String(deadline()),
            )
          : await redis.revokeFamily(
              familyKey(token.familyId),
              credentialId,
              String(now),
              String(graceMs),
              fingerprint,
              String(notBefore),
              String(token.generation),
              token.tokenHash,
              String(deadline()),
            ),
      ),
    );

  return {
    createFamily: ({ token, credentialId, fingerprint, expiresAt, endsAt, now }) =>
      guarded(true, async () => {
        const key = familyKey(token.familyId);
        // One MULTI: the record and its cleanup TTL together, refused whole when Redis is full (D54).
        await redis
          .multi()
          .hset(
            key,
            'cred',
            credentialId,
            'fp',
            fingerprint,
            'login',
            String(now),
            'end',
            String(endsAt),
            'gen',
            String(generationOf(token)),
            'ch',
            token.tokenHash,
            'ce',
            String(expiresAt),
          )
          .pexpire(key, ttlFor(expiresAt, now))
          .exec();
      }),
    discardFamily: (familyId) =>
      guarded(false, async () => {
        await redis.del(familyKey(familyId));
      }),
    rotate,
    revokeFamily,
  };
}

const generationOf = (token: TokenRef): number => token.generation ?? 0;
