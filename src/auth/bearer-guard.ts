import type { FastifyReply, FastifyRequest } from 'fastify';
import type { LiveSettings } from '../config/live-settings.js';
import { errors, type GatewayError } from '../edge/errors.js';
import type { AuditSink } from '../observability/audit.js';
import type { GatewayMetrics } from '../observability/metrics.js';
import { admitsAddress } from './credentials.js';
import type { AccessClaims, TokenService } from './token-service.js';

/** D12: the scheme (any case), exactly one space, then a JWS compact token. */
const BEARER = /^Bearer ([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)$/i;

/**
 * The protected scope's onRequest hook: authenticate the bearer token, then resolve the
 * credential on every request so deactivation and permission changes apply at once (D7),
 * then the credential's own address ranges (D10) and the route's permission (D13).
 */
export function createBearerGuard(deps: { tokens: TokenService; live: LiveSettings; audit: AuditSink; metrics: GatewayMetrics }) {
  const { tokens, live, audit, metrics } = deps;

  /** Everything after the signature check; returns the refusal, or sets the principal. */
  function authorise(request: FastifyRequest, claims: AccessClaims): GatewayError | undefined {
    const credential = live.current.credentials.byId(claims.sub);
    const denied = (reason: string, credentialId?: string) => {
      metrics.accessDenied.inc({ reason });
      audit.record({ event: 'access.denied', correlationId: request.id, clientAddress: request.clientAddress, outcome: 'denied', credential: credentialId, reason });
    };
    if (!credential) {
      denied('unknown_credential');
      return errors.authenticationFailed('Access token is invalid');
    }
    if (!credential.active) {
      denied('inactive', credential.id);
      return errors.authenticationFailed('Credential is inactive');
    }
    if (!admitsAddress(credential, request.clientAddress)) {
      denied('address', credential.id);
      return errors.forbidden('Client address is not registered for this credential');
    }
    const permission = request.routeOptions.config.policy?.permission;
    if (permission && !credential.permissions.has(permission)) {
      denied('permission', credential.id);
      return errors.forbidden(`Permission ${permission} is required`);
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
      done(errors.authenticationFailed(header === undefined ? 'Authorization header is missing' : 'Authorization header must be "Bearer <token>"'));
      return;
    }
    const cached = tokens.cachedClaims(match[1]);
    if (cached) {
      done(authorise(request, cached));
      return;
    }
    tokens.verifyAccessToken(match[1]).then(
      (claims) => done(authorise(request, claims)),
      (error: Error) => done(error),
    );
  };
}
