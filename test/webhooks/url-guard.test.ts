/**
 * The private-address rules on their own: which literal addresses a webhook may target, and
 * that an IPv6 address embedding an IPv4 address (mapped, translated, compatible, NAT64, 6to4)
 * is judged by that IPv4 address, both as an address and as the host of a webhook URI.
 */
import { describe, expect, it } from "vitest";
import { isPrivateAddress, webhookUriProblem } from "../../src/webhooks/url-guard.js";

const REFUSED = "points at a private, loopback or link-local address, which is not allowed";

describe("isPrivateAddress", () => {
  it.each([
    ["127.0.0.1", "loopback"],
    ["127.255.255.254", "loopback"],
    ["0.0.0.0", "unspecified"],
    ["10.1.2.3", "private"],
    ["172.16.0.1", "private"],
    ["172.31.255.255", "private"],
    ["192.168.1.1", "private"],
    ["100.64.0.1", "CGNAT"],
    ["100.100.100.200", "metadata (Alibaba)"],
    ["169.254.169.254", "metadata (link-local)"],
    ["192.0.0.192", "metadata (Oracle, IETF protocol assignments)"],
    ["198.18.0.1", "benchmarking"],
    ["192.0.2.1", "documentation"],
    ["224.0.0.1", "multicast"],
    ["255.255.255.255", "broadcast"],
    ["::", "unspecified"],
    ["::1", "loopback"],
    ["fd00:ec2::254", "metadata (AWS, unique-local)"],
    ["fc00::1", "unique-local"],
    ["fe80::1", "link-local"],
    ["ff02::1", "multicast"],
    ["2001:db8::1", "documentation"],
    ["2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"],
    ["64:ff9b:1::a00:1", "local-use NAT64"],
  ])("%s is refused (%s)", (ip) => {
    expect(isPrivateAddress(ip)).toBe(true);
  });

  it.each(["8.8.8.8", "1.2.3.4", "93.184.215.14", "172.32.0.1", "100.128.0.1", "2606:4700:4700::1111", "2a00:1450:4001:80b::200e"])("%s is public", (ip) => {
    expect(isPrivateAddress(ip)).toBe(false);
  });

  // Each form, with a blocked and a public IPv4 address inside: judged by the IPv4 address alone.
  it.each([
    ["IPv4-mapped", "::ffff:127.0.0.1", "::ffff:8.8.8.8"],
    ["IPv4-mapped, hex", "::ffff:7f00:1", "::ffff:808:808"],
    ["IPv4-mapped metadata", "::ffff:a9fe:a9fe", "::ffff:5db8:d70e"],
    ["IPv4-translated (SIIT)", "::ffff:0:7f00:1", "::ffff:0:808:808"],
    ["IPv4-compatible", "::7f00:1", "::808:808"],
    ["IPv4-compatible, dotted", "::10.0.0.1", "::8.8.8.8"],
    ["NAT64", "64:ff9b::7f00:1", "64:ff9b::808:808"],
    ["NAT64, dotted", "64:ff9b::192.168.0.1", "64:ff9b::8.8.8.8"],
    ["NAT64 metadata", "64:ff9b::a9fe:a9fe", "64:ff9b::5db8:d70e"],
    ["6to4", "2002:7f00:1::", "2002:808:808::"],
    ["6to4 with a host part", "2002:c0a8:101::1", "2002:808:808:1::1"],
    ["6to4 metadata", "2002:a9fe:a9fe::", "2002:5db8:d70e::"],
  ])("%s: %s is refused, %s is public", (_form, blockedIp, publicIp) => {
    expect(isPrivateAddress(blockedIp)).toBe(true);
    expect(isPrivateAddress(publicIp)).toBe(false);
  });

  it("is false for anything that is not an IP address", () => {
    for (const s of ["", "localhost", "example.com", "127.0.0.1.nip.io", "::g"]) expect(isPrivateAddress(s)).toBe(false);
  });
});

describe("webhookUriProblem", () => {
  it.each([
    "http://[64:ff9b::7f00:1]/",
    "http://[64:ff9b::127.0.0.1]:8080/hook",
    "http://[2002:7f00:1::]/",
    "https://[::7f00:1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://[64:ff9b::a9fe:a9fe]/latest/meta-data",
    "http://2130706433/", // 127.0.0.1 as one number: the URL parser normalises it
    "http://0x7f.1/",
    "http://[::]/",
    "http://LOCALHOST/",
    "http://api.localhost/",
  ])("refuses %s", (uri) => {
    expect(webhookUriProblem(uri, false)).toBe(REFUSED);
    expect(webhookUriProblem(uri, true)).toBeUndefined();
  });

  it.each(["https://hooks.example.com/dr", "http://[64:ff9b::808:808]/", "http://[2002:808:808::]/", "http://8.8.8.8:8080/x"])("accepts %s", (uri) => {
    expect(webhookUriProblem(uri, false)).toBeUndefined();
  });

  it("refuses what is not an absolute http(s) URI, whatever the private setting", () => {
    for (const uri of ["ftp://example.com/", "/relative", "example.com", "http://"]) {
      expect(webhookUriProblem(uri, true)).toBe("must be an absolute http or https URI");
    }
  });
});
