/** Sender of forwarded e-mails when the message named no ForwardFromEmail. */
export const NO_REPLY_EMAIL = "no-reply@switchboard.invalid";

/** The domains a ForwardFromEmail may use when MAIL_FROM_DOMAINS is not set: the no-reply address's. */
export const DEFAULT_MAIL_FROM_DOMAINS: readonly string[] = [NO_REPLY_EMAIL.slice(NO_REPLY_EMAIL.lastIndexOf("@") + 1)];

/** Parses MAIL_FROM_DOMAINS: comma-separated domains, any case; `*` allows any domain. */
export function parseMailFromDomains(value: string | undefined): string[] {
  const domains = (value ?? "")
    .split(",")
    .map((d) => d.trim().toLowerCase())
    .filter(Boolean);
  return domains.length > 0 ? domains : [...DEFAULT_MAIL_FROM_DOMAINS];
}

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
