import type { AccessClaims } from './auth/token-service.js';
import type { Credential, Permission } from './auth/credentials.js';

/** Who is calling, resolved on every request by the bearer guard (D7). */
export interface Principal {
  readonly credential: Credential;
  readonly claims: AccessClaims;
}

export interface RoutePolicy {
  /** Permission the route needs (D13); checked right after authentication. */
  permission?: Permission;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The client's address: socket or trusted-proxy report, IPv4-mapped unwrapped (D10). */
    clientAddress: string;
    principal: Principal | undefined;
  }
  interface FastifyContextConfig {
    policy?: RoutePolicy;
  }
}
