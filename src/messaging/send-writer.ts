import { create } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import type { MikroORM } from "@mikro-orm/sql";
import { type Message as MessagePb, MessageSchema } from "../../gen/switchboard/v2/messaging_pb.js";
import type { Account } from "../accounts/account.entity.js";
import { wrongCredentials } from "../accounts/auth.js";
import { fieldError, fieldErrors, type FieldProblem, notFound, ruleError } from "../common/errors.js";
import { createGroupCommit, type GroupCommit, type ItemOutcome } from "../common/group-commit.js";
import { executeBound } from "../db/bound-sql.js";
import { allocateLease } from "../leases/lease-allocator.js";
import type { ValidSend } from "./send-rules.js";

/** An Idempotency-Key is remembered this long (docs/api.md#idempotency-key). */
export const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;

/** One checked send request, waiting for its batch. */
export interface SendItem {
  /** The authenticated account; its tokenHash is re-checked against the database in the batch. */
  account: Pick<Account, "sid" | "tokenHash">;
  propertySid: string;
  /** The result of validateSend: reported only after the property check, as a lone send would. */
  checked: { problems: FieldProblem[] } | { send: ValidSend };
  /** Whether the message goes out from a leased sender (From blank, or alphanumeric where not taken). */
  leased: boolean;
  idemKey: string | undefined;
  now: Date;
  /** The new message's Sid. */
  sid: string;
}

/** What a send is answered with. */
export interface SendOutcome {
  message: MessagePb;
  /** True when a message was stored that is due now (the dispatcher should look). */
  dueNow: boolean;
}

interface CheckRow {
  i: number;
  account_token_hash: string | null;
  account_sms: boolean | null;
  property_sms: boolean | null;
  owned: boolean;
  key_expired: boolean | null;
  m_sid: string | null;
  m_account_sid: string | null;
  m_property_sid: string | null;
  m_sender: string | null;
  m_recipient: string | null;
  m_text: string | null;
}

/** Columns of one stored message, and the SQL type of each (the insert passes one array per column). */
const MESSAGE_COLUMNS = [
  ["sid", "text"], ["account_sid", "text"], ["property_sid", "text"], ["direction", "text"], ["status", "text"],
  ["sender_kind", "text"], ["sender", "text"], ["recipient", "text"], ["text", "text"], ["encoding", "text"],
  ["num_segments", "int"], ["delivery_receipt", "bool"], ["dr_webhook_uri", "text"], ["dr_webhook_method", "text"],
  ["forward_to_sms", "text"], ["forward_from_sms", "text"], ["forward_to_email", "text"], ["forward_from_email", "text"],
  ["webhook_uri", "text"], ["webhook_method", "text"], ["lease_sid", "text"], ["scheduled_at", "timestamptz"],
  ["send_at", "timestamptz"], ["created_at", "timestamptz"],
] as const;

// A batch passes one array per column (unnest), so each statement has one text whatever the
// batch size and is prepared once per connection (executeBound). With a VALUES row per send,
// PostgreSQL parsed and planned every batch anew: most of its CPU per send.
const INSERT_SQL = `insert into messages (${MESSAGE_COLUMNS.map(([c]) => c).join(", ")})
  select * from unnest(${MESSAGE_COLUMNS.map(([, t]) => `?::${t}[]`).join(", ")})`;

export const CHECK_SQL = `select v.i, a.token_hash as account_token_hash, a.sms_enabled as account_sms, p.sms_enabled as property_sms,
       n.sid is not null as owned, k.created_at <= v.expire_before as key_expired,
       m.sid as m_sid, m.account_sid as m_account_sid, m.property_sid as m_property_sid, m.sender as m_sender, m.recipient as m_recipient, m.text as m_text
  from unnest(?::int[], ?::text[], ?::text[], ?::text[], ?::text[], ?::timestamptz[]) as v(i, account_sid, property_sid, sender, idem_key, expire_before)
  left join accounts a on a.sid = v.account_sid
  left join properties p on p.sid = v.property_sid and p.account_sid = v.account_sid
  left join numbers n on n.number = v.sender and n.account_sid = v.account_sid
  left join idempotency_keys k on k.account_sid = v.account_sid and k.key = v.idem_key
  left join messages m on m.sid = k.message_sid`;

/**
 * Planner settings for a send batch's transaction. The check query is prepared once per
 * connection and its plan reused (force_generic_plan: no planning per batch). A plan made while
 * the tables were small could hash-join a sequential scan of idempotency_keys or messages and keep
 * doing so as they grow (40 ms per batch at 100,000 keys); with sequential scans and hash or merge
 * joins off it looks every row up through an index, at any table size.
 */
export const SEND_BATCH_SETTINGS = `select set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true),
  set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true)`;

const ok = <O>(value: O): ItemOutcome<O> => ({ ok: true, value });
const fail = <O>(error: unknown): ItemOutcome<O> => ({ ok: false, error });

/** Options of the send writer. */
export interface SendWriterOptions {
  orm: MikroORM;
  maxBatch?: number;
  maxInFlight?: number;
}

/**
 * The store side of Send SMS, with group commit: the sends waiting at the same moment are
 * checked with one query (account still valid and SMS-enabled, property, sender ownership,
 * Idempotency-Key) and stored in one transaction. Each check is made in the order a lone send
 * makes it, and each send gets its own answer; a send is answered only after its batch committed.
 */
export function createSendWriter(opts: SendWriterOptions): GroupCommit<SendItem, SendOutcome> {
  return createGroupCommit<SendItem, SendOutcome>({
    maxBatch: opts.maxBatch,
    maxInFlight: opts.maxInFlight,
    run: (items) => opts.orm.em.fork().transactional((tx) => writeBatch(tx, items)),
  });
}

type Tx = Parameters<Parameters<MikroORM["em"]["transactional"]>[0]>[0];

async function writeBatch(tx: Tx, items: SendItem[]): Promise<ItemOutcome<SendOutcome>[]> {
  const check: unknown[][] = [[], [], [], [], [], []];
  items.forEach((item, i) => {
    const send = "send" in item.checked ? item.checked.send : undefined;
    const ownedSender = send?.fromKind === "E164" ? send.from : null;
    const row = [i, item.account.sid, item.propertySid, ownedSender, item.idemKey ?? null, new Date(item.now.getTime() - IDEMPOTENCY_TTL_MS)];
    for (let c = 0; c < row.length; c++) check[c].push(row[c]);
  });
  await executeBound(tx, SEND_BATCH_SETTINGS, [], "sb_send_settings");
  const rows = await executeBound<CheckRow>(tx, CHECK_SQL, check, "sb_send_check");
  const byIndex = new Map<number, CheckRow>(rows.map((r) => [Number(r.i), r]));

  const outcomes: ItemOutcome<SendOutcome>[] = new Array(items.length);
  const toStore: { index: number; send: ValidSend }[] = [];
  const expiredKeys: SendItem[] = [];
  // Keys claimed earlier in this batch: a repeat gets the first one's message, as after its commit.
  const claimed = new Map<string, number>();
  const repeats: { index: number; first: number }[] = [];

  items.forEach((item, i) => {
    const row = byIndex.get(i);
    if (!row?.account_token_hash || row.account_token_hash !== item.account.tokenHash) {
      // The token was rotated (maybe by another process) after this process authenticated it.
      outcomes[i] = fail(wrongCredentials());
      return;
    }
    if (row.property_sms === null) return void (outcomes[i] = fail(notFound("Property", item.propertySid)));
    if ("problems" in item.checked) return void (outcomes[i] = fail(fieldErrors(item.checked.problems)));
    const send = item.checked.send;
    if (!row.account_sms) {
      return void (outcomes[i] = fail(ruleError("SmsNotEnabled", `Account ${item.account.sid} is not enabled for SMS; ask the operator to enable it.`)));
    }
    if (!row.property_sms) {
      return void (outcomes[i] = fail(ruleError("SmsNotEnabled", `Property ${item.propertySid} is not enabled for SMS; ask the operator to enable it.`)));
    }
    if (send.fromKind === "E164" && !row.owned) {
      return void (outcomes[i] = fail(
        fieldError("From", "SenderNotOwned", `From ${send.from} is not one of this account's numbers; use one of them, an alphanumeric ID, or leave From blank for a leased sender.`),
      ));
    }
    if (item.idemKey) {
      const keyId = `${item.account.sid}\n${item.idemKey}`;
      const first = claimed.get(keyId);
      if (first !== undefined) return void repeats.push({ index: i, first });
      if (row.key_expired === true) expiredKeys.push(item);
      else if (row.key_expired === false && row.m_sid) {
        const message = create(MessageSchema, {
          messageSid: row.m_sid,
          accountSid: row.m_account_sid!,
          propertySid: row.m_property_sid!,
          from: row.m_sender!,
          to: row.m_recipient!,
          text: row.m_text!,
        });
        return void (outcomes[i] = ok({ message, dueNow: false }));
      }
      claimed.set(keyId, i);
    }
    toStore.push({ index: i, send });
  });

  if (expiredKeys.length > 0) {
    await executeBound(
      tx,
      `delete from idempotency_keys where (account_sid, key) in (${expiredKeys.map(() => "(?, ?)").join(", ")})`,
      expiredKeys.flatMap((item) => [item.account.sid, item.idemKey!]),
    );
  }

  // Leased senders: allocated one by one (each takes its recipient's advisory lock), in recipient
  // order so that two batches never wait for each other's locks in a cycle.
  const senders = new Map<number, { sender: string; leaseSid: string | null }>();
  const leased = toStore.filter((s) => items[s.index].leased).sort((a, b) => (a.send.to.number < b.send.to.number ? -1 : a.send.to.number > b.send.to.number ? 1 : 0));
  for (const s of leased) {
    const item = items[s.index];
    try {
      const lease = await allocateLease(tx, { recipient: s.send.to.number, accountSid: item.account.sid, messageSid: item.sid, now: item.now });
      senders.set(s.index, { sender: lease.poolNumber, leaseSid: lease.sid });
    } catch (err) {
      // A rule (LeaseLimitReached, NoLeasedNumberAvailable) fails this send only; a database error fails the batch.
      if (!(err instanceof ConnectError)) throw err;
      outcomes[s.index] = fail(err);
    }
  }

  const stored = toStore.filter((s) => outcomes[s.index] === undefined);
  if (stored.length > 0) {
    const columns: unknown[][] = MESSAGE_COLUMNS.map(() => []);
    for (const { index, send } of stored) {
      const item = items[index];
      const lease = senders.get(index);
      const isLeased = item.leased;
      const row = [
        item.sid,
        item.account.sid,
        item.propertySid,
        "Transmit",
        send.scheduled ? "Scheduled" : "Processing",
        isLeased ? "Leased" : send.fromKind === "E164" ? "E164" : "Alphanumeric",
        lease ? lease.sender : send.from,
        send.to.number,
        send.text,
        send.encoding,
        send.numSegments,
        send.deliveryReceipt,
        send.drWebhookUri,
        send.drWebhookMethod,
        // Lease options are kept only where a reply can come back: through a leased sender.
        isLeased ? send.forwardToSms : "",
        isLeased ? send.forwardFromSms : "",
        isLeased ? send.forwardToEmail : "",
        isLeased ? send.forwardFromEmail : "",
        isLeased ? send.webhookUri : "",
        isLeased ? send.webhookMethod : "POST",
        lease?.leaseSid ?? null,
        send.schedule === undefined ? null : new Date(send.schedule * 1000),
        send.scheduled ? new Date(send.schedule! * 1000) : item.now,
        item.now,
      ];
      for (let c = 0; c < row.length; c++) columns[c].push(row[c]);
      outcomes[index] = ok({
        message: create(MessageSchema, {
          messageSid: item.sid,
          accountSid: item.account.sid,
          propertySid: item.propertySid,
          from: lease ? lease.sender : send.from,
          to: send.to.number,
          text: send.text,
        }),
        dueNow: !send.scheduled,
      });
    }
    await executeBound(tx, INSERT_SQL, columns, "sb_send_insert");
    const keyed = stored.filter((s) => items[s.index].idemKey);
    if (keyed.length > 0) {
      await executeBound(
        tx,
        `insert into idempotency_keys (account_sid, key, message_sid, created_at) values ${keyed.map(() => "(?, ?, ?, ?)").join(", ")}`,
        keyed.flatMap((s) => [items[s.index].account.sid, items[s.index].idemKey!, items[s.index].sid, items[s.index].now]),
      );
    }
  }
  for (const { index, first } of repeats) {
    const o = outcomes[first];
    // The first send with this key failed (no lease to be had): the repeat is a send of its own.
    // Rare enough to redo the whole batch one send per transaction, where it is one.
    if (!o.ok) throw new Error("an Idempotency-Key repeated in a batch whose first send failed: retry one by one");
    outcomes[index] = ok({ message: o.value.message, dueNow: false });
  }
  return outcomes;
}
