import { randomBytes } from "node:crypto";

/** Two-letter Sid prefixes by resource type (docs/api.md#sids). */
export const SidPrefix = {
  account: "AC",
  property: "PR",
  message: "MG",
  address: "AD",
  number: "PN",
  lease: "LS",
  carrier: "CR",
  rateImport: "RI",
  senderId: "SI",
} as const;

/** A Sid prefix. */
export type SidPrefix = (typeof SidPrefix)[keyof typeof SidPrefix];

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
// 252 is the largest multiple of 36 below 256: rejecting bytes at or above it keeps every character equally likely.
const LIMIT = 252;

// Random bytes are drawn 4 KiB at a time: one call into the CSPRNG per ~100 Sids, not per Sid.
const POOL_SIZE = 4096;
let pool = Buffer.alloc(0);
let poolAt = 0;

function randomByte(): number {
  if (poolAt >= pool.length) {
    pool = randomBytes(POOL_SIZE);
    poolAt = 0;
  }
  return pool[poolAt++];
}

/** Characters of a Sid that carry its creation time: milliseconds since 1970 in base 36, enough until the year 5188. */
const TIME_CHARS = 9;
const SID_LENGTH = 32;

const ALPHABET_BYTES = Buffer.from(ALPHABET, "latin1");
// A Sid's characters are written here and read out as one string: appending them one by one made
// ~30 intermediate strings per Sid (a new message's Sid is made on every send).
const sidBytes = Buffer.alloc(SID_LENGTH);

// The time characters of the last millisecond asked for: a busy process makes many Sids in each.
let lastMs = -1;
let lastTimeChars = "";

function timeChars(ms: number): string {
  if (ms !== lastMs) {
    lastMs = ms;
    lastTimeChars = ms.toString(36).toUpperCase().padStart(TIME_CHARS, "0");
  }
  return lastTimeChars;
}

/**
 * A new Sid: the prefix, the creation time (TIME_CHARS characters of [0-9A-Z], digits first so
 * that they sort by time in every collation), then 21 characters of [A-Z0-9] from a cryptographic
 * source (108 bits: as unguessable as a random UUID). Time first keeps a growing table's primary
 * key writing at its right edge and the rows a message's later updates read in the recent pages,
 * where random keys would touch any page of an index that no longer fits in memory.
 */
export function newSid(prefix: SidPrefix, nowMs = Date.now()): string {
  let n = sidBytes.write(prefix, 0, "latin1");
  n += sidBytes.write(timeChars(nowMs), n, "latin1");
  while (n < SID_LENGTH) {
    const b = randomByte();
    if (b < LIMIT) sidBytes[n++] = ALPHABET_BYTES[b % 36];
  }
  return sidBytes.toString("latin1", 0, SID_LENGTH);
}

/** Whether a string has the shape of a Sid with that prefix. */
export function isSid(value: string, prefix: SidPrefix): boolean {
  return value.length === SID_LENGTH && value.startsWith(prefix) && /^[A-Z]{2}[A-Z0-9]{30}$/.test(value);
}

/** A random secret of the given length from [A-Za-z0-9], for tokens and webhook secrets. */
export function randomSecret(length: number): string {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  let out = "";
  while (out.length < length) {
    for (const b of randomBytes(length * 2)) {
      if (b < 248) out += alphabet[b % 62];
      if (out.length === length) break;
    }
  }
  return out;
}
