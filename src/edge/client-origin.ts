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
 * What the TCP peer itself is, before any header is read: a trusted proxy, a direct client on
 * the allowlist, or an outsider (not on either list, or not a valid address). The connection
 * budget, the parser-error answers and the framework-error answers all judge a socket by this.
 */
export function classifyPeer(
  socketAddress: string | undefined,
  ranges: { allowlist: AddressRanges; trustedProxies: AddressRanges },
): 'proxy' | 'client' | 'outsider' {
  const peer = socketAddress === undefined ? undefined : normaliseAddress(socketAddress);
  if (peer === undefined) return 'outsider';
  if (ranges.trustedProxies.contains(peer)) return 'proxy';
  return ranges.allowlist.contains(peer) ? 'client' : 'outsider';
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
