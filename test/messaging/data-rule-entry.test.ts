/**
 * A send rule that needs data is one entry (issue 42): this test adds a throwaway rule (a
 * recipient on a block list of its own table) as one DataRule, installs the facts function built
 * from the rules with it (what `npm run generate:sql` writes for SEND_RULES), and shows the rule
 * holding on every path of the pipeline: the one-statement send, a keyed send and a leased one
 * (the transaction), a batch item, and a gRPC call, each refused with the entry's own answer and
 * nothing stored.
 */
import { Code, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MessagingService } from "../../gen/switchboard/v2/messaging_pb.js";
import { executeBound } from "../../src/db/bound-sql.js";
import { ormKind } from "../../src/db/orm.js";
import { applyRepeatableSql, sqlFile } from "../../src/db/repeatable-sql.js";
import { fieldError } from "../../src/common/errors.js";
import { sendFactsFunctionSql } from "../../src/messaging/message-send-store.js";
import { type DataRule, factsSpec, found, SEND_RULES, type SendRules } from "../../src/messaging/send-steps.js";
import { createTestOrm, dbKind, type TestOrm } from "../support/db.js";
import { addPoolNumbers, createTenant, createTestApp, rpcRefusal, sendOk, type Tenant, type TestApp } from "../support/harness.js";

/** The throwaway rule: one entry, nothing else. */
const NOT_BLOCKED: DataRule = {
  name: "recipient not blocked",
  applies: () => true,
  fact: { name: "recipient_blocked", type: "bool", sql: found("test_blocked_numbers b", "b.number = v.recipient") },
  wants: () => false,
  refuse: (_item, send) => fieldError("To", "DestinationNotAllowed", `To ${send.to.number} is on the test block list.`),
};
const RULES_WITH_BLOCK: SendRules = { access: SEND_RULES.access, rules: [...SEND_RULES.rules, NOT_BLOCKED] };

const BLOCKED = "+61412000001";
const FREE = "+61412000002";

describe(`a rule that needs data is one entry (${dbKind()})`, () => {
  let db: TestOrm;
  let t: TestApp;
  let tenant: Tenant;

  beforeAll(async () => {
    db = await createTestOrm();
    const em = db.orm.em.fork();
    await executeBound(em, "create table test_blocked_numbers (number text primary key)", []);
    await executeBound(em, "insert into test_blocked_numbers (number) values (?)", [BLOCKED]);
    // The facts function of these rules, as the repeatable step installs SEND_RULES' (src/messaging/sql/sb_send_facts.sql).
    await applyRepeatableSql(db.orm, ormKind(db.orm), [sqlFile("src/messaging/sql/sb_send_facts.sql", sendFactsFunctionSql(factsSpec(RULES_WITH_BLOCK)))]);
    t = await createTestApp({ db, rules: RULES_WITH_BLOCK });
    tenant = await createTenant(t.app);
  });
  afterAll(async () => {
    await t?.close();
    await db?.close();
  });

  const send = (payload: Record<string, unknown>, headers: Record<string, string> = {}) =>
    t.app.inject({
      method: "POST",
      url: `/v2/Properties/${tenant.propertySid}/Messages`,
      headers: { authorization: tenant.auth, ...headers },
      payload: { From: tenant.ownedNumber, Text: "hello", ...payload },
    });
  const stored = async (to: string) =>
    (await executeBound<{ n: number }>(db.orm.em.fork(), "select count(*)::int as n from messages where recipient = ?", [to]))[0].n;

  const REFUSAL = {
    ResponseStatus: {
      ErrorCode: "DestinationNotAllowed",
      Message: `To ${BLOCKED} is on the test block list.`,
      Errors: [{ FieldName: "To", ErrorCode: "DestinationNotAllowed", Message: `To ${BLOCKED} is on the test block list.` }],
    },
  };

  it("the one-statement send: 400 with the entry's answer, nothing stored; another recipient is sent", async () => {
    const res = await send({ To: BLOCKED });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual(REFUSAL);
    expect(await stored(BLOCKED)).toBe(0);
    expect(await sendOk(t.app, tenant, { To: FREE })).toMatch(/^MG/);
  });

  it("a keyed send and a send from a leased sender (the transaction's path): the same answer", async () => {
    expect((await send({ To: BLOCKED }, { "idempotency-key": "block-1" })).json()).toEqual(REFUSAL);
    await addPoolNumbers(t.app, 1);
    expect((await send({ To: BLOCKED, From: "" })).json()).toEqual(REFUSAL);
    expect(await stored(BLOCKED)).toBe(0);
  });

  it("a batch refuses only the blocked item", async () => {
    const res = await t.app.inject({
      method: "POST",
      url: `/v2/Properties/${tenant.propertySid}/BatchMessages`,
      headers: { authorization: tenant.auth },
      payload: { Messages: [FREE, BLOCKED].map((To) => ({ From: tenant.ownedNumber, To, Text: "batch" })) },
    });
    expect(res.statusCode).toBe(200);
    const [sent, refused] = res.json().Messages;
    expect(sent.MessageSid).toMatch(/^MG/);
    expect(refused).toEqual(REFUSAL);
    expect(await stored(BLOCKED)).toBe(0);
  });

  it("over Connect: invalid_argument, as the error table says for DestinationNotAllowed, with the same message", async () => {
    const base = await t.app.listen({ port: 0, host: "127.0.0.1" });
    const client = createClient(MessagingService, createConnectTransport({ baseUrl: base, httpVersion: "1.1" }));
    const err = await rpcRefusal(() =>
      client.sendMessage({ propertySid: tenant.propertySid, from: tenant.ownedNumber, to: BLOCKED, text: "hi" }, { headers: { authorization: tenant.auth } }),
    );
    expect([Code[err.code], err.rawMessage]).toEqual(["InvalidArgument", REFUSAL.ResponseStatus.Message]);
    expect(await stored(BLOCKED)).toBe(0);
  });
});
