/**
 * How a JSON request body's bytes become text, for REST and for Connect JSON alike: which
 * charset a Content-Type may name, and a strict UTF-8 decoder that refuses ill-formed bytes
 * instead of replacing them with U+FFFD (which silently changed a message's text and encoding).
 */
import { apiError, quoted } from "../common/errors.js";

/** The charsets a JSON request body is read in. */
export type BodyCharset = "utf-8";

const CHARSET_PARAM = /;\s*charset\s*=\s*(?:"([^"]*)"|([^;\s]*))/i;

/**
 * The one charset decision for JSON request bodies: a Content-Type without a charset, or with
 * UTF-8 (`utf-8`, `utf8`, any case, quoted or not), is UTF-8; any other charset is 415
 * UnsupportedMediaType. (Accounts with Fone Dynamics compatibility will also be read as
 * ISO-8859-1: that decision belongs here.)
 */
export function jsonBodyCharset(contentType: string | undefined): BodyCharset {
  const m = contentType === undefined ? null : CHARSET_PARAM.exec(contentType);
  if (!m) return "utf-8";
  const charset = (m[1] ?? m[2]).toLowerCase();
  if (charset === "utf-8" || charset === "utf8") return "utf-8";
  throw apiError(
    "UnsupportedMediaType",
    `The request body must be UTF-8, but its Content-Type says charset=${quoted(charset)}: send the JSON encoded as UTF-8, with charset=utf-8 or no charset.`,
  );
}

// fatal: ill-formed bytes throw instead of becoming U+FFFD; a leading BOM is dropped (ignoreBOM false).
const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/** A body's text, decoded strictly; ill-formed UTF-8 is 400 MalformedRequest naming the byte offset. */
export function decodeBody(bytes: Uint8Array, charset: BodyCharset = "utf-8"): string {
  switch (charset) {
    case "utf-8":
      try {
        return strictUtf8.decode(bytes);
      } catch {
        throw notUtf8(bytes);
      }
  }
}

/** The text of a JSON request body, in the charset its Content-Type names (415 and 400 as above). */
export function jsonBodyText(bytes: Uint8Array, contentType: string | undefined): string {
  return decodeBody(bytes, jsonBodyCharset(contentType));
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
