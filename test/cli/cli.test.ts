/**
 * The operator CLI as an operator runs it: a child process (`npx switchboard …` from the project
 * root) once, its `main` in this process for the rest (a process each cost seconds), against a
 * real listening app, through
 * account set-up, token rotation, pool numbers, the address review queue (list-addresses, then
 * approve-address), the list and get commands, and the simulator's handsets;
 * plus help, usage errors, API errors and an unreachable service.
 */
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AdminService } from "../../gen/switchboard/admin/v1/admin_pb.js";
import { adminCommands, kebab, methodKey, summaryOf } from "../../src/cli/commands.js";
import { main } from "../../src/cli/main.js";
import { loadProtoComments } from "../../src/openapi/proto-comments.js";
import { ADMIN_TOKEN, basic, createTestApp, type TestApp } from "../support/harness.js";
import { freePort } from "../support/kannel.js";
import { ACCOUNT_DEFAULTS as CONSENT_DEFAULTS } from "../support/account-defaults.js";

const ROOT = resolve(import.meta.dirname, "../..");
const SID_RE = (prefix: string) => new RegExp(`^${prefix}[A-Z0-9]{30}$`);
// The npx run is a fresh process that compiles the CLI through tsx; a loaded 2-core machine is slow.
const SLOW = 120_000;

/** An account's consent and destination settings as created (docs/api.md#opt-out-stop-start-help). */

let t: TestApp;
let baseUrl: string;
let scratch: string;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs the CLI: in this process through src/cli/main.ts's `main` with its own output and
 * environment (what bin/switchboard.mjs runs), or, with `npx`, as the operator does, a child
 * process through `npx switchboard` from the project root. The URL and token come from the
 * environment (SWITCHBOARD_URL, SWITCHBOARD_ADMIN_TOKEN) unless `env` replaces them; cwd is a
 * scratch folder without a .switchboard/admin-token, unless `npx` runs it from the project root.
 */
function cli(args: string[], opts: { env?: Record<string, string>; npx?: boolean; cwd?: string } = {}): Promise<Run> {
  const env: NodeJS.ProcessEnv = { ...process.env, SWITCHBOARD_URL: baseUrl, SWITCHBOARD_ADMIN_TOKEN: ADMIN_TOKEN };
  delete env.NODE_OPTIONS;
  Object.assign(env, opts.env ?? {});
  for (const [k, v] of Object.entries(env)) if (v === "") delete env[k];
  const cwd = opts.cwd ?? (opts.npx ? ROOT : scratch);
  if (!opts.npx) {
    let stdout = "";
    let stderr = "";
    const io = { env, cwd, stdout: (t: string) => void (stdout += t), stderr: (t: string) => void (stderr += t) };
    return main(args, io).then((code) => ({ code, stdout, stderr }));
  }
  return new Promise((done) => {
    execFile("npx", ["--offline", "switchboard", ...args], { cwd, env, timeout: SLOW }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === "number" ? err.code : -1) : 0;
      done({ code, stdout, stderr });
    });
  });
}

/** A successful run's JSON output. */
async function ok(args: string[], opts?: Parameters<typeof cli>[1]): Promise<any> {
  const r = await cli(args, opts);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout);
}

/** A failed run: its exit code and the ResponseStatus it printed on stderr (stdout stays empty). */
async function fails(args: string[], opts?: Parameters<typeof cli>[1]): Promise<{ code: number; status: any }> {
  const r = await cli(args, opts);
  expect(r.stdout).toBe("");
  return { code: r.code, status: JSON.parse(r.stderr).ResponseStatus };
}

async function v2(method: string, path: string, auth: string, body?: unknown): Promise<{ status: number; json: any }> {
  const headers: Record<string, string> = { authorization: auth };
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(baseUrl + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : undefined };
}

beforeAll(async () => {
  t = await createTestApp({ engine: true });
  await t.app.listen({ port: 0, host: "127.0.0.1" });
  baseUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  scratch = mkdtempSync(join(tmpdir(), "switchboard-cli-"));
});

afterAll(async () => {
  await t?.close();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe("operator flow", () => {
  const HANDSET = "+14155550177";
  const POOL = "+12025550142";
  let account: any;
  let propertySid: string;
  let ownedNumber: string;

  it("npx switchboard create-account (from the project root) prints the account with its token, once", { timeout: SLOW }, async () => {
    account = await ok(["create-account", "--name", "Acme Hotels"], { npx: true });
    expect(Object.keys(account)).toEqual(["AccountSid", "Name", "SmsEnabled", "Token", "WebhookSecret", "RestCompatibility"]);
    expect(account.AccountSid).toMatch(SID_RE("AC"));
    expect(account).toMatchObject({ Name: "Acme Hotels", SmsEnabled: true });
    expect(account.Token).toHaveLength(40);
    expect(account.WebhookSecret).toMatch(/^whsec_/);
    const numbers = await v2("GET", `/v2/Accounts/${account.AccountSid}/Numbers`, basic(account.AccountSid, account.Token));
    expect(numbers.status).toBe(200);
  });

  it("create-property, create-number (owned and pool), flags given instead of the environment", { timeout: SLOW }, async () => {
    const prop = await ok(["--url", baseUrl, "--token", ADMIN_TOKEN, "create-property", account.AccountSid, "--name", "Harbour View"], {
      env: { SWITCHBOARD_URL: "", SWITCHBOARD_ADMIN_TOKEN: "" },
    });
    expect(prop).toEqual({
      PropertySid: expect.stringMatching(SID_RE("PR")),
      AccountSid: account.AccountSid,
      Name: "Harbour View",
      SmsEnabled: true,
      Created: Math.floor(t.clock.now().getTime() / 1000),
    });
    propertySid = prop.PropertySid;

    ownedNumber = "+447700960555";
    const owned = await ok(["create-number", ownedNumber, "--account-sid", account.AccountSid]);
    expect(owned).toEqual({ Number: ownedNumber, AccountSid: account.AccountSid, Friendly: "", AddressSid: "" });
    const pool = await ok(["create-number", POOL]);
    expect(pool).toEqual({ Number: POOL, AccountSid: "", Friendly: "", AddressSid: "" });

    const listed = await v2("GET", `/v2/Accounts/${account.AccountSid}/Numbers`, basic(account.AccountSid, account.Token));
    expect(listed.json.Numbers.map((n: any) => n.Number)).toEqual([ownedNumber]);
  });

  it("a US recipient gets the pool number as sender; list-handset-messages shows it, times as numbers", { timeout: SLOW }, async () => {
    const sent = await v2("POST", `/v2/Properties/${propertySid}/Messages`, basic(account.AccountSid, account.Token), {
      To: HANDSET,
      Text: "Your room is ready",
    });
    expect(sent.status, JSON.stringify(sent.json)).toBe(200);
    expect(sent.json.From).toBe(POOL);
    while ((await t.engine!.dispatcher.tick()) > 0) {
      /* submit every due message */
    }
    const got = await ok(["list-handset-messages", HANDSET.slice(1)]);
    expect(got.Messages).toEqual([
      { MessageSid: sent.json.MessageSid, From: POOL, To: HANDSET, Text: "Your room is ready", Received: Math.floor(t.clock.now().getTime() / 1000) },
    ]);

    const inbound = await ok(["inject-inbound", "--from", HANDSET, "--to", POOL, "--text", "Thanks!"]);
    expect(inbound).toEqual({ MessageSid: expect.stringMatching(SID_RE("MG")), InReplyTo: sent.json.MessageSid });

    const hooks = await ok(["list-webhook-deliveries", sent.json.MessageSid]);
    expect(hooks).toEqual({ Deliveries: [] });
  });

  it("rotate-token: the old token stops working on /v2, the new one works", { timeout: SLOW }, async () => {
    const oldAuth = basic(account.AccountSid, account.Token);
    const rotated = await ok(["rotate-token", account.AccountSid]);
    expect(Object.keys(rotated)).toEqual(["AccountSid", "Token"]);
    expect(rotated.AccountSid).toBe(account.AccountSid);
    expect(rotated.Token).toHaveLength(40);
    expect(rotated.Token).not.toBe(account.Token);

    const old = await v2("GET", `/v2/Accounts/${account.AccountSid}/Numbers`, oldAuth);
    expect(old.status).toBe(401);
    expect(old.json.ResponseStatus.ErrorCode).toBe("Unauthorized");
    const fresh = await v2("GET", `/v2/Accounts/${account.AccountSid}/Numbers`, basic(account.AccountSid, rotated.Token));
    expect(fresh.status).toBe(200);
    account.Token = rotated.Token;
  });

  it("review flow: the account adds an address, the operator finds it with list-addresses and approves it", { timeout: SLOW }, async () => {
    const auth = basic(account.AccountSid, account.Token);
    expect(await ok(["list-addresses"])).toEqual({ Addresses: [], TotalCount: 0 });
    // No PostalCode for a US address: it waits for an operator's review.
    const added = await v2("POST", `/v2/Accounts/${account.AccountSid}/Addresses`, auth, {
      Friendly: "HQ",
      Line1: "1 Harbour Way",
      City: "San Francisco",
      CountryCode: "US",
    });
    expect(added.status, JSON.stringify(added.json)).toBe(200);
    expect(added.json.Status).toBe("Pending");

    const queue = await ok(["list-addresses", "--status", "Pending"]);
    expect(queue).toEqual({ Addresses: [added.json], TotalCount: 1 });
    const [found] = queue.Addresses;
    expect(await ok(["list-addresses", "--account-sid", account.AccountSid])).toEqual(queue);

    const approved = await ok(["approve-address", found.AddressSid]);
    expect(approved).toEqual({ ...added.json, Status: "Active" });
    expect((await v2("GET", `/v2/Addresses/${found.AddressSid}`, auth)).json.Status).toBe("Active");
    expect(await ok(["list-addresses"])).toEqual({ Addresses: [], TotalCount: 0 });
    expect(await ok(["list-addresses", "--status", "Active", "--results-count", "10"])).toEqual({ Addresses: [approved], TotalCount: 1 });

    const bad = await fails(["list-addresses", "--status", "Approved"]);
    expect(bad.code).toBe(1);
    expect(bad.status).toEqual({
      ErrorCode: "InvalidParameter",
      Message: 'Status must be Pending, Active, Rejected or All, not "Approved".',
      Errors: [{ FieldName: "Status", ErrorCode: "InvalidParameter", Message: 'Status must be Pending, Active, Rejected or All, not "Approved".' }],
    });
  });

  it("sender ID review: list-sender-ids, approve-sender-id, reject-sender-id; a second review is refused", { timeout: SLOW }, async () => {
    const auth = basic(account.AccountSid, account.Token);
    const apply = async (name: string) => {
      const res = await v2("POST", `/v2/Accounts/${account.AccountSid}/SenderIds`, auth, { SenderId: name, Country: "AU", UseCase: "Booking reminders" });
      expect(res.status, JSON.stringify(res.json)).toBe(200);
      return res.json;
    };
    const x = await apply("CliShop");
    const y = await apply("CliBank");
    expect((await ok(["list-sender-ids"])).SenderIds.map((s: any) => s.SenderIdSid).sort()).toEqual([x.SenderIdSid, y.SenderIdSid].sort());
    expect(await ok(["approve-sender-id", x.SenderIdSid])).toEqual({ ...x, Status: "Registered" });
    expect(await ok(["reject-sender-id", y.SenderIdSid])).toEqual({ ...y, Status: "Rejected" });
    const again = await fails(["approve-sender-id", y.SenderIdSid]);
    expect([again.code, again.status.ErrorCode]).toEqual([1, "SenderIdNotPending"]);
    expect(await ok(["list-sender-ids", "--status", "Registered", "--account-sid", account.AccountSid])).toEqual({
      SenderIds: [{ ...x, Status: "Registered" }],
      TotalCount: 1,
    });
    expect(await ok(["list-sender-ids"])).toEqual({ SenderIds: [], TotalCount: 0 });
  });

  it("address review: reject-address, review-address --status; a second review is refused", { timeout: SLOW }, async () => {
    const auth = basic(account.AccountSid, account.Token);
    const add = async () => {
      const res = await v2("POST", `/v2/Accounts/${account.AccountSid}/Addresses`, auth, { Line1: "2 Harbour Way", City: "San Francisco", CountryCode: "US" });
      expect(res.status, JSON.stringify(res.json)).toBe(200);
      expect(res.json.Status).toBe("Pending");
      return res.json.AddressSid as string;
    };
    const b = await add();
    const c = await add();
    // Both added in the same (test clock) second: oldest first cannot tell them apart.
    expect((await ok(["list-addresses"])).Addresses.map((x: any) => x.AddressSid).sort()).toEqual([b, c].sort());

    expect(await ok(["reject-address", b])).toMatchObject({ AddressSid: b, Status: "Rejected" });
    expect(await ok(["review-address", c, "--status", "Rejected"])).toMatchObject({ AddressSid: c, Status: "Rejected" });

    const again = await fails(["approve-address", b]);
    expect(again.code).toBe(1);
    expect(again.status.ErrorCode).toBe("AddressNotPending");
    expect(again.status.Message).toContain(b);
    expect(await ok(["list-addresses", "--status", "Rejected"])).toMatchObject({ TotalCount: 2 });
    expect(await ok(["list-addresses"])).toEqual({ Addresses: [], TotalCount: 0 });
  });

  it("list-accounts, get-account, list-properties and list-numbers show what was set up, without secrets", { timeout: SLOW }, async () => {
    const accounts = await ok(["list-accounts"]);
    const created = accounts.Accounts[0].Created;
    expect(accounts).toEqual({
      Accounts: [{ AccountSid: account.AccountSid, Name: "Acme Hotels", SmsEnabled: true, Created: created, RestCompatibility: "None", ...CONSENT_DEFAULTS }],
      TotalCount: 1,
    });
    expect(created).toBe(Math.floor(t.clock.now().getTime() / 1000));
    // GetAccount also shows today's use: with no daily quota set, the segments of what the account
    // stored since midnight UTC (the one-segment send above).
    expect(await ok(["get-account", account.AccountSid])).toEqual({ ...accounts.Accounts[0], SegmentsToday: 1 });
    expect(JSON.stringify(accounts)).not.toContain(account.Token);
    expect(JSON.stringify(accounts)).not.toContain(account.WebhookSecret);

    expect(await ok(["list-properties", account.AccountSid])).toEqual({
      Properties: [{ PropertySid: propertySid, AccountSid: account.AccountSid, Name: "Harbour View", SmsEnabled: true, Created: created }],
      TotalCount: 1,
    });
    // The pool number holds the lease the US send above took.
    const numbers = { Friendly: "", AddressSid: "", Created: created };
    expect(await ok(["list-numbers"])).toEqual({
      Numbers: [
        { Number: POOL, AccountSid: "", ...numbers, Pool: true, Leased: true, LiveLeases: 1 },
        { Number: ownedNumber, AccountSid: account.AccountSid, ...numbers, Pool: false, Leased: false, LiveLeases: 0 },
      ],
      TotalCount: 2,
    });
    expect((await ok(["list-numbers", "--no-pool"])).Numbers.map((n: any) => n.Number)).toEqual([ownedNumber]);
    expect((await ok(["list-numbers", "--pool"])).Numbers.map((n: any) => n.Number)).toEqual([POOL]);

    const missing = await fails(["get-account", `AC${"0".repeat(30)}`]);
    expect(missing.code).toBe(1);
    expect(missing.status).toEqual({ ErrorCode: "NotFound", Message: `Account AC${"0".repeat(30)} was not found.`, Errors: [] });
  });

  it("update-account --no-sms-enabled disables sending; --sms-enabled and --name bring it back renamed", { timeout: SLOW }, async () => {
    const off = await ok(["update-account", account.AccountSid, "--no-sms-enabled"]);
    const Created = off.Created;
    expect(off).toEqual({ AccountSid: account.AccountSid, Name: "Acme Hotels", SmsEnabled: false, Created, RestCompatibility: "None", ...CONSENT_DEFAULTS });
    const refused = await v2("POST", `/v2/Properties/${propertySid}/Messages`, basic(account.AccountSid, account.Token), { To: HANDSET, Text: "x" });
    expect(refused.json.ResponseStatus.ErrorCode).toBe("SmsNotEnabled");

    const on = await ok(["update-account", account.AccountSid, "--sms-enabled", "--name", "Acme Resorts"]);
    expect(on).toEqual({ AccountSid: account.AccountSid, Name: "Acme Resorts", SmsEnabled: true, Created, RestCompatibility: "None", ...CONSENT_DEFAULTS });
    const fone = await ok(["update-account", account.AccountSid, "--rest-compatibility", "FoneDynamics"]);
    expect(fone).toEqual({ ...on, RestCompatibility: "FoneDynamics" });
    expect(await ok(["update-account", account.AccountSid, "--rest-compatibility", "None"])).toEqual(on);
    const kept = await ok(["update-account", account.AccountSid, "--retention-days", "90", "--redact-after-days", "7"]);
    expect(kept).toEqual({ ...on, RetentionDays: 90, RedactAfterDays: 7 });
    expect(await ok(["update-account", account.AccountSid, "--retention-days", "0", "--redact-after-days", "0"])).toEqual(on);
    const prop = await ok(["update-property", propertySid, "--json", '{"Name":"From JSON","SmsEnabled":false}', "--name", "Flag wins"]);
    expect(prop).toEqual({ PropertySid: propertySid, AccountSid: account.AccountSid, Name: "Flag wins", SmsEnabled: false, Created });
  });

  it("update-account sets the consent and destination settings; a bad country code is the 400 naming the field", { timeout: SLOW }, async () => {
    const set = await ok([
      "update-account",
      account.AccountSid,
      "--allowed-countries",
      '["au","NZ"]',
      "--opt-out-text",
      "Bye from Acme. Reply START to rejoin.",
      "--no-opt-out-keywords",
      "--no-smart-encoding",
    ]);
    expect(set).toMatchObject({
      AllowedCountries: ["AU", "NZ"],
      OptOutText: "Bye from Acme. Reply START to rejoin.",
      OptOutKeywords: false,
      SmartEncoding: false,
    });
    const back = await ok(["update-account", account.AccountSid, "--allowed-countries", "[]", "--opt-out-text", "", "--opt-out-keywords", "--smart-encoding"]);
    expect(back).toMatchObject(CONSENT_DEFAULTS);
    const bad = await fails(["update-account", account.AccountSid, "--allowed-countries", '["UK"]']);
    expect(bad.code).not.toBe(0);
    expect(bad.status.Errors).toEqual([
      {
        FieldName: "AllowedCountries",
        ErrorCode: "InvalidCountryCode",
        Message: 'AllowedCountries: "UK" is not an ISO 3166-1 alpha-2 country code (e.g. GB, AU, US).',
      },
    ]);
  });

  it("update-account sets and clears the low-balance settings (docs/billing.md#low-balance); a bad URI is the 400 naming it", { timeout: SLOW }, async () => {
    // A negative amount goes with "=", so that it is not read as an option.
    const set = await ok(["update-account", account.AccountSid, "--low-balance-threshold=-2.5", "--low-balance-webhook-uri", "https://hooks.example.com/low"]);
    expect(set).toMatchObject({ LowBalanceThreshold: "-2.50", LowBalanceWebhookUri: "https://hooks.example.com/low" });
    const cleared = await ok(["update-account", account.AccountSid, "--low-balance-threshold", "", "--low-balance-webhook-uri", ""]);
    expect(cleared).toMatchObject({ LowBalanceWebhookUri: "" });
    expect(cleared).not.toHaveProperty("LowBalanceThreshold");
    const bad = await fails(["update-account", account.AccountSid, "--low-balance-webhook-uri", "ftp://hooks.example.com"]);
    expect(bad.code).not.toBe(0);
    expect(bad.status.Errors).toEqual([
      { FieldName: "LowBalanceWebhookUri", ErrorCode: "InvalidWebhookUri", Message: "LowBalanceWebhookUri must be an absolute http or https URI." },
    ]);
  });

  it("set-smpp-credentials (PUT), get-smpp-credentials and list-smpp-binds: the password never printed", { timeout: SLOW }, async () => {
    const set = await cli([
      "set-smpp-credentials",
      account.AccountSid,
      "--system-id",
      "cli-acme",
      "--password",
      "s3cret",
      "--property-sid",
      propertySid,
      "--allowed-addresses",
      "203.0.113.0/24",
      "--allowed-addresses",
      "10.1.0.0/16",
      "--deliver-replies",
    ]);
    expect(set.code, set.stderr).toBe(0);
    expect(set.stdout).not.toContain("s3cret");
    expect(JSON.parse(set.stdout)).toEqual({
      AccountSid: account.AccountSid,
      SystemId: "cli-acme",
      PropertySid: propertySid,
      MaxBinds: 4,
      AllowedAddresses: ["203.0.113.0/24", "10.1.0.0/16"],
      DeliverReplies: true,
      Updated: Math.floor(t.clock.now().getTime() / 1000),
    });
    expect(await ok(["get-smpp-credentials", account.AccountSid])).toMatchObject({ SystemId: "cli-acme", DeliverReplies: true });
    expect(await ok(["list-smpp-binds"])).toEqual({ Binds: [] });
  });

  it("list-emails pages with integer options", { timeout: SLOW }, async () => {
    expect(await ok(["list-emails", "--results-count", "5", "--results-skip", "0"])).toEqual({ Emails: [], TotalCount: 0 });
  });
});

describe("errors", () => {
  it(
    "carriers and routes: add, list (no password), replace the routes from a JSON file, show them, remove only an unrouted carrier",
    { timeout: SLOW * 3 },
    async () => {
      const added = await ok(["add-carrier", "--name", "cli-smsc", "--kind", "smpp", "--carrier-url", "smpp://sys:hunter2@127.0.0.1:2775", "--window", "5"]);
      expect(added).toEqual({
        CarrierSid: expect.stringMatching(SID_RE("CR")),
        Name: "cli-smsc",
        Kind: "smpp",
        Url: "smpp://sys@127.0.0.1:2775",
        Tps: 0,
        Window: 5,
        Link: "-",
        CostCard: "",
        // The route table is empty: the default route still takes every message (issue 41).
        Warning: expect.stringMatching(
          /^The route table is empty: the environment's carrier \(the default route\) keeps taking every message and cli-smsc gets none/,
        ),
      });
      // Its cost card (issue 43): --cost-card names a rate card, "" clears it, an unknown one is refused naming CostCard.
      await ok(["replace-rate-card", "cli-cost", "--json", '{"Rates":[{"Prefix":"+61","PricePerSegment":"0.012"}]}']);
      expect((await ok(["update-carrier", added.CarrierSid, "--cost-card", "cli-cost"])).CostCard).toBe("cli-cost");
      const unknownCard = await fails(["update-carrier", added.CarrierSid, "--cost-card", "nope"]);
      expect([unknownCard.code, unknownCard.status.Errors]).toEqual([
        1,
        [{ FieldName: "CostCard", ErrorCode: "InvalidParameter", Message: 'CostCard "nope" is not a rate card.' }],
      ]);
      expect((await ok(["update-carrier", added.CarrierSid, "--cost-card", ""])).CostCard).toBe("");
      const listed = await ok(["list-carriers"]);
      expect(listed.Carriers.map((c: any) => c.Name)).toContain("cli-smsc");
      expect(JSON.stringify(listed)).not.toContain("hunter2");
      const file = join(scratch, "routes.json");
      const table = { Routes: [{ Prefix: "+61", Carriers: [added.CarrierSid], Strategy: "LeastCost" }] };
      writeFileSync(file, JSON.stringify(table));
      expect(await ok(["replace-routes", "--json-file", "routes.json"])).toEqual(table);
      expect(await ok(["get-routes"])).toEqual(table);
      const refused = await fails(["remove-carrier", added.CarrierSid]);
      expect(refused.code).toBe(1);
      expect(refused.status.ErrorCode).toBe("CarrierInUse");
      await ok(["replace-routes", "--json", '{"Routes":[]}']);
      expect(await ok(["remove-carrier", added.CarrierSid])).toEqual({ CarrierSid: added.CarrierSid });
    },
  );

  it("a wrong admin token: exit 1, ErrorCode Unauthorized on stderr", { timeout: SLOW }, async () => {
    const r = await fails(["create-account", "--name", "Nope"], { env: { SWITCHBOARD_ADMIN_TOKEN: "not-the-operator-token" } });
    expect(r.code).toBe(1);
    expect(r.status).toEqual({ ErrorCode: "Unauthorized", Message: expect.stringContaining("Bearer"), Errors: [] });
  });

  it("an API field error: exit 1 with the field violation", { timeout: SLOW }, async () => {
    const r = await fails(["create-number", "12345"]);
    expect(r.code).toBe(1);
    expect(r.status.ErrorCode).toBe("InvalidParameter");
    expect(r.status.Errors).toEqual([{ FieldName: "Number", ErrorCode: "InvalidParameter", Message: expect.stringContaining("E164") }]);
  });

  it("usage errors: exit 2, ErrorCode UsageError, nothing sent", { timeout: SLOW }, async () => {
    const unknownOption = await fails(["create-account", "--bogus", "x"]);
    expect(unknownOption.code).toBe(2);
    expect(unknownOption.status.ErrorCode).toBe("UsageError");
    expect(unknownOption.status.Message).toContain("'--bogus'");

    const cases: [string[], string][] = [
      [["launch-rockets"], "Unknown command 'launch-rockets'"],
      [["rotate-token"], "rotate-token needs <AccountSid>"],
      [["rotate-token", "AC1", "AC2"], "Unexpected argument 'AC2'"],
      [["list-emails", "--results-count", "many"], "--results-count takes a number"],
      [["create-account", "--json", "[1]"], "--json must be a JSON object"],
      [["create-account", "--json", '{"Nmae":"typo"}'], "Nmae"],
      [[], "No command given"],
    ];
    const results = await Promise.all(cases.map(([args]) => fails(args)));
    cases.forEach(([args, message], i) => {
      expect(results[i].code, args.join(" ")).toBe(2);
      expect(results[i].status.ErrorCode).toBe("UsageError");
      expect(results[i].status.Message).toContain(message);
    });
  });

  it("no token anywhere: exit 2 naming --token and SWITCHBOARD_ADMIN_TOKEN", { timeout: SLOW }, async () => {
    const r = await fails(["rotate-token", "AC1"], { env: { SWITCHBOARD_ADMIN_TOKEN: "" } });
    expect(r.code).toBe(2);
    expect(r.status.Message).toContain("SWITCHBOARD_ADMIN_TOKEN");
  });

  it("without --token or SWITCHBOARD_ADMIN_TOKEN, the .switchboard/admin-token npm start wrote in the current folder", { timeout: SLOW }, async () => {
    const project = join(scratch, "project");
    mkdirSync(join(project, ".switchboard"), { recursive: true });
    writeFileSync(join(project, ".switchboard/admin-token"), `${ADMIN_TOKEN}\n`);
    const emails = await ok(["list-emails"], { cwd: project, env: { SWITCHBOARD_ADMIN_TOKEN: "" } });
    expect(emails).toEqual({ Emails: [], TotalCount: 0 });
  });

  it("an unreachable URL: exit 3, ErrorCode ConnectionFailed", { timeout: SLOW }, async () => {
    const dead = `http://127.0.0.1:${await freePort()}`;
    const r = await fails(["--url", dead, "rotate-token", `AC${"0".repeat(30)}`]);
    expect(r.code).toBe(3);
    expect(r.status.ErrorCode).toBe("ConnectionFailed");
    expect(r.status.Message).toContain(dead);
    expect(r.status.Message).toContain("ECONNREFUSED");
  });
});

describe("help", () => {
  it("every AdminService method is a command whose summary is the first paragraph of its proto comment", () => {
    const comments = loadProtoComments();
    const commands = adminCommands();
    for (const m of AdminService.methods) {
      const comment = comments.get(methodKey(m));
      expect(comment, `AdminService.${m.name} needs a leading comment in proto/switchboard/admin/v1/admin.proto (then npm run generate)`).toBeTruthy();
      const command = commands.find((c) => c.name === kebab(m.name));
      expect(command, kebab(m.name)).toBeDefined();
      expect(command!.summary).toBe(comment!.split("\n\n")[0]);
      expect(command!.summary).toBe(summaryOf(comment));
    }
    // The new read methods are commands too.
    for (const name of ["list-accounts", "get-account", "list-properties", "list-numbers", "list-addresses"]) {
      expect(commands.map((c) => c.name)).toContain(name);
    }
    // A two-paragraph comment gives its first paragraph; the OpenAPI description keeps both.
    expect(commands.find((c) => c.name === "list-numbers")!.summary).toBe(
      "Lists numbers, owned and in the lease pool, with how many live leases each pool number has.",
    );
    // Without the descriptor set (no npm run generate) the commands still exist, with a plain summary.
    expect(adminCommands(new Map()).find((c) => c.name === "list-accounts")!.summary).toBe("Calls AdminService/ListAccounts.");
  });

  it("--help lists every command with its summary on stdout, exit 0", { timeout: SLOW }, async () => {
    const r = await cli(["--help"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^Usage: switchboard /);
    for (const c of adminCommands()) expect(r.stdout).toMatch(new RegExp(`^  ${c.name} +${c.summary.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`, "m"));
    expect((await cli(["help"])).stdout).toBe(r.stdout);
  });

  it("<command> --help shows its arguments, options and REST equivalent", { timeout: SLOW }, async () => {
    const r = await cli(["create-number", "--help"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("Usage: switchboard create-number <Number> [options]");
    expect(r.stdout).toContain("REST: POST /admin/v1/Numbers");
    expect(r.stdout).toMatch(/--account-sid ACCOUNTSID +owning account; omit for the lease pool/);
    const update = await cli(["help", "update-account"]);
    expect(update.stdout).toContain("Usage: switchboard update-account <AccountSid> [options]");
    expect(update.stdout).toContain("--[no-]sms-enabled");
  });
});
