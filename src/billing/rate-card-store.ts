/**
 * Statements on `rate_cards`, `rates` and `rate_imports` (docs/billing.md). A card's
 * rates are replaced whole (the operator's PUT, or the commit of a staged CSV import), read in
 * pages, and looked up per send by sb_rate_for (sql/sb_rate_for.sql): the longest prefix of the
 * destination with a rate in effect at the send's time. Amounts are bigint micro-units; they
 * cross to and from the driver as text, never as a JavaScript number.
 */
import type { EntityManager } from "@mikro-orm/sql";
import { executeBound } from "../db/bound-sql.js";
import type { Rate } from "./rate-rules.js";

/** A card without its rates. */
export interface RateCardSummary {
  name: string;
  /** How many rates it holds (every prefix and EffectiveFrom). */
  rateCount: number;
  createdAt: Date;
  updatedAt: Date;
}

/** One send to price: the account's card, the E164 destination and the accept time. */
export interface SendToPrice {
  card: string;
  destination: string;
  at: Date;
}

interface CardDbRow {
  name: string;
  rate_count: number | string;
  created_at: Date | string;
  updated_at: Date | string;
}

interface RateDbRow {
  prefix: string;
  price: string;
  effective_from: number | string;
}

function toSummary(r: CardDbRow): RateCardSummary {
  return { name: r.name, rateCount: Number(r.rate_count), createdAt: new Date(r.created_at), updatedAt: new Date(r.updated_at) };
}

function toRate(r: RateDbRow): Rate {
  return { prefix: r.prefix, pricePerSegment: BigInt(r.price), effectiveFrom: Number(r.effective_from) };
}

// The output names differ from the columns (price, and effective_from as seconds): an ORDER BY names the table's columns as rates.x.
const RATE_COLUMNS = "rates.prefix, rates.price_per_segment::text as price, extract(epoch from rates.effective_from)::float8 as effective_from";

/**
 * The lateral join that prices sends in a statement that has, per send, a card name, an E164
 * destination and an accept time: `left join lateral ${RATE_LOOKUP}(card, destination, at) as rate on true`
 * gives `rate.prefix` and `rate.price_per_segment` (micro-units; null: no rate). sb_rate_for is a
 * plain SQL function, which the planner inlines into the calling statement.
 */
export const RATE_LOOKUP = "sb_rate_for";

/**
 * Creates the card if it is new and replaces its rates, in the caller's transaction. The upsert
 * locks the card's row, so replaces and import commits of one card take turns and the last wins
 * whole, never a mix.
 */
export async function replaceRates(tx: EntityManager, name: string, rates: readonly Rate[], now: Date): Promise<RateCardSummary> {
  await lockCard(tx, name, now);
  await executeBound(tx, `delete from rates where card = ?`, [name]);
  if (rates.length > 0) {
    await executeBound(
      tx,
      `insert into rates (card, prefix, price_per_segment, effective_from)
       select ?, r.prefix, r.price, to_timestamp(r.effective_from)
         from unnest(?::text[], ?::bigint[], ?::bigint[]) as r(prefix, price, effective_from)`,
      [name, rates.map((r) => r.prefix), rates.map((r) => r.pricePerSegment.toString()), rates.map((r) => r.effectiveFrom)],
    );
  }
  await executeBound(tx, `update rate_cards set rate_count = ? where name = ?`, [rates.length, name]);
  return (await findRateCard(tx, name))!;
}

async function lockCard(tx: EntityManager, name: string, now: Date): Promise<void> {
  await executeBound(
    tx,
    `insert into rate_cards (name, rate_count, created_at, updated_at, version) values (?, 0, ?, ?, nextval('rate_card_versions'))
     on conflict (name) do update set updated_at = excluded.updated_at, version = nextval('rate_card_versions')`,
    [name, now, now],
  );
}

/** One card without its rates, or null. */
export async function findRateCard(em: EntityManager, name: string): Promise<RateCardSummary | null> {
  const rows = await executeBound<CardDbRow>(em, `select name, rate_count, created_at, updated_at from rate_cards where name = ?`, [name]);
  return rows[0] ? toSummary(rows[0]) : null;
}

/** A page of the cards by name, and how many there are. */
export async function listRateCards(em: EntityManager, limit: number, offset: number): Promise<{ cards: RateCardSummary[]; total: number }> {
  const rows = await executeBound<CardDbRow>(em, `select name, rate_count, created_at, updated_at from rate_cards order by name limit ? offset ?`, [
    limit,
    offset,
  ]);
  const total = await executeBound<{ n: number | string }>(em, `select count(*) as n from rate_cards`, []);
  return { cards: rows.map(toSummary), total: Number(total[0].n) };
}

/**
 * A page of a card's rates by prefix, then EffectiveFrom (the primary key's order); with `after`,
 * only those past that rate (keyset paging: a deep page costs what the first does).
 */
export async function pageRates(
  em: EntityManager,
  name: string,
  limit: number,
  offset: number,
  after?: { prefix: string; effectiveFrom: number },
): Promise<Rate[]> {
  const rows = after
    ? await executeBound<RateDbRow>(
        em,
        `select ${RATE_COLUMNS} from rates where rates.card = ? and (rates.prefix, rates.effective_from) > (?, to_timestamp(?::float8))
          order by rates.prefix, rates.effective_from limit ? offset ?`,
        [name, after.prefix, after.effectiveFrom, limit, offset],
      )
    : await executeBound<RateDbRow>(em, `select ${RATE_COLUMNS} from rates where rates.card = ? order by rates.prefix, rates.effective_from limit ? offset ?`, [
        name,
        limit,
        offset,
      ]);
  return rows.map(toRate);
}

/** The rate for one send (see sql/sb_rate_for.sql), or null when the card has none for the destination. */
export async function rateFor(em: EntityManager, send: SendToPrice): Promise<Rate | null> {
  const rows = await executeBound<RateDbRow>(em, `select ${RATE_COLUMNS} from ${RATE_LOOKUP}(?, ?, ?) as rates`, [send.card, send.destination, send.at]);
  return rows[0] ? toRate(rows[0]) : null;
}

/** The rates of many sends in one statement, in their order (null: no rate). */
export async function priceSends(em: EntityManager, sends: readonly SendToPrice[]): Promise<(Rate | null)[]> {
  if (sends.length === 0) return [];
  const rows = await executeBound<RateDbRow & { ord: number; price: string | null }>(
    em,
    `select rates.ord, ${RATE_COLUMNS} from sb_rate_for_batch(?::text[], ?::text[], ?::timestamptz[]) as rates order by rates.ord`,
    [sends.map((s) => s.card), sends.map((s) => s.destination), sends.map((s) => s.at)],
  );
  return rows.map((r) => (r.price === null ? null : toRate(r)));
}

/**
 * Stages a chunk of an import's rates with their CSV lines. False when a line was staged
 * already (a chunk sent twice, or two chunks overlapping): nothing of this chunk is kept then,
 * as the caller's transaction rolls back.
 */
export async function stageRates(
  tx: EntityManager,
  importSid: string,
  card: string,
  rows: readonly { line: number; rate: Rate }[],
  now: Date,
): Promise<boolean> {
  if (rows.length === 0) return true;
  const inserted = await executeBound<{ line: number }>(
    tx,
    `insert into rate_imports (import_sid, line, card, prefix, price_per_segment, effective_from, created_at)
     select ?, r.line, ?, r.prefix, r.price, to_timestamp(r.effective_from), ?
       from unnest(?::int[], ?::text[], ?::bigint[], ?::bigint[]) as r(line, prefix, price, effective_from)
     on conflict (import_sid, line) do nothing
     returning line`,
    [
      importSid,
      card,
      now,
      rows.map((r) => r.line),
      rows.map((r) => r.rate.prefix),
      rows.map((r) => r.rate.pricePerSegment.toString()),
      rows.map((r) => r.rate.effectiveFrom),
    ],
  );
  return inserted.length === rows.length;
}

/** The largest line an import has staged for a card (0: none), and how many rows. */
export async function stagedLines(em: EntityManager, importSid: string, card: string): Promise<{ lastLine: number; rows: number }> {
  const rows = await executeBound<{ last_line: number | null; n: number | string }>(
    em,
    `select max(line) as last_line, count(*) as n from rate_imports where import_sid = ? and card = ?`,
    [importSid, card],
  );
  return { lastLine: rows[0].last_line ?? 0, rows: Number(rows[0].n) };
}

/** What committing an import found. */
export type CommitOutcome =
  | { kind: "committed"; card: RateCardSummary }
  | { kind: "missing" }
  | { kind: "duplicate"; line: number; firstLine: number; prefix: string; effectiveFrom: number };

/**
 * Replaces the card's rates by the staged ones and forgets the import, in the caller's
 * transaction; nothing changes when the import is unknown or repeats a (Prefix, EffectiveFrom).
 */
export async function commitImport(tx: EntityManager, importSid: string, card: string, now: Date): Promise<CommitOutcome> {
  const staged = await stagedLines(tx, importSid, card);
  if (staged.rows === 0) return { kind: "missing" };
  const dup = await executeBound<{ line: number; first_line: number; prefix: string; effective_from: number | string }>(
    tx,
    `select line, first_line, prefix, extract(epoch from effective_from)::float8 as effective_from
       from (select line, prefix, effective_from,
                    min(line) over (partition by prefix, effective_from) as first_line
               from rate_imports where import_sid = ? and card = ?) s
      where line <> first_line
      order by line limit 1`,
    [importSid, card],
  );
  if (dup[0]) {
    const d = dup[0];
    return { kind: "duplicate", line: d.line, firstLine: d.first_line, prefix: d.prefix, effectiveFrom: Number(d.effective_from) };
  }
  await lockCard(tx, card, now);
  await executeBound(tx, `delete from rates where card = ?`, [card]);
  await executeBound(
    tx,
    `insert into rates (card, prefix, price_per_segment, effective_from)
     select card, prefix, price_per_segment, effective_from from rate_imports where import_sid = ? and card = ?`,
    [importSid, card],
  );
  await executeBound(tx, `delete from rate_imports where import_sid = ?`, [importSid]);
  await executeBound(tx, `update rate_cards set rate_count = ? where name = ?`, [staged.rows, card]);
  return { kind: "committed", card: (await findRateCard(tx, card))! };
}

/** A whole card as a process keeps it in memory (rate-cache.ts): its version and every rate, read in one snapshot. */
export interface CardSnapshot {
  version: string;
  rates: Rate[];
}

/**
 * A card's version and all its rates, in one statement (so the rates are the version's), or null
 * when there is no such card; null too when it holds more than `maxRates` (not worth keeping).
 */
export async function loadCard(em: EntityManager, name: string, maxRates: number): Promise<CardSnapshot | null> {
  const rows = await executeBound<RateDbRow & { version: string; rate_count: number | string }>(
    em,
    `select rc.version::text as version, rc.rate_count, ${RATE_COLUMNS}
       from rate_cards rc left join rates on rates.card = rc.name and rc.rate_count <= ?
      where rc.name = ?`,
    [maxRates, name],
  );
  if (rows.length === 0 || Number(rows[0].rate_count) > maxRates) return null;
  return { version: rows[0].version, rates: rows[0].prefix === null ? [] : rows.map(toRate) };
}

/** The current version of each of these cards (a card that no longer exists is absent). */
export async function cardVersions(em: EntityManager, names: readonly string[]): Promise<Map<string, string>> {
  if (names.length === 0) return new Map();
  const rows = await executeBound<{ name: string; version: string }>(em, `select name, version::text as version from rate_cards where name = any(?::text[])`, [
    [...names],
  ]);
  return new Map(rows.map((r) => [r.name, r.version]));
}

/** Forgets imports staged before `before` and never committed (a CLI stopped half-way). */
export async function purgeStaleImports(em: EntityManager, before: Date): Promise<void> {
  await executeBound(em, `delete from rate_imports where created_at < ?`, [before]);
}
