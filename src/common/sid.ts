import { randomBytes } from "node:crypto";

/** Two-letter Sid prefixes by resource type (contract §2). */
export const SidPrefix = {
  account: "AC",
  property: "PR",
  message: "MG",
  address: "AD",
  number: "PN",
  lease: "LS",
} as const;

/** A Sid prefix. */
export type SidPrefix = (typeof SidPrefix)[keyof typeof SidPrefix];

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
// 252 is the largest multiple of 36 below 256: rejecting bytes at or above it keeps every character equally likely.
const LIMIT = 252;

/** A new Sid: the prefix and 30 characters of [A-Z0-9] from a cryptographic source. */
export function newSid(prefix: SidPrefix): string {
  let out = prefix as string;
  while (out.length < 32) {
    for (const b of randomBytes(40)) {
      if (b < LIMIT) out += ALPHABET[b % 36];
      if (out.length === 32) break;
    }
  }
  return out;
}

/** Whether a string has the shape of a Sid with that prefix. */
export function isSid(value: string, prefix: SidPrefix): boolean {
  return value.length === 32 && value.startsWith(prefix) && /^[A-Z]{2}[A-Z0-9]{30}$/.test(value);
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
