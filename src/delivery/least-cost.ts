/**
 * LeastCost routing (docs/billing.md#carrier-costs-and-least-cost-routing): the rule that orders a
 * route's carriers by what each costs for one message's destination, and the cost lookups it
 * needs, made for a whole dispatcher round in one statement (rate-card-store.ts priceSends, the
 * same sb_rate_for as the send's price: longest prefix, EffectiveFrom at the given time). Nothing
 * is cached across rounds: a rate card replaced, or a rate whose EffectiveFrom comes, counts from
 * the next round without any signal, and a round's one statement costs a few microseconds per
 * message (at most 15 primary-key probes per destination and card).
 */
import type { MikroORM } from "@mikro-orm/sql";
import type { Logger } from "pino";
import { priceSends, type SendToPrice } from "../billing/rate-card-store.js";

/** One message's per-segment rate on each cost card of its route (micro-units); null: the card has no rate for it. */
export type CardRates = ReadonlyMap<string, bigint | null>;

/**
 * The LeastCost order of a route's carriers for one message: cheapest first by `costOf`; a carrier
 * without a cost (no CostCard, or no rate on it for the destination) after every carrier with one;
 * ties, and the carriers without a cost among themselves, in the route's order. The segments are
 * the same on every carrier, so the rate per segment orders them as the message's cost would.
 */
export function leastCostOrder<T>(links: readonly T[], costOf: (link: T) => bigint | null | undefined): T[] {
  return links
    .map((link, i) => ({ link, i, cost: costOf(link) ?? null }))
    .sort((a, b) => {
      if (a.cost === null || b.cost === null) return a.cost === b.cost ? a.i - b.i : a.cost === null ? 1 : -1;
      return a.cost < b.cost ? -1 : a.cost > b.cost ? 1 : a.i - b.i;
    })
    .map((x) => x.link);
}

/** One message a LeastCost route carries: its Sid, destination and the cost cards of its route's carriers. */
export interface CostQuery {
  messageSid: string;
  to: string;
  cards: readonly string[];
}

/** The rates LeastCost orders by: looked up for a round at once, taken per message at its submission. */
export interface CostLookup {
  /** Looks up the rates of a round's messages in one statement (nothing for an empty round); never throws. */
  prepare(queries: readonly CostQuery[], at: Date): Promise<void>;
  /**
   * One message's rates, forgotten once taken: those prepare found, or (a message no round
   * prepared: a submission from outside the dispatcher) looked up alone. On a database error
   * (here or in prepare), no rates: the route's order.
   */
  take(query: CostQuery, at: Date): Promise<CardRates>;
}

/** How many prepared messages are kept at most: a round's messages are taken within the round, this only bounds what a lost one leaves. */
const MAX_PREPARED = 100_000;

/** Creates the lookups of one router. */
export function createCostLookup(opts: { orm: MikroORM; log?: Logger }): CostLookup {
  /** Each prepared message's rates, in the order prepared (the oldest are dropped past MAX_PREPARED). */
  const prepared = new Map<string, CardRates>();

  /** The rates of many messages in one statement: each distinct (card, destination) once. */
  async function lookUp(queries: readonly CostQuery[], at: Date): Promise<Map<string, CardRates>> {
    const pairs = new Map<string, SendToPrice>();
    for (const q of queries) for (const card of q.cards) pairs.set(`${card}\n${q.to}`, { card, destination: q.to, at });
    const keys = [...pairs.keys()];
    const rates = await priceSends(opts.orm.em.fork(), [...pairs.values()]);
    const byPair = new Map(keys.map((k, i) => [k, rates[i]?.pricePerSegment ?? null]));
    return new Map(queries.map((q) => [q.messageSid, new Map(q.cards.map((card) => [card, byPair.get(`${card}\n${q.to}`) ?? null]))]));
  }

  return {
    async prepare(queries, at) {
      if (queries.length === 0) return;
      try {
        for (const [sid, rates] of await lookUp(queries, at)) prepared.set(sid, rates);
      } catch (err) {
        // The messages still go, in their routes' order: no statement per message while the database is away.
        opts.log?.warn({ err, count: queries.length }, "could not look up the carriers' costs for LeastCost routes: their carriers are tried in order");
        for (const q of queries) prepared.set(q.messageSid, new Map());
      }
      for (const sid of prepared.keys()) {
        if (prepared.size <= MAX_PREPARED) break;
        prepared.delete(sid);
      }
    },

    async take(query, at) {
      const found = prepared.get(query.messageSid);
      prepared.delete(query.messageSid);
      // A route changed between the round's lookup and the submission may name a card not looked up.
      if (found && (found.size === 0 || query.cards.every((c) => found.has(c)))) return found;
      try {
        return (await lookUp([query], at)).get(query.messageSid) ?? new Map();
      } catch (err) {
        opts.log?.warn({ err, messageSid: query.messageSid }, "could not look up the carriers' costs: LeastCost tries the route's carriers in order");
        return new Map();
      }
    },
  };
}
