import ipaddr from 'ipaddr.js';

type Address = ipaddr.IPv4 | ipaddr.IPv6;

/** A parsed CIDR list that answers "is this address inside?" for either address family. */
export interface AddressRanges {
  readonly source: readonly string[];
  contains(address: string): boolean;
}

/**
 * Parses one address or CIDR entry as operators write it. IPv4 must be four-part decimal:
 * ipaddr.js also accepts `127.1` and `0x7f.1`, which nobody means in an allowlist.
 * IPv4-mapped IPv6 entries are unwrapped so that `::ffff:10.0.0.0/104` and `10.0.0.0/8` agree.
 */
export function parseRange(entry: string): [Address, number] {
  const text = entry.trim();
  const slash = text.indexOf('/');
  const host = slash === -1 ? text : text.slice(0, slash);
  const bitsText = slash === -1 ? undefined : text.slice(slash + 1);
  let address: Address;
  if (host.includes(':')) {
    if (!ipaddr.IPv6.isValid(host)) throw new Error(`"${entry}" is not an IPv6 address or range`);
    address = ipaddr.IPv6.parse(host);
  } else {
    if (!ipaddr.IPv4.isValidFourPartDecimal(host)) throw new Error(`"${entry}" is not a four-part decimal IPv4 address or range`);
    address = ipaddr.IPv4.parse(host);
  }
  const maxBits = address.kind() === 'ipv4' ? 32 : 128;
  let bits = maxBits;
  if (bitsText !== undefined) {
    if (!/^\d{1,3}$/.test(bitsText) || Number(bitsText) > maxBits) throw new Error(`"${entry}" has an invalid prefix length`);
    bits = Number(bitsText);
  }
  if (address.kind() === 'ipv6' && (address as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96) {
    return [(address as ipaddr.IPv6).toIPv4Address(), bits - 96];
  }
  return [address, bits];
}

/**
 * Remembers answers per address: clients reuse a handful of addresses, and ipaddr.js parsing
 * was a measurable part of every request (bench). Bounded: cleared when full.
 */
function memoize<T>(compute: (address: string) => T, limit = 4096): (address: string) => T {
  const answers = new Map<string, T>();
  return (address) => {
    let answer = answers.get(address);
    if (answer === undefined && !answers.has(address)) {
      if (answers.size >= limit) answers.clear();
      answer = compute(address);
      answers.set(address, answer);
    }
    return answer as T;
  };
}

/**
 * The canonical text of an address written the way D10 accepts it, or undefined: IPv4 only as
 * four-part decimal (`127.1`, `2130706433` and `0x7f.0.0.1` are refused, as in the config),
 * IPv6 as RFC 4291 text, IPv4-mapped IPv6 unwrapped to its IPv4 address. Socket addresses and
 * X-Forwarded-For entries go through here, so the allowlist, the limiters and the audit all
 * see one spelling of an address.
 */
export const normaliseAddress: (address: string) => string | undefined = memoize((text) => {
  if (text.includes(':')) {
    if (!ipaddr.IPv6.isValid(text)) return undefined;
    // ipaddr.js also takes `::ffff:0x7f.0.0.1`: the embedded IPv4 must be four-part decimal too.
    const dotted = text.lastIndexOf(':');
    if (text.includes('.', dotted) && !ipaddr.IPv4.isValidFourPartDecimal(text.slice(dotted + 1))) return undefined;
    const address = ipaddr.IPv6.parse(text);
    return address.isIPv4MappedAddress() ? address.toIPv4Address().toString() : address.toString();
  }
  return ipaddr.IPv4.isValidFourPartDecimal(text) ? ipaddr.IPv4.parse(text).toString() : undefined;
});

/** The audit and limiter key of an address: IPv4 as is, IPv6 by its /64 (one host, many addresses). */
export const addressBucket: (address: string) => string = memoize((address) => {
  if (!address.includes(':') || !ipaddr.IPv6.isValid(address)) return address;
  const parts = ipaddr.IPv6.parse(address).parts.slice(0, 4);
  return `${ipaddr.IPv6.parse(`${parts.map((p) => p.toString(16)).join(':')}::`).toString()}/64`;
});

export function compileRanges(entries: readonly string[]): AddressRanges {
  const v4: [ipaddr.IPv4, number][] = [];
  const v6: [ipaddr.IPv6, number][] = [];
  for (const entry of entries) {
    const [address, bits] = parseRange(entry);
    if (address.kind() === 'ipv4') v4.push([address as ipaddr.IPv4, bits]);
    else v6.push([address as ipaddr.IPv6, bits]);
  }
  const source = Object.freeze([...entries]);
  return Object.freeze({
    source,
    contains: memoize((text: string): boolean => {
      const canonical = normaliseAddress(text);
      if (canonical === undefined) return false;
      // Mapped addresses are already unwrapped, so ::ffff:a.b.c.d is matched against the IPv4
      // ranges; match() would throw across families and subnetMatch would skip them.
      const address = ipaddr.parse(canonical);
      if (address.kind() === 'ipv4') {
        const four = address as ipaddr.IPv4;
        return v4.some((range) => four.match(range));
      }
      const six = address as ipaddr.IPv6;
      return v6.some((range) => six.match(range));
    }),
  });
}
