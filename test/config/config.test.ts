/**
 * Configuration is one schema (src/config/variables.ts): every variable parsed from it, every bad
 * one named at once with the form it expects, and the documented tables generated from it.
 */
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig, parseVariables } from "../../src/config.js";
import { CONFIG_DOCS, configTableMarkdown, withConfigTables } from "../../src/config/config-doc.js";
import { VARIABLES } from "../../src/config/variables.js";

const ROOT = resolve(import.meta.dirname, "..", "..");

describe("configuration", () => {
  it("the documented tables are the ones generated from src/config/variables.ts (run `npm run docs:config` after changing it)", () => {
    for (const page of new Set(Object.values(CONFIG_DOCS))) {
      const committed = readFileSync(join(ROOT, page), "utf8");
      expect(committed, page).toBe(withConfigTables(committed, page));
    }
    const documented = (["service", "kannel", "smpp", "smpp-server"] as const).map(configTableMarkdown).join("\n");
    for (const name of Object.keys(VARIABLES)) expect(documented).toContain(`| \`${name}\` |`);
  });

  it("src/config.ts reads no variable by hand: every one comes through the schema", () => {
    const source = readFileSync(join(ROOT, "src", "config.ts"), "utf8");
    expect(source.match(/env(\.|\[["'`])[A-Z][A-Z0-9_]*/g) ?? []).toEqual([]);
  });

  it("every bad variable is named at once, each with the form it expects and the value it got", () => {
    let error: unknown;
    try {
      loadConfig({ PORT: "80x", SEND_RATE_LIMIT: "fast", BLOCKED_PREFIXES: "+44,0044", WEBHOOK_ALLOW_PRIVATE: "maybe", DELIVERY: "sometimes", HOST: "::" });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems).toEqual([
      'PORT must be a port number, got "80x"',
      'WEBHOOK_ALLOW_PRIVATE must be true or false, got "maybe"',
      'BLOCKED_PREFIXES must be a comma-separated list of E164 prefixes such as +4470,+882; "0044" is not one',
      'SEND_RATE_LIMIT must be a number of messages per second, 0 or "off", got "fast"',
      'DELIVERY must be on or off, got "sometimes"',
    ]);
    expect((error as Error).message).toMatch(/^5 configuration variables are wrong:\n- PORT must be a port number, got "80x"\n- WEBHOOK_ALLOW_PRIVATE/);
  });

  it("a secret's bad value is never repeated in the error", () => {
    const secret = "smpp://sys:hunter2-very-secret@";
    expect(() => loadConfig({ CARRIER: "smpp", SMPP_URL: secret })).toThrow(ConfigError);
    try {
      loadConfig({ CARRIER: "smpp", SMPP_URL: secret, SWITCHBOARD_ADMIN_TOKEN: "short-secret" });
    } catch (e) {
      expect((e as Error).message).not.toContain("hunter2");
      expect((e as Error).message).not.toContain("short-secret");
      expect((e as ConfigError).problems).toHaveLength(2);
    }
  });

  it("SENDER_ID_REGISTRATION: AU=require by default; CC=require|label pairs in any case; none; a bad pair named", () => {
    expect([...loadConfig({}).senderIdRegistration]).toEqual([["AU", "require"]]);
    expect([...loadConfig({ SENDER_ID_REGISTRATION: "au=Require, gb = label" }).senderIdRegistration]).toEqual([
      ["AU", "require"],
      ["GB", "label"],
    ]);
    expect(loadConfig({ SENDER_ID_REGISTRATION: "None" }).senderIdRegistration.size).toBe(0);
    for (const bad of ["AU=block", "XX=require", "AU", "AU=require,,GB:label"])
      expect(parseVariables({ SENDER_ID_REGISTRATION: bad }, ["SENDER_ID_REGISTRATION"]).problems, bad).toEqual([
        expect.stringMatching(
          /^SENDER_ID_REGISTRATION must be a comma-separated list of COUNTRY=require\|label pairs such as AU=require,GB=label \(ISO 3166-1 alpha-2 codes\), or none; "[^"]+" is not one$/,
        ),
      ]);
  });

  it("blank counts as unset; bounds are checked; defaults come from the schema", () => {
    const c = loadConfig({
      PORT: " ",
      SEND_RATE_LIMIT: "off",
      PURGE_INTERVAL_SECONDS: "1.5",
      ALLOW_PREMIUM_DESTINATIONS: "YES",
      DEFAULT_ALLOWED_COUNTRIES: "gb, au,GB",
    });
    expect(c.port).toBe(8080);
    expect(c.sendRateLimit).toBe(0);
    expect(c.sendRateBurst).toBe(100);
    expect(c.retention.intervalMs).toBe(1500);
    expect(c.destinations).toEqual({ defaultAllowedCountries: ["GB", "AU"], blockedPrefixes: [], allowPremium: true });
    expect(parseVariables({ PORT: "65536" }, ["PORT"]).problems).toEqual(['PORT must be a port number, got "65536"']);
    expect(parseVariables({ MAX_HEADER_BYTES: "1023" }, ["MAX_HEADER_BYTES"]).problems).toEqual([
      'MAX_HEADER_BYTES must be a whole number of at least 1024, got "1023"',
    ]);
    expect(parseVariables({ LOG_LEVEL: "verbose" }, ["LOG_LEVEL"]).problems).toEqual([
      'LOG_LEVEL must be fatal, error, warn, info, debug, trace or silent, got "verbose"',
    ]);
  });
});
