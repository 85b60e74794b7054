/**
 * A bind's credentials checked (docs/smpp-server.md#bind): its system_id and password against the
 * account's SMPP credentials, under the API's failed-guess limits, and its address against
 * AllowedAddresses. MaxBinds is the server's (smpp_binds, every process); this is the rest.
 */
import type { MikroORM } from "@mikro-orm/sql";
import type { Account } from "../accounts/account.entity.js";
import { readAccountFresh } from "../accounts/account-store.js";
import type { AuthFailureGuard } from "../accounts/auth-failures.js";
import { passwordMatches } from "../accounts/password-hash.js";
import { findSmppCredentialsBySystemId, type SmppCredentialRecord } from "../accounts/smpp-store.js";
import { cidrMatcher } from "../common/cidr.js";
import { status } from "./smpp-pdu.js";

/** What a bind's check found: the credentials and account, or the command_status to refuse it with. */
export type BindCheck = { ok: true; creds: SmppCredentialRecord; account: Account } | { ok: false; status: number; why?: string };

/** Checks a bind from `ip`; never logs or returns the password. */
export async function checkBind(
  deps: { orm: MikroORM; failures?: AuthFailureGuard },
  ip: string,
  bind: { systemId: string; password: string },
): Promise<BindCheck> {
  const guard = deps.failures;
  const em = deps.orm.em.fork();
  const creds = await findSmppCredentialsBySystemId(em, bind.systemId);
  // The same failed-guess limits as the API (accounts/auth-failures.ts): past them, nothing is checked.
  let attempt: Awaited<ReturnType<AuthFailureGuard["attempt"]>> | undefined;
  try {
    guard?.admit(ip, creds?.accountSid);
    attempt = await guard?.attempt(ip, creds?.accountSid);
  } catch {
    return { ok: false, status: status("ESME_RBINDFAIL"), why: "too many failed binds" };
  }
  // An unknown system_id gets the wrong password's answer: a guess learns neither.
  if (!(await passwordMatches(bind.password, creds?.passwordHash)) || !creds) {
    return { ok: false, status: status("ESME_RINVPASWD"), why: "wrong system_id or password" };
  }
  attempt?.succeeded();
  guard?.trust(ip, creds.accountSid);
  if (!cidrMatcher(creds.allowedAddresses)(ip)) return { ok: false, status: status("ESME_RBINDFAIL"), why: "address not allowed" };
  const account = await readAccountFresh(em, creds.accountSid);
  if (!account) return { ok: false, status: status("ESME_RBINDFAIL"), why: "account gone" };
  return { ok: true, creds, account };
}
