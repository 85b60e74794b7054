import { createHash, timingSafeEqual } from "node:crypto";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { Clock } from "../common/clock.js";
import type { KannelConfig } from "../config.js";
import { textEncoding } from "../common/sms-text.js";
import { createPacer } from "./pacer.js";
import { type Carrier, CarrierError, type CarrierEvents, type DeliveryReport, type OutboundSms } from "../delivery/carrier.js";

/** Options of the Kannel carrier. */
export interface KannelCarrierOptions extends Omit<KannelConfig, "confirmWaitMs" | "tps"> {
  /** sendsms calls per second (KANNEL_TPS); 0 or absent for no limit. */
  tps?: number;
  /** The carrier's Tps shared by every process (pacer.ts `gate`); absent: KANNEL_TPS per process. */
  tpsGate?: () => Promise<number>;
  clock: Clock;
  /** After a crash, how long to wait for the type 8 report before submitting again, ms (default 30 s). */
  confirmWaitMs?: number;
  /** How long a sendsms call may take before it counts as unavailable, ms (default 10 s). */
  fetchTimeoutMs?: number;
}

/**
 * Kannel delivery report types (the `%d` escape of a dlr-url), a bit mask in the user guide:
 * 1 delivered to the phone, 2 non-delivered, 4 buffered at the SMSC, 8 accepted by the SMSC
 * ("submitted", Kannel's own ack), 16 rejected by the SMSC.
 */
export const KANNEL_DLR = { delivered: 1, failed: 2, buffered: 4, submitted: 8, rejected: 16 } as const;
/** The dlr-mask asking for every report type above. */
export const KANNEL_DLR_MASK = 31;

/** Where Kannel calls back: delivery reports (dlr-url) and mobile-originated SMS (sms-service get-url). */
export const KANNEL_DLR_PATH = "/carriers/kannel/dlr";
export const KANNEL_INBOUND_PATH = "/carriers/kannel/inbound";

/**
 * What a Kannel delivery report type means for the message; null: nothing to record. 8 (the SMSC
 * accepted it) and 4 (buffered at the SMSC) confirm that the carrier holds the message: Submitted.
 */
export function mapKannelDlr(type: number): Pick<DeliveryReport, "status" | "errorCode"> | null {
  switch (type) {
    case KANNEL_DLR.delivered:
      return { status: "Delivered", errorCode: "" };
    case KANNEL_DLR.failed:
      return { status: "Failed", errorCode: "CarrierFailed" };
    case KANNEL_DLR.rejected:
      return { status: "Failed", errorCode: "CarrierRejected" };
    case KANNEL_DLR.submitted:
    case KANNEL_DLR.buffered:
      return { status: "Submitted", errorCode: "" };
    default:
      return null; // anything unknown: the message is still on its way
  }
}

/**
 * A value for a Kannel URL pattern (dlr-url, get-url): URL-encoded, then every `%` doubled,
 * because Kannel expands `%x` escape codes in the whole pattern (`%C3` would become `UTF-83`)
 * and turns `%%` back into `%`.
 */
export function kannelPatternValue(value: string): string {
  return encodeURIComponent(value).replace(/%/g, "%%");
}

/** The dlr-url handed to Kannel with each message; Kannel fills in %d (report type) and %A (answer). */
export function kannelDlrUrl(cfg: Pick<KannelConfig, "callbackBaseUrl" | "callbackSecret">, messageSid: string): string {
  const base = cfg.callbackBaseUrl.replace(/\/+$/, "");
  return `${base}${KANNEL_DLR_PATH}?secret=${kannelPatternValue(cfg.callbackSecret)}&sid=${kannelPatternValue(messageSid)}&status=%d&answer=%A`;
}

/**
 * The query of a request as raw bytes per parameter. Kannel's `%b` sends the SMS bytes as they
 * are (UTF-16BE for a UCS-2 message), which a UTF-8 query parser would mangle.
 */
export function rawQuery(url: string): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  const q = url.indexOf("?");
  if (q < 0) return out;
  for (const part of url.slice(q + 1).split("&")) {
    if (part === "") continue;
    const eq = part.indexOf("=");
    const name = percentDecode(eq < 0 ? part : part.slice(0, eq)).toString("utf8");
    if (!out.has(name)) out.set(name, percentDecode(eq < 0 ? "" : part.slice(eq + 1)));
  }
  return out;
}

function percentDecode(s: string): Buffer {
  const bytes: number[] = [];
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (c === "+") bytes.push(0x20);
    else if (c === "%" && /^[0-9a-fA-F]{2}$/.test(s.slice(i + 1, i + 3))) {
      bytes.push(parseInt(s.slice(i + 1, i + 3), 16));
      i += 2;
    } else bytes.push(...Buffer.from(c, "utf8"));
  }
  return Buffer.from(bytes);
}

/** Decodes SMS bytes from Kannel by the `%C` charset (or the `%c` coding when no charset is given). */
export function decodeKannelText(bytes: Buffer, charset: string, coding: string): string {
  const cs = charset.trim().toUpperCase();
  if (cs === "UTF-16BE" || cs === "UCS-2" || cs === "UCS-2BE" || cs === "UTF-16" || (cs === "" && coding === "2")) {
    const even = bytes.subarray(0, bytes.length - (bytes.length % 2));
    return Buffer.from(even).swap16().toString("utf16le");
  }
  if (cs === "ISO-8859-1" || cs === "LATIN1" || cs === "WINDOWS-1252") return bytes.toString("latin1");
  return bytes.toString("utf8");
}

/**
 * A number as the SMSC gave it, in E164 where that is certain: `00` international prefix → `+`,
 * 8 to 15 bare digits (international number without the plus, how SMPP SMSCs usually send
 * TON=international) → `+digits`; anything else (short codes, alphanumeric senders) as given.
 */
export function normalizeKannelNumber(raw: string): string {
  const n = raw.trim().replace(/[\s-]/g, "");
  if (/^\+\d+$/.test(n)) return n;
  if (/^00\d{8,15}$/.test(n)) return `+${n.slice(2)}`;
  if (/^\d{8,15}$/.test(n)) return `+${n}`;
  return raw.trim();
}

function sha256(s: string | Buffer): Buffer {
  return createHash("sha256").update(s).digest();
}

/** Constant-time comparison: both sides are hashed first, so the length leaks nothing either. */
function secretMatches(given: Buffer | undefined, expected: string): boolean {
  return timingSafeEqual(sha256(given ?? Buffer.alloc(0)), sha256(expected)) && given !== undefined && expected !== "";
}

/** What the request log shows of a callback: its URL without the secret. */
function redactedRequest(req: FastifyRequest) {
  return { method: req.method, url: req.url.replace(/([?&]secret=)[^&]*/g, "$1[redacted]"), host: req.host, remoteAddress: req.ip };
}

/** The Kannel carrier as the service sees it, with its callback paths. */
export type KannelCarrier = Carrier & { routes: (app: FastifyInstance) => Promise<void> };

/**
 * The Kannel carrier: submits through Kannel's smsbox sendsms HTTP interface with a dlr-url back
 * to this service, and takes delivery reports and mobile-originated SMS (an `sms-service` get-url)
 * on two GET routes guarded by a shared secret. Kannel keeps no state the service needs: the
 * MessageSid travels in the dlr-url, so any API process can take any report.
 */
export function createKannelCarrier(opts: KannelCarrierOptions): KannelCarrier {
  const timeoutMs = opts.fetchTimeoutMs ?? 10_000;
  let events: CarrierEvents | undefined;
  // KANNEL_TPS: calls start spaced 1/tps apart; the dispatcher claims no more than that lets through.
  const pacer = opts.tps && opts.tps > 0 ? createPacer({ window: Infinity, tps: opts.tps, gate: opts.tpsGate }) : undefined;

  async function submit(sms: OutboundSms): Promise<{ carrierRef: string }> {
    if (!pacer) return send(sms);
    const slot = await pacer.acquire();
    try {
      return await send(sms);
    } finally {
      slot.done();
    }
  }

  async function send(sms: OutboundSms): Promise<{ carrierRef: string }> {
    const url = new URL(opts.sendsmsUrl);
    const p = url.searchParams;
    p.set("username", opts.username);
    p.set("password", opts.password);
    p.set("from", sms.from);
    p.set("to", sms.to);
    p.set("text", sms.text);
    // smsbox converts from the given charset; coding=2 (UCS-2) for what GSM-7 cannot carry.
    p.set("charset", "UTF-8");
    if (textEncoding(sms.text).encoding === "UCS2") p.set("coding", "2");
    // Always ask for reports: the service tracks every message's state, whatever the client asked.
    p.set("dlr-mask", String(KANNEL_DLR_MASK));
    p.set("dlr-url", kannelDlrUrl(opts, sms.messageSid));

    let res: Response;
    let body: string;
    try {
      res = await fetch(url, { method: "GET", signal: AbortSignal.timeout(timeoutMs), redirect: "manual" });
      body = (await res.text()).trim();
    } catch (err) {
      const e = err as Error & { cause?: { code?: string } };
      const why = e.name === "TimeoutError" ? `no answer within ${timeoutMs} ms` : (e.cause?.code ?? e.message);
      throw new CarrierError(`Kannel sendsms is unreachable: ${why}`, "CarrierUnavailable", false);
    }
    if (res.status >= 200 && res.status < 300) return { carrierRef: sms.messageSid };
    const detail = `Kannel sendsms answered ${res.status}${body ? `: ${body.slice(0, 200)}` : ""}`;
    if (res.status >= 400 && res.status < 500) throw new CarrierError(detail, "CarrierRejected", true);
    // 5xx (503 when its queue is full) and anything unexpected: try again later.
    throw new CarrierError(detail, "CarrierUnavailable", false);
  }

  /** Common checks of a callback; answers and returns undefined when the request goes no further. */
  function callback(req: FastifyRequest, reply: FastifyReply): { q: Map<string, Buffer>; events: CarrierEvents } | undefined {
    const q = rawQuery(req.url);
    if (!secretMatches(q.get("secret"), opts.callbackSecret)) {
      void reply.code(403).type("text/plain").send("forbidden");
      return undefined;
    }
    if (!events) {
      void reply.code(503).type("text/plain").send("carrier not started");
      return undefined;
    }
    return { q, events };
  }

  async function routes(app: FastifyInstance): Promise<void> {
    // The secret travels in the query: keep it out of the request logs.
    const routeOpts = { logSerializers: { req: redactedRequest } };
    app.get(KANNEL_DLR_PATH, routeOpts, async (req, reply) => {
      const c = callback(req, reply);
      if (!c) return reply;
      const sid = c.q.get("sid")?.toString("utf8") ?? "";
      const type = Number(c.q.get("status")?.toString("utf8") ?? "");
      if (sid === "" || !Number.isInteger(type)) return reply.code(400).type("text/plain").send("sid and status are required");
      const mapped = mapKannelDlr(type);
      if (mapped) {
        req.log.info({ messageSid: sid, kannelDlr: type, answer: c.q.get("answer")?.toString("latin1") }, "Kannel delivery report");
        // Kannel's reference is the MessageSid itself: it travels in the dlr-url.
        await c.events.deliveryReport({ messageSid: sid, ...mapped, at: opts.clock.now(), carrierRef: sid });
      }
      return reply.code(200).type("text/plain").send("");
    });

    app.get(KANNEL_INBOUND_PATH, routeOpts, async (req, reply) => {
      const c = callback(req, reply);
      if (!c) return reply;
      const str = (name: string) => c.q.get(name)?.toString("utf8") ?? "";
      const from = normalizeKannelNumber(str("from"));
      const to = normalizeKannelNumber(str("to"));
      if (from === "" || to === "") return reply.code(400).type("text/plain").send("from and to are required");
      const text = decodeKannelText(c.q.get("text") ?? Buffer.alloc(0), str("charset"), str("coding"));
      const result = await c.events.inbound({ from, to, text, at: opts.clock.now() });
      req.log.info({ messageSid: result.messageSid || undefined, inReplyTo: result.inReplyTo || undefined }, "Kannel inbound SMS");
      // An empty 200 answer: with `omit-empty = true` Kannel sends no reply SMS to the handset.
      return reply.code(200).type("text/plain").send("");
    });
  }

  return {
    name: "kannel",
    // smsbox retries a dlr-url it could not deliver (http-request-retry), so a crash that lost
    // sendsms's answer is still settled by the type 8 report, if it comes within this wait.
    confirmWaitMs: opts.confirmWaitMs ?? 30_000,
    submit,
    capacity: pacer ? (withinMs: number) => pacer.capacity(withinMs) : undefined,
    status: () => ({ link: "", since: null, lastError: "", inFlight: pacer?.inFlight ?? 0, window: 0, tps: opts.tps ?? 0, queued: pacer?.queued ?? 0 }),
    async start(e: CarrierEvents) {
      events = e;
    },
    async stop() {
      events = undefined;
    },
    routes,
  };
}
