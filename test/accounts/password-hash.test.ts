/** SMPP passwords' salted scrypt hashes (src/accounts/password-hash.ts). */
import { describe, expect, it } from "vitest";
import { hashPassword, passwordMatches } from "../../src/accounts/password-hash.js";

describe("password hashes", () => {
  it("match their password only, with a new salt each time; no name or a malformed hash never matches", async () => {
    const a = await hashPassword("pa55");
    const b = await hashPassword("pa55");
    expect(a).not.toBe(b);
    expect(await passwordMatches("pa55", a)).toBe(true);
    expect(await passwordMatches("pa55", b)).toBe(true);
    expect(await passwordMatches("pa56", a)).toBe(false);
    expect(await passwordMatches("", a)).toBe(false);
    expect(await passwordMatches("pa55", undefined)).toBe(false);
    expect(await passwordMatches("pa55", "0".repeat(64))).toBe(false);
    expect(await passwordMatches("pa55", a.replace(/^scrypt\$16384/, "scrypt$99999999"))).toBe(false);
  });
});
