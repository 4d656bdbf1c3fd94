import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { isIP, type LookupFunction, type Socket } from 'node:net';
import ipaddr from 'ipaddr.js';
import { buildConnector } from 'undici';

/**
 * The egress guard (D65): a webhook URL is the partner's to choose, so in production the sender
 * must not become a way into the gateway's own network. It refuses, at connect time, every
 * address in these ranges: the address the socket is about to connect to, as the resolver
 * answered it then, never a name checked once at config time (DNS may answer 127.0.0.1 later).
 */
const REFUSED_RANGES: ReadonlySet<string> = new Set([
  'unspecified',
  'loopback',
  'private',
  'linkLocal',
  'uniqueLocal',
  // Not in the design's list, but as internal as `private`: shared address space (RFC 6598)
  // and the deprecated IPv6 site-local range.
  'carrierGradeNat',
  'deprecatedSiteLocal',
]);

/** The error a refused connection fails with; the sender reports it as `address refused by egress guard`. */
export class EgressRefusedError extends Error {
  readonly code = 'EGRESS_REFUSED';

  constructor() {
    // No address or name in the message: the URL is the partner's and may say more than it should.
    super('address refused by egress guard');
    this.name = 'EgressRefusedError';
  }
}

/** Whether the guard refuses this address: any in the refused ranges, IPv4-mapped IPv6 unwrapped first; anything unparsable too. */
export function isRefusedAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return true;
  // process() unwraps ::ffff:127.0.0.1 to 127.0.0.1: matched as IPv6 it would be in no range.
  return REFUSED_RANGES.has(ipaddr.process(address).range());
}

/** Whether the guard refuses anything: in production, unless `events.allowPrivateNetworks`; sandbox and local reach private and loopback addresses anyway. */
export function egressGuarded(environment: string, allowPrivateNetworks: boolean): boolean {
  return environment === 'production' && !allowPrivateNetworks;
}

/**
 * A resolver that answers only the addresses the guard allows, and fails with
 * EgressRefusedError when none is left. Node's connect (with `autoSelectFamily`) tries exactly
 * the addresses this answers, so nothing refused is ever connected to.
 */
export function guardedLookup(resolve: LookupFunction = dnsLookup as LookupFunction): LookupFunction {
  return (hostname: string, options: LookupOptions, callback) => {
    resolve(hostname, { ...options, all: true }, (error, found) => {
      if (error) return callback(error, []);
      const addresses = (Array.isArray(found) ? found : [{ address: found, family: isIP(found) }]) as LookupAddress[];
      const allowed = addresses.filter((entry) => !isRefusedAddress(entry.address));
      const first = allowed[0];
      if (first === undefined) return callback(new EgressRefusedError(), []);
      if (options.all) return callback(null, allowed);
      return callback(null, first.address, first.family);
    });
  };
}

export interface GuardedConnectorOptions {
  /** False: every address is allowed (sandbox, local, `allowPrivateNetworks`). */
  readonly guarded: boolean;
  /** Connect timeout in ms (undici's default is 10 s). */
  readonly timeoutMs?: number;
  /** The resolver behind the guard; by default the system's (tests give one that answers what they want). */
  readonly resolve?: LookupFunction;
  /** Trusted CAs for https endpoints instead of the system's (tests). */
  readonly ca?: string | Buffer;
}

/**
 * undici's connector with the guard in front: a name goes through the guarded resolver; an
 * address literal (the resolver is not asked for one) is checked as it is; and once connected,
 * the socket's remote address is checked again, whatever path led there.
 */
export function guardedConnector(options: GuardedConnectorOptions): buildConnector.connector {
  const connect = buildConnector({
    ...(options.timeoutMs !== undefined && { timeout: options.timeoutMs }),
    ...(options.ca !== undefined && { ca: options.ca }),
    ...(options.guarded && { lookup: guardedLookup(options.resolve) }),
    ...(!options.guarded && options.resolve !== undefined && { lookup: options.resolve }),
  });
  if (!options.guarded) return connect;
  return (target, callback) => {
    if (isIP(target.hostname) !== 0 && isRefusedAddress(target.hostname)) {
      callback(new EgressRefusedError(), null);
      return;
    }
    connect(target, (error, socket) => {
      if (error !== null) return callback(error, null);
      const remote = (socket as Socket).remoteAddress;
      if (remote === undefined || isRefusedAddress(remote)) {
        socket.destroy();
        return callback(new EgressRefusedError(), null);
      }
      return callback(null, socket);
    });
  };
}
