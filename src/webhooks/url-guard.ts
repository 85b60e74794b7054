import { BlockList, isIP } from "node:net";

// Loopback, private, link-local, CGNAT, metadata and other non-public ranges: a webhook must
// not become a way to reach the service's own network.
const blocked = new BlockList();
for (const [net, prefix] of [
  ["0.0.0.0", 8], ["10.0.0.0", 8], ["100.64.0.0", 10], ["127.0.0.0", 8], ["169.254.0.0", 16],
  ["172.16.0.0", 12], ["192.0.0.0", 24], ["192.168.0.0", 16], ["198.18.0.0", 15], ["224.0.0.0", 4], ["240.0.0.0", 4],
] as const) blocked.addSubnet(net, prefix, "ipv4");
for (const [net, prefix] of [["::", 128], ["::1", 128], ["fc00::", 7], ["fe80::", 10], ["ff00::", 8]] as const) {
  blocked.addSubnet(net, prefix, "ipv6");
}

/** Whether an IP address is loopback, private, link-local, metadata or otherwise not public. */
export function isPrivateAddress(ip: string): boolean {
  const v = isIP(ip);
  if (v === 4) return blocked.check(ip, "ipv4");
  if (v === 6) {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
    if (mapped) return blocked.check(mapped[1], "ipv4");
    return blocked.check(ip, "ipv6");
  }
  return false;
}

/**
 * Why a webhook URI is unacceptable, or undefined when it is fine. Only literal addresses and
 * localhost names are judged here; names that resolve to private addresses are refused when
 * the call is made.
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
  const host = url.hostname.replace(/^\[|\]$/g, "").toLowerCase();
  if (host === "localhost" || host.endsWith(".localhost") || isPrivateAddress(host)) {
    return "points at a private, loopback or link-local address, which is not allowed";
  }
  return undefined;
}
