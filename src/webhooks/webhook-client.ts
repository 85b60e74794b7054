import { promises as dns } from "node:dns";
import http from "node:http";
import https from "node:https";
import { isIP, type LookupFunction } from "node:net";
import { bareHost, isPrivateAddress } from "./url-guard.js";

/** One address a host name resolved to. */
export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** Resolves a host name to every address it has; webhook calls are given one (tests give their own DNS server). */
export type ResolveHost = (hostname: string) => Promise<ResolvedAddress[]>;

/** The system resolver (getaddrinfo: /etc/hosts, then DNS), the one any HTTP client would use. */
export const systemResolver: ResolveHost = async (hostname) =>
  (await dns.lookup(hostname, { all: true })).map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));

/** A resolver that asks these DNS servers (`ip` or `ip:port`) directly for A and AAAA records (WEBHOOK_DNS_SERVERS). */
export function dnsServersResolver(servers: string[]): ResolveHost {
  const resolver = new dns.Resolver({ timeout: 2000, tries: 2 });
  resolver.setServers(servers);
  return async (hostname) => {
    const [v4, v6] = await Promise.allSettled([resolver.resolve4(hostname), resolver.resolve6(hostname)]);
    const found: ResolvedAddress[] = [
      ...(v4.status === "fulfilled" ? v4.value.map((address) => ({ address, family: 4 as const })) : []),
      ...(v6.status === "fulfilled" ? v6.value.map((address) => ({ address, family: 6 as const })) : []),
    ];
    if (found.length > 0) return found;
    throw v4.status === "rejected" ? v4.reason : new Error(`${hostname} has no address`);
  };
}

/** The call was refused before any connection: its target is not public. Not worth retrying. */
export class PrivateTargetError extends Error {
  constructor(address: string) {
    super(`the URI resolves to a private, loopback or link-local address (${address})`);
    this.name = "PrivateTargetError";
  }
}

/** One webhook request, signed and ready (see buildWebhookRequest). */
export interface WebhookHttpRequest {
  url: string;
  method: string;
  headers: Record<string, string>;
  body?: string;
}

/** What a webhook call needs besides the request. */
export interface WebhookCallOptions {
  resolve: ResolveHost;
  allowPrivate: boolean;
  /** Aborts the whole call, name resolution included. */
  signal: AbortSignal;
}

function abortable<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  signal.throwIfAborted();
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

/**
 * Makes one webhook call and returns the HTTP status. The host name is resolved once and every
 * answer checked (any private one refuses the call with PrivateTargetError, unless
 * allowPrivate); the connection is then made to exactly those addresses, so a name that changes
 * its answer (DNS rebinding) cannot reach a refused address. No redirect is followed.
 */
export async function callWebhook(req: WebhookHttpRequest, opts: WebhookCallOptions): Promise<number> {
  const url = new URL(req.url);
  const host = bareHost(url);
  const literal = isIP(host);
  const addresses: ResolvedAddress[] = literal ? [{ address: host, family: literal === 6 ? 6 : 4 }] : await abortable(opts.resolve(host), opts.signal);
  if (!opts.allowPrivate) {
    const refused = addresses.find((a) => isPrivateAddress(a.address));
    if (refused) throw new PrivateTargetError(refused.address);
  }
  // The connection goes to the checked addresses and nowhere else: no second lookup, whatever
  // the name answers now. The name itself stays in the request, so Host, SNI and the certificate
  // check are about the name (Node's https agent takes all three from `host`).
  const lookup: LookupFunction = (_hostname, options, callback) => {
    const wanted = options.family === 4 || options.family === "IPv4" ? 4 : options.family === 6 || options.family === "IPv6" ? 6 : 0;
    const usable = wanted ? addresses.filter((a) => a.family === wanted) : addresses;
    if (usable.length === 0) callback(Object.assign(new Error(`${host} has no IPv${wanted} address`), { code: "ENOTFOUND" }), "");
    else if (options.all) callback(null, usable);
    else callback(null, usable[0].address, usable[0].family);
  };
  const client = url.protocol === "https:" ? https : http;
  return new Promise<number>((resolve, reject) => {
    const request = client.request(url, { method: req.method, headers: req.headers, lookup, agent: false, signal: opts.signal }, (res) => {
      resolve(res.statusCode ?? 0);
      res.destroy();
    });
    request.on("error", reject);
    request.end(req.body);
  });
}
