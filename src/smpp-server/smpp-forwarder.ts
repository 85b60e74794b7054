/**
 * Store-and-forward of receipts and replies to the binds this process holds
 * (docs/smpp-server.md#receipts-and-replies). Every POLL_MS (and when a bind opens) it claims the
 * due rows of the accounts with a receiver or transceiver bind here (a claim that expires: a
 * process killed with rows claimed leaves them to the next claim), sends each as a deliver_sm on
 * one of the account's binds in turn, deletes it on deliver_sm_resp 0 and frees it otherwise.
 */
import type { MikroORM } from "@mikro-orm/sql";
import smpp from "smpp";
import type { Clock } from "../common/clock.js";
import { textEncoding } from "../common/sms-text.js";
import { claimSmppOutbox, deleteSmppOutboxRow, purgeSmppOutbox, releaseSmppOutboxRow, type SmppOutboxItem } from "../messaging/smpp-outbox-store.js";
import { MESSAGE_STATE, messageStateOf, STAT_WORD } from "./smpp-query.js";
import type { SmppSession } from "./smpp-session.js";
import type { SmppLog } from "./smpp-session-settings.js";
import { receiptDate } from "./smpp-time.js";

/** How often the outbox is looked at while binds receive. */
export const POLL_MS = 1000;
/** deliver_sm a process has outstanding per account at most; claims wait while it is reached. */
export const MAX_OUTSTANDING_PER_ACCOUNT = 100;
const PURGE_EVERY_MS = 60_000;
/** The most octets in short_message; a longer text goes in message_payload. */
const SHORT_MESSAGE_MAX = 254;

/** An address as SMPP carries it: E.164 without its + (TON 1), else alphanumeric (TON 5). */
function addressOf(value: string): { ton: number; npi: number; addr: string } {
  return /^\+\d+$/.test(value) ? { ton: 1, npi: 1, addr: value.slice(1) } : { ton: 5, npi: 0, addr: value.slice(0, 20) };
}

/** The customary receipt text (SMPP 3.4 Appendix B), its text: the first 20 characters of the message in ASCII. */
export function receiptText(item: SmppOutboxItem, now: Date): string {
  const state = messageStateOf(item.status, item.errorCode);
  const delivered = state === MESSAGE_STATE.DELIVERED ? "001" : "000";
  const err = state === MESSAGE_STATE.DELIVERED ? "000" : "001";
  const text = item.text.slice(0, 20).replace(/[^\x20-\x7e]/g, "?");
  return `id:${item.messageSid} sub:001 dlvrd:${delivered} submit date:${receiptDate(item.createdAt)} done date:${receiptDate(item.doneAt ?? now)} stat:${STAT_WORD[state]} err:${err} text:${text}`;
}

/** The deliver_sm fields of a receipt or a reply. */
export function deliverFields(item: SmppOutboxItem, now: Date): Record<string, unknown> {
  if (item.kind === "Receipt") {
    // From the handset the message went to, to the sender it went from.
    const source = addressOf(item.recipient);
    const dest = addressOf(item.sender);
    return {
      source_addr_ton: source.ton,
      source_addr_npi: source.npi,
      source_addr: source.addr,
      dest_addr_ton: dest.ton,
      dest_addr_npi: dest.npi,
      destination_addr: dest.addr,
      esm_class: 0x04,
      data_coding: 0,
      short_message: Buffer.from(receiptText(item, now), "latin1"),
      receipted_message_id: item.messageSid,
      message_state: messageStateOf(item.status, item.errorCode),
    };
  }
  const source = addressOf(item.sender);
  const dest = addressOf(item.recipient);
  const gsm = textEncoding(item.text || " ").encoding === "GSM7";
  let bytes: Buffer;
  if (gsm) bytes = smpp.gsmCoder.encode(item.text);
  else {
    bytes = Buffer.from(item.text, "utf16le");
    bytes.swap16();
  }
  return {
    source_addr_ton: source.ton,
    source_addr_npi: source.npi,
    source_addr: source.addr,
    dest_addr_ton: dest.ton,
    dest_addr_npi: dest.npi,
    destination_addr: dest.addr,
    esm_class: 0,
    data_coding: gsm ? 0 : 8,
    ...(bytes.length <= SHORT_MESSAGE_MAX ? { short_message: bytes } : { short_message: Buffer.alloc(0), message_payload: bytes }),
  };
}

export interface SmppForwarder {
  /** Looks at the outbox now (a bind opened). */
  wake(): void;
  start(): void;
  /** Stops claiming; rows claimed and not answered are freed by their claims' end. */
  stop(): Promise<void>;
}

export function createSmppForwarder(deps: { orm: MikroORM; clock: Clock; log: SmppLog; sessions: () => readonly SmppSession[] }): SmppForwarder {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let again = false;
  let stopped = true;
  let lastPurge = 0;
  const outstanding = new Map<string, number>();
  const turn = new Map<string, number>();

  async function round(): Promise<void> {
    const receiving = new Map<string, SmppSession[]>();
    for (const s of deps.sessions()) {
      if (!s.receives) continue;
      const list = receiving.get(s.bound!.accountSid) ?? [];
      list.push(s);
      receiving.set(s.bound!.accountSid, list);
    }
    const now = deps.clock.now();
    if (now.getTime() - lastPurge > PURGE_EVERY_MS) {
      lastPurge = now.getTime();
      await purgeSmppOutbox(deps.orm.em.fork(), now);
    }
    const accounts = [...receiving.keys()].filter((a) => (outstanding.get(a) ?? 0) < MAX_OUTSTANDING_PER_ACCOUNT);
    if (accounts.length === 0) return;
    const items = await claimSmppOutbox(deps.orm.em.fork(), accounts, now, MAX_OUTSTANDING_PER_ACCOUNT);
    for (const item of items) {
      const binds = (receiving.get(item.accountSid) ?? []).filter((s) => s.receives);
      const em = deps.orm.em.fork();
      if (binds.length === 0) {
        await releaseSmppOutboxRow(em, item.id);
        continue;
      }
      const i = (turn.get(item.accountSid) ?? 0) % binds.length;
      turn.set(item.accountSid, i + 1);
      outstanding.set(item.accountSid, (outstanding.get(item.accountSid) ?? 0) + 1);
      binds[i]!.deliver(deliverFields(item, now))
        .then(
          (st) => (st === 0 ? deleteSmppOutboxRow(em, item.id) : releaseSmppOutboxRow(em, item.id)),
          () => releaseSmppOutboxRow(em, item.id),
        )
        .catch((err: unknown) => deps.log.warn({ err, id: item.id }, "SMPP outbox row not updated (its claim expires)"))
        .finally(() => outstanding.set(item.accountSid, (outstanding.get(item.accountSid) ?? 1) - 1));
    }
    // A full claim: more may be due at once.
    if (items.length === MAX_OUTSTANDING_PER_ACCOUNT) again = true;
  }

  function kick(): void {
    if (stopped) return;
    if (running) {
      again = true;
      return;
    }
    running = round()
      .catch((err: unknown) => deps.log.warn({ err }, "SMPP outbox round failed"))
      .finally(() => {
        running = undefined;
        if (again) {
          again = false;
          kick();
        }
      });
  }

  return {
    wake: kick,
    start() {
      stopped = false;
      timer = setInterval(kick, POLL_MS);
      timer.unref();
    },
    async stop() {
      stopped = true;
      if (timer) clearInterval(timer);
      await running;
    },
  };
}
