import type { IncomingHttpHeaders } from 'node:http';
import { normaliseAddress, type AddressRanges } from '../foundation/address-ranges.js';

/** Who sent a request, as far as the edge can tell (D9, D10). */
export interface ClientOrigin {
  /** Canonical client address, or undefined when a trusted proxy reported one that is not a valid address. */
  readonly address: string | undefined;
  /** The client spoke TLS: to this listener, or to a trusted proxy that says so. */
  readonly https: boolean;
}

function lastValue(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  const text = Array.isArray(header) ? header.join(',') : header;
  const comma = text.lastIndexOf(',');
  return (comma === -1 ? text : text.slice(comma + 1)).trim();
}

/**
 * The client address and scheme. A direct peer is the client. A trusted proxy's report is
 * believed hop by hop from the right of X-Forwarded-For: the first address that is not itself a
 * trusted proxy is the client (proxies' own entries are skipped, never the client's). Every
 * entry must be a strictly written address; one that is not makes the client unknown, which
 * the allowlist refuses, rather than guessing what `127.1` means. X-Forwarded-Proto is taken
 * from the nearest proxy (its last value).
 */
export function resolveClientOrigin(
  socketAddress: string | undefined,
  encrypted: boolean,
  headers: IncomingHttpHeaders,
  trustedProxies: AddressRanges,
): ClientOrigin {
  const peer = socketAddress === undefined ? undefined : normaliseAddress(socketAddress);
  if (peer === undefined || trustedProxies.source.length === 0 || !trustedProxies.contains(peer)) return { address: peer, https: encrypted };

  const proto = lastValue(headers['x-forwarded-proto'])?.toLowerCase();
  const https = proto === undefined ? encrypted : proto === 'https';
  const forwarded = headers['x-forwarded-for'];
  if (forwarded === undefined) return { address: peer, https };
  const entries = (Array.isArray(forwarded) ? forwarded.join(',') : forwarded).split(',');
  let client: string | undefined = peer;
  for (let index = entries.length - 1; index >= 0; index -= 1) {
    const entry = entries[index]!.trim();
    const address = normaliseAddress(entry);
    if (address === undefined) return { address: undefined, https };
    client = address;
    if (!trustedProxies.contains(address)) break;
  }
  return { address: client, https };
}
