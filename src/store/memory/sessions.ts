import type { RevokeOutcome, RotateResult, SessionBinding, SessionStore } from '../store-types.js';

/** One generation's token as the family keeps it: its hash and expiry. */
interface GenerationRecord {
  hash: string;
  expiresAt: number;
}

interface FamilyRecord {
  credentialId: string;
  revoked: boolean;
  /** D41: the credential's secret fingerprint at login, the login instant and the session's absolute end. */
  fingerprint: string;
  loginAt: number;
  endsAt: number;
  /** The current generation: its token, and its secret sealed under the previous token (empty at login). */
  generation: number;
  current: GenerationRecord & { sealed: string };
  /** Generation - 1, replaced at `rotatedAt`: refreshes as a sibling for the grace after it (D5). */
  previous: GenerationRecord | undefined;
  rotatedAt: number;
}

/** D41: a family made under another secret, or logged in before the credential's not-before instant, has ended. */
const hasEnded = (family: FamilyRecord, binding: SessionBinding): boolean => family.fingerprint !== binding.fingerprint || family.loginAt < binding.notBefore;

/** How long the memory store keeps an expired session record (the Redis store's TTLs add the same). */
const EXPIRED_KEPT_MS = 60_000;

/** Where a presented token stands in its family, before expiry and grace are looked at. */
type Standing = { kind: 'current' } | { kind: 'previous'; record: GenerationRecord } | { kind: 'older' } | { kind: 'unknown' };

function standingOf(family: FamilyRecord, generation: number | undefined, hash: string): Standing {
  // A token of the format before issue 35 never belongs to a family of this one.
  if (generation === undefined) return { kind: 'unknown' };
  if (generation === family.generation) return family.current.hash === hash ? { kind: 'current' } : { kind: 'unknown' };
  if (generation === family.generation - 1) return family.previous?.hash === hash ? { kind: 'previous', record: family.previous } : { kind: 'unknown' };
  return generation < family.generation - 1 ? { kind: 'older' } : { kind: 'unknown' };
}

/**
 * Refresh-token families in the process (D3-D6, D41): the decisions of the Redis scripts
 * rotateRefresh and revokeFamily, line for line, on one record per family.
 */
export class MemorySessions implements SessionStore {
  readonly families = new Map<string, FamilyRecord>();

  async createFamily({ token, credentialId, fingerprint, expiresAt, endsAt, now }: Parameters<SessionStore['createFamily']>[0]): Promise<void> {
    this.families.set(token.familyId, {
      credentialId,
      revoked: false,
      fingerprint,
      loginAt: now,
      endsAt,
      generation: token.generation ?? 0,
      current: { hash: token.tokenHash, expiresAt, sealed: '' },
      previous: undefined,
      rotatedAt: now,
    });
  }

  async discardFamily(familyId: string): Promise<void> {
    this.families.delete(familyId);
  }

  async rotate(input: Parameters<SessionStore['rotate']>[0]): Promise<RotateResult> {
    const { token, credentialId, next, newExpiresAt, now, graceMs } = input;
    const family = this.families.get(token.familyId);
    if (!family) return { outcome: 'unknown' };
    const standing = standingOf(family, token.generation, token.tokenHash);
    if (standing.kind === 'unknown') return { outcome: 'unknown' };
    if (family.credentialId !== credentialId) return { outcome: 'mismatch' };
    if (family.revoked) return { outcome: 'revoked' };
    if (hasEnded(family, input)) {
      family.revoked = true;
      return { outcome: 'ended' };
    }
    if (family.endsAt <= now) return { outcome: 'expired' };
    if (standing.kind === 'current') {
      if (family.current.expiresAt <= now) return { outcome: 'expired' };
      const expiresAt = Math.min(newExpiresAt, family.endsAt);
      family.previous = { hash: family.current.hash, expiresAt: family.current.expiresAt };
      family.current = { hash: next.tokenHash, expiresAt, sealed: next.sealed };
      family.generation += 1;
      family.rotatedAt = now;
      return { outcome: 'rotated', expiresAt };
    }
    if (standing.kind === 'previous' && standing.record.expiresAt <= now) return { outcome: 'expired' };
    if (standing.kind === 'previous' && now < family.rotatedAt + graceMs) {
      return { outcome: 'sibling', expiresAt: family.current.expiresAt, sealed: family.current.sealed, tokenHash: family.current.hash };
    }
    // The previous generation past its grace, or an older one: reuse, the whole family dies (D5).
    family.revoked = true;
    return { outcome: 'reuse' };
  }

  async revokeFamily(input: Parameters<SessionStore['revokeFamily']>[0]): Promise<RevokeOutcome> {
    const { token, credentialId, now, graceMs } = input;
    const family = this.families.get(token.familyId);
    if (!family) return 'unknown';
    const standing = standingOf(family, token.generation, token.tokenHash);
    if (standing.kind === 'unknown') return 'unknown';
    if (family.credentialId !== credentialId) return 'mismatch';
    if (family.revoked) return 'already-revoked';
    if (hasEnded(family, input)) {
      family.revoked = true;
      return 'ended';
    }
    if (family.endsAt <= now) return 'expired';
    if (standing.kind === 'current' && family.current.expiresAt <= now) return 'expired';
    if (standing.kind === 'previous' && standing.record.expiresAt <= now) return 'expired';
    family.revoked = true;
    if (standing.kind === 'current' || (standing.kind === 'previous' && now < family.rotatedAt + graceMs)) return 'revoked';
    return 'rotated-out';
  }

  sweep(now: number): void {
    // Kept a minute past expiry, as the Redis store's TTLs keep them: an expired token is
    // answered refresh_token_expired, on both stores, rather than invalid once swept.
    const cutoff = now - EXPIRED_KEPT_MS;
    for (const [id, family] of this.families) if (Math.min(family.current.expiresAt, family.endsAt) <= cutoff) this.families.delete(id);
  }
}
