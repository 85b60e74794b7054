import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { EntityManager } from "@mikro-orm/sql";
import {
  type AdminService,
  type GetSmppCredentialsRequest,
  type ListSmppBindsRequest,
  ListSmppBindsResponseSchema,
  type SetSmppCredentialsRequest,
  type SmppCredentials,
  SmppCredentialsSchema,
} from "../../gen/switchboard/admin/v1/admin_pb.js";
import { findProperty } from "../accounts/account-store.js";
import { hashPassword } from "../accounts/password-hash.js";
import { findSmppCredentials, listSmppBinds, SMPP_BIND_STALE_MS, type SmppCredentialRecord, upsertSmppCredentials } from "../accounts/smpp-store.js";
import { parseCidr } from "../common/cidr.js";
import { type Clock, unixSeconds } from "../common/clock.js";
import { type FieldProblem, fieldErrors, notFound, quoted } from "../common/errors.js";
import { isSid } from "../common/sid.js";
import { findAccount } from "./admin-lists.js";

/** SMPP 3.4's longest system_id (16 octets with its NUL). */
export const SMPP_SYSTEM_ID_MAX = 15;
/** SMPP 3.4's longest password (9 octets with its NUL). */
export const SMPP_PASSWORD_MAX = 8;
/** An account's binds when the operator names no MaxBinds. */
export const DEFAULT_SMPP_MAX_BINDS = 4;
/** The most binds an account may be given. */
export const SMPP_MAX_BINDS_LIMIT = 100;
/** The most CIDRs in AllowedAddresses. */
const MAX_ALLOWED_ADDRESSES = 100;

// Printable ASCII without space: what every SMPP client can type and send as a C-Octet String.
const PRINTABLE = /^[\x21-\x7e]+$/;

function checkToken(field: "SystemId" | "Password", value: string, max: number, problems: FieldProblem[]): void {
  if (value === "") problems.push({ field, code: "MissingParameter", message: `${field} is required: 1 to ${max} printable ASCII characters.` });
  else if (value.length > max || !PRINTABLE.test(value)) {
    // The password is never echoed, not even in a refusal.
    const shown = field === "Password" ? "" : ` Got ${quoted(value)}.`;
    problems.push({ field, code: "InvalidParameter", message: `${field} must be 1 to ${max} printable ASCII characters, without spaces.${shown}` });
  }
}

function toPb(c: SmppCredentialRecord): SmppCredentials {
  return create(SmppCredentialsSchema, {
    accountSid: c.accountSid,
    systemId: c.systemId,
    propertySid: c.propertySid,
    maxBinds: c.maxBinds,
    allowedAddresses: c.allowedAddresses,
    deliverReplies: c.deliverReplies,
    updated: BigInt(unixSeconds(c.updatedAt)),
  });
}

/** The operator's SMPP methods (docs/smpp-server.md): an account's credentials and the live binds. */
export function createSmppAdmin(deps: {
  clock: Clock;
  em: (ctx: HandlerContext) => EntityManager;
}): Pick<ServiceImpl<typeof AdminService>, "setSmppCredentials" | "getSmppCredentials" | "listSmppBinds"> {
  return {
    async setSmppCredentials(req: SetSmppCredentialsRequest, ctx: HandlerContext) {
      const em = deps.em(ctx);
      const account = await findAccount(em, req.accountSid);
      const problems: FieldProblem[] = [];
      checkToken("SystemId", req.systemId, SMPP_SYSTEM_ID_MAX, problems);
      checkToken("Password", req.password, SMPP_PASSWORD_MAX, problems);
      if (req.propertySid.trim() === "") {
        problems.push({
          field: "PropertySid",
          code: "MissingParameter",
          message: "PropertySid is required: the account's property its SMPP sends are made for.",
        });
      } else if (!(isSid(req.propertySid, "PR") && (await findProperty(em, req.propertySid, account.sid)))) {
        problems.push({
          field: "PropertySid",
          code: "InvalidParameter",
          message: `PropertySid ${quoted(req.propertySid)} is not a property of account ${account.sid}.`,
        });
      }
      const maxBinds = req.maxBinds ?? DEFAULT_SMPP_MAX_BINDS;
      if (!Number.isInteger(maxBinds) || maxBinds < 1 || maxBinds > SMPP_MAX_BINDS_LIMIT) {
        problems.push({
          field: "MaxBinds",
          code: "InvalidParameter",
          message: `MaxBinds must be a whole number from 1 to ${SMPP_MAX_BINDS_LIMIT}; got ${maxBinds}.`,
        });
      }
      if (req.allowedAddresses.length > MAX_ALLOWED_ADDRESSES) {
        problems.push({ field: "AllowedAddresses", code: "InvalidParameter", message: `AllowedAddresses holds at most ${MAX_ALLOWED_ADDRESSES} CIDRs.` });
      }
      const allowed: string[] = [];
      req.allowedAddresses.forEach((text, i) => {
        const cidr = parseCidr(text);
        if (!cidr) {
          problems.push({
            field: `AllowedAddresses[${i}]`,
            code: "InvalidParameter",
            message: `AllowedAddresses[${i}] ${quoted(text)} is not a CIDR such as 203.0.113.0/24 or 2001:db8::/32.`,
          });
        } else allowed.push(`${cidr.address}/${cidr.prefix}`);
      });
      if (problems.length > 0) throw fieldErrors(problems);
      const record: SmppCredentialRecord = {
        accountSid: account.sid,
        systemId: req.systemId,
        passwordHash: await hashPassword(req.password),
        propertySid: req.propertySid,
        maxBinds,
        allowedAddresses: allowed,
        deliverReplies: req.deliverReplies,
        updatedAt: deps.clock.now(),
      };
      // A SystemId another account holds breaks its unique key: 409 SmppSystemIdTaken (common/errors.ts).
      await upsertSmppCredentials(em, record);
      return toPb(record);
    },

    async getSmppCredentials(req: GetSmppCredentialsRequest, ctx: HandlerContext) {
      const em = deps.em(ctx);
      const account = await findAccount(em, req.accountSid);
      const found = await findSmppCredentials(em, account.sid);
      if (!found) throw notFound("SMPP credentials of account", account.sid);
      return toPb(found);
    },

    async listSmppBinds(req: ListSmppBindsRequest, ctx: HandlerContext) {
      const em = deps.em(ctx);
      const liveSince = new Date(deps.clock.now().getTime() - SMPP_BIND_STALE_MS);
      // An AccountSid that cannot be one matches no bind (as an unknown one).
      if (req.accountSid !== "" && !isSid(req.accountSid, "AC")) return create(ListSmppBindsResponseSchema, { binds: [] });
      const binds = await listSmppBinds(em, liveSince, req.accountSid === "" ? undefined : req.accountSid);
      return create(ListSmppBindsResponseSchema, {
        binds: binds.map((b) => ({
          accountSid: b.accountSid,
          systemId: b.systemId,
          address: b.address,
          mode: b.mode,
          since: BigInt(unixSeconds(b.since)),
          inFlight: b.inFlight,
        })),
      });
    },
  };
}
