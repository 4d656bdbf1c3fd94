import { randomUUID } from 'node:crypto';
import { SignJWT, exportJWK, importPKCS8, importSPKI, jwtVerify, type CryptoKey, type JWK, type JWTHeaderParameters } from 'jose';
import { toEpochSeconds, type Clock } from '../foundation/clock.js';
import type { GatewayConfig } from '../config/config-types.js';
import { errors } from '../foundation/errors.js';
import type { Credential } from '../config/credentials-file.js';
import { isCanonicalCompactJws } from './canonical-jws.js';
import { VerifiedTokenCache } from './verified-token-cache.js';

export const ACCESS_TOKEN_TYPE = 'at+jwt';

/** The private claim carrying the credential's secret fingerprint (D41). */
export const SECRET_FINGERPRINT_CLAIM = 'csf';

export interface AccessClaims {
  sub: string;
  jti: string;
  /** Epoch seconds. */
  exp: number;
  /** Epoch seconds, with milliseconds in the fraction (D41). */
  iat: number;
  /** The credential's secret fingerprint when the token was issued; undefined in a token from before D41. */
  secretFingerprint: string | undefined;
}

export interface IssuedToken {
  token: string;
  /** Epoch seconds, as the spec's `...ExpiresAt` fields. */
  expiresAt: number;
}

/** Headers that would let a token choose its own key (D1): never honoured, always refused. */
const SELF_KEYED_HEADERS = ['jwk', 'jku', 'x5u', 'x5c'] as const;

/**
 * Issues and verifies the JWTs (D1, D2, D24). One signing key; several verification keys so a
 * rotation logs nobody out. Verification pins algorithm, `typ`, issuer and audience, and
 * requires `exp`. Verified access tokens are cached until their `exp` (measured: the
 * signature check is half of a request's cost); the credential itself is still looked up on
 * every request by the guard (D7).
 */
export class TokenService {
  readonly #settings: GatewayConfig['tokens'];
  readonly #clock: Clock;
  readonly #signingKey: CryptoKey;
  readonly #verificationKeys: ReadonlyMap<string, CryptoKey>;
  readonly #jwks: { keys: JWK[] };
  readonly #cache: VerifiedTokenCache<AccessClaims>;

  private constructor(settings: GatewayConfig['tokens'], clock: Clock, signingKey: CryptoKey, verificationKeys: Map<string, CryptoKey>, jwks: JWK[]) {
    this.#settings = settings;
    this.#clock = clock;
    this.#signingKey = signingKey;
    this.#verificationKeys = verificationKeys;
    this.#jwks = { keys: jwks };
    this.#cache = new VerifiedTokenCache(settings.verifiedTokenCacheSize);
  }

  static async create(settings: GatewayConfig['tokens'], clock: Clock): Promise<TokenService> {
    const alg = settings.algorithm;
    // WebCrypto keys imported once: jose would otherwise convert the KeyObject on every call.
    const signingKey = await importPKCS8(settings.signingKey.key.export({ type: 'pkcs8', format: 'pem' }).toString(), alg);
    const verificationKeys = new Map<string, CryptoKey>();
    const jwks: JWK[] = [];
    for (const { kid, key } of settings.verificationKeys) {
      verificationKeys.set(kid, await importSPKI(key.export({ type: 'spki', format: 'pem' }).toString(), alg, { extractable: true }));
      jwks.push({ ...(await exportJWK(key)), kid, alg, use: 'sig' });
    }
    return new TokenService(settings, clock, signingKey, verificationKeys, jwks);
  }

  get jwks(): { keys: JWK[] } {
    return this.#jwks;
  }

  async issueAccessToken(credential: Credential): Promise<IssuedToken> {
    const nowMs = this.#clock.now();
    const expiresAt = toEpochSeconds(nowMs) + this.#settings.accessTokenTtlSeconds;
    const token = await new SignJWT({ [SECRET_FINGERPRINT_CLAIM]: credential.secretFingerprint })
      .setProtectedHeader({ alg: this.#settings.algorithm, kid: this.#settings.signingKey.kid, typ: ACCESS_TOKEN_TYPE })
      .setSubject(credential.id)
      .setIssuer(this.#settings.issuer)
      .setAudience(this.#settings.audience)
      // To the millisecond (a NumericDate may have a fraction, RFC 7519 section 2): a token issued
      // in the same second as its credential's deactivation is still told apart (D41).
      .setIssuedAt(nowMs / 1000)
      .setExpirationTime(expiresAt)
      .setJti(randomUUID())
      .sign(this.#signingKey);
    return { token, expiresAt };
  }

  /** OIDC-shaped ID token (D2): audience is the credential's username, so it can never pass as an access token. */
  async issueIdToken(credential: Credential, authTime: number): Promise<IssuedToken> {
    const iat = toEpochSeconds(this.#clock.now());
    const expiresAt = iat + this.#settings.accessTokenTtlSeconds;
    const token = await new SignJWT({ auth_time: authTime })
      .setProtectedHeader({ alg: this.#settings.algorithm, kid: this.#settings.signingKey.kid, typ: 'JWT' })
      .setSubject(credential.id)
      .setIssuer(this.#settings.issuer)
      .setAudience(credential.username)
      .setIssuedAt(iat)
      .setExpirationTime(expiresAt)
      .sign(this.#signingKey);
    return { token, expiresAt };
  }

  /**
   * The claims of a token whose signature verified before and that has not expired since;
   * undefined otherwise (then verifyAccessToken decides). Synchronous: the common case of a
   * client reusing its token costs no promise.
   */
  cachedClaims(token: string): AccessClaims | undefined {
    const cached = this.#cache.get(token);
    if (!cached) return undefined;
    if (cached.exp * 1000 + this.#settings.clockToleranceSeconds * 1000 > this.#clock.now()) return cached;
    this.#cache.delete(token);
    return undefined;
  }

  /** Resolves the claims of a valid access token; throws the 401 GatewayError otherwise. */
  async verifyAccessToken(token: string): Promise<AccessClaims> {
    const cached = this.cachedClaims(token);
    if (cached) return cached;
    // jose decodes leniently: a spelling with non-zero spare bits would verify (D33).
    if (!isCanonicalCompactJws(token)) throw errors.tokenInvalid();
    const nowMs = this.#clock.now();
    let claims: AccessClaims;
    try {
      const { payload } = await jwtVerify(token, (header: JWTHeaderParameters) => this.#keyFor(header), {
        algorithms: [this.#settings.algorithm],
        typ: ACCESS_TOKEN_TYPE,
        issuer: this.#settings.issuer,
        audience: this.#settings.audience,
        requiredClaims: ['exp', 'iat', 'sub', 'jti'],
        clockTolerance: this.#settings.clockToleranceSeconds,
        currentDate: new Date(nowMs),
      });
      if (typeof payload.sub !== 'string' || typeof payload.jti !== 'string' || typeof payload.exp !== 'number' || typeof payload.iat !== 'number')
        throw new TypeError('claims');
      const fingerprint = payload[SECRET_FINGERPRINT_CLAIM];
      claims = {
        sub: payload.sub,
        jti: payload.jti,
        exp: payload.exp,
        iat: payload.iat,
        secretFingerprint: typeof fingerprint === 'string' ? fingerprint : undefined,
      };
    } catch (error) {
      throw (error as { code?: string }).code === 'ERR_JWT_EXPIRED' ? errors.tokenExpired() : errors.tokenInvalid();
    }
    this.#cache.set(token, claims);
    return claims;
  }

  #keyFor(header: JWTHeaderParameters): CryptoKey {
    if (SELF_KEYED_HEADERS.some((name) => name in header)) throw new Error('self-keyed token');
    const key = header.kid === undefined ? undefined : this.#verificationKeys.get(header.kid);
    if (!key) throw new Error('unknown kid');
    return key;
  }
}
