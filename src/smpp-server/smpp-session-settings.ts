/**
 * The SMPP server's session settings and the shapes its parts share (docs/smpp-server.md): what a
 * bind answers with, how much it may have in flight, how long it may wait, and what it logs with.
 */
import type { BindMode } from "./smpp-pdu.js";

/** The system_id the server answers binds with. */
export const SERVER_SYSTEM_ID = "Switchboard";
/** Requests a bind may have in flight (sent, not yet answered; held parts included). */
export const DEFAULT_WINDOW = 100;
/** A connection that has not bound within this long is closed. */
export const BIND_TIMEOUT_MS = 30_000;
/** How long a deliver_sm waits for its deliver_sm_resp (under the outbox's claim of 30 s). */
export const DELIVER_TIMEOUT_MS = 20_000;
/** How long a verified account is used before it is read again (as the API's account cache). */
export const ACCOUNT_TTL_MS = 2000;

/** What a session logs with (pino's shape); never a password. */
export interface SmppLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

/** An open bind of the session. */
export interface BoundAs {
  bindId: string;
  mode: BindMode;
  accountSid: string;
  systemId: string;
  propertySid: string;
  since: Date;
}
