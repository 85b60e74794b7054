/**
 * How a JSON request body's bytes become text, for REST and for Connect JSON alike: which
 * charset a Content-Type may name, and a strict UTF-8 decoder that refuses ill-formed bytes
 * instead of replacing them with U+FFFD (which silently changed a message's text and encoding).
 */
import { apiError, quoted } from "../common/errors.js";

/** The charsets a JSON request body is read in. */
export type BodyCharset = "utf-8" | "iso-8859-1";

const CHARSET_PARAM = /;\s*charset\s*=\s*(?:"([^"]*)"|([^;\s]*))/i;

/** Charset labels a Content-Type may name, and what each is read as. */
const CHARSETS: Record<string, BodyCharset> = {
  "utf-8": "utf-8",
  utf8: "utf-8",
  "iso-8859-1": "iso-8859-1",
  iso8859_1: "iso-8859-1",
  "iso_8859-1": "iso-8859-1",
  latin1: "iso-8859-1",
  l1: "iso-8859-1",
};

/**
 * The one charset decision for JSON request bodies: the charset a Content-Type names (UTF-8, or
 * ISO-8859-1 under any of its usual labels, any case, quoted or not), undefined when it names
 * none; any other charset is 415 UnsupportedMediaType naming the supported ones.
 */
export function jsonBodyCharset(contentType: string | undefined): BodyCharset | undefined {
  const m = contentType === undefined ? null : CHARSET_PARAM.exec(contentType);
  if (!m) return undefined;
  const charset = (m[1] ?? m[2]).toLowerCase();
  const known = CHARSETS[charset];
  if (known) return known;
  throw apiError(
    "UnsupportedMediaType",
    `The request body's Content-Type says charset=${quoted(charset)}, which is not supported: send the JSON as UTF-8 (charset=utf-8 or no charset) or as ISO-8859-1 (charset=iso-8859-1).`,
  );
}

/**
 * The charset rule of Connect, gRPC and gRPC-Web JSON: those protocols carry JSON as UTF-8 only,
 * so any other charset a Content-Type names is 415 (REST /v2 also reads ISO-8859-1).
 */
export function rpcJsonCharset(contentType: string): void {
  const m = CHARSET_PARAM.exec(contentType);
  if (!m) return;
  const charset = (m[1] ?? m[2]).toLowerCase();
  if (CHARSETS[charset] === "utf-8") return;
  throw apiError(
    "UnsupportedMediaType",
    `The request body must be UTF-8, but its Content-Type says charset=${quoted(charset)}: Connect, gRPC and gRPC-Web carry JSON as UTF-8 (with charset=utf-8 or no charset).`,
  );
}

// fatal: ill-formed bytes throw instead of becoming U+FFFD; a leading BOM is dropped (ignoreBOM false).
const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * A body's text, decoded strictly; ill-formed UTF-8 is 400 MalformedRequest naming the byte offset.
 * ISO-8859-1 maps each byte to the code point of the same value (Buffer's latin1; not the WHATWG
 * decoder, which reads that label as windows-1252).
 */
export function decodeBody(bytes: Uint8Array, charset: BodyCharset = "utf-8"): string {
  switch (charset) {
    case "utf-8":
      try {
        return strictUtf8.decode(bytes);
      } catch {
        throw notUtf8(bytes);
      }
    case "iso-8859-1":
      return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("latin1");
  }
}

/** How a body without a charset parameter is read: UTF-8, or (Fone Dynamics compatible accounts) ISO-8859-1 when it is not valid UTF-8. */
export type DefaultCharset = "utf-8" | "utf-8-else-latin1";

/**
 * The text of a JSON request body: in the charset its Content-Type names (415 for one not
 * supported); without one, UTF-8 (400 naming the offset when it is not), except that with
 * "utf-8-else-latin1" a body that is not valid UTF-8 is read as ISO-8859-1, which is what Fone
 * Dynamics' SDKs send under a bare application/json. Valid UTF-8 is always read as UTF-8.
 */
export function jsonBodyText(bytes: Uint8Array, contentType: string | undefined, fallback: DefaultCharset = "utf-8"): string {
  const named = jsonBodyCharset(contentType);
  if (named !== undefined || fallback === "utf-8") return decodeBody(bytes, named);
  try {
    return strictUtf8.decode(bytes);
  } catch {
    return decodeBody(bytes, "iso-8859-1");
  }
}

function notUtf8(bytes: Uint8Array) {
  const offset = invalidUtf8Offset(bytes);
  const at = offset < 0 ? "" : ` at byte offset ${offset} (0x${bytes[offset].toString(16).toUpperCase().padStart(2, "0")}; offsets count from 0)`;
  return apiError("MalformedRequest", `The request body is not valid UTF-8${at}: send the JSON encoded as UTF-8.`);
}

/**
 * The offset of the first byte where the bytes stop being well-formed UTF-8 (the lead byte of
 * the ill-formed or truncated sequence), or -1 when they are well-formed. Unicode's table of
 * well-formed byte sequences (no overlongs, no surrogates, nothing over U+10FFFF).
 */
export function invalidUtf8Offset(bytes: Uint8Array): number {
  const n = bytes.length;
  let i = 0;
  while (i < n) {
    const b = bytes[i];
    if (b < 0x80) {
      i++;
      continue;
    }
    let need: number;
    let lo = 0x80;
    let hi = 0xbf;
    if (b >= 0xc2 && b <= 0xdf) need = 1;
    else if (b >= 0xe0 && b <= 0xef) {
      need = 2;
      if (b === 0xe0) lo = 0xa0;
      else if (b === 0xed) hi = 0x9f;
    } else if (b >= 0xf0 && b <= 0xf4) {
      need = 3;
      if (b === 0xf0) lo = 0x90;
      else if (b === 0xf4) hi = 0x8f;
    } else return i;
    if (i + need >= n) return i; // truncated at the end
    const second = bytes[i + 1];
    if (second < lo || second > hi) return i;
    for (let k = 2; k <= need; k++) {
      const c = bytes[i + k];
      if (c < 0x80 || c > 0xbf) return i;
    }
    i += need + 1;
  }
  return -1;
}
