// Types for the parts of the `smpp` package (0.5.1, plain JavaScript) the SMPP carrier uses.
declare module "smpp" {
  import { EventEmitter } from "node:events";
  import type { ConnectionOptions } from "node:tls";

  /** A decoded PDU: the header fields, then the command's parameters and TLVs by name. */
  export interface PDU {
    command: string;
    command_id: number;
    command_status: number;
    sequence_number: number;
    [field: string]: unknown;
    isResponse(): boolean;
    response(options?: Record<string, unknown>): PDU;
  }

  /** One SMPP connection. */
  export class Session extends EventEmitter {
    /** A session on a connection made elsewhere (any duplex stream carrying the PDUs). */
    constructor(options: { socket: import("node:stream").Duplex });
    socket: import("node:stream").Duplex;
    /** Stops decoding PDUs (and so reading the socket) until resume(). */
    pause(): void;
    resume(): void;
    send(pdu: PDU, responseCallback?: (pdu: PDU) => void, sendCallback?: (pdu: PDU) => void): boolean;
    close(callback?: () => void): void;
    destroy(callback?: () => void): void;
    bind_transceiver(options: Record<string, unknown>, responseCallback?: (pdu: PDU) => void): boolean;
    submit_sm(options: Record<string, unknown>, responseCallback?: (pdu: PDU) => void): boolean;
    enquire_link(options?: Record<string, unknown>, responseCallback?: (pdu: PDU) => void): boolean;
    unbind(options?: Record<string, unknown>, responseCallback?: (pdu: PDU) => void): boolean;
  }

  export interface ConnectOptions extends ConnectionOptions {
    host: string;
    port: number;
    tls?: boolean;
  }

  export function connect(options: ConnectOptions, listener?: () => void): Session;
  export const PDU: { new (command: string, options?: Record<string, unknown>): PDU };
  /** Command status names to codes (ESME_ROK, ESME_RTHROTTLED, …). */
  export const errors: Record<string, number>;
  export const gsmCoder: { encode(text: string, shift?: number): Buffer; decode(bytes: Buffer, shift?: number): string };
}
