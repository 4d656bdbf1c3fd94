import { parseRange } from '../foundation/address-ranges.js';
import { ConfigFileSchema } from './config-schema.js';
import { child, entries, members } from './schema-parts.js';

const SCHEMA = ConfigFileSchema.properties;

/** The widest allowlist entry production takes without `allowlistWideRangesAllowed` (D62). */
const WIDEST = { ipv4: 8, ipv6: 32 } as const;

/** The prefix length of a range entry and its family, or undefined for an entry the ranges loader reports. */
function prefixOf(entry: unknown): { bits: number; family: 'ipv4' | 'ipv6' } | undefined {
  if (typeof entry !== 'string') return undefined;
  try {
    const [address, bits] = parseRange(entry);
    return { bits, family: address.kind() };
  } catch {
    return undefined;
  }
}

/** Hosts that only this machine reaches. A name other than `localhost` may resolve anywhere. */
function isLoopback(host: string): boolean {
  if (host === 'localhost') return true;
  try {
    const [address] = parseRange(host.replace(/^\[(.*)\]$/, '$1'));
    return address.range() === 'loopback';
  } catch {
    return false;
  }
}

/** One open door: production refuses it (`refuse`), or starts and warns (`warn`), as production-guards.ts's UnsafeSetting. */
export interface OpenDoor {
  field: string;
  problem: string;
  inProduction: 'refuse' | 'warn';
}

/**
 * D62: the settings that leave a door open to anyone, each as a `field: problem` that production
 * refuses and sandbox warns about: an allowlist that admits the whole internet (or a range wider
 * than a /8 or a /32 that nobody declared deliberate), a trusted proxy range that lets every peer
 * say who the client is, and an unauthenticated admin listener on a non-loopback address that
 * nobody declared exposed (declared, it is a warning everywhere, naming the exposure), and a
 * connector listener without mutual TLS or a secret (D64).
 */
export function openDoors(root: unknown): OpenDoor[] {
  const found: OpenDoor[] = [];
  const refuse = (field: string, problem: string) => found.push({ field, problem, inProduction: 'refuse' });
  const { allowlistWideRangesAllowed } = members(ConfigFileSchema, root);
  entries(child(root, 'allowlist')).forEach((entry, index) => {
    const range = prefixOf(entry);
    if (range === undefined) return;
    const field = `allowlist[${index}]`;
    if (range.bits === 0) {
      refuse(field, `"${String(entry)}" admits every address: an allowlist of everything is none; list the clients' ranges`);
    } else if (range.bits < WIDEST[range.family] && allowlistWideRangesAllowed !== true) {
      refuse(
        field,
        `"${String(entry)}" is wider than a /${WIDEST[range.family]}; list the clients' own ranges, or set allowlistWideRangesAllowed: true if a partner's network really is that large`,
      );
    }
  });
  entries(child(root, 'trustedProxies')).forEach((entry, index) => {
    if (prefixOf(entry)?.bits !== 0) return;
    refuse(
      `trustedProxies[${index}]`,
      `"${String(entry)}" trusts every peer: any client could name any address in X-Forwarded-For and pass the allowlist; list the load balancers' ranges`,
    );
  });
  const admin = members(SCHEMA.listeners.properties.admin, child(child(root, 'listeners'), 'admin'));
  if (admin.host !== undefined && !isLoopback(admin.host)) {
    const serves = `the admin listener on ${admin.host} serves /metrics, /healthz, /readyz and /openapi.json without authentication to whoever reaches that address`;
    if (admin.exposed === true) {
      found.push({
        field: 'listeners.admin.host',
        problem: `${serves} (listeners.admin.exposed: true); keep it on a network only the scraper and the probes reach`,
        inProduction: 'warn',
      });
    } else {
      refuse('listeners.admin.host', `${serves}; bind it to 127.0.0.1, or set listeners.admin.exposed: true where a network policy keeps it internal`);
    }
  }
  // D64: whoever can post to the connector listener writes events partners act on.
  const connectorListener = child(child(root, 'listeners'), 'connector');
  if (connectorListener !== undefined && child(connectorListener, 'clientCa') === undefined && child(child(root, 'connector'), 'eventsSecret') === undefined) {
    refuse(
      'listeners.connector',
      'the connector listener accepts events from whoever reaches it: set listeners.connector.clientCa (mutual TLS) or connector.eventsSecret (X-Connector-Secret), or both',
    );
  }
  return found;
}
