import type { FastifyReply, FastifyRequest } from 'fastify';
import type { LiveSettings } from '../config/live-settings.js';
import { admitsAddress } from '../config/credentials-file.js';
import { errors, GatewayError } from '../foundation/errors.js';
import type { AccessClaims, TokenService } from '../auth/token-service.js';
import type { CredentialRevocations } from '../auth/credential-revocations.js';
import type { EdgeRefusal, Outcomes } from '../observability/outcomes.js';
import './request-context.js';

/** D12: the scheme (any case), exactly one space, then a JWS compact token. */
const BEARER = /^Bearer ([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)$/i;

/** The refusals of the bearer token itself: counted and audited under their code's own name. */
const TOKEN_REFUSALS: ReadonlySet<string> = new Set<EdgeRefusal>(['token_missing', 'token_malformed', 'token_invalid', 'token_expired']);
const isTokenRefusal = (code: string): code is EdgeRefusal => TOKEN_REFUSALS.has(code);

/**
 * The protected scope's first onRequest hook: authenticate the bearer token, then resolve the
 * credential on every request so deactivation applies at once (D7), then whether the token's
 * session has ended with the credential's secret (D41: checked in memory, no store round trip),
 * then the credential's own address ranges (D10). Failed authentication is audited in
 * per-minute summaries per source (D34): a client replaying a forged token cannot turn the
 * audit trail into a log of its attempts.
 */
export function createBearerGuard(deps: { tokens: TokenService; live: LiveSettings; outcomes: Outcomes; revocations: CredentialRevocations }) {
  const { tokens, live, outcomes, revocations } = deps;
  const context = (request: FastifyRequest) => ({ correlationId: request.id, clientAddress: request.clientAddress });

  function unauthenticated(request: FastifyRequest, error: GatewayError): GatewayError {
    if (isTokenRefusal(error.code)) outcomes.record({ name: 'edge.refused', reason: error.code }, context(request));
    return error;
  }

  /** Everything after the signature check; returns the refusal, or sets the principal. */
  function authorise(request: FastifyRequest, claims: AccessClaims): GatewayError | undefined {
    const credential = live.current.credentials.byId(claims.sub);
    if (!credential) {
      outcomes.record({ name: 'access.denied', credential: undefined, reason: 'unknown_credential' }, context(request));
      return errors.tokenInvalid();
    }
    if (!credential.active) {
      outcomes.record({ name: 'access.denied', credential: credential.id, reason: 'credential_inactive' }, context(request));
      return errors.credentialInactive();
    }
    // Not yet known (the store did not answer since start): a token cannot be judged, so none is taken.
    if (!revocations.loaded) return errors.storeUnavailable();
    if (!revocations.accepts(credential, claims)) {
      outcomes.record({ name: 'access.denied', credential: credential.id, reason: 'token_revoked' }, context(request));
      return errors.tokenRevoked();
    }
    if (!admitsAddress(credential, request.clientAddress)) {
      outcomes.record({ name: 'access.denied', credential: credential.id, reason: 'address' }, context(request));
      return errors.permissionDenied('Client address is not registered for this credential');
    }
    request.principal = { credential, claims };
    return undefined;
  }

  // A callback hook rather than an async one: with the signature check cached (the usual
  // case), a request passes without allocating a promise.
  return function bearerGuard(request: FastifyRequest, _reply: FastifyReply, done: (error?: Error) => void): void {
    const header = request.headers.authorization;
    const match = header === undefined ? null : BEARER.exec(header);
    if (!match?.[1]) {
      done(unauthenticated(request, header === undefined ? errors.tokenMissing() : errors.tokenMalformed()));
      return;
    }
    const cached = tokens.cachedClaims(match[1]);
    if (cached) {
      done(authorise(request, cached));
      return;
    }
    tokens.verifyAccessToken(match[1]).then(
      (claims) => done(authorise(request, claims)),
      (error: unknown) => done(error instanceof GatewayError ? unauthenticated(request, error) : (error as Error)),
    );
  };
}
