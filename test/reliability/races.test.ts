/**
 * Races and retries (issue 15): a request racing another gets the answer it would get arriving
 * just after the other, never a 500. Each race runs 30 rounds on real PostgreSQL (PGlite's one
 * connection runs requests one at a time, so it cannot race); the sequential version of each, the
 * answers the race must reproduce, runs on both.
 */
import type { LightMyRequestResponse } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { dbKind } from "../support/db.js";
import { ADMIN_TOKEN, addPoolNumbers, createTenant, createTestApp, type Tenant, type TestApp } from "../support/harness.js";

const ROUNDS = 30;
const RACE_TIMEOUT = 600_000;
const onPostgres = dbKind() === "postgres";

/** What the races came to, printed as one JSON line (RELIABILITY.md): counts of each answer. */
const figures: Record<string, Record<string, number>> = {};
function tally(race: string, answer: string): void {
  figures[race] ??= {};
  figures[race][answer] = (figures[race][answer] ?? 0) + 1;
}

let t: TestApp;
let a: Tenant;
let b: Tenant;

beforeAll(async () => {
  // No send rate limit: the test clock stands still, so the buckets would never refill.
  t = await createTestApp({ config: { sendRateLimit: 0 } });
  a = await createTenant(t.app);
  b = await createTenant(t.app);
  await addPoolNumbers(t.app, 2, 70);
}, 120_000);
afterAll(async () => {
  if (Object.keys(figures).length > 0) console.log(JSON.stringify({ test: "races", db: dbKind(), rounds: ROUNDS, figures }));
  await t?.close();
});

const ACTIVE_US = { Line1: "1 Market St", City: "San Francisco", CountryCode: "US", PostalCode: "94103" };
const PENDING_US = { Line1: "1 Market St", City: "San Francisco", CountryCode: "US" };

function addAddress(body: object, tenant = a) {
  return t.app.inject({ method: "POST", url: `/v2/Accounts/${tenant.accountSid}/Addresses`, headers: { authorization: tenant.auth }, payload: body });
}
async function newAddress(body: object): Promise<string> {
  const res = await addAddress(body);
  expect(res.statusCode, res.body).toBe(200);
  return res.json().AddressSid;
}
function deleteAddress(sid: string) {
  return t.app.inject({ method: "DELETE", url: `/v2/Addresses/${sid}`, headers: { authorization: a.auth } });
}
function getAddress(sid: string) {
  return t.app.inject({ method: "GET", url: `/v2/Addresses/${sid}`, headers: { authorization: a.auth } });
}
function configure(number: string, body: object) {
  return t.app.inject({ method: "POST", url: `/v2/Numbers/${number.replace(/^\+/, "")}`, headers: { authorization: a.auth }, payload: body });
}
function addNumber(number: string, accountSid?: string) {
  return t.app.inject({
    method: "POST",
    url: "/admin/v1/Numbers",
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    payload: accountSid ? { Number: number, AccountSid: accountSid } : { Number: number },
  });
}
function review(sid: string, status: string) {
  return t.app.inject({
    method: "POST",
    url: `/admin/v1/Addresses/${sid}/Review`,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    payload: { Status: status },
  });
}
function send(body: object, key?: string, tenant = a) {
  return t.app.inject({
    method: "POST",
    url: `/v2/Properties/${tenant.propertySid}/Messages`,
    headers: { authorization: tenant.auth, ...(key === undefined ? {} : { "idempotency-key": key }) },
    payload: body,
  });
}
function sendBatch(messages: object[], key?: string, tenant = a) {
  return t.app.inject({
    method: "POST",
    url: `/v2/Properties/${tenant.propertySid}/BatchMessages`,
    headers: { authorization: tenant.auth, ...(key === undefined ? {} : { "idempotency-key": key }) },
    payload: { Messages: messages },
  });
}
/** The same send over the Connect protocol (JSON), as an internal service calls it. */
function sendConnect(body: object, key: string, tenant = a) {
  return t.app.inject({
    method: "POST",
    url: "/switchboard.v2.MessagingService/SendMessage",
    headers: { authorization: tenant.auth, "content-type": "application/json", "idempotency-key": key },
    payload: JSON.stringify({ PropertySid: tenant.propertySid, ...body }),
  });
}
async function messageCount(tenant = a): Promise<number> {
  const res = await t.app.inject({
    method: "GET",
    url: `/v2/Properties/${tenant.propertySid}/Messages?Results_Count=1`,
    headers: { authorization: tenant.auth },
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().TotalCount;
}

function body(res: LightMyRequestResponse) {
  return { status: res.statusCode, json: res.json() };
}
const notInAccount = (sid: string) => {
  const message = `AddressSid ${sid} is not an address of this account; add it first (POST /v2/Accounts/{AccountSid}/Addresses).`;
  return {
    status: 400,
    json: {
      ResponseStatus: {
        ErrorCode: "InvalidParameter",
        Message: message,
        Errors: [{ FieldName: "AddressSid", ErrorCode: "InvalidParameter", Message: message }],
      },
    },
  };
};
const inUse = (sid: string) => ({
  status: 400,
  json: {
    ResponseStatus: {
      ErrorCode: "AddressInUse",
      Message: `Address ${sid} is used to register numbers; assign those numbers another address first (Configure Numbers).`,
      Errors: [],
    },
  },
});
const numberExists = (n: string) => ({
  status: 409,
  json: { ResponseStatus: { ErrorCode: "NumberExists", Message: `Number ${n} already exists.`, Errors: [] } },
});
const notPending = (sid: string, status: string) => ({
  status: 409,
  json: {
    ResponseStatus: {
      ErrorCode: "AddressNotPending",
      Message: `Address ${sid} is ${status}; only a Pending address can be reviewed (a Rejected address stays rejected: the customer submits a new one).`,
      Errors: [],
    },
  },
});
const addressNotFound = (sid: string) => ({
  status: 404,
  json: { ResponseStatus: { ErrorCode: "NotFound", Message: `Address ${sid} was not found.`, Errors: [] } },
});
const keyReused = (key: string) => {
  const message = `Idempotency-Key "${key}" was already used for a different request in the last 24 hours; send a new key with a new request.`;
  return {
    status: 422,
    json: {
      ResponseStatus: {
        ErrorCode: "IdempotencyKeyReused",
        Message: message,
        Errors: [{ FieldName: "Idempotency-Key", ErrorCode: "IdempotencyKeyReused", Message: message }],
      },
    },
  };
};

let seq = 0;
/** A number no test has used yet. */
function freshNumber(): string {
  return `+1415777${String(process.pid % 10)}${String(++seq).padStart(3, "0")}`;
}
/** A UK recipient (alphanumeric senders allowed) no test has used yet. */
function recipient(): string {
  return `+447911${String(500_000 + ++seq).padStart(6, "0")}`;
}

describe("Configure Numbers racing the deletion of its address", () => {
  /** An owned number of `a`, registered against no address. */
  async function ownedNumber(): Promise<string> {
    const n = freshNumber();
    expect((await addNumber(n, a.accountSid)).statusCode).toBe(200);
    return n;
  }

  it("sequential: configure after delete is 400 InvalidParameter; delete after configure is 400 AddressInUse", async () => {
    const n = await ownedNumber();
    const gone = await newAddress(ACTIVE_US);
    expect((await deleteAddress(gone)).statusCode).toBe(200);
    expect(body(await configure(n, { AddressSid: gone }))).toStrictEqual(notInAccount(gone));
    const used = await newAddress(ACTIVE_US);
    expect((await configure(n, { AddressSid: used })).statusCode).toBe(200);
    expect(body(await deleteAddress(used))).toStrictEqual(inUse(used));
  });

  it.runIf(onPostgres)(
    `concurrent, ${ROUNDS} rounds: one wins, the other gets the answer it would get just after`,
    async () => {
      const n = await ownedNumber();
      const wins = { configure: 0, delete: 0 };
      for (let round = 0; round < ROUNDS; round++) {
        const sid = await newAddress(ACTIVE_US);
        const [c, d] = (await Promise.all([configure(n, { AddressSid: sid }), deleteAddress(sid)])).map(body);
        tally(
          "configureVsDelete",
          `configure ${c.status} ${c.json.ResponseStatus?.ErrorCode ?? ""}, delete ${d.status} ${d.json.ResponseStatus?.ErrorCode ?? ""}`.replace(/ ,/g, ","),
        );
        if (c.status === 200) {
          wins.configure++;
          expect(c.json.AddressSid).toBe(sid);
          expect(d, `round ${round}`).toStrictEqual(inUse(sid));
          expect((await getAddress(sid)).statusCode).toBe(200);
          expect((await configure(n, { AddressSid: "" })).statusCode).toBe(200);
          expect((await deleteAddress(sid)).statusCode).toBe(200);
        } else {
          wins.delete++;
          expect(d, `round ${round}: ${JSON.stringify(c)}`).toStrictEqual({ status: 200, json: { AddressSid: sid } });
          expect(c, `round ${round}`).toStrictEqual(notInAccount(sid));
          expect((await getAddress(sid)).statusCode).toBe(404);
        }
      }
      expect(wins.configure + wins.delete).toBe(ROUNDS);
    },
    RACE_TIMEOUT,
  );
});

describe("the operator adds one number several times at once", () => {
  it("sequential: the first is 200, each later one 409 NumberExists", async () => {
    const n = freshNumber();
    expect((await addNumber(n)).statusCode).toBe(200);
    for (let i = 0; i < 3; i++) expect(body(await addNumber(n, i % 2 ? a.accountSid : undefined))).toStrictEqual(numberExists(n));
  });

  it.runIf(onPostgres)(
    `concurrent, ${ROUNDS} rounds of four: one 200, three 409 NumberExists`,
    async () => {
      for (let round = 0; round < ROUNDS; round++) {
        const n = freshNumber();
        const answers = (await Promise.all([addNumber(n), addNumber(n, a.accountSid), addNumber(n), addNumber(n, b.accountSid)])).map(body);
        for (const x of answers) tally("addNumberFourTimes", `${x.status} ${x.json.ResponseStatus?.ErrorCode ?? ""}`.trim());
        expect(
          answers.filter((x) => x.status === 200),
          `round ${round}: ${JSON.stringify(answers)}`,
        ).toHaveLength(1);
        expect(answers.filter((x) => x.status !== 200)).toStrictEqual([numberExists(n), numberExists(n), numberExists(n)]);
      }
    },
    RACE_TIMEOUT,
  );
});

describe("concurrent reviews of one address", () => {
  it("sequential: the first decision wins; the same decision again is a 200 that changes nothing; the other is 409 AddressNotPending", async () => {
    for (const [first, other] of [
      ["Active", "Rejected"],
      ["Rejected", "Active"],
    ]) {
      const sid = await newAddress(PENDING_US);
      const decided = body(await review(sid, first));
      expect(decided.status).toBe(200);
      expect(decided.json.Status).toBe(first);
      expect(body(await review(sid, first))).toStrictEqual(decided);
      expect(body(await review(sid, other))).toStrictEqual(notPending(sid, first));
      expect((await getAddress(sid)).json().Status).toBe(first);
    }
  });

  it.runIf(onPostgres)(
    `concurrent, ${ROUNDS} rounds of Active, Rejected, Active, Rejected: one decision holds, the others agree or get 409`,
    async () => {
      const finals = new Set<string>();
      for (let round = 0; round < ROUNDS; round++) {
        const sid = await newAddress(PENDING_US);
        const decisions = ["Active", "Rejected", "Active", "Rejected"];
        const answers = (await Promise.all(decisions.map((d) => review(sid, d)))).map(body);
        const final = (await getAddress(sid)).json().Status;
        for (const x of answers) tally("fourReviews", `${x.status} ${x.json.ResponseStatus?.ErrorCode ?? x.json.Status}`);
        finals.add(final);
        expect(["Active", "Rejected"]).toContain(final);
        answers.forEach((x, i) => {
          if (decisions[i] === final) expect(x.status, `round ${round}: ${JSON.stringify(answers)}`).toBe(200);
          if (decisions[i] === final) expect(x.json.Status).toBe(final);
          else expect(x, `round ${round}`).toStrictEqual(notPending(sid, final));
        });
      }
      expect(finals.size).toBeGreaterThan(0);
    },
    RACE_TIMEOUT,
  );
});

describe("concurrent deletes of one address", () => {
  it("sequential: the first is 200, each later one 404", async () => {
    const sid = await newAddress(ACTIVE_US);
    expect(body(await deleteAddress(sid))).toStrictEqual({ status: 200, json: { AddressSid: sid } });
    for (let i = 0; i < 3; i++) expect(body(await deleteAddress(sid))).toStrictEqual(addressNotFound(sid));
  });

  it.runIf(onPostgres)(
    `concurrent, ${ROUNDS} rounds of four: exactly one 200, three 404`,
    async () => {
      for (let round = 0; round < ROUNDS; round++) {
        const sid = await newAddress(ACTIVE_US);
        const answers = (await Promise.all([0, 1, 2, 3].map(() => deleteAddress(sid)))).map(body);
        for (const x of answers) tally("fourDeletes", `${x.status}`);
        expect(
          answers.filter((x) => x.status === 200),
          `round ${round}: ${JSON.stringify(answers)}`,
        ).toStrictEqual([{ status: 200, json: { AddressSid: sid } }]);
        expect(answers.filter((x) => x.status !== 200)).toStrictEqual([addressNotFound(sid), addressNotFound(sid), addressNotFound(sid)]);
      }
    },
    RACE_TIMEOUT,
  );
});

describe("Idempotency-Key on single and batch sends", () => {
  /** A batch with a good item, a leased one and one that fails its rules (its ResponseStatus is part of the answer). */
  function batchItems(): object[] {
    return [
      { From: "Acme", To: recipient(), Text: "one" },
      { To: recipient(), Text: "leased" },
      { From: "Acme", To: "12345", Text: "bad" },
    ];
  }

  it("sequential: a repeated batch returns the first response exactly, every item included, and stores nothing", async () => {
    const before = await messageCount();
    const items = batchItems();
    const first = body(await sendBatch(items, "batch-seq"));
    expect(first.status).toBe(200);
    expect(first.json.Messages).toHaveLength(3);
    expect(first.json.Messages[2].ResponseStatus.ErrorCode).toBe("InvalidRecipient");
    expect(await messageCount()).toBe(before + 2);
    for (let i = 0; i < 2; i++) expect(body(await sendBatch(items, "batch-seq"))).toStrictEqual(first);
    expect(await messageCount()).toBe(before + 2);
    // Keys are per account: b's equal key is a batch of its own.
    const other = body(await sendBatch(items, "batch-seq", b));
    expect(other.status).toBe(200);
    expect(other.json.Messages[0].MessageSid).not.toBe(first.json.Messages[0].MessageSid);
    // Remembered 24 hours: at 24 h - 1 s the same answer, at 24 h a new batch under the free key.
    const start = t.clock.now();
    try {
      t.clock.advance(86_400_000 - 1000);
      expect(body(await sendBatch(items, "batch-seq"))).toStrictEqual(first);
      t.clock.advance(1000);
      const later = body(await sendBatch(items, "batch-seq"));
      expect(later.status).toBe(200);
      expect(later.json.Messages[0].MessageSid).not.toBe(first.json.Messages[0].MessageSid);
      expect(await messageCount()).toBe(before + 4);
      expect(body(await sendBatch(items, "batch-seq"))).toStrictEqual(later);
    } finally {
      t.clock.set(start);
    }
  });

  it("sequential: the same key with a different request is 422 IdempotencyKeyReused, and stores nothing", async () => {
    const to = recipient();
    const before = await messageCount();
    const first = body(await send({ From: "Acme", To: to, Text: "keyed" }, "single-seq"));
    expect(first.status).toBe(200);
    expect(body(await send({ From: "Acme", To: to, Text: "keyed" }, "single-seq"))).toStrictEqual(first);
    expect(body(await send({ From: "Acme", To: to, Text: "other text" }, "single-seq"))).toStrictEqual(keyReused("single-seq"));
    expect(body(await sendBatch([{ From: "Acme", To: to, Text: "keyed" }], "single-seq"))).toStrictEqual(keyReused("single-seq"));
    const items = batchItems();
    expect((await sendBatch(items, "batch-seq-2")).statusCode).toBe(200);
    expect(body(await sendBatch(items.slice(0, 2), "batch-seq-2"))).toStrictEqual(keyReused("batch-seq-2"));
    expect(body(await send({ From: "Acme", To: to, Text: "keyed" }, "batch-seq-2"))).toStrictEqual(keyReused("batch-seq-2"));
    expect(await messageCount()).toBe(before + 1 + 2);
  });

  it("sequential: REST and Connect agree on what the same request is (compared decoded, not as bytes)", async () => {
    const to = recipient();
    const first = body(await send({ Text: "both wires", To: to, From: "Acme" }, "wires"));
    expect(first.status).toBe(200);
    const again = await sendConnect({ From: "Acme", To: to, Text: "both wires" }, "wires");
    expect(again.statusCode, again.body).toBe(200);
    expect(again.json()).toStrictEqual(first.json);
    const different = await sendConnect({ From: "Acme", To: to, Text: "not the same" }, "wires");
    expect(different.statusCode).toBe(400); // Connect's HTTP status for invalid_argument
    expect(different.json()).toMatchObject({ code: "invalid_argument", message: keyReused("wires").json.ResponseStatus.Message });
  });

  it.runIf(onPostgres)(
    `concurrent, ${ROUNDS} rounds: four equal batches, four equal sends, and two different requests under one key`,
    async () => {
      for (let round = 0; round < ROUNDS; round++) {
        const before = await messageCount();
        // Four copies of one batch under one key: one set of messages, four equal answers.
        const items = batchItems();
        const batches = (await Promise.all([0, 1, 2, 3].map(() => sendBatch(items, `batch-${round}`)))).map(body);
        expect(batches[0].status, JSON.stringify(batches[0])).toBe(200);
        for (const x of batches) expect(x, `round ${round}`).toStrictEqual(batches[0]);
        // Four copies of one send under one key.
        const to = recipient();
        const singles = (await Promise.all([0, 1, 2, 3].map(() => send({ From: "Acme", To: to, Text: "x" }, `single-${round}`)))).map(body);
        expect(singles[0].status, JSON.stringify(singles[0])).toBe(200);
        for (const x of singles) expect(x, `round ${round}`).toStrictEqual(singles[0]);
        expect(await messageCount(), `round ${round}`).toBe(before + 2 + 1);
        // Two requests, two copies each, under one key: the first decides; its copies get its answer, the other 422.
        const key = `mixed-${round}`;
        const reqs = [
          { From: "Acme", To: to, Text: "A" },
          { From: "Acme", To: to, Text: "B" },
          { From: "Acme", To: to, Text: "A" },
          { From: "Acme", To: to, Text: "B" },
        ];
        const mixed = (await Promise.all(reqs.map((r) => send(r, key)))).map(body);
        for (const x of mixed) tally("twoRequestsOneKey", `${x.status}`);
        tally("repeats", `batch answers equal: ${batches.every((x) => JSON.stringify(x) === JSON.stringify(batches[0]))}`);
        const winner = mixed.find((x) => x.status === 200);
        expect(winner, `round ${round}: ${JSON.stringify(mixed)}`).toBeDefined();
        mixed.forEach((x, i) => {
          if ((reqs[i] as { Text: string }).Text === winner!.json.Text) expect(x).toStrictEqual(winner);
          else expect(x, `round ${round}`).toStrictEqual(keyReused(key));
        });
        expect(await messageCount(), `round ${round}`).toBe(before + 2 + 1 + 1);
      }
    },
    RACE_TIMEOUT,
  );
});
