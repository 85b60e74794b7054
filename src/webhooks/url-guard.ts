import { BlockList, isIP } from "node:net";

/**
 * IPv4 ranges that are not globally reachable (IANA special-purpose registry): this network,
 * private, CGNAT (also cloud metadata such as 100.100.100.200), loopback, link-local (169.254.169.254
 * metadata), IETF protocol assignments, documentation, the retired 6to4 relay, benchmarking,
 * multicast, reserved and broadcast.
 */
const BLOCKED_V4: ReadonlyArray<readonly [string, number]> = [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.0.2.0", 24],
  ["192.88.99.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
];

/**
 * IPv6 ranges that are not globally reachable and do not carry an IPv4 address we can judge:
 * unspecified, loopback, local-use NAT64 (RFC 8215, where the IPv4 part may sit anywhere),
 * discard-only, IETF protocol assignments (Teredo, whose client address is obfuscated, among them),
 * documentation, SRv6 SIDs, unique-local (AWS metadata fd00:ec2::254), site-local, link-local, multicast.
 */
const BLOCKED_V6: ReadonlyArray<readonly [string, number]> = [
  ["::", 128],
  ["::1", 128],
  ["64:ff9b:1::", 48],
  ["100::", 64],
  ["2001::", 23],
  ["2001:db8::", 32],
  ["3fff::", 20],
  ["5f00::", 16],
  ["fc00::", 7],
  ["fec0::", 10],
  ["fe80::", 10],
  ["ff00::", 8],
];

const hex16 = (a: number, b: number) => ((a << 8) | b).toString(16);

// Addresses that embed an IPv4 address are judged by it: each blocked IPv4 range is also blocked
// as IPv4-mapped (::ffff:0:0/96), IPv4-translated (::ffff:0:0:0/96, SIIT), IPv4-compatible (::/96),
// NAT64 (64:ff9b::/96, RFC 6052) and 6to4 (2002::/16, the IPv4 address in bits 16-47). BlockList does the matching; nothing here
// parses an address.
const blocked = new BlockList();
for (const [net, prefix] of BLOCKED_V4) {
  blocked.addSubnet(net, prefix, "ipv4");
  for (const embedding of ["::ffff:", "::ffff:0:", "::", "64:ff9b::"]) blocked.addSubnet(`${embedding}${net}`, 96 + prefix, "ipv6");
  const [a, b, c, d] = net.split(".").map(Number);
  blocked.addSubnet(`2002:${hex16(a, b)}:${hex16(c, d)}::`, 16 + prefix, "ipv6");
}
for (const [net, prefix] of BLOCKED_V6) blocked.addSubnet(net, prefix, "ipv6");

/**
 * Whether an IP address is loopback, private, link-local, metadata, unspecified or otherwise not
 * public. An address that embeds an IPv4 address (mapped, compatible, NAT64, 6to4) is judged by
 * that IPv4 address. Not an IP address: false.
 */
export function isPrivateAddress(ip: string): boolean {
  const v = isIP(ip);
  if (v === 4) return blocked.check(ip, "ipv4");
  if (v === 6) return blocked.check(ip, "ipv6");
  return false;
}

/**
 * Why a webhook URI is unacceptable, or undefined when it is fine. Only literal addresses and
 * localhost names are judged here; names that resolve to private addresses are refused when
 * the call is made (webhook-client.ts), against the very addresses it connects to.
 */
export function webhookUriProblem(uri: string, allowPrivate: boolean): string | undefined {
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return "must be an absolute http or https URI";
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return "must be an absolute http or https URI";
  if (uri.length > 2048) return "must be at most 2048 characters";
  if (allowPrivate) return undefined;
  const host = bareHost(url);
  if (host === "localhost" || host.endsWith(".localhost") || isPrivateAddress(host)) {
    return "points at a private, loopback or link-local address, which is not allowed";
  }
  return undefined;
}

/** A URL's host name without the brackets of an IPv6 literal, lower case. */
export function bareHost(url: URL): string {
  return url.hostname.replace(/^\[|\]$/g, "").toLowerCase();
}
