import { createHash } from "node:crypto";
import type { EntityManager } from "@mikro-orm/sql";
import { bindArraysByName, bindByName, executeBound, type NamedArrays } from "../db/bound-sql.js";
import { chargeCtes } from "../billing/balance-store.js";
import type { KeyAnswer } from "./idempotency-key-store.js";

/**
 * The statements that store a send's message in the `messages` table (message-store.ts holds the
 * table's other statements): the send batch's facts-and-store statement, built from the send
 * rules' entries (send-steps.ts), and the plain insert of messages judged in a transaction. Rows
 * are named objects (MessageRow); `bindByName` (db/bound-sql.ts) is the one place they become positional arrays.
 */

type Em = EntityManager;

/** The SQL types of the batch statements' array parameters. */
export type SqlType = "text" | "bool" | "int" | "bigint" | "timestamptz";

/** One stored message as a send writes it: a column each. */
export interface MessageRow {
  sid: string;
  account_sid: string;
  property_sid: string;
  direction: "Transmit";
  status: "Processing" | "Scheduled" | "Failed";
  sender_kind: "Leased" | "E164" | "Alphanumeric";
  sender: string;
  recipient: string;
  text: string;
  encoding: string;
  num_segments: number;
  /** Whether smart encoding replaced look-alike characters in the text (docs/api.md). */
  smart_encoded: boolean;
  delivery_receipt: boolean;
  dr_webhook_uri: string;
  dr_webhook_method: string;
  forward_to_sms: string;
  forward_from_sms: string;
  forward_to_email: string;
  forward_from_email: string;
  webhook_uri: string;
  webhook_method: string;
  lease_sid: string | null;
  in_reply_to: string | null;
  error_code: string;
  scheduled_at: Date | null;
  send_at: Date;
  created_at: Date;
  valid_until: Date;
  /**
   * A send stored already claimed by the dispatcher of the process that accepted it (its hand-off,
   * delivery/hand-off.ts): what the dispatcher's claim would have set; else null, and attempts 0.
   */
  claimed_until: Date | null;
  attempts: number;
  /**
   * Whether the alphanumeric sender was Registered for the recipient's country, where a rule checks
   * it; null elsewhere. A recorded fact (FactSql.column): the storing statement takes it from the facts.
   */
  sender_id_registered: boolean | null;
  /**
   * Segments times the destination's rate at accept, micro-units as a decimal integer string (a
   * bigint never passes through a number); null: unpriced. A recorded fact: the send's price.
   */
  price: string | null;
}

/** Every MessageRow column and its SQL type: a column missing here, or one too many, does not compile. */
const MESSAGE_COLUMNS = {
  sid: "text",
  account_sid: "text",
  property_sid: "text",
  direction: "text",
  status: "text",
  sender_kind: "text",
  sender: "text",
  recipient: "text",
  text: "text",
  encoding: "text",
  num_segments: "int",
  smart_encoded: "bool",
  delivery_receipt: "bool",
  dr_webhook_uri: "text",
  dr_webhook_method: "text",
  forward_to_sms: "text",
  forward_from_sms: "text",
  forward_to_email: "text",
  forward_from_email: "text",
  webhook_uri: "text",
  webhook_method: "text",
  lease_sid: "text",
  in_reply_to: "text",
  error_code: "text",
  scheduled_at: "timestamptz",
  send_at: "timestamptz",
  created_at: "timestamptz",
  valid_until: "timestamptz",
  claimed_until: "timestamptz",
  attempts: "int",
  sender_id_registered: "bool",
  price: "bigint",
} as const satisfies Record<keyof MessageRow, SqlType>;

const COLUMN_NAMES = Object.keys(MESSAGE_COLUMNS) as (keyof MessageRow)[];

/** `?::type[]`: one array parameter. */
const arrayParam = (t: SqlType) => `?::${t}[]`;

// A batch passes one array per column (unnest), so each statement has one text whatever the
// batch size and is prepared once per connection (executeBound). With a VALUES row per send,
// PostgreSQL parsed and planned every batch anew: most of its CPU per send.
const INSERT_SQL = `insert into messages (${COLUMN_NAMES.join(", ")})
  select * from unnest(${COLUMN_NAMES.map((c) => arrayParam(MESSAGE_COLUMNS[c])).join(", ")})`;

/** Stores messages the pipeline has judged in a transaction (keyed and leased sends, refused service sends kept as Failed). */
export async function insertMessages(tx: Em, rows: readonly MessageRow[]): Promise<void> {
  if (rows.length === 0) return;
  await executeBound(tx, INSERT_SQL, bindByName(COLUMN_NAMES, rows), "sb_send_insert");
}

// ---------------------------------------------------------------------------------------------
// The send batch's facts (sql/sb_send_facts.sql, generated from the rules' entries) and store

/** A fact a send rule is judged on: its name, SQL type, and the SQL expression that finds it (see FIXED_KEYS for what it may use). */
export interface FactSql {
  name: string;
  /** Its SQL type; a bigint arrives as a decimal string. */
  type: "bool" | "text" | "bigint";
  sql: string;
  /** The message column this fact is recorded in when the send is stored (a name other than the fact's). */
  column?: keyof MessageRow;
  /**
   * A `left join lateral …` the fact's SQL reads (its alias), when several facts share one lookup
   * (the rate of the destination: whether there is one, and the price): joined once, by its text.
   */
  join?: string;
}

/**
 * The charge of a send, the last step before it is stored (send-steps.ts SendRules.charge): the
 * fact that is its amount (bigint micro-units, null or 0: nothing to charge), taken from the
 * account's balance (billing/sql/sb_charge.sql) in the statement that stores it, in send order,
 * only for the sends every rule passed; a send the balance cannot cover is not stored.
 */
export interface ChargeSpec {
  amountFact: string;
}

/** What the facts statement is built from: the rules' own lookup keys (text, beyond FIXED_KEYS), their facts, in rule order, and the charge. */
export interface FactsSpec {
  keys: readonly string[];
  facts: readonly FactSql[];
  charge?: ChargeSpec;
}

/**
 * The lookup keys every send has, by name, with their SQL types: what a fact's SQL may use as `v.<name>`
 * (with `a`, the send's account row, and `p`, its property if the account's). `recipient` is null
 * for a request with problems; `idem_key` null without an Idempotency-Key; a key older than
 * `expire_before` has expired.
 */
export const FIXED_KEYS = {
  i: "int",
  account_sid: "text",
  property_sid: "text",
  recipient: "text",
  idem_key: "text",
  expire_before: "timestamptz",
} as const satisfies Record<string, SqlType>;

export type FixedKey = keyof typeof FIXED_KEYS;

/** What every send's facts come with: its Idempotency-Key's state and the message the key answered. */
export interface KeyFacts extends KeyAnswer {
  i: number;
  key_expired: boolean | null;
  /** Whether the statement stored the send's message. */
  stored: boolean;
  /** Whether its charge was taken (false: its balance could not cover it, so it was not stored); null: nothing charged. */
  charged: boolean | null;
}

/** One send's facts: the key's (KeyFacts) and each rule's, by the fact's name. */
export type SendFacts = KeyFacts & { readonly [fact: string]: unknown };

const KEY_FACTS = `k.created_at <= v.expire_before as key_expired, k.request_hash::text as key_hash, m.sid::text as m_sid, m.account_sid::text as m_account_sid,
         m.property_sid::text as m_property_sid, m.sender::text as m_sender, m.recipient::text as m_recipient, m.text as m_text`;
const KEY_FACT_TYPES = `key_expired boolean, key_hash text, m_sid text, m_account_sid text, m_property_sid text, m_sender text, m_recipient text, m_text text`;

/** Every key of a spec, fixed first, with its type. */
function keysOf(spec: FactsSpec): [string, SqlType][] {
  return [...Object.entries(FIXED_KEYS), ...spec.keys.map((k): [string, SqlType] => [k, "text"])];
}

const pgType = (t: SqlType) => (t === "bool" ? "boolean" : t === "int" ? "integer" : t);

/** The lateral joins the spec's facts read, once each, in fact order. */
const factJoins = (spec: FactsSpec) => [...new Set(spec.facts.flatMap((f) => (f.join ? [f.join] : [])))];

/**
 * The text of `sql/sb_send_facts.sql`: the function that reads a batch's facts, one row per send,
 * as the spec's entries say. It judges nothing. Written by `npm run generate:sql`; a test checks
 * that the committed file is this text.
 */
export function sendFactsFunctionSql(spec: FactsSpec): string {
  const keys = keysOf(spec);
  return `-- Generated by \`npm run generate:sql\` from the send rules' entries (src/messaging/send-steps.ts
-- SEND_RULES, built by message-send-store.ts sendFactsFunctionSql): do not edit.
-- The facts a batch of sends is judged on (messaging/send-pipeline.ts), in one statement: per send
-- (v.i), each rule's fact, and its Idempotency-Key with the message the key answered. It judges
-- nothing: the store's statement around it (message-send-store.ts) inserts a send only where each
-- fact is the value the rules want.
-- Settings: a plan made while the tables were small could hash-join a sequential scan of a table
-- and keep it as the table grows (40 ms per batch at 100,000 idempotency keys,
-- bench/planner-settings.ts); with sequential scans and hash or merge joins off every row is looked
-- up through an index at any size. plan_cache_mode = force_generic_plan: one plan per connection,
-- no planning per call (PL/pgSQL would plan the first five calls anew).
do $drop$ declare f regprocedure; begin
  for f in select oid::regprocedure from pg_proc where proname = 'sb_send_facts' loop execute 'drop function ' || f; end loop;
end $drop$;
create function sb_send_facts(${keys.map(([k, t]) => `p_${k} ${t}[]`).join(", ")})
  returns table (i int, ${spec.facts.map((f) => `${f.name} ${pgType(f.type)}`).join(", ")}, ${KEY_FACT_TYPES})
  language plpgsql stable
  set enable_seqscan = off set enable_hashjoin = off set enable_mergejoin = off
  set plan_cache_mode = force_generic_plan
as $fn$
#variable_conflict use_column
begin
  return query
  select v.i,
         ${spec.facts.map((f) => `(${f.sql})::${pgType(f.type)}`).join(",\n         ")},
         ${KEY_FACTS}
    from unnest(${keys.map(([k]) => `p_${k}`).join(", ")})
         as v(${keys.map(([k]) => k).join(", ")})
    left join accounts a on a.sid = v.account_sid
    left join properties p on p.sid = v.property_sid and p.account_sid = v.account_sid${factJoins(spec)
      .map((j) => `\n    ${j}`)
      .join("")}
    left join idempotency_keys k on k.account_sid = v.account_sid and k.key = v.idem_key
    left join messages m on m.sid = k.message_sid;
end
$fn$;
`;
}

/**
 * A batch for the facts statement, by name: each key's values (every FIXED_KEYS and spec key), for
 * each send whether to store it, the value each fact must have for it to be stored (null: any), and
 * the message to store (null: none).
 */
export interface SendBatch {
  /** When the batch's charges are taken (the ledger's time). */
  now: Date;
  keys: NamedArrays;
  store: boolean[];
  wanted: NamedArrays;
  rows: (MessageRow | null)[];
}

/** The facts-and-store statement of one spec. */
export interface SendStatement {
  /** Reads a batch's facts and stores the messages whose facts are as wanted, in one statement (its own transaction outside one). */
  run(em: Em, batch: SendBatch): Promise<SendFacts[]>;
}

/**
 * The statement for a spec: a send is stored when it asks to be (`store`), each of its facts is
 * the value wanted (null: any), a compare-and-set that holds no rule of its own, and (with a
 * charge) its balance covers its amount: the sends that passed are charged in send order
 * (billing's chargeCtes, which lock the balances), and one the balance cannot cover is not stored. One text
 * whatever the batch size: prepared once per connection (executeBound), under a name of its own.
 */
export function createSendStatement(spec: FactsSpec): SendStatement {
  const keys = keysOf(spec);
  const keyNames = keys.map(([k]) => k);
  const factNames = spec.facts.map((f) => f.name);
  const wanted = spec.facts.map((f) => `(v.want_${f.name} is null or f.${f.name} = v.want_${f.name})`).join(" and ");
  // A recorded fact (FactSql.column) is its column's value: the row was built before the facts were read.
  const recorded = new Map(spec.facts.flatMap((f) => (f.column ? [[f.column as string, f.name] as const] : [])));
  const amount = spec.charge?.amountFact;
  // The charge (billing's chargeCtes): the sends that passed with an amount, in send order; the
  // others are stored uncharged.
  const charge = amount
    ? `,
charge_sends as materialized (select v.i, v.account_sid, v.sid, v.${amount} as amount from v where v.passed and v.${amount} > 0),
${chargeCtes("charge_sends")},
s as materialized (select v.*, v.passed and coalesce(c.accepted, true) as stored, c.accepted as charged from v left join charged c on c.i = v.i)`
    : `,
s as materialized (select v.*, v.passed as stored, null::boolean as charged from v)`;
  const sql = `with f as materialized (select * from sb_send_facts(${keys.map(([, t]) => arrayParam(t)).join(", ")})),
v as materialized (
  select f.*, v.store and ${wanted} as passed, ${COLUMN_NAMES.map((c) => `v.${c}`).join(", ")}
    from unnest(?::int[], ?::bool[], ${spec.facts.map((f) => arrayParam(f.type)).join(", ")}, ${COLUMN_NAMES.map((c) => arrayParam(MESSAGE_COLUMNS[c])).join(", ")})
         as v(vi, store, ${factNames.map((f) => `want_${f}`).join(", ")}, ${COLUMN_NAMES.join(", ")})
    join f on f.i = v.vi)${charge},
ins as (insert into messages (${COLUMN_NAMES.join(", ")}) select ${COLUMN_NAMES.map((c) => recorded.get(c) ?? c).join(", ")} from s where s.stored)
select i, ${factNames.join(", ")}, key_expired, key_hash, m_sid, m_account_sid, m_property_sid, m_sender, m_recipient, m_text, stored, charged from s`;
  const prepared = `sb_send_${createHash("sha256").update(sql).digest("hex").slice(0, 12)}`;
  return {
    run(em, batch) {
      const params = [
        ...bindArraysByName(keyNames, batch.keys),
        batch.keys.i,
        batch.store,
        ...bindArraysByName(factNames, batch.wanted),
        ...bindByName(COLUMN_NAMES, batch.rows),
        ...(amount ? [batch.now] : []),
      ];
      return executeBound<SendFacts>(em, sql, params, prepared);
    },
  };
}
