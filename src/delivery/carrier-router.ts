import type { MikroORM } from "@mikro-orm/sql";
import type { Logger } from "pino";
import { type Carrier, CarrierError, type CarrierEvents, type CarrierStatusInfo, type OutboundSms, type SubmitResult } from "./carrier.js";
import { NO_ROUTE } from "../common/errors.js";
import { type CarrierRecord, listCarriers, publicUrl } from "../admin/carrier-store.js";
import { listRoutes, type RouteRecord } from "../admin/route-store.js";
import type { Clock } from "../common/clock.js";
import { type CardRates, type CostQuery, createCostLookup, leastCostOrder } from "./least-cost.js";

/** The name of the environment's carrier (CARRIER, SMPP_URL, KANNEL_*), the one route while the route table is empty. */
export const DEFAULT_CARRIER_NAME = "default";

/** What the router reports of each of its links (the operator API's Link, the metrics). */
export interface LinkInfo {
  name: string;
  /** "Bound", "Connecting", "Down", or "" for a carrier without a standing link. */
  link: CarrierStatusInfo["link"];
  /** Submissions handed to the carrier and not yet answered (waiting in its queue included). */
  inFlight: number;
  /** Submissions waiting in the carrier's queue for its window or rate. */
  queued: number;
  submitted: number;
  failed: number;
}

/** Options of the carrier router. */
export interface CarrierRouterOptions {
  orm: MikroORM;
  log?: Logger;
  /** The environment's carrier: the one route while the route table is empty. */
  fallback: Carrier;
  /** Builds the Carrier of a configured row (carriers/ knows the kinds). */
  build(spec: CarrierRecord): Promise<Carrier>;
  /** How often the configuration is read again, ms (default 2000). */
  pollMs?: number;
  /** How often the links' states are looked at, to move waiting submissions off a dropped link, ms (default 100). */
  watchMs?: number;
  /** The time of a LeastCost lookup outside a dispatcher round (default: the system's). */
  clock?: Clock;
}

/** A Carrier that routes each message to one of several carriers by the route table. */
export interface CarrierRouter extends Carrier {
  /** Reads the configuration now (after an operator change in this process). */
  refresh(): Promise<void>;
  links(): LinkInfo[];
}

interface Link {
  sid: string;
  name: string;
  version: string;
  /** Its CostCard (LeastCost orders by it); null: none. Changed in place: a new card keeps the link open. */
  costCard: string | null;
  carrier: Carrier;
  started: boolean;
  inFlight: number;
  submitted: number;
  failed: number;
  closing: boolean;
  /** Aborted when the link drops: submissions waiting on it move to the next carrier of their route. */
  abort: AbortController;
  wasUp: boolean;
}

interface CompiledRoute {
  prefix: string | null;
  accountSid: string | null;
  links: Link[];
  strategy: RouteRecord["strategy"];
  next: number;
}

/** Whether a link takes messages: bound, or a carrier without a standing link (Kannel, the simulator). */
function isUp(link: Link): boolean {
  const s = link.carrier.status?.();
  return !s || s.link === "" || s.link === "Bound";
}

/** The first route in order whose prefix and account match, or undefined. */
function matchRoute(routes: CompiledRoute[], to: string, accountSid: string | undefined): CompiledRoute | undefined {
  return routes.find((r) => (r.prefix === null || to.startsWith(r.prefix)) && (r.accountSid === null || r.accountSid === accountSid));
}

/**
 * Why a message no route matches fails NoRoute, recorded as its CarrierError (issue 41): the route
 * table has routes (an empty one routes everything to the environment's carrier), none for this
 * destination and account, and what the operator does about it.
 */
export function noRouteReason(to: string, accountSid: string | undefined, routeCount: number): string {
  return (
    `No route matches To ${to} from account ${accountSid ?? "(none)"}: none of the route table's ${routeCount} route(s) has a Prefix and AccountSid ` +
    `that match. Add one (PUT /admin/v1/Routes, npx switchboard replace-routes), for instance a last route without Prefix and AccountSid.`
  );
}

/**
 * The carriers to try for one message, in order. Failover: those up, in the route's order.
 * RoundRobin: those up, starting one further along for each message. LeastCost: those up, cheapest
 * first for the message by `costOf` (leastCostOrder: those without a cost last, in the route's
 * order). With none up, the first of that order alone (Failover, RoundRobin: the route's first;
 * LeastCost: the cheapest): it holds the message until its link comes back (SMPP waits for the bind
 * within its submit deadline) or refuses it as temporary, and the dispatcher retries it later.
 */
export function carriersToTry<T>(
  route: { links: T[]; strategy: RouteRecord["strategy"]; next: number },
  up: (l: T) => boolean,
  costOf: (l: T) => bigint | null | undefined = () => null,
): T[] {
  const links = route.strategy === "LeastCost" ? leastCostOrder(route.links, costOf) : route.links;
  const live = links.filter(up);
  if (live.length === 0) return links.slice(0, 1);
  if (route.strategy !== "RoundRobin") return live;
  const start = route.next++ % live.length;
  if (route.next >= Number.MAX_SAFE_INTEGER) route.next = 0;
  return [...live.slice(start), ...live.slice(0, start)];
}

/**
 * Creates the router. Every process that dispatches keeps the carriers and routes in memory and
 * reads them again every pollMs (and at once on refresh()), so a change made through any process
 * reaches every dispatcher within seconds. It opens one link per configured carrier (the Carrier
 * its `build` makes), and a removed or changed carrier's link is stopped once the submissions
 * it holds have been answered. While the route table is empty (no carrier configured yet, or
 * carriers added and no route naming them yet), the environment's carrier is the one route, named
 * `default` (issue 41: adding a carrier no longer leaves every message without a route). Each message goes to the first matching route's carriers in
 * carriersToTry order: a temporary refusal passes it to the next, a permanent one fails it, no
 * matching route fails it with NoRoute. A message goes to a second carrier only after the first
 * refused it, or dropped its link before answering (the documented case where it may arrive twice).
 */
export function createCarrierRouter(opts: CarrierRouterOptions): CarrierRouter {
  const pollMs = opts.pollMs ?? 2000;
  const watchMs = opts.watchMs ?? 100;
  let events: CarrierEvents | undefined;
  let links = new Map<string, Link>();
  let routes: CompiledRoute[] = [];
  let fingerprint = "";
  let poll: NodeJS.Timeout | undefined;
  let watch: NodeJS.Timeout | undefined;
  let stopped = true;
  let loading: Promise<void> | undefined;
  const fallback: Link = newLink(DEFAULT_CARRIER_NAME, DEFAULT_CARRIER_NAME, "", null, opts.fallback);
  /** Links being closed: stopped once their last submission is answered. */
  const closing = new Set<Link>();
  const costs = createCostLookup({ orm: opts.orm, log: opts.log });

  function newLink(sid: string, name: string, version: string, costCard: string | null, carrier: Carrier): Link {
    return {
      sid,
      name,
      version,
      costCard,
      carrier,
      started: false,
      inFlight: 0,
      submitted: 0,
      failed: 0,
      closing: false,
      abort: new AbortController(),
      wasUp: false,
    };
  }

  /** The cost cards of a LeastCost route's carriers, each once; none for another strategy. */
  function costCards(route: CompiledRoute): string[] {
    if (route.strategy !== "LeastCost") return [];
    return [...new Set(route.links.flatMap((l) => (l.costCard === null ? [] : [l.costCard])))];
  }

  /** The events a link reports through: its segment receipts carry its name. */
  function linkEvents(name: string): CarrierEvents {
    const e = events!;
    return {
      ...e,
      deliveryReport: (r) => e.deliveryReport(r),
      inbound: (sms) => e.inbound(sms),
      segmentReceipt: e.segmentReceipt ? (r) => e.segmentReceipt!({ ...r, carrier: name }) : undefined,
    };
  }

  async function startLink(link: Link): Promise<void> {
    if (link.started || !events || stopped) return;
    link.started = true;
    await link.carrier.start(linkEvents(link.name));
  }

  async function closeLink(link: Link): Promise<void> {
    link.closing = true;
    if (link.inFlight > 0) {
      closing.add(link);
      return;
    }
    closing.delete(link);
    if (!link.started) return;
    link.started = false;
    try {
      await link.carrier.stop();
    } catch (err) {
      opts.log?.warn({ err, carrier: link.name }, "could not stop a removed carrier's link");
    }
  }

  /**
   * Applies a configuration read from the database. Every carrier row gets its link (its state
   * shows before a route names it); an empty route table routes everything to the environment's
   * carrier.
   */
  async function apply(carriers: CarrierRecord[], table: RouteRecord[]): Promise<void> {
    const next = new Map<string, Link>();
    for (const c of carriers) {
      // What the link is made of: a carrier whose connection changed gets a new link, the old one
      // closes. Its name and CostCard are not: the link stays open when only they change.
      const version = JSON.stringify([c.kind, c.url, c.tps, c.window, c.systemType]);
      const old = links.get(c.sid);
      if (old && old.version === version && !old.closing) {
        old.name = c.name;
        old.costCard = c.costCard;
        next.set(c.sid, old);
        continue;
      }
      let carrier: Carrier;
      try {
        carrier = await opts.build(c);
      } catch (err) {
        // One unusable row leaves the others routing; the message never carries the password.
        const reason = String((err as Error)?.message ?? err)
          .split(c.url)
          .join(publicUrl(c.url));
        opts.log?.error({ carrier: c.name, kind: c.kind, reason }, "could not open a configured carrier; routes skip it");
        continue;
      }
      const link = newLink(c.sid, c.name, version, c.costCard, carrier);
      await startLink(link);
      next.set(c.sid, link);
      opts.log?.info({ carrier: c.name, kind: c.kind }, old ? "carrier changed: its link is opened again" : "carrier link opened");
    }
    if (table.length === 0) {
      next.set(fallback.sid, fallback);
      await startLink(fallback);
      routes = [{ prefix: null, accountSid: null, links: [fallback], strategy: "Failover", next: 0 }];
    } else {
      routes = table.map((r) => ({
        prefix: r.prefix,
        accountSid: r.accountSid,
        links: r.carriers.flatMap((sid) => next.get(sid) ?? []),
        strategy: r.strategy,
        next: 0,
      }));
    }
    const previous = links;
    links = next;
    for (const [sid, link] of previous) {
      if (next.get(sid) === link) continue;
      // The environment's carrier stays open once started (its callbacks are the app's routes).
      if (link === fallback) continue;
      opts.log?.info({ carrier: link.name, inFlight: link.inFlight }, "carrier removed or changed: closing its link once its submissions are answered");
      await closeLink(link);
    }
  }

  async function load(): Promise<void> {
    const em = opts.orm.em.fork();
    const carriers = await listCarriers(em);
    const table = await listRoutes(em);
    const print = JSON.stringify([carriers.map((c) => [c.sid, c.name, c.updatedAt.getTime(), c.costCard]), table]);
    if (print === fingerprint) return;
    await apply(carriers, table);
    fingerprint = print;
  }

  /** One load at a time; a refresh during a load waits for it and loads again. */
  function reload(): Promise<void> {
    const run = (loading ?? Promise.resolve()).then(load, load);
    // What the next load waits for: this one settled, its failure left to the caller of `run` (a
    // database outage must not become an unhandled rejection, which would stop the process).
    const settled: Promise<void> = run
      .then(
        () => undefined,
        () => undefined,
      )
      .finally(() => {
        if (loading === settled) loading = undefined;
      });
    loading = settled;
    return run;
  }

  /** Aborts the submissions waiting on a link that just dropped, so they move to the next carrier. */
  function watchLinks(): void {
    for (const link of links.values()) {
      const up = isUp(link);
      if (link.wasUp && !up) {
        opts.log?.warn({ carrier: link.name }, "carrier link down: its share goes to the next carriers of its routes");
        link.abort.abort(new CarrierError(`carrier ${link.name}'s link went down`, "CarrierUnavailable", false));
        link.abort = new AbortController();
      }
      link.wasUp = up;
    }
  }

  async function submitTo(link: Link, sms: OutboundSms, moveOn: boolean): Promise<SubmitResult> {
    link.inFlight++;
    try {
      const result = await link.carrier.submit(moveOn ? { ...sms, signal: link.abort.signal } : sms);
      link.submitted++;
      return { ...result, carrier: link.name };
    } catch (err) {
      link.failed++;
      throw err;
    } finally {
      link.inFlight--;
      if (link.closing && link.inFlight === 0) void closeLink(link);
    }
  }

  return {
    name: "router",
    get confirmWaitMs() {
      let most: number | undefined;
      for (const l of links.values()) if (l.carrier.confirmWaitMs !== undefined) most = Math.max(most ?? 0, l.carrier.confirmWaitMs);
      return most ?? opts.fallback.confirmWaitMs;
    },
    routes: opts.fallback.routes,

    async submit(sms) {
      const route = matchRoute(routes, sms.to, sms.accountSid);
      if (!route) {
        const reason = noRouteReason(sms.to, sms.accountSid, routes.length);
        throw new CarrierError(reason, NO_ROUTE, true, reason);
      }
      const cards = costCards(route);
      const rates: CardRates =
        cards.length === 0 ? new Map() : await costs.take({ messageSid: sms.messageSid, to: sms.to, cards }, opts.clock?.now() ?? new Date());
      const order = carriersToTry(route, isUp, (l) => (l.costCard === null ? null : rates.get(l.costCard)));
      let last: CarrierError | undefined;
      for (let i = 0; i < order.length; i++) {
        try {
          return await submitTo(order[i], sms, i < order.length - 1);
        } catch (err) {
          const refusal = err instanceof CarrierError ? err : new CarrierError(String((err as Error)?.message ?? err), "CarrierError", false);
          if (refusal.permanent) throw refusal;
          last = refusal;
          if (i < order.length - 1)
            opts.log?.info(
              { messageSid: sms.messageSid, carrier: order[i].name, errorCode: refusal.errorCode },
              "carrier refused for now: trying the next of the route",
            );
        }
      }
      throw last ?? new CarrierError("no carrier of the route", "CarrierUnavailable", false);
    },

    async prepare(batch, at) {
      const queries: CostQuery[] = [];
      for (const sms of batch) {
        const route = matchRoute(routes, sms.to, sms.accountSid);
        const cards = route ? costCards(route) : [];
        if (cards.length > 0) queries.push({ messageSid: sms.messageSid, to: sms.to, cards });
      }
      await costs.prepare(queries, at);
    },

    capacity(withinMs) {
      let sum = 0;
      for (const l of links.values()) sum += l.carrier.capacity ? l.carrier.capacity(withinMs) : Infinity;
      return sum;
    },

    async start(e) {
      events = e;
      stopped = false;
      await reload();
      poll = setInterval(() => {
        if (stopped) return;
        reload().catch((err: unknown) => opts.log?.warn({ err }, "could not read the carriers and routes; keeping the last ones"));
      }, pollMs);
      poll.unref();
      watch = setInterval(watchLinks, watchMs);
      watch.unref();
    },

    async stop() {
      stopped = true;
      if (poll) clearInterval(poll);
      if (watch) clearInterval(watch);
      await loading?.catch(() => undefined);
      const all = new Set([...links.values(), ...closing]);
      if (fallback.started) all.add(fallback);
      for (const l of all) {
        if (!l.started) continue;
        l.started = false;
        await l.carrier.stop();
      }
      links = new Map();
      closing.clear();
      fingerprint = "";
    },

    refresh: () => (stopped ? Promise.resolve() : reload()),

    links() {
      return [...links.values()].map((l) => ({
        name: l.name,
        link: l.carrier.status?.().link ?? "",
        inFlight: l.inFlight,
        queued: l.carrier.status?.().queued ?? 0,
        submitted: l.submitted,
        failed: l.failed,
      }));
    },
  };
}
