import { createHash, timingSafeEqual } from "node:crypto";
import { Code, type ContextValues } from "@connectrpc/connect";
import type { DescService } from "@bufbuild/protobuf";
import type { MikroORM } from "@mikro-orm/sql";
import { AdminService } from "../../gen/switchboard/admin/v1/admin_pb.js";
import { apiError, fieldError } from "../common/errors.js";
import { kAccount, kAdmin, kEm, kIdempotencyKey } from "../common/context.js";
import { isSid } from "../common/sid.js";
import { Account } from "./account.entity.js";

/** sha256 hex of a secret: tokens are high-entropy random strings, so a fast hash is enough at rest. */
export function hashToken(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

/** Compares two secrets in constant time (by their hashes, so lengths never leak). */
export function secretsEqual(a: string, b: string): boolean {
  return timingSafeEqual(createHash("sha256").update(a).digest(), createHash("sha256").update(b).digest());
}

function unauthorized(message: string) {
  return apiError(Code.Unauthenticated, "Unauthorized", message);
}

/** Decodes `Basic base64(user:pass)`; undefined when the header is absent or malformed. */
export function parseBasic(header: string | null): { user: string; pass: string } | undefined {
  const m = /^Basic\s+([A-Za-z0-9+/=_-]+)\s*$/i.exec(header ?? "");
  if (!m) return undefined;
  const decoded = Buffer.from(m[1], "base64").toString("utf8");
  const i = decoded.indexOf(":");
  if (i < 0) return undefined;
  return { user: decoded.slice(0, i), pass: decoded.slice(i + 1) };
}

/** What the edge needs to authenticate a call. */
export interface EdgeDeps {
  orm: MikroORM;
  adminToken: string | undefined;
}

/** What one incoming call looks like to the edge, whatever the transport. */
export interface EdgeCall {
  service: DescService;
  header: Headers;
  values: ContextValues;
}

/**
 * The one edge every transport runs before a method: forks the request's EntityManager,
 * authenticates (operator bearer token for AdminService, HTTP Basic otherwise) and records
 * the result and the Idempotency-Key in context values.
 */
export async function authenticateCall(deps: EdgeDeps, call: EdgeCall): Promise<void> {
  const em = deps.orm.em.fork();
  call.values.set(kEm, em);
  const idem = call.header.get("idempotency-key");
  if (idem !== null) {
    if (idem.length === 0 || idem.length > 255) {
      throw fieldError("Idempotency-Key", "InvalidParameter", "The Idempotency-Key header must be 1 to 255 characters long.");
    }
    call.values.set(kIdempotencyKey, idem);
  }
  const authorization = call.header.get("authorization");
  if (call.service.typeName === AdminService.typeName) {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? "");
    if (!deps.adminToken || !m || !secretsEqual(m[1], deps.adminToken)) {
      throw apiError(Code.Unauthenticated, "Unauthorized", "Operator calls need `Authorization: Bearer <SWITCHBOARD_ADMIN_TOKEN>`.", [], {
        "www-authenticate": 'Bearer realm="switchboard-admin"',
      });
    }
    call.values.set(kAdmin, true);
    return;
  }
  const basic = parseBasic(authorization);
  if (!basic) throw unauthorized("Authentication required: use HTTP Basic with your AccountSid as user and your token as password.");
  const account = isSid(basic.user, "AC") ? await em.findOne(Account, { sid: basic.user }) : null;
  // Compare even when the account is unknown so that timing does not reveal which Sids exist.
  const ok = secretsEqual(hashToken(basic.pass), account?.tokenHash ?? "0".repeat(64));
  if (!account || !ok) throw unauthorized("The AccountSid or token is wrong.");
  call.values.set(kAccount, account);
}
