import { describe, expect, it } from 'vitest';
import { hashRefreshToken, newRefreshToken, openSuccessor, parseRefreshToken, successorOf } from '../../src/auth/refresh-token.js';

/**
 * D3 and issue 35: a refresh token carries its family and generation beside 256 random bits; its
 * successor's secret is sealed under it, so that a sibling refresh (D5) can be answered the
 * successor, and nothing but the token it replaces opens the seal.
 */
describe('refresh tokens', () => {
  it('are <22-character family>.<generation>.<43-character secret>, addressed by the hash of the whole token', () => {
    const { token, ref } = newRefreshToken();
    expect(token).toMatch(/^[A-Za-z0-9_-]{22}\.0\.[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(token.split('.')[2]!, 'base64url')).toHaveLength(32);
    expect(ref).toEqual({ familyId: token.split('.')[0], generation: 0, tokenHash: hashRefreshToken(token) });
    expect(parseRefreshToken(token)).toEqual(ref);
    expect(newRefreshToken().token).not.toBe(token);
  });

  it('parse the format before issue 35 (no generation) as a token without one, and refuse anything else', () => {
    const { token } = newRefreshToken();
    const [family, , secret] = token.split('.') as [string, string, string];
    expect(parseRefreshToken(`${family}.${secret}`)).toEqual({ familyId: family, tokenHash: hashRefreshToken(`${family}.${secret}`) });
    for (const bad of [
      `${family}.01.${secret}`,
      `${family}.-1.${secret}`,
      `${family}.1234567890.${secret}`,
      `${family}.1.${secret}x`,
      `${family}..${secret}`,
      'garbage',
      '',
    ])
      expect(parseRefreshToken(bad), bad).toBeUndefined();
    expect(parseRefreshToken(`${family}.123456789.${secret}`)?.generation).toBe(123456789);
  });

  it('have a successor of the next generation in the same family, with a fresh secret sealed under the token it replaces', () => {
    const first = newRefreshToken();
    const next = successorOf(first.token, first.ref);
    expect(next.token.split('.').slice(0, 2)).toEqual([first.ref.familyId, '1']);
    expect(next.ref).toEqual({ familyId: first.ref.familyId, generation: 1, tokenHash: hashRefreshToken(next.token) });
    expect(next.token.split('.')[2]).not.toBe(first.token.split('.')[2]);
    // the seal is not the secret
    expect(next.sealed).not.toBe(next.token.split('.')[2]);
    expect(Buffer.from(next.sealed, 'base64url')).toHaveLength(32);
    const after = successorOf(next.token, next.ref);
    expect(after.ref.generation).toBe(2);
  });

  it('open the sealed successor with the token it replaced, and with nothing else', () => {
    const first = newRefreshToken();
    const next = successorOf(first.token, first.ref);
    expect(openSuccessor(first.token, first.ref, next.sealed, next.ref.tokenHash)).toBe(next.token);
    // another token of the same family and generation, a token of another family, the successor itself
    const other = newRefreshToken(first.ref.familyId);
    expect(openSuccessor(other.token, other.ref, next.sealed, next.ref.tokenHash)).toBeUndefined();
    const stranger = newRefreshToken();
    expect(openSuccessor(stranger.token, stranger.ref, next.sealed, next.ref.tokenHash)).toBeUndefined();
    expect(openSuccessor(next.token, next.ref, next.sealed, next.ref.tokenHash)).toBeUndefined();
    // a seal altered by one bit, or of the wrong length
    const altered = Buffer.from(next.sealed, 'base64url');
    altered[0]! ^= 1;
    expect(openSuccessor(first.token, first.ref, altered.toString('base64url'), next.ref.tokenHash)).toBeUndefined();
    expect(openSuccessor(first.token, first.ref, next.sealed.slice(1), next.ref.tokenHash)).toBeUndefined();
  });

  it('replace a token of the earlier format by one of the same format (its records are of that format)', () => {
    const { token } = newRefreshToken();
    const [family, , secret] = token.split('.') as [string, string, string];
    const legacy = `${family}.${secret}`;
    const next = successorOf(legacy, parseRefreshToken(legacy)!);
    expect(next.token).toMatch(new RegExp(`^${family}\\.[A-Za-z0-9_-]{43}$`));
    expect(next.ref).toEqual({ familyId: family, tokenHash: hashRefreshToken(next.token) });
    expect(openSuccessor(legacy, parseRefreshToken(legacy)!, next.sealed, next.ref.tokenHash)).toBeUndefined();
  });
});
