/**
 * The operator console under /console (docs/console.md): the page and its assets, built from
 * console/ by Vite into dist/console at `npm run build` / `npm start` (scripts/build.mjs), and its
 * session endpoints. The page calls the operator service (AdminService over Connect) like any
 * operator client; a session cookie with its CSRF header stands for the bearer token there.
 *
 *   POST   /console/session  {"Token": "<SWITCHBOARD_ADMIN_TOKEN>"} -> 200 {"CsrfToken", "Expires"}
 *                            and the session cookie; a wrong token gets the operator API's 401
 *   GET    /console/session  the cookie's session: 200 {"CsrfToken", "Expires"}, or that 401
 *   DELETE /console/session  signs out (needs the X-CSRF-Token header): 204, the cookie cleared
 *
 * Every answer carries a strict Content-Security-Policy: the page loads scripts, styles and data
 * from this origin only, runs no inline script, and cannot be framed.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { extname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { CSRF_REFUSAL, operatorUnauthorized, secretsEqual } from "../accounts/auth.js";
import type { AuthFailureGuard } from "../accounts/auth-failures.js";
import { apiError, fieldError } from "../common/errors.js";
import { webHeaders, writeError } from "../http/http-layer.js";
import { type ConsoleSessions, SESSION_COOKIE } from "./console-sessions.js";

/** The built console, two folders above this module in src/ and in dist/src/ alike. */
export const CONSOLE_DIR = fileURLToPath(new URL("../../dist/console", import.meta.url));

/** The console's Content-Security-Policy: nothing from elsewhere, no inline script or style element, no framing. */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".woff2": "font/woff2",
};

/** What the plugin needs. */
export interface ConsoleOptions {
  adminToken: string | undefined;
  sessions: ConsoleSessions;
  /** The limit on failed authentications, shared with the API: a wrong token here counts as one there. */
  failures?: AuthFailureGuard;
  /** The built console; default CONSOLE_DIR. */
  dir?: string;
}

interface Built {
  index: Buffer;
  assets: Map<string, { body: Buffer; type: string }>;
}

/** Reads the build once it exists (a build made after the service started is served too). */
function loader(dir: string): () => Built | undefined {
  let built: Built | undefined;
  return () => {
    if (built) return built;
    const indexFile = join(dir, "index.html");
    if (!existsSync(indexFile)) return undefined;
    const assets = new Map<string, { body: Buffer; type: string }>();
    const assetDir = join(dir, "assets");
    for (const name of existsSync(assetDir) ? readdirSync(assetDir) : []) {
      const type = TYPES[extname(name)];
      if (type) assets.set(name, { body: readFileSync(join(assetDir, name)), type });
    }
    built = { index: readFileSync(indexFile), assets };
    return built;
  };
}

/** Writes an error in the documented body, as the API does; the reply, for a route handler to return. */
function refuse(reply: FastifyReply, reason: unknown): FastifyReply {
  writeError(reply, reason);
  return reply;
}

function secureHeaders(reply: FastifyReply): FastifyReply {
  return reply
    .header("content-security-policy", CONSOLE_CSP)
    .header("x-content-type-options", "nosniff")
    .header("referrer-policy", "no-referrer")
    .header("cross-origin-opener-policy", "same-origin");
}

/** Whether the browser reached us over https (directly or through a proxy saying so): the cookie is then Secure. */
function overHttps(request: FastifyRequest): boolean {
  return request.protocol === "https" || request.headers["x-forwarded-proto"] === "https";
}

function sessionCookie(request: FastifyRequest, value: string, maxAgeSeconds: number): string {
  return `${SESSION_COOKIE}=${value}; Path=/; Max-Age=${maxAgeSeconds}; HttpOnly; SameSite=Strict${overHttps(request) ? "; Secure" : ""}`;
}

/** A Fastify plugin: GET /console and its assets, and the session endpoints. */
export async function consolePlugin(app: FastifyInstance, opts: ConsoleOptions): Promise<void> {
  const load = loader(opts.dir ?? CONSOLE_DIR);
  const notBuilt = () => apiError("NotFound", "The console is not built on this server: `npm run build` builds it.");

  // Relative, so that the page also works behind a proxy that mounts the service under a prefix.
  app.get("/console", async (_request, reply) => secureHeaders(reply).redirect("console/", 302));
  app.get("/console/", async (_request, reply) => {
    const built = load();
    if (!built) return refuse(secureHeaders(reply), notBuilt());
    return secureHeaders(reply).header("content-type", TYPES[".html"]).header("cache-control", "no-cache").send(built.index);
  });
  app.get<{ Params: { file: string } }>("/console/assets/:file", async (request, reply) => {
    const asset = load()?.assets.get(request.params.file);
    if (!asset) return reply.callNotFound();
    // Vite names every asset by its content's hash: a new build has new names.
    return secureHeaders(reply).header("content-type", asset.type).header("cache-control", "public, max-age=31536000, immutable").send(asset.body);
  });

  app.post<{ Body: unknown }>("/console/session", async (request, reply) => {
    secureHeaders(reply).header("cache-control", "no-store");
    const body = request.body;
    const token = typeof body === "object" && body !== null && "Token" in body ? (body as { Token: unknown }).Token : undefined;
    if (typeof token !== "string" || token === "") {
      return refuse(reply, fieldError("Token", "MissingParameter", "Token is required: the operator token (SWITCHBOARD_ADMIN_TOKEN)."));
    }
    // Counted as the API counts a bearer token: the same limit on guesses from one address.
    const address = request.ip;
    const attempt = await opts.failures?.attempt(address);
    if (!opts.adminToken || !secretsEqual(token, opts.adminToken)) return refuse(reply, operatorUnauthorized());
    attempt?.succeeded();
    const session = opts.sessions.open();
    return reply
      .header("set-cookie", sessionCookie(request, session.id, session.maxAgeSeconds))
      .send({ CsrfToken: session.csrf, Expires: Math.floor(session.expires.getTime() / 1000) });
  });

  app.get("/console/session", async (request, reply) => {
    secureHeaders(reply).header("cache-control", "no-store");
    const session = opts.sessions.find(webHeaders(request.headers));
    if (!session) return refuse(reply, operatorUnauthorized());
    return reply.send({ CsrfToken: session.csrf, Expires: Math.floor(session.expires.getTime() / 1000) });
  });

  app.delete("/console/session", async (request, reply) => {
    secureHeaders(reply).header("cache-control", "no-store");
    const headers = webHeaders(request.headers);
    const state = opts.sessions.check(headers);
    if (state === "absent") return refuse(reply, operatorUnauthorized());
    if (state === "refused") return refuse(reply, operatorUnauthorized(CSRF_REFUSAL));
    opts.sessions.close(headers);
    return reply
      .header("set-cookie", sessionCookie(request, "", 0))
      .code(204)
      .send();
  });
}
