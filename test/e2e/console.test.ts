/**
 * The operator console (docs/console.md) in Debian's headless Chromium, against a listening
 * service whose data is made through the API: sign-in (a wrong token, then the right one), every
 * page with its data, a message found by To with its timeline (the delivery and a webhook attempt,
 * then a Retry), an address approved and another rejected by clicks (the API then says so), a
 * token rotated from the page (the API then refuses the old one), a state change without the CSRF
 * token refused, and sign-out. axe-core checks every page (no serious or critical violation), the
 * page loads nothing from elsewhere and breaks no Content-Security-Policy rule, and each page's
 * screenshot is taken: into docs/console/ for docs/console.md with CONSOLE_SHOTS=1 (`CONSOLE_SHOTS=1
 * npx vitest run test/e2e/console.test.ts`), else into a temporary folder, so that a test run leaves
 * the working tree as it found it.
 */
import { mkdirSync, rmSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Browser, Page } from "playwright-core";
import { checkAccessibility } from "../support/axe.js";
import { launchChromium } from "../support/chromium.js";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { FIRST_PAGE_BUDGET, firstPageBytes } from "../../scripts/build-console.mjs";
import { dbKind } from "../support/db.js";
import { ADMIN_TOKEN, addPoolNumbers, basic, createTenant, createTestApp, simulatorInbound, type Tenant, type TestApp } from "../support/harness.js";
import { buildService } from "../support/service.js";
import { without } from "../support/system-packages.js";
import { startReceiver, type Receiver } from "../support/webhook-receiver.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const SHOTS = process.env.CONSOLE_SHOTS === "1" ? join(ROOT, "docs", "console") : join(tmpdir(), `switchboard-console-shots-${process.pid}`);
const TO = "+447700900201";
const LEASED_TO = "+447700900202";

describe.skipIf(without("chromium"))(`the operator console in headless Chromium (${dbKind()})`, () => {
  let t: TestApp;
  let rx: Receiver;
  let tenant: Tenant;
  let browser: Browser;
  let page: Page;
  let base: string;
  let messageSid: string;
  let leasedSid: string;
  let replySid: string;
  const addresses: string[] = [];
  const senderIds: string[] = [];
  const requested: string[] = [];
  const problems: string[] = [];
  let badRequests = 0;

  const api = (method: string, url: string, auth: string, payload?: object) =>
    t.app.inject({ method: method as "GET", url, headers: { authorization: auth }, ...(payload ? { payload } : {}) });

  async function shoot(name: string): Promise<void> {
    await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
  }

  /** Waits for the page's status line (role="status", read out by screen readers) to say exactly this. */
  async function announced(text: string | RegExp): Promise<void> {
    const exact = typeof text === "string" ? new RegExp(`^${text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`) : text;
    await page.getByRole("status").filter({ hasText: exact }).waitFor({ timeout: 10_000 });
  }

  async function open(link: string, heading: string | RegExp): Promise<void> {
    await page.getByRole("navigation", { name: "Console pages" }).getByRole("link", { name: link }).click();
    await page.getByRole("heading", { level: 2, name: heading }).waitFor();
  }

  beforeAll(async () => {
    // `npm start`'s build step: the service and the console (skipped when the console is up to date).
    buildService();
    mkdirSync(SHOTS, { recursive: true });
    rx = await startReceiver();
    rx.answer = () => 500;
    const now = new Date(Math.floor(Date.now() / 1000) * 1000);
    // A failing webhook call is given up at once, so the message page has a Failed call to retry.
    t = await createTestApp({ now, webhookAllowPrivate: true, engine: { webhooks: { retryForMs: 0 } } });
    tenant = await createTenant(t.app);
    await addPoolNumbers(t.app, 2, 40);
    const sent = await api("POST", `/v2/Properties/${tenant.propertySid}/Messages`, tenant.auth, {
      From: tenant.ownedNumber,
      To: TO,
      Text: "Your table is ready",
      DeliveryReceiptWebhookUri: rx.url("/receipts"),
    });
    expect(sent.statusCode, sent.body).toBe(200);
    messageSid = sent.json().MessageSid;
    expect(await t.engine!.dispatcher.tick()).toBe(1);
    await vi.waitFor(async () => expect((await api("GET", `/v2/Messages/${messageSid}`, tenant.auth)).json().Status).toBe("Delivered"), {
      timeout: 5000,
      interval: 10,
    });
    expect(await t.engine!.webhooks.tick()).toBe(1);
    // A send from a leased pool number, and the recipient's reply on that lease.
    const viaLease = await api("POST", `/v2/Properties/${tenant.propertySid}/Messages`, tenant.auth, { To: LEASED_TO, Text: "Reply YES to confirm" });
    expect(viaLease.statusCode, viaLease.body).toBe(200);
    leasedSid = viaLease.json().MessageSid;
    expect(await t.engine!.dispatcher.tick()).toBe(1);
    await vi.waitFor(async () => expect((await api("GET", `/v2/Messages/${leasedSid}`, tenant.auth)).json().Status).toBe("Delivered"), {
      timeout: 5000,
      interval: 10,
    });
    replySid = (await simulatorInbound(t.app, LEASED_TO, viaLease.json().From, "Sounds good, see you then")).MessageSid;
    expect(replySid).toMatch(/^MG/);
    for (const [Friendly, Line1] of [
      ["Head office", "1 Market St"],
      ["Warehouse", "99 Dock Rd"],
    ]) {
      const res = await api("POST", `/v2/Accounts/${tenant.accountSid}/Addresses`, tenant.auth, {
        Friendly,
        Line1,
        City: "San Francisco",
        CountryCode: "US",
        // No postal code where the country has them: the address waits for review.
      });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json().Status).toBe("Pending");
      addresses.push(res.json().AddressSid);
    }
    for (const SenderId of ["AcmeBank", "AcmeShop"]) {
      const res = await api("POST", `/v2/Accounts/${tenant.accountSid}/SenderIds`, tenant.auth, { SenderId, Country: "AU", UseCase: "Booking reminders" });
      expect(res.statusCode, res.body).toBe(200);
      senderIds.push(res.json().SenderIdSid);
    }
    const carrier = await api("POST", "/admin/v1/Carriers", `Bearer ${ADMIN_TOKEN}`, { Name: "sim-a", Kind: "simulator", Url: "simulator://" });
    expect(carrier.statusCode, carrier.body).toBe(200);
    const opt = await api("POST", `/v2/Accounts/${tenant.accountSid}/OptOuts`, tenant.auth, { Number: "+61412345678" });
    expect(opt.statusCode, opt.body).toBe(200);

    await t.app.listen({ port: 0, host: "127.0.0.1" });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.on("request", (r) => requested.push(r.url()));
    page.on("pageerror", (e) => problems.push(String(e)));
    // The browser logs every refused call: the wrong token's 401, and the route form's one deliberate 400 (counted).
    page.on("console", (m) => {
      if (m.type() !== "error" || /401 \(Unauthorized\)/.test(m.text())) return;
      if (/400 \(Bad Request\)/.test(m.text())) badRequests++;
      else problems.push(m.text());
    });
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await t?.close();
    await rx?.close();
    if (process.env.CONSOLE_SHOTS !== "1") rmSync(SHOTS, { recursive: true, force: true });
  });

  it("stays within its size budget: the first page's files, gzip", () => {
    const parts = firstPageBytes(join(ROOT, "dist", "console"));
    const total = parts.reduce((n, p) => n + p.gzip, 0);
    console.log(`console first page: ${total} bytes gzip (${parts.map((p) => `${p.file} ${p.gzip}`).join(", ")})`);
    expect(parts.some((p) => p.file.endsWith(".js"))).toBe(true);
    expect(total).toBeLessThanOrEqual(FIRST_PAGE_BUDGET);
  });

  it("refuses a wrong token with the API's message, and signs in with the right one", async () => {
    await page.goto(`${base}/console`, { waitUntil: "load" });
    await page.getByLabel("Operator token").waitFor();
    await checkAccessibility(page, "sign-in");
    await shoot("sign-in");
    await page.getByLabel("Operator token").fill("not-the-token");
    await page.getByRole("button", { name: "Sign in" }).click();
    await expect(page.getByRole("alert").innerText()).resolves.toBe("Operator calls need `Authorization: Bearer <SWITCHBOARD_ADMIN_TOKEN>`.");
    await page.getByLabel("Operator token").fill(ADMIN_TOKEN);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { level: 2, name: "Overview" }).waitFor();
    // The cookie is HttpOnly: the page's script cannot read it.
    expect(await page.evaluate(() => (globalThis as unknown as { document: { cookie: string } }).document.cookie)).toBe("");
    const [cookie] = await page.context().cookies();
    expect(cookie).toMatchObject({ name: "sb_console", httpOnly: true, sameSite: "Strict", path: "/" });
  }, 60_000);

  it("Overview: the hour's chart, the queue, the webhook backlog and the carriers' links", async () => {
    await page.getByTestId("queue-depth").waitFor();
    // The figures the API gives any operator client.
    const stats = (await api("GET", "/admin/v1/Stats", `Bearer ${ADMIN_TOKEN}`)).json();
    expect(await page.getByTestId("queue-depth").innerText()).toBe(String(stats.QueueDepth));
    expect(await page.getByTestId("webhook-backlog").innerText()).toBe(String(stats.WebhookBacklog));
    expect(await page.locator(".chart canvas").count()).toBe(1);
    await expect(page.locator(".legend").innerText()).resolves.toContain("Accepted: 2 in the hour");
    await expect(page.locator(".legend").innerText()).resolves.toContain("Delivered: 2 in the hour");
    await expect(page.getByRole("region", { name: "Carrier links" }).innerText()).resolves.toContain("sim-a");
    await checkAccessibility(page, "overview");
    await shoot("overview");
  }, 60_000);

  it("Messages: found by To; its timeline shows the delivery and the webhook attempt; Retry queues the failed call again", async () => {
    await open("Messages", "Messages");
    await page.getByLabel("To", { exact: true }).fill(TO);
    await page.getByRole("button", { name: "Search" }).click();
    // The search's answer (before it, the page lists every message).
    await page.getByText("Messages 1 to 1 of 1, newest first.").waitFor();
    const link = page.getByRole("link", { name: messageSid });
    expect(await page.getByRole("region", { name: "Matching messages" }).locator("tbody tr").count()).toBe(1);
    await checkAccessibility(page, "messages");
    await shoot("messages");
    await link.click();
    await page.getByRole("heading", { level: 2, name: `Message ${messageSid}` }).waitFor();
    const timeline = await page.getByTestId("timeline").innerText();
    expect(timeline).toMatch(/Accepted[\s\S]*Submitted[\s\S]*Delivered[\s\S]*WebhookAttempt/);
    expect(timeline).toMatch(/DeliveryReceipt POST .*\/receipts: HTTP 500 in \d+ ms/);
    await checkAccessibility(page, "message");
    await shoot("message");
    await page.getByRole("button", { name: /^Retry webhook call msg_/ }).click();
    await announced(/^Webhook call msg_\S+ is queued again\.$/);
    const calls = (await api("GET", `/admin/v1/Messages/${messageSid}/Webhooks`, `Bearer ${ADMIN_TOKEN}`)).json().Deliveries;
    expect(calls.map((c: { Status: string }) => c.Status)).toStrictEqual(["Pending"]);
    // The leased send's page shows the reply on its lease.
    await page.goto(`${base}/console/#/messages/${leasedSid}`);
    await page.getByRole("link", { name: replySid }).waitFor();
  }, 60_000);

  it("Addresses: one approved and one rejected by clicks, which the API then shows", async () => {
    await open("Addresses", "Addresses");
    await page.getByRole("button", { name: `Approve ${addresses[0]}` }).waitFor();
    await checkAccessibility(page, "addresses");
    await shoot("addresses");
    await page.getByRole("button", { name: `Approve ${addresses[0]}` }).click();
    await announced(`Address ${addresses[0]} is approved (Active).`);
    await page.getByRole("button", { name: `Reject ${addresses[1]}` }).click();
    await announced(`Address ${addresses[1]} is rejected.`);
    await page.getByText("No address waits for review.").waitFor();
    const status = async (sid: string) => (await api("GET", `/v2/Addresses/${sid}`, tenant.auth)).json().Status;
    expect([await status(addresses[0]), await status(addresses[1])]).toStrictEqual(["Active", "Rejected"]);
  }, 60_000);

  it("Sender IDs: one registered and one rejected by clicks, which the API then shows; the registered one sends to AU", async () => {
    await open("Sender IDs", "Sender IDs");
    const register = page.getByRole("button", { name: `Register AcmeBank for AU (${senderIds[0]})` });
    await register.waitFor();
    await checkAccessibility(page, "sender-ids");
    await shoot("sender-ids");
    await register.click();
    await announced(`Sender ID AcmeBank (AU, ${senderIds[0]}) is registered.`);
    await page.getByRole("button", { name: `Reject AcmeShop for AU (${senderIds[1]})` }).click();
    await announced(`Sender ID AcmeShop (AU, ${senderIds[1]}) is rejected.`);
    await page.getByText("No sender ID waits for review.").waitFor();
    const list = await api("GET", `/v2/Accounts/${tenant.accountSid}/SenderIds`, tenant.auth);
    expect(list.json().SenderIds.map((s: { SenderIdSid: string; Status: string }) => [s.SenderIdSid, s.Status])).toStrictEqual([
      [senderIds[0], "Registered"],
      [senderIds[1], "Rejected"],
    ]);
    const sent = await api("POST", `/v2/Properties/${tenant.propertySid}/Messages`, tenant.auth, { From: "AcmeBank", To: "+61412345670", Text: "hi" });
    expect(sent.statusCode, sent.body).toBe(200);
  }, 60_000);

  it("Numbers: owned and pool numbers with their live leases", async () => {
    await open("Numbers", "Numbers");
    const table = page.getByRole("region", { name: "Numbers" });
    await table.waitFor();
    const text = await table.innerText();
    expect(text).toContain(tenant.ownedNumber);
    expect(text).toContain("+12025550040");
    expect(text).toContain("Lease pool");
    // The pool number lent to the leased send's recipient has its live lease, listed under it on request.
    expect(text).toMatch(/Lease pool\t1 ▸\t/);
    const leased = (await api("GET", `/v2/Messages/${leasedSid}`, tenant.auth)).json().From;
    const disclose = page.getByRole("button", { name: `Show the 1 live lease of ${leased}` });
    expect(await disclose.getAttribute("aria-expanded")).toBe("false");
    await disclose.click();
    expect(await page.getByRole("button", { name: `Hide the 1 live lease of ${leased}` }).getAttribute("aria-expanded")).toBe("true");
    const leases = page.getByRole("table", { name: `Live leases of ${leased}` });
    await leases.waitFor();
    const row = leases.getByRole("row", { name: new RegExp(`^${LEASED_TO.replace("+", "\\+")}`) });
    const cells = await row.getByRole("cell").allInnerTexts();
    expect(cells.slice(0, 3)).toStrictEqual([tenant.accountSid, tenant.propertySid, leasedSid]);
    expect(await leases.getByRole("columnheader").allInnerTexts()).toStrictEqual(["Recipient", "Account", "Property", "Message", "Leased", "Expires"]);
    await checkAccessibility(page, "numbers");
    await shoot("numbers");
  }, 60_000);

  it("Accounts: SMS switched and settings saved from the page, its opt-outs; a token rotated from the page, after which the API refuses the old one", async () => {
    await open("Accounts", "Accounts");
    await page.getByRole("link", { name: "Tenant" }).first().waitFor();
    await checkAccessibility(page, "accounts");
    await shoot("accounts");
    await page.goto(`${base}/console/#/accounts/${tenant.accountSid}`);
    await page.getByRole("button", { name: "Rotate token" }).waitFor();
    await expect(page.getByRole("region", { name: "Opt-out list" }).innerText()).resolves.toContain("+61412345678");
    await checkAccessibility(page, "account");
    await shoot("account");
    // SMS switched off and settings saved from the page, as the API then reads them.
    await page.getByRole("button", { name: "Disable SMS" }).click();
    await page.getByTestId("sms-state").filter({ hasText: "Disabled" }).waitFor();
    await page.getByLabel(/^Allowed countries/).fill("au nz");
    await page.getByLabel(/^Retention in days/).fill("30");
    await page.getByLabel(/^Messages per second handed to carriers/).fill("20");
    await page.getByLabel(/^Daily segment quota/).fill("5000");
    await page.getByLabel(/^Low-balance threshold/).fill("2.5");
    await page.getByLabel(/^Low-balance webhook URI/).fill("https://hooks.example.com/low");
    await page.getByRole("button", { name: "Save settings" }).click();
    await announced("Settings saved.");
    const saved = (await api("GET", `/admin/v1/Accounts/${tenant.accountSid}`, `Bearer ${ADMIN_TOKEN}`)).json();
    expect([
      saved.SmsEnabled,
      saved.AllowedCountries,
      saved.RetentionDays,
      saved.MessagesPerSecond,
      saved.DailySegmentQuota,
      saved.LowBalanceThreshold,
      saved.LowBalanceWebhookUri,
    ]).toStrictEqual([false, ["AU", "NZ"], 30, 20, 5000, "2.50", "https://hooks.example.com/low"]);
    await page.getByRole("button", { name: "Enable SMS" }).click();
    await page.getByTestId("sms-state").filter({ hasText: "Enabled" }).waitFor();
    page.once("dialog", (d) => void d.accept());
    await page.getByRole("button", { name: "Rotate token" }).click();
    const shown = await page.getByTestId("new-token").innerText();
    expect(shown).toMatch(/^[A-Za-z0-9]{40}$/);
    const old = await api("GET", `/v2/Properties/${tenant.propertySid}/Messages`, basic(tenant.accountSid, tenant.token));
    expect(old.statusCode).toBe(401);
    expect(old.json().ResponseStatus.ErrorCode).toBe("Unauthorized");
    expect((await api("GET", `/v2/Properties/${tenant.propertySid}/Messages`, basic(tenant.accountSid, shown))).statusCode).toBe(200);
    tenant.token = shown;
  }, 60_000);

  it("Carriers and routes: the carriers with their links; the route table replaced through its form (a refusal shown by the field it names), as the API then reads it", async () => {
    await open("Carriers and routes", "Carriers and routes");
    await expect(page.getByRole("region", { name: "Carriers" }).innerText()).resolves.toContain("sim-a");
    const carriers = (await api("GET", "/admin/v1/Carriers", `Bearer ${ADMIN_TOKEN}`)).json().Carriers as { Name: string; CarrierSid: string }[];
    const simA = carriers.find((c) => c.Name === "sim-a")!.CarrierSid;
    await page.getByText("No route: the deployment's CARRIER takes every message.").waitFor();
    // With carriers and no route, the page says the default route still takes every message (issue 41).
    await page
      .getByRole("note")
      .getByText(/^The route table is empty: the deployment's CARRIER still takes every message/)
      .waitFor();
    // Saving the first table asks first: it replaces that default route.
    const replacing: string[] = [];
    const acceptReplace = (d: { message(): string; accept(): Promise<void> }) => {
      replacing.push(d.message());
      void d.accept();
    };
    page.on("dialog", acceptReplace);
    // Two routes: +61 round-robin over sim-a, then any destination by failover over sim-a.
    await page.getByRole("button", { name: "Add a route" }).click();
    await page.getByRole("button", { name: "Add a route" }).click();
    const route = (n: number) => page.getByRole("group", { name: `Route ${n}`, exact: true });
    await route(1)
      .getByLabel(/^Prefix/)
      .fill("61x");
    await route(1).getByLabel("Carrier 1", { exact: true }).selectOption(simA);
    await route(1).getByLabel("Strategy", { exact: true }).selectOption("RoundRobin");
    await route(2).getByLabel("Carrier 1", { exact: true }).selectOption(simA);
    await page.getByRole("button", { name: "Save the route table" }).click();
    const message = 'Routes[0].Prefix must be an E164 prefix such as +61 (+ and 1 to 15 digits); got "61x".';
    await page.getByRole("list", { name: "Problems with the route table" }).getByText(`Routes[0].Prefix: ${message}`).waitFor();
    const prefix = route(1).getByLabel(/^Prefix/);
    expect(await prefix.getAttribute("aria-invalid")).toBe("true");
    await expect(page.locator(`#${await prefix.getAttribute("aria-describedby")}`).innerText()).resolves.toBe(message);
    expect((await api("GET", "/admin/v1/Routes", `Bearer ${ADMIN_TOKEN}`)).json()).toStrictEqual({ Routes: [] });
    await checkAccessibility(page, "carriers-error");
    await prefix.fill("+61");
    await page.getByRole("button", { name: "Save the route table" }).click();
    await announced("The route table is replaced.");
    page.off("dialog", acceptReplace);
    expect(replacing).toHaveLength(2);
    expect(replacing[0]).toMatch(/^Replace the default route\?/);
    expect((await api("GET", "/admin/v1/Routes", `Bearer ${ADMIN_TOKEN}`)).json()).toStrictEqual({
      Routes: [
        { Prefix: "+61", Carriers: [simA], Strategy: "RoundRobin" },
        { Carriers: [simA], Strategy: "Failover" },
      ],
    });
    // The form shows the table as saved; moving the catch-all first would shadow +61 (issue 41):
    // refused, naming the route; given a prefix of its own, the moved route saves the new order.
    await route(2).getByRole("button", { name: "Move route 2 up" }).click();
    // Polled: the form re-renders after the click, later on a loaded machine.
    await expect
      .poll(() =>
        route(1)
          .getByLabel(/^Prefix/)
          .inputValue(),
      )
      .toBe("");
    await page.getByRole("button", { name: "Save the route table" }).click();
    await page
      .getByRole("list", { name: "Problems with the route table" })
      .getByText(/^Routes\[1\]: Routes\[1\] \(Prefix \+61, any account\) would never be used: Routes\[0\] \(any destination, any account\) comes first/)
      .waitFor();
    await route(1)
      .getByLabel(/^Prefix/)
      .fill("+64");
    await page.getByRole("button", { name: "Save the route table" }).click();
    await vi.waitFor(async () =>
      expect((await api("GET", "/admin/v1/Routes", `Bearer ${ADMIN_TOKEN}`)).json().Routes.map((r: { Prefix?: string }) => r.Prefix ?? "")).toStrictEqual([
        "+64",
        "+61",
      ]),
    );
    // A carrier's cost card (issue 43): a select of the rate cards, saved on change; "None" clears it.
    const put = await api("PUT", "/admin/v1/RateCards/sim-cost", `Bearer ${ADMIN_TOKEN}`, { Rates: [{ Prefix: "+61", PricePerSegment: "0.012" }] });
    expect(put.statusCode, put.body).toBe(200);
    await page.reload();
    await page.getByRole("heading", { level: 2, name: "Carriers and routes" }).waitFor();
    const costCard = page.getByLabel("Cost card of sim-a", { exact: true });
    await costCard.selectOption("sim-cost");
    await announced("Carrier sim-a costs by rate card sim-cost now.");
    const costOf = async () =>
      ((await api("GET", "/admin/v1/Carriers", `Bearer ${ADMIN_TOKEN}`)).json().Carriers as { Name: string; CostCard: string }[]).find(
        (c) => c.Name === "sim-a",
      )!.CostCard;
    expect(await costOf()).toBe("sim-cost");
    expect(await route(1).getByLabel("Strategy", { exact: true }).locator("option").allInnerTexts()).toContain("LeastCost (the cheapest up by CostCard)");
    await checkAccessibility(page, "carriers");
    await shoot("carriers");
    await costCard.selectOption("");
    await announced("Carrier sim-a has no cost card now.");
    expect(await costOf()).toBe("");
  }, 60_000);

  it("SMPP: the open binds, and an account's SMPP credentials set from the page, as the API then reads them (without the password)", async () => {
    // Set once through the API (an account without any is a 404, which the browser would log).
    const set = await api("PUT", `/admin/v1/Accounts/${tenant.accountSid}/Smpp`, `Bearer ${ADMIN_TOKEN}`, {
      SystemId: "first",
      Password: "pw1234",
      PropertySid: tenant.propertySid,
      MaxBinds: 2,
    });
    expect(set.statusCode, set.body).toBe(200);
    await open("SMPP", "SMPP");
    await page.getByText("No SMPP bind is open.").waitFor();
    await page.getByLabel("AccountSid").fill(tenant.accountSid);
    await page.getByRole("button", { name: "Show" }).click();
    await page.getByRole("heading", { name: new RegExp(`^Credentials of ${tenant.accountSid}`) }).waitFor();
    expect(await page.getByLabel("System ID (1 to 15 characters, unique)").inputValue()).toBe("first");
    await page.getByLabel("Most binds at once (1 to 100); empty for 4").fill("");
    await page.getByLabel("System ID (1 to 15 characters, unique)").fill("console");
    await page.getByLabel("Password (1 to 8 characters; required: a save sets it again)").fill("pw5678");
    await page.getByLabel("PropertySid its sends are made for").fill(tenant.propertySid);
    await page.getByLabel("Allowed addresses (CIDRs, space-separated); empty for any").fill("10.0.0.0/8 127.0.0.1");
    await checkAccessibility(page, "smpp");
    await shoot("smpp");
    await page.getByRole("button", { name: "Save SMPP credentials" }).click();
    await announced(`SMPP credentials of ${tenant.accountSid} saved.`);
    const res = await api("GET", `/admin/v1/Accounts/${tenant.accountSid}/Smpp`, `Bearer ${ADMIN_TOKEN}`);
    expect(res.json()).toMatchObject({
      SystemId: "console",
      PropertySid: tenant.propertySid,
      MaxBinds: 4,
      AllowedAddresses: ["10.0.0.0/8", "127.0.0.1/32"],
      DeliverReplies: false,
    });
    expect(res.body).not.toContain("pw5678");
  }, 60_000);

  it("fits a phone's screen", async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await open("Messages", "Messages");
    const fits = await page.evaluate(() => {
      const g = globalThis as unknown as { document: { documentElement: { scrollWidth: number } }; innerWidth: number };
      return g.document.documentElement.scrollWidth <= g.innerWidth;
    });
    expect(fits).toBe(true);
    await shoot("messages-phone");
    await page.setViewportSize({ width: 1280, height: 900 });
  }, 60_000);

  it("refuses a state change the page's cookie carries without the CSRF token", async () => {
    const answer = await page.evaluate(async (accountSid) => {
      const res = await fetch("../switchboard.admin.v1.AdminService/RotateToken", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ AccountSid: accountSid }),
      });
      return { status: res.status, body: (await res.json()) as { code: string; message: string } };
    }, tenant.accountSid);
    expect(answer.status).toBe(401);
    expect(answer.body.code).toBe("unauthenticated");
    expect(answer.body.message).toMatch(/X-CSRF-Token/);
    // The token the page rotated last is still the account's.
    expect((await api("GET", `/v2/Properties/${tenant.propertySid}/Messages`, basic(tenant.accountSid, tenant.token))).statusCode).toBe(200);
  }, 60_000);

  it("signs out: the form is back and the session is gone", async () => {
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByLabel("Operator token").waitFor();
    expect(await page.evaluate(async () => (await fetch("session")).status)).toBe(401);
    expect(await page.context().cookies()).toStrictEqual([]);
  }, 60_000);

  it("loaded nothing from elsewhere and met its Content-Security-Policy", () => {
    expect(requested.filter((u) => !u.startsWith(`${base}/`) && !u.startsWith("data:"))).toStrictEqual([]);
    expect(problems, JSON.stringify(problems)).toStrictEqual([]);
    // The carriers page's two deliberate refusals: the bad prefix and the shadowed route (issue 41).
    expect(badRequests).toBe(2);
  });
});
