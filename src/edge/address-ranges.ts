import ipaddr from 'ipaddr.js';

type Address = ipaddr.IPv4 | ipaddr.IPv6;

/** A parsed CIDR list that answers "is this address inside?" for either address family. */
export interface AddressRanges {
  readonly source: readonly string[];
  contains(address: string): boolean;
}

/**
 * Parses one address or CIDR entry as operators write it. IPv4 must be four-part decimal:
 * ipaddr.js also accepts `127.1` and `0x7f.1`, which nobody means in an allowlist (pitfalls.md).
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

/** Turns any textual client address into its canonical form, unwrapping IPv4-mapped IPv6. */
export const normaliseAddress: (address: string) => string | undefined = memoize((address) =>
  ipaddr.isValid(address) ? ipaddr.process(address).toString() : undefined,
);

export function compileRanges(entries: readonly string[]): AddressRanges {
  const v4: [ipaddr.IPv4, number][] = [];
  const v6: [ipaddr.IPv6, number][] = [];
  for (const entry of entries) {
    const [address, bits] = parseRange(entry);
    if (address.kind() === 'ipv4') v4.push([address as ipaddr.IPv4, bits]);
    else v6.push([address as ipaddr.IPv6, bits]);
  }
  const source = Object.freeze([...entries]);
  return {
    source,
    contains: memoize((text: string): boolean => {
      if (!ipaddr.isValid(text)) return false;
      // process() unwraps ::ffff:a.b.c.d so it is matched against the IPv4 ranges; match()
      // would throw across families and subnetMatch would skip them (fail open on denylists).
      const address = ipaddr.process(text);
      if (address.kind() === 'ipv4') {
        const four = address as ipaddr.IPv4;
        return v4.some((range) => four.match(range));
      }
      const six = address as ipaddr.IPv6;
      return v6.some((range) => six.match(range));
    }),
  };
}
