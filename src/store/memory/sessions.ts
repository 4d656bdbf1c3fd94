import type { RevokeOutcome, RotateResult, SessionBinding, SessionStore } from '../store-types.js';

interface FamilyRecord {
  credentialId: string;
  revoked: boolean;
  /** Latest expiry of any token of the family; the family is garbage after it. */
  expiresAt: number;
  /** D41: the credential's secret fingerprint at login, the login instant and the session's absolute end. */
  fingerprint: string;
  loginAt: number;
  endsAt: number;
}

/** D41: a family made under another secret, or logged in before the credential's not-before instant, has ended. */
const hasEnded = (family: FamilyRecord, binding: SessionBinding): boolean => family.fingerprint !== binding.fingerprint || family.loginAt < binding.notBefore;

interface TokenRecord {
  expiresAt: number;
  rotatedAt: number | undefined;
}

/** How long the memory store keeps an expired session record (the Redis store's TTLs add the same). */
const EXPIRED_KEPT_MS = 60_000;

/**
 * Refresh-token families in the process (D3-D6, D41): the decisions of the Redis scripts
 * rotateRefresh and revokeFamily, line for line.
 */
export class MemorySessions implements SessionStore {
  readonly families = new Map<string, FamilyRecord>();
  readonly tokens = new Map<string, TokenRecord>();

  async createFamily({ token, credentialId, fingerprint, expiresAt, endsAt, now }: Parameters<SessionStore['createFamily']>[0]): Promise<void> {
    this.families.set(token.familyId, { credentialId, revoked: false, expiresAt, fingerprint, loginAt: now, endsAt });
    this.tokens.set(`${token.familyId}:${token.tokenHash}`, { expiresAt, rotatedAt: undefined });
  }

  async rotate(input: Parameters<SessionStore['rotate']>[0]): Promise<RotateResult> {
    const { token, credentialId, newTokenHash, newExpiresAt, now, graceMs } = input;
    const family = this.families.get(token.familyId);
    const record = this.tokens.get(`${token.familyId}:${token.tokenHash}`);
    if (!family || !record) return { outcome: 'unknown' };
    if (family.credentialId !== credentialId) return { outcome: 'mismatch' };
    if (family.revoked) return { outcome: 'revoked' };
    if (hasEnded(family, input)) {
      family.revoked = true;
      return { outcome: 'ended' };
    }
    if (record.expiresAt <= now || family.endsAt <= now) return { outcome: 'expired' };
    if (record.rotatedAt !== undefined && now >= record.rotatedAt + graceMs) {
      family.revoked = true;
      return { outcome: 'reuse' };
    }
    if (record.rotatedAt === undefined) record.rotatedAt = now;
    const expiresAt = Math.min(newExpiresAt, family.endsAt);
    this.tokens.set(`${token.familyId}:${newTokenHash}`, { expiresAt, rotatedAt: undefined });
    family.expiresAt = Math.max(family.expiresAt, expiresAt);
    return { outcome: 'rotated', expiresAt };
  }

  async revokeFamily(input: Parameters<SessionStore['revokeFamily']>[0]): Promise<RevokeOutcome> {
    const { token, credentialId, now, graceMs } = input;
    const family = this.families.get(token.familyId);
    const record = this.tokens.get(`${token.familyId}:${token.tokenHash}`);
    if (!family || !record) return 'unknown';
    if (family.credentialId !== credentialId) return 'mismatch';
    if (family.revoked) return 'already-revoked';
    if (hasEnded(family, input)) {
      family.revoked = true;
      return 'ended';
    }
    if (record.expiresAt <= now) return 'expired';
    family.revoked = true;
    return record.rotatedAt !== undefined && now >= record.rotatedAt + graceMs ? 'rotated-out' : 'revoked';
  }

  sweep(now: number): void {
    // Kept a minute past expiry, as the Redis store's TTLs keep them: an expired token is
    // answered refresh_token_expired, on both stores, rather than invalid once swept.
    const cutoff = now - EXPIRED_KEPT_MS;
    for (const [id, family] of this.families) if (family.expiresAt <= cutoff) this.families.delete(id);
    for (const [key, token] of this.tokens) if (token.expiresAt <= cutoff) this.tokens.delete(key);
  }
}
