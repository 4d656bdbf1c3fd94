import type { Credential, Permission } from '../config/credentials-file.js';
import type { AccessClaims } from '../auth/token-service.js';
import type { LimitedAction } from '../auth/auth-rate-limits.js';
import type { FastifyContextConfig, FastifyRequest } from 'fastify';
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

/**
 * What the hooks read of the route a request took. Fastify's `request.routeOptions` builds a new
 * object of a dozen fields on every read, and a card request read it seven times (issue 34):
 * these are made once per route and found once per request.
 */
export interface RouteFacts {
  /** The route's template; undefined for the not-found handler. */
  readonly url: string | undefined;
  readonly policy: RoutePolicy | undefined;
  /** The route's body schema, which the strict JSON reader walks beside the text. */
  readonly bodySchema: unknown;
}

const FACTS = new WeakMap<object, RouteFacts>();

/** The facts of the route `request` took (made on the first request of each route). */
export function routeOf(request: FastifyRequest): RouteFacts {
  if (request.routeFacts !== undefined) return request.routeFacts;
  const options = request.routeOptions;
  // One config object per route: its facts are made once.
  const config = options.config as FastifyContextConfig & object;
  let facts = FACTS.get(config);
  if (facts === undefined) {
    facts = { url: options.url, policy: config.policy, bodySchema: options.schema?.body };
    FACTS.set(config, facts);
  }
  request.routeFacts = facts;
  return facts;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by routeOf on the request's first look at its route. */
    routeFacts: RouteFacts | undefined;
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
  return { correlationId: request.id, clientAddress: request.clientAddress, route: `${request.method} ${routeOf(request).url ?? 'unmatched'}` };
}
