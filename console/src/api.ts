// The console's only way to the service: the operator service (AdminService) over Connect, with
// the client generated from our proto (gen/), as any operator client calls it, plus the session
// endpoints of /console/session. The session cookie is HttpOnly: the page never sees it; it
// holds the session's CSRF token in memory and sends it with every call.
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { BadRequestSchema } from "../../gen/google/rpc/error_details_pb.js";
import { AdminService } from "../../gen/switchboard/admin/v1/admin_pb.js";

/** The service's root, from the page's own address (/console/ under it), so a path prefix works too. */
const root = new URL("../", document.baseURI);
const sessionUrl = new URL("console/session", root);

let csrfToken = "";

const withCsrf: Interceptor = (next) => (req) => {
  req.header.set("X-CSRF-Token", csrfToken);
  return next(req);
};

export const admin = createClient(
  AdminService,
  createConnectTransport({
    baseUrl: root.href.replace(/\/$/, ""),
    interceptors: [withCsrf],
    fetch: (input, init) => fetch(input, { ...init, credentials: "same-origin" }),
  }),
);

/** The message of a failed call, as the service wrote it. */
export function messageOf(e: unknown): string {
  if (e instanceof ConnectError) return e.rawMessage;
  return e instanceof Error ? e.message : String(e);
}

/** True when a call failed because the session ended (signed out elsewhere, expired, or the service restarted). */
export function isSignedOut(e: unknown): boolean {
  return e instanceof ConnectError && e.code === Code.Unauthenticated;
}

interface SessionAnswer {
  CsrfToken?: string;
  ResponseStatus?: { Message?: string };
}

/** Signs in with the operator token: undefined on success, else the service's message. */
export async function signIn(token: string): Promise<string | undefined> {
  const res = await fetch(sessionUrl, {
    method: "POST",
    credentials: "same-origin",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ Token: token }),
  });
  const body = (await res.json()) as SessionAnswer;
  if (!res.ok) return body.ResponseStatus?.Message ?? `HTTP ${res.status}`;
  csrfToken = body.CsrfToken ?? "";
  return undefined;
}

/** Picks up the session this browser already has (after a reload); false when there is none. */
export async function resumeSession(): Promise<boolean> {
  const res = await fetch(sessionUrl, { credentials: "same-origin" });
  if (!res.ok) return false;
  csrfToken = ((await res.json()) as SessionAnswer).CsrfToken ?? "";
  return true;
}

/** Ends the session. */
export async function signOut(): Promise<void> {
  await fetch(sessionUrl, { method: "DELETE", credentials: "same-origin", headers: { "X-CSRF-Token": csrfToken } });
  csrfToken = "";
}

/** A failed call's field problems (the error's BadRequest detail), each with the request field it names. */
export function fieldProblemsOf(e: unknown): { field: string; message: string }[] {
  if (!(e instanceof ConnectError)) return [];
  return e.findDetails(BadRequestSchema).flatMap((d) => d.fieldViolations.map((v) => ({ field: v.field, message: v.description })));
}
