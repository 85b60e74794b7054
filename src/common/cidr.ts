import { BlockList, isIP } from "node:net";

/** A CIDR (203.0.113.0/24, 2001:db8::/32; a bare address is /32 or /128) as its parts, or undefined when it is not one. */
export function parseCidr(text: string): { address: string; prefix: number; family: "ipv4" | "ipv6" } | undefined {
  const m = /^([^/\s]+)(?:\/(\d{1,3}))?$/.exec(text.trim());
  if (!m) return undefined;
  const version = isIP(m[1]!);
  if (version === 0) return undefined;
  const max = version === 4 ? 32 : 128;
  const prefix = m[2] === undefined ? max : Number(m[2]);
  if (prefix > max) return undefined;
  return { address: m[1]!, prefix, family: version === 4 ? "ipv4" : "ipv6" };
}

/**
 * Whether an address is in any of the CIDRs (an empty list allows every address). Node's BlockList
 * compares an IPv4-mapped IPv6 address (::ffff:203.0.113.5, as a dual-stack socket reports it)
 * with the IPv4 rules too.
 */
export function cidrMatcher(cidrs: readonly string[]): (address: string) => boolean {
  if (cidrs.length === 0) return () => true;
  const list = new BlockList();
  for (const c of cidrs) {
    const p = parseCidr(c);
    if (p) list.addSubnet(p.address, p.prefix, p.family);
  }
  return (address) => {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
    if (mapped) return list.check(mapped[1]!, "ipv4");
    const v = isIP(address);
    return v !== 0 && list.check(address, v === 4 ? "ipv4" : "ipv6");
  };
}
