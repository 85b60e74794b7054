import { readFileSync } from "node:fs";
import { connect as netConnect } from "node:net";
import { connect as tlsConnect } from "node:tls";
import type { Logger } from "pino";
import smpp from "smpp";
import type { PDU, Session } from "smpp";
import type { Clock } from "../../common/clock.js";
import type { SmppConfig } from "../../config.js";
import { type Carrier, CarrierError, type CarrierEvents, type CarrierStatusInfo, type OutboundSms } from "../../delivery/carrier.js";
import { createPacer } from "../pacer.js";
import {
  concatInfo,
  formatStatus,
  isTemporaryStatus,
  messageStateName,
  normalizeSmppNumber,
  parseReceiptText,
  receiptOutcome,
  sourceAddress,
  STATUS,
  submitParts,
} from "./smpp-codec.js";
import { PduFramedSocket, SMPP_MAX_PDU_LENGTH, SMPP_MIN_PDU_LENGTH } from "./smpp-framing.js";

/** Options of the SMPP carrier. */
export interface SmppCarrierOptions extends SmppConfig {
  clock: Clock;
  log?: Logger;
  /** The carrier's Tps shared by every process (pacer.ts `gate`); absent: SMPP_TPS per process and bind. */
  tpsGate?: () => Promise<number>;
  /** How long a submission may wait for a bind, the window, the rate or a throttled SMSC, ms (default 30 s: half the claim). */
  submitDeadlineMs?: number;
  /** How long a request may wait for its response before the link counts as broken, ms (default 30 s). */
  responseTimeoutMs?: number;
  /** First reconnect delay, doubling to reconnectMaxMs (defaults 1 s and 30 s). */
  reconnectMinMs?: number;
  reconnectMaxMs?: number;
  /** How often kept receipts and overdue inbound parts are looked at, ms (default 5 s). */
  housekeepingMs?: number;
  /**
   * deliver_sm read and not yet answered (being stored) at which the link stops reading from the
   * SMSC until half of them are answered (default DELIVER_BACKLOG): the memory and the database
   * work a flood of receipts or MO can make wait.
   */
  deliverBacklog?: number;
}

/** deliver_sm a link holds unanswered at most by default (deliverBacklog). */
export const DELIVER_BACKLOG = 500;
/** deliver_sm a link decodes at most in one turn of the event loop before letting other work in. */
const DELIVER_PER_TURN = 64;

/** The SMPP carrier, with what the operator API and the metrics read. */
export type SmppCarrier = Carrier & { status(): CarrierStatusInfo; capacity(withinMs: number): number };

/** The link was lost with a request outstanding (or before it could be written). */
class LinkLost extends Error {
  constructor(readonly written: boolean) {
    super("the SMPP link was lost");
  }
}

interface Outstanding {
  resolve(pdu: PDU): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
}

/**
 * The SMPP 3.4 carrier: one transceiver bind per process, kept up with enquire_link and rebuilt
 * with backoff when it drops. submit_sm go out through a window (SMPP_WINDOW outstanding) and a
 * steady rate (SMPP_TPS); a throttled SMSC slows them down. Receipts and inbound SMS arrive as
 * deliver_sm and are answered only after what they carry is committed.
 */
export function createSmppCarrier(opts: SmppCarrierOptions): SmppCarrier {
  const log = opts.log?.child({ carrier: "smpp", smsc: `${opts.tls ? "smpps" : "smpp"}://${opts.host}:${opts.port}`, systemId: opts.systemId });
  const submitDeadlineMs = opts.submitDeadlineMs ?? 30_000;
  const responseTimeoutMs = opts.responseTimeoutMs ?? 30_000;
  const reconnectMinMs = opts.reconnectMinMs ?? 1000;
  const reconnectMaxMs = opts.reconnectMaxMs ?? 30_000;
  const deliverBacklog = Math.max(1, opts.deliverBacklog ?? DELIVER_BACKLOG);
  const ca = opts.tlsCaFile ? readFileSync(opts.tlsCaFile) : undefined;
  const pacer = createPacer({ window: opts.window, tps: opts.tps, initialRoundTripMs: 250, gate: opts.tpsGate });

  let events: CarrierEvents | undefined;
  let stopped = true;
  let session: Session | undefined;
  let link: CarrierStatusInfo["link"] = "Down";
  let since: Date | null = null;
  let lastError = "";
  let outstanding = new Map<number, Outstanding>();
  let boundWaiters: (() => void)[] = [];
  let concatRef = Math.floor(Math.random() * 256);
  let loop: Promise<void> | undefined;
  let wake: (() => void) | undefined;
  let housekeeping: NodeJS.Timeout | undefined;

  function setLink(state: CarrierStatusInfo["link"]): void {
    if (state === link) return;
    link = state;
    since = opts.clock.now();
    if (state === "Bound") for (const w of boundWaiters.splice(0)) w();
  }

  /** Sends a request on the current session and waits for its response. */
  function request(s: Session, command: string, params: Record<string, unknown>): Promise<PDU> {
    return new Promise<PDU>((resolve, reject) => {
      const pdu = new smpp.PDU(command, params);
      const ok = s.send(pdu, (resp) => {
        const o = outstanding.get(pdu.sequence_number);
        if (!o) return;
        outstanding.delete(pdu.sequence_number);
        clearTimeout(o.timer);
        o.resolve(resp);
      });
      if (!ok) return reject(new LinkLost(false));
      const timer = setTimeout(() => {
        // No answer in time: the link is not working, whatever TCP thinks. Rebuilding it fails
        // every outstanding request, which the submitters resend once.
        log?.warn({ command, responseTimeoutMs }, "no response from the SMSC in time: dropping the link");
        s.destroy();
      }, responseTimeoutMs);
      outstanding.set(pdu.sequence_number, { resolve, reject, timer });
    });
  }

  function failOutstanding(): void {
    const all = outstanding;
    outstanding = new Map();
    for (const o of all.values()) {
      clearTimeout(o.timer);
      o.reject(new LinkLost(true));
    }
  }

  /** Connects and binds; resolves once bound, with a promise that settles when the link closes. */
  function bindOnce(): Promise<{ closed: Promise<void> }> {
    return new Promise((resolveBound, rejectBound) => {
      let bound = false;
      let closed!: () => void;
      const whenClosed = new Promise<void>((r) => (closed = r));
      const raw = opts.tls ? tlsConnect({ host: opts.host, port: opts.port, ca, servername: opts.host }) : netConnect({ host: opts.host, port: opts.port });
      const s = new smpp.Session({
        socket: new PduFramedSocket(raw, (length) => {
          lastError = `corrupt PDU from the SMSC: command_length ${length} (0x${length.toString(16).toUpperCase()}) is outside ${SMPP_MIN_PDU_LENGTH}..${SMPP_MAX_PDU_LENGTH}`;
          log?.error({ commandLength: length, min: SMPP_MIN_PDU_LENGTH, max: SMPP_MAX_PDU_LENGTH }, "corrupt PDU length from the SMSC: closing the link");
        }),
      });
      session = s;
      // deliver_sm read and not answered yet: the session stops reading while there are too many,
      // and after DELIVER_PER_TURN in one turn of the event loop (the API's requests come between).
      let backlog = 0;
      let readThisTurn = 0;
      let overBacklog = false;
      let turnOver = false;
      let paused = false;
      const flow = () => {
        const stop = overBacklog || turnOver;
        if (stop === paused) return;
        // Set first: resume() decodes at once, and those deliver_sm come back here.
        paused = stop;
        if (stop) s.pause();
        else s.resume();
      };
      let keepalive: NodeJS.Timeout | undefined;
      const connectTimer = setTimeout(() => {
        lastError = "connect or bind timed out";
        s.destroy();
      }, responseTimeoutMs);
      s.on("error", (err: Error) => {
        lastError = err.message;
        if (!bound) log?.warn({ err: err.message }, "SMPP connection failed");
        else {
          // The library stops decoding for good after a PDU it cannot read: nothing more would come.
          log?.warn({ err: err.message }, "SMPP link error: closing the link");
          s.destroy();
        }
      });
      s.on("close", () => {
        clearTimeout(connectTimer);
        if (keepalive) clearInterval(keepalive);
        if (session === s) session = undefined;
        failOutstanding();
        if (bound) closed();
        else rejectBound(new Error(lastError || "connection closed before the bind"));
      });
      raw.once(opts.tls ? "secureConnect" : "connect", () => {
        request(s, "bind_transceiver", {
          system_id: opts.systemId,
          password: opts.password,
          system_type: opts.systemType,
          interface_version: 0x34,
        }).then(
          (resp) => {
            clearTimeout(connectTimer);
            if (resp.command_status !== STATUS.OK) {
              // Never the password: the system_id, the SMSC and its answer identify the attempt.
              lastError = `bind refused: ${formatStatus(resp.command_status)}`;
              log?.error(
                { status: formatStatus(resp.command_status) },
                "the SMSC refused the bind (check SMPP_URL's system_id and password, SMPP_SYSTEM_TYPE)",
              );
              s.destroy();
              return;
            }
            bound = true;
            log?.info({ smscSystemId: resp.system_id }, "SMPP bound as transceiver");
            keepalive = setInterval(() => {
              request(s, "enquire_link", {}).catch(() => undefined);
            }, opts.enquireLinkMs);
            // Wrapped: a promise resolved with a promise would wait for the link to close.
            resolveBound({ closed: whenClosed });
          },
          () => undefined,
        );
      });
      s.on("enquire_link", (pdu: PDU) => s.send(pdu.response()));
      s.on("unbind", (pdu: PDU) => {
        s.send(pdu.response());
        lastError = "the SMSC unbound";
        s.close();
      });
      s.on("deliver_sm", (pdu: PDU) => {
        if (readThisTurn++ === 0)
          setImmediate(() => {
            readThisTurn = 0;
            turnOver = false;
            flow();
          });
        if (readThisTurn >= DELIVER_PER_TURN) turnOver = true;
        if (++backlog >= deliverBacklog && !overBacklog) {
          overBacklog = true;
          log?.debug({ backlog }, "deliver_sm arrive faster than they are stored: reading from the SMSC paused");
        }
        flow();
        void onDeliver(s, pdu).finally(() => {
          if (--backlog <= deliverBacklog / 2 && overBacklog) {
            overBacklog = false;
            flow();
          }
        });
      });
    });
  }

  async function runLink(): Promise<void> {
    let attempt = 0;
    while (!stopped) {
      setLink("Connecting");
      try {
        const { closed } = await bindOnce();
        attempt = 0;
        setLink("Bound");
        await closed;
        if (!stopped) log?.warn({ reason: lastError || "connection closed" }, "SMPP link lost; reconnecting");
      } catch (err) {
        lastError = lastError || (err as Error).message;
      }
      if (stopped) break;
      setLink("Down");
      attempt++;
      const delay = Math.min(reconnectMaxMs, reconnectMinMs * 2 ** (attempt - 1)) * (0.8 + Math.random() * 0.4);
      await new Promise<void>((r) => {
        const t = setTimeout(r, delay);
        wake = () => {
          clearTimeout(t);
          r();
        };
      });
      wake = undefined;
    }
    setLink("Down");
  }

  function waitBound(signal: AbortSignal): Promise<void> {
    if (link === "Bound" && session) return Promise.resolve();
    // An abort event never fires for a signal aborted already (the deadline passed, the router moved on).
    if (signal.aborted) return Promise.reject(signal.reason as Error);
    return new Promise((resolve, reject) => {
      const w = () => {
        signal.removeEventListener("abort", onAbort);
        resolve();
      };
      const onAbort = () => {
        boundWaiters = boundWaiters.filter((x) => x !== w);
        reject(signal.reason);
      };
      boundWaiters.push(w);
      signal.addEventListener("abort", onAbort, { once: true });
    });
  }

  /** One submit_sm until the SMSC answers it; throttling slows down and retries until the deadline. */
  async function submitPart(params: Record<string, unknown>, signal: AbortSignal, sid: string): Promise<string> {
    let resent = false;
    let throttled = 0;
    for (;;) {
      let resp: PDU;
      try {
        await waitBound(signal);
        const slot = await pacer.acquire(signal);
        try {
          const s = session;
          if (!s || link !== "Bound") throw new LinkLost(false);
          resp = await request(s, "submit_sm", params);
        } finally {
          slot.done();
        }
      } catch (err) {
        if (err instanceof LinkLost) {
          if (!err.written) continue;
          // Sent, never answered: the SMSC may hold it. Once more on the next bind (the documented
          // duplicate risk); after that the dispatcher's retry takes over.
          if (resent) throw new CarrierError("the SMPP link was lost twice with this submission outstanding", "CarrierUnavailable", false);
          resent = true;
          log?.warn({ messageSid: sid }, "link lost before the submit_sm_resp: resubmitting once (the handset may get it twice)");
          continue;
        }
        if (signal.aborted)
          throw new CarrierError(
            `not submitted within ${submitDeadlineMs} ms (SMPP link ${link}${lastError ? `: ${lastError}` : ""})`,
            "CarrierUnavailable",
            false,
          );
        throw err;
      }
      const status = resp.command_status;
      if (status === STATUS.OK) return String(resp.message_id ?? "");
      if (status === STATUS.THROTTLED || status === STATUS.MSGQFUL) {
        throttled++;
        const pause = Math.min(10_000, 250 * 2 ** Math.min(6, throttled - 1));
        pacer.pause(pause);
        log?.info({ messageSid: sid, status: formatStatus(status), pauseMs: pause }, "SMSC throttling: slowing down");
        if (signal.aborted) throw new CarrierError(`SMSC still throttling: ${formatStatus(status)}`, "CarrierUnavailable", false, formatStatus(status));
        continue;
      }
      if (isTemporaryStatus(status)) throw new CarrierError(`SMSC error: ${formatStatus(status)}`, "CarrierUnavailable", false, formatStatus(status));
      throw new CarrierError(`SMSC refused the message: ${formatStatus(status)}`, "CarrierRejected", true, formatStatus(status));
    }
  }

  async function submit(sms: OutboundSms): Promise<{ carrierRef: string; segmentIds: string[] }> {
    concatRef = (concatRef + 1) & 0xff;
    const parts = submitParts(sms.text, concatRef);
    const deadline = AbortSignal.timeout(submitDeadlineMs);
    // The router's signal: this link dropped and another carrier of the route can take it.
    const signal = sms.signal ? AbortSignal.any([deadline, sms.signal]) : deadline;
    const base = {
      ...sourceAddress(sms.from),
      dest_addr_ton: 1,
      dest_addr_npi: 1,
      destination_addr: sms.to.replace(/^\+/, ""),
      // Always: the service tracks every message; DeliveryReceipt only decides the client's webhook.
      registered_delivery: 1,
    };
    const ids = await Promise.all(parts.map((p) => submitPart({ ...base, ...p }, signal, sms.messageSid)));
    return { carrierRef: ids.join(" "), segmentIds: ids };
  }

  /** Handles a deliver_sm: a receipt or an inbound SMS, answered once committed (a temporary error otherwise). */
  async function onDeliver(s: Session, pdu: PDU): Promise<void> {
    let status: number = STATUS.OK;
    try {
      if (!events) throw new Error("carrier not started");
      await handleDeliver(events, pdu);
    } catch (err) {
      status = STATUS.X_T_APPN;
      log?.warn({ err }, "could not record a deliver_sm: answering ESME_RX_T_APPN so the SMSC retries");
    }
    s.send(pdu.response({ command_status: status }));
  }

  async function handleDeliver(ev: CarrierEvents, pdu: PDU): Promise<void> {
    const sm = (pdu.short_message ?? {}) as { message?: string | Buffer; udh?: Buffer[] };
    const payload = pdu.message_payload as { message?: string | Buffer; udh?: Buffer[] } | undefined;
    const body = sm.message !== undefined && String(sm.message) !== "" ? sm : (payload ?? sm);
    const text = typeof body.message === "string" ? body.message : (body.message?.toString("latin1") ?? "");
    const esm = Number(pdu.esm_class ?? 0);
    const isReceiptClass = (esm & 0x3c) === 0x04 || (esm & 0x3c) === 0x20;
    const tlvId = pdu.receipted_message_id !== undefined ? String(pdu.receipted_message_id) : undefined;
    const fromText = parseReceiptText(text);
    if (isReceiptClass || tlvId !== undefined || fromText) {
      const id = tlvId ?? fromText?.id;
      if (!id) {
        // Its text only at debug: a deliver_sm flagged as a receipt may carry a customer's words.
        log?.warn({ length: text.length }, "a delivery receipt without a message id: ignored");
        log?.debug({ text: text.slice(0, 160) }, "the receipt without a message id");
        return;
      }
      const state = pdu.message_state !== undefined ? Number(pdu.message_state) : undefined;
      const stat = fromText?.stat ?? (state !== undefined ? messageStateName(state) : "");
      const outcome = state !== undefined ? receiptOutcome(state) : receiptOutcome(stat);
      if (!outcome) return; // ENROUTE, ACCEPTD: not final yet
      const err = fromText?.err ?? (pdu.network_error_code ? Buffer.from(pdu.network_error_code as Buffer).toString("hex") : "");
      const carrierError = outcome === "Failed" ? `stat:${stat}${err ? ` err:${err}` : ""}` : "";
      await ev.segmentReceipt!({ carrierId: id, status: outcome, carrierError, at: opts.clock.now() });
      return;
    }
    const from = normalizeSmppNumber(String(pdu.source_addr ?? ""), Number(pdu.source_addr_ton ?? 0), opts.country);
    const to = normalizeSmppNumber(String(pdu.destination_addr ?? ""), Number(pdu.dest_addr_ton ?? 0), opts.country);
    const concat = concatInfo(body.udh);
    const at = opts.clock.now();
    if (concat && concat.total > 1) {
      await ev.inboundPart!({ from, to, text, at, ...concat });
      return;
    }
    const result = await ev.inbound({ from, to, text, at });
    log?.info({ messageSid: result.messageSid || undefined, inReplyTo: result.inReplyTo || undefined }, "SMPP inbound SMS");
  }

  return {
    name: "smpp",
    submit,
    capacity(withinMs) {
      return link === "Bound" ? pacer.capacity(withinMs) : 0;
    },
    status() {
      return { link, since, lastError, inFlight: pacer.inFlight, window: opts.window, tps: opts.tps, queued: pacer.queued };
    },
    async start(e) {
      events = e;
      stopped = false;
      loop = runLink();
      const every = opts.housekeepingMs ?? 5000;
      housekeeping = setInterval(() => {
        events
          ?.housekeeping?.(new Date(opts.clock.now().getTime() - opts.moReassemblyMs))
          .catch((err: unknown) => log?.warn({ err }, "SMPP housekeeping failed"));
      }, every);
    },
    async stop() {
      stopped = true;
      if (housekeeping) clearInterval(housekeeping);
      wake?.();
      const s = session;
      if (s && link === "Bound") {
        await Promise.race([request(s, "unbind", {}).catch(() => undefined), new Promise((r) => setTimeout(r, 2000))]);
      }
      s?.destroy();
      await loop;
      pacer.rejectWaiting(new CarrierError("the SMPP carrier stopped", "CarrierUnavailable", false));
      events = undefined;
    },
  };
}
