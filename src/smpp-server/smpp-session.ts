/**
 * One client connection of the SMPP server (docs/smpp-server.md): its PDUs framed and decoded,
 * its bind, and its submit_sm, query_sm and cancel_sm through the same MessagingService methods
 * REST calls (SendMessage runs the one send pipeline). Memory is bounded per connection: at most
 * `window` requests in flight (held long-text parts included); while full, or while the client
 * does not read what we write, its socket is not read (TCP then holds the client back).
 */
import type { Socket } from "node:net";
import { createContextValues, createHandlerContext, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import type { DescMethod } from "@bufbuild/protobuf";
import type { MikroORM } from "@mikro-orm/sql";
import { MessagingService } from "../../gen/switchboard/v2/messaging_pb.js";
import type { Account } from "../accounts/account.entity.js";
import { kAccount } from "../accounts/account-context.js";
import { readAccountFresh } from "../accounts/account-store.js";
import type { AuthFailureGuard } from "../accounts/auth-failures.js";
import type { SmppCredentialRecord } from "../accounts/smpp-store.js";
import type { Clock } from "../common/clock.js";
import { kClientAddress, kEm, kSmppReceipt } from "../common/context.js";
import { apiError } from "../common/errors.js";
import { PartJoiner } from "./part-joiner.js";
import { checkBind } from "./smpp-bind.js";
import {
  type BindPdu,
  COMMAND,
  type CancelSmPdu,
  decodePdu,
  encodePdu,
  MAX_PDU_LENGTH,
  PDU_HEADER_LENGTH,
  PduError,
  type QuerySmPdu,
  readHeader,
  RESPONSE_BIT,
  responseId,
  status,
  type SubmitSmPdu,
} from "./smpp-pdu.js";
import { commandStatusOf, sendRequestOf } from "./smpp-submit.js";
import { decodeText, textPartOf } from "./smpp-text.js";
import { queryAnswer } from "./smpp-query.js";
import { ACCOUNT_TTL_MS, BIND_TIMEOUT_MS, type BoundAs, DELIVER_TIMEOUT_MS, SERVER_SYSTEM_ID, type SmppLog } from "./smpp-session-settings.js";

/** The server's side of a session: the shared parts, and the bind table across processes. */
export interface SessionDeps {
  orm: MikroORM;
  clock: Clock;
  /** The served MessagingService, the one REST calls. */
  messaging: ServiceImpl<typeof MessagingService>;
  failures?: AuthFailureGuard;
  log: SmppLog;
  window: number;
  /** Records a bind if the account has room under its MaxBinds (every process); false: full. */
  openBind(session: SmppSession, creds: SmppCredentialRecord): Promise<boolean>;
  /** The bind ended (or the connection closed). */
  closeBind(session: SmppSession): void;
  /** Counts a submit_sm answered (each part of a long text counts), for /metrics. */
  onSubmitAnswered?(accountSid: string, accepted: boolean): void;
}

/** A request waiting for its answer: its sequence_number and its PDU. */
interface Waiter {
  sequence: number;
  pdu: SubmitSmPdu;
}

const RESP_OF: Record<string, string> = {
  Transmitter: "bind_transmitter_resp",
  Receiver: "bind_receiver_resp",
  Transceiver: "bind_transceiver_resp",
};

/** The response command of each request the server answers with its own response. */
const REQUEST_RESP: Record<number, string> = {
  [COMMAND.bind_transmitter]: "bind_transmitter_resp",
  [COMMAND.bind_receiver]: "bind_receiver_resp",
  [COMMAND.bind_transceiver]: "bind_transceiver_resp",
  [COMMAND.submit_sm]: "submit_sm_resp",
  [COMMAND.query_sm]: "query_sm_resp",
  [COMMAND.cancel_sm]: "cancel_sm_resp",
};

export class SmppSession {
  bound: BoundAs | undefined;
  /** Requests in flight, for the window and the operator's InFlight. */
  inFlight = 0;
  readonly address: string;
  private buf: Buffer = Buffer.alloc(0);
  private binding = false;
  private writeBlocked = false;
  private closing = false;
  private ended = false;
  private sequence = 0;
  private account: { value: Account; at: number } | undefined;
  private readonly joiner: PartJoiner<Waiter>;
  private readonly bindTimer: NodeJS.Timeout;
  private unbindAnswered: (() => void) | undefined;
  private idle: (() => void) | undefined;
  /** deliver_sm sent and not yet answered, by sequence_number. */
  private readonly delivering = new Map<number, (status: number) => void>();

  constructor(
    readonly socket: Socket,
    private readonly deps: SessionDeps,
  ) {
    this.address = `${socket.remoteAddress ?? "unknown"}:${socket.remotePort ?? 0}`;
    this.joiner = new PartJoiner<Waiter>((waiters) => {
      // A long text whose parts stopped coming: each part held is answered as not taken.
      for (const w of waiters) this.answer(w.sequence, "submit_sm_resp", status("ESME_RSUBMITFAIL"));
    });
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 30_000);
    socket.on("data", (chunk: Buffer) => {
      this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
      this.pump();
    });
    socket.on("drain", () => {
      this.writeBlocked = false;
      this.pump();
    });
    socket.on("error", () => undefined);
    socket.on("close", () => this.onClose());
    this.bindTimer = setTimeout(() => {
      if (!this.bound) this.end();
    }, BIND_TIMEOUT_MS);
    this.bindTimer.unref();
  }

  /** Why the socket is not read now: the window is full, the client does not read, a bind is being checked, or we are closing. */
  private blocked(): boolean {
    return this.binding || this.writeBlocked || this.closing || this.inFlight >= this.deps.window;
  }

  /** Handles the whole PDUs buffered while nothing blocks, and reads the socket only then. */
  private pump(): void {
    while (!this.blocked() && !this.ended) {
      if (this.buf.length < 4) break;
      const length = this.buf.readUInt32BE(0);
      if (length < PDU_HEADER_LENGTH || length > MAX_PDU_LENGTH) {
        // No way to find the next PDU: answered, and the connection closed cleanly.
        const sequence = this.buf.length >= PDU_HEADER_LENGTH ? this.buf.readUInt32BE(12) : 0;
        this.deps.log.warn({ address: this.address, commandLength: length }, "SMPP PDU with an impossible command_length; closing");
        this.write(encodePdu("generic_nack", { sequence_number: sequence, command_status: status("ESME_RINVCMDLEN") }));
        this.end();
        return;
      }
      if (this.buf.length < length) break;
      const pdu = this.buf.subarray(0, length);
      this.buf = this.buf.subarray(length);
      this.handle(pdu);
    }
    if (this.ended) return;
    if (this.blocked()) this.socket.pause();
    else this.socket.resume();
  }

  private write(bytes: Buffer): void {
    if (this.ended || this.socket.destroyed || !this.socket.writable) return;
    if (!this.socket.write(bytes)) this.writeBlocked = true;
  }

  private answer(sequence: number, command: string, commandStatus: number, fields: Record<string, unknown> = {}): void {
    this.write(encodePdu(command, { ...fields, sequence_number: sequence, command_status: commandStatus }));
  }

  private handle(bytes: Buffer): void {
    let decoded: ReturnType<typeof decodePdu>;
    try {
      decoded = decodePdu(bytes);
    } catch (err) {
      const header = readHeader(bytes);
      const st = err instanceof PduError ? err.status : status("ESME_RSYSERR");
      const resp = REQUEST_RESP[header.commandId];
      if (resp) this.answer(header.sequence, resp, st);
      else if ((header.commandId & RESPONSE_BIT) === 0) this.answer(header.sequence, "generic_nack", st);
      return;
    }
    const { header, pdu } = decoded;
    switch (pdu.kind) {
      case "bind":
        return this.onBind(header.sequence, pdu);
      case "submit_sm":
        return this.onSubmit(header.sequence, pdu);
      case "query_sm":
        return this.onQuery(header.sequence, pdu);
      case "cancel_sm":
        return this.onCancel(header.sequence, pdu);
      case "enquire_link":
        return this.answer(header.sequence, "enquire_link_resp", 0);
      case "unbind":
        this.answer(header.sequence, "unbind_resp", 0);
        this.unbound();
        this.end();
        return;
      case "unbind_resp":
        this.unbindAnswered?.();
        return;
      case "deliver_sm_resp": {
        const done = this.delivering.get(header.sequence);
        this.delivering.delete(header.sequence);
        done?.(pdu.status);
        return;
      }
      case "enquire_link_resp":
      case "generic_nack":
      case "other_resp":
        return;
      case "unknown":
        return this.answer(header.sequence, "generic_nack", status("ESME_RINVCMDID"));
    }
  }

  // ---------------------------------------------------------------------------------------------
  // bind

  private onBind(sequence: number, pdu: BindPdu): void {
    const resp = RESP_OF[pdu.mode]!;
    if (this.bound) return this.answer(sequence, resp, status("ESME_RALYBND"));
    this.binding = true;
    this.bind(pdu).then(
      (st) => {
        this.answer(sequence, resp, st, st === 0 ? { system_id: SERVER_SYSTEM_ID } : {});
        this.binding = false;
        this.pump();
      },
      (err: unknown) => {
        this.deps.log.warn({ address: this.address, err }, "SMPP bind failed");
        this.answer(sequence, resp, status("ESME_RBINDFAIL"));
        this.binding = false;
        this.pump();
      },
    );
  }

  /** Checks a bind's credentials, address and room; the status to answer with. */
  private async bind(pdu: BindPdu): Promise<number> {
    const check = await checkBind(this.deps, this.socket.remoteAddress ?? "unknown", pdu);
    if (!check.ok) {
      this.deps.log.info({ address: this.address, systemId: pdu.systemId }, `SMPP bind refused: ${check.why ?? "refused"}`);
      return check.status;
    }
    const { creds, account } = check;
    this.account = { value: account, at: performance.now() };
    const bound: BoundAs = {
      bindId: `SB${this.deps.clock.now().getTime().toString(36)}${Math.random().toString(36).slice(2, 12)}`.slice(0, 32),
      mode: pdu.mode,
      accountSid: creds.accountSid,
      systemId: creds.systemId,
      propertySid: creds.propertySid,
      since: this.deps.clock.now(),
    };
    this.bound = bound;
    if (!(await this.deps.openBind(this, creds))) {
      this.bound = undefined;
      this.deps.log.info({ address: this.address, systemId: pdu.systemId }, "SMPP bind refused: MaxBinds reached");
      return status("ESME_RBINDFAIL");
    }
    if (this.ended) {
      // The connection closed while the bind was recorded: its row goes now, not at its staleness.
      this.bound = bound;
      this.unbound();
      return status("ESME_RBINDFAIL");
    }
    clearTimeout(this.bindTimer);
    this.deps.log.info({ address: this.address, systemId: bound.systemId, accountSid: bound.accountSid, mode: bound.mode }, "SMPP bind");
    return 0;
  }

  private unbound(): void {
    if (!this.bound) return;
    this.deps.closeBind(this);
    this.bound = undefined;
  }

  // ---------------------------------------------------------------------------------------------
  // requests

  /** The bound account, read again once its copy is ACCOUNT_TTL_MS old (a rotated token, a disabled account). */
  private async boundAccount(): Promise<Account> {
    const cached = this.account;
    if (cached && performance.now() - cached.at < ACCOUNT_TTL_MS) return cached.value;
    const fresh = await readAccountFresh(this.deps.orm.em.fork(), this.bound!.accountSid);
    if (!fresh) throw apiError("Unauthorized", "The account is gone.");
    this.account = { value: fresh, at: performance.now() };
    return fresh;
  }

  /** The handler context of a call made for the bound account, as the edge makes one. */
  private context(method: DescMethod, account: Account): HandlerContext {
    const values = createContextValues();
    values.set(kAccount, account);
    let em: ReturnType<MikroORM["em"]["fork"]> | undefined;
    values.set(kEm, () => (em ??= this.deps.orm.em.fork()));
    values.set(kClientAddress, this.socket.remoteAddress);
    return createHandlerContext({
      service: MessagingService,
      method,
      protocolName: "smpp",
      requestMethod: "POST",
      url: `smpp://${this.address}`,
      contextValues: values,
    });
  }

  private canTransmit(): boolean {
    return this.bound !== undefined && this.bound.mode !== "Receiver";
  }

  private onSubmit(sequence: number, pdu: SubmitSmPdu): void {
    if (!this.canTransmit()) return this.answer(sequence, "submit_sm_resp", status("ESME_RINVBNDSTS"));
    let text: ReturnType<typeof textPartOf>;
    try {
      text = textPartOf(pdu);
    } catch (err) {
      return this.answer(sequence, "submit_sm_resp", commandStatusOf(err));
    }
    this.inFlight++;
    const waiter = { sequence, pdu };
    if (!text.part) return void this.submit([waiter], waiter.pdu, text.bytes);
    const key = `${pdu.sourceTon}:${pdu.sourceAddr}|${pdu.destTon}:${pdu.destinationAddr}|${text.part.ref}`;
    const outcome = this.joiner.add(key, text.part, text.bytes, waiter);
    if (outcome.kind === "full") return this.done([waiter], "submit_sm_resp", status("ESME_RMSGQFUL"));
    if (outcome.kind === "whole") void this.submit(outcome.waiters, outcome.first.pdu, outcome.bytes);
  }

  /** Sends one whole text and answers each of its parts' waiters with the MessageSid, or the refusal. */
  private async submit(waiters: Waiter[], pdu: SubmitSmPdu, bytes: Buffer): Promise<void> {
    try {
      const account = await this.boundAccount();
      const req = sendRequestOf(pdu, decodeText(bytes, pdu.dataCoding), this.bound!.propertySid, this.deps.clock.now());
      const ctx = this.context(MessagingService.method.sendMessage, account);
      // The receipt's outbox row is stored with the message: once the client has the MessageSid, its receipt is on record.
      const registered = pdu.registeredDelivery & 0x03;
      if (registered === 1 || registered === 2) ctx.values.set(kSmppReceipt, registered);
      const message = await this.deps.messaging.sendMessage(req, ctx);
      this.done(waiters, "submit_sm_resp", 0, { message_id: message.messageSid });
    } catch (err) {
      this.done(waiters, "submit_sm_resp", commandStatusOf(err));
    }
  }

  /** Answers waiters that were in flight. */
  private done(waiters: readonly { sequence: number }[], command: string, commandStatus: number, fields: Record<string, unknown> = {}): void {
    for (const w of waiters) this.answer(w.sequence, command, commandStatus, commandStatus === 0 ? fields : {});
    if (command === "submit_sm_resp" && this.bound)
      for (let i = 0; i < waiters.length; i++) this.deps.onSubmitAnswered?.(this.bound.accountSid, commandStatus === 0);
    this.inFlight -= waiters.length;
    if (this.inFlight === 0) this.idle?.();
    this.pump();
  }

  private onQuery(sequence: number, pdu: QuerySmPdu): void {
    if (!this.canTransmit()) return this.answer(sequence, "query_sm_resp", status("ESME_RINVBNDSTS"));
    this.inFlight++;
    void (async () => {
      try {
        const account = await this.boundAccount();
        const record = await this.deps.messaging.getMessage({ messageSid: pdu.messageId } as never, this.context(MessagingService.method.getMessage, account));
        this.done([{ sequence }], "query_sm_resp", 0, queryAnswer(record));
      } catch (err) {
        this.done([{ sequence }], "query_sm_resp", commandStatusOf(err));
      }
    })();
  }

  private onCancel(sequence: number, pdu: CancelSmPdu): void {
    if (!this.canTransmit()) return this.answer(sequence, "cancel_sm_resp", status("ESME_RINVBNDSTS"));
    this.inFlight++;
    void (async () => {
      try {
        const account = await this.boundAccount();
        // The REST cancel's own method: the same conditional update, lease release and refund.
        await this.deps.messaging.cancelMessage({ messageSid: pdu.messageId } as never, this.context(MessagingService.method.cancelMessage, account));
        this.done([{ sequence }], "cancel_sm_resp", 0);
      } catch (err) {
        this.done([{ sequence }], "cancel_sm_resp", commandStatusOf(err));
      }
    })();
  }

  // ---------------------------------------------------------------------------------------------
  // deliver_sm and the end

  /** Whether the bind takes deliver_sm (receiver or transceiver). */
  get receives(): boolean {
    return this.bound !== undefined && this.bound.mode !== "Transmitter" && !this.closing && !this.ended;
  }

  /**
   * Sends a deliver_sm; resolves with the client's command_status, or -1 when the connection ends
   * or no answer comes within DELIVER_TIMEOUT_MS (the row is then freed for another try).
   */
  deliver(fields: Record<string, unknown>): Promise<number> {
    return new Promise((resolve, reject) => {
      if (!this.receives) return reject(new Error("the bind does not receive"));
      this.sequence = this.sequence >= 0x7fffffff ? 1 : this.sequence + 1;
      const seq = this.sequence;
      const timer = setTimeout(() => {
        this.delivering.delete(seq);
        resolve(-1);
      }, DELIVER_TIMEOUT_MS);
      timer.unref();
      this.delivering.set(seq, (st) => {
        clearTimeout(timer);
        resolve(st);
      });
      this.write(encodePdu("deliver_sm", { ...fields, sequence_number: seq }));
    });
  }

  /**
   * Ends the bind cleanly (the server stops): no more requests are read, those in flight are
   * answered (at most `waitMs`), then an unbind is sent and its answer awaited (as long), and the
   * connection closed.
   */
  async stop(waitMs: number): Promise<void> {
    if (this.ended) return;
    this.closing = true;
    this.socket.pause();
    const wait = (register: (fn: () => void) => void) =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, waitMs);
        register(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    if (this.inFlight > 0) await wait((fn) => (this.idle = fn));
    if (this.bound && !this.ended) {
      this.sequence = this.sequence >= 0x7fffffff ? 1 : this.sequence + 1;
      const answered = wait((fn) => (this.unbindAnswered = fn));
      this.write(encodePdu("unbind", { sequence_number: this.sequence }));
      // The unbind_resp is read although the socket is paused for requests.
      this.closing = false;
      this.binding = true;
      this.socket.resume();
      this.listenForUnbindResp();
      await answered;
    }
    this.unbound();
    this.end();
  }

  /** While stopping: only the unbind_resp (and deliver_sm_resp) are handled. */
  private listenForUnbindResp(): void {
    this.socket.on("data", () => {
      while (this.buf.length >= PDU_HEADER_LENGTH) {
        const length = this.buf.readUInt32BE(0);
        if (length < PDU_HEADER_LENGTH || length > MAX_PDU_LENGTH || this.buf.length < length) break;
        const header = readHeader(this.buf);
        this.buf = this.buf.subarray(length);
        if (header.commandId === responseId(COMMAND.unbind)) this.unbindAnswered?.();
      }
    });
  }

  /** Closes the connection after what was written. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.socket.end();
    // A client that never closes its side is cut off.
    setTimeout(() => this.socket.destroy(), 2000).unref();
  }

  private onClose(): void {
    this.ended = true;
    clearTimeout(this.bindTimer);
    this.joiner.clear();
    for (const done of this.delivering.values()) done(-1);
    this.delivering.clear();
    this.unbound();
    this.idle?.();
    this.unbindAnswered?.();
  }
}
