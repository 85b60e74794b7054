/**
 * Whether the service may send e-mail from `address` (already a valid address): its domain is one
 * of `domains` exactly (a subdomain is listed on its own), or `domains` holds `*`. Our mail server
 * signs and sends as the operator: any other sender would let a client spoof someone else's mail.
 */
export function mailFromAllowed(address: string, domains: readonly string[]): boolean {
  if (domains.includes("*")) return true;
  const domain = address.slice(address.lastIndexOf("@") + 1).toLowerCase();
  return domains.includes(domain);
}
