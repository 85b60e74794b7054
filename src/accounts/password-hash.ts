/**
 * Short passwords chosen by people (an SMPP password is at most 8 characters), stored as a salted
 * scrypt hash: `scrypt$<N>$<salt, base64url>$<hash, base64url>`. API tokens are long and random, so
 * one SHA-256 of them is enough (auth.ts hashToken); eight characters are not, should the table
 * ever leak. Hashing runs on libuv's thread pool (async scrypt), never on the event loop.
 */
import { randomBytes, scrypt, timingSafeEqual } from "node:crypto";

/** scrypt's cost (N = 2^14, r = 8, p = 1: Node's defaults, tens of milliseconds here), per bind. */
const COST = 16384;
const KEY_BYTES = 32;

function derive(password: string, salt: Buffer, cost: number): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(password, salt, KEY_BYTES, { N: cost, r: 8, p: 1, maxmem: 64 * 1024 * 1024 }, (err, key) => (err ? reject(err) : resolve(key))),
  );
}

/** A new salted hash of `password`. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, COST);
  return `scrypt$${COST}$${salt.toString("base64url")}$${key.toString("base64url")}`;
}

/** A well-formed hash of no password: an unknown name is checked against it, so it costs the same time. */
const NOBODY = `scrypt$${COST}$${Buffer.alloc(16).toString("base64url")}$${Buffer.alloc(KEY_BYTES).toString("base64url")}`;

/** Whether `password` is the one `stored` was made from; `stored` undefined (no such name): false, in the same time. */
export async function passwordMatches(password: string, stored: string | undefined): Promise<boolean> {
  const parts = (stored ?? NOBODY).split("$");
  if (parts.length !== 4 || parts[0] !== "scrypt") return false;
  const cost = Number(parts[1]);
  if (!Number.isInteger(cost) || cost < 2 || cost > 1 << 20) return false;
  const expected = Buffer.from(parts[3], "base64url");
  const key = await derive(password, Buffer.from(parts[2], "base64url"), cost);
  return stored !== undefined && key.length === expected.length && timingSafeEqual(key, expected);
}
