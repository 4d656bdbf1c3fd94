import type { Credential, Permission } from '../config/credentials-file.js';
import type { AccessClaims } from '../auth/token-service.js';
import type { LimitedAction } from '../auth/auth-rate-limits.js';
import type { FastifyRequest } from 'fastify';
import type { RequestContext } from '../observability/outcomes.js';

/** Who is calling, resolved on every request by the bearer guard (D7). */
export interface Principal {
  readonly credential: Credential;
  readonly claims: AccessClaims;
}

/**
 * What a route needs, declared in its `config.policy` and applied by route-policy.ts in one
 * place: the permission (checked before the body is read, D13), the rate limits (checked
 * before the handler, in order), and whether its outcomes must be audited (D26: while the
 * audit trail cannot be written, such a route answers 503).
 */
export interface RoutePolicy {
  /** The permissions the request needs, in order, each with the message its refusal answers. */
  permission?: (request: FastifyRequest) => readonly { readonly permission: Permission; readonly refusal: string }[];
  limits?: readonly LimitedAction[];
  /**
   * The limits counted after the body are started before the handler but not awaited there: the
   * handler awaits `request.limitsChecked` beside its own first store calls, before any work the
   * limits guard, so that they share one round trip to the store (login: the per-username limit,
   * the lockout and the new family, issue 35).
   */
  limitsWithHandler?: boolean;
  /** A function when only some requests of the route are audited (a read that reveals). */
  audited?: boolean | ((request: FastifyRequest) => boolean);
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The client's address: socket or trusted-proxy report, IPv4-mapped unwrapped (D10). */
    clientAddress: string;
    principal: Principal | undefined;
    /** With `limitsWithHandler`: settles once the route's limits counted after the body passed (rejects with the 429). */
    limitsChecked: Promise<void> | undefined;
  }
  interface FastifyContextConfig {
    policy?: RoutePolicy;
  }
}

/** Who a request came from and which route it took, as outcomes record them. */
export function requestContext(request: FastifyRequest): RequestContext {
  return { correlationId: request.id, clientAddress: request.clientAddress, route: `${request.method} ${request.routeOptions.url ?? 'unmatched'}` };
}
