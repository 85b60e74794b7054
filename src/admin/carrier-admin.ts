/**
 * The operator's carriers and route table (issue 30; docs/operations.md#carriers-and-routes): AdminService's ListCarriers,
 * AddCarrier, UpdateCarrier, RemoveCarrier, GetRoutes and ReplaceRoutes. Every field is checked
 * here (a 400 naming it); the stores hold the statements. A carrier's password is stored and
 * never returned: every answer carries `publicUrl`.
 */
import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { EntityManager } from "@mikro-orm/sql";
import {
  type AddCarrierRequest,
  type AdminService,
  type Carrier as CarrierPb,
  CarrierSchema,
  ListCarriersResponseSchema,
  type RemoveCarrierRequest,
  RemoveCarrierResponseSchema,
  type ReplaceRoutesRequest,
  RouteSchema,
  RouteTableSchema,
  type UpdateCarrierRequest,
} from "../../gen/switchboard/admin/v1/admin_pb.js";
import type { Clock } from "../common/clock.js";
import { apiError, fieldErrors, type FieldProblem, notFound, quoted } from "../common/errors.js";
import { isSid, newSid } from "../common/sid.js";
import { CARRIER_KINDS, type CarrierKind } from "./carrier.entity.js";
import {
  type CarrierRecord,
  deleteUnroutedCarrier,
  findCarrier,
  insertCarrier,
  listCarriers,
  lockCarriers,
  publicUrl,
  updateCarrier,
} from "./carrier-store.js";
import { ROUTE_STRATEGIES, type RouteStrategy } from "./route.entity.js";
import { listRoutes, replaceRoutes, type RouteRecord } from "./route-store.js";
import { existingAccountSids } from "../accounts/account-store.js";
import { findRateCard } from "../billing/rate-card-store.js";
import { cardNameProblem } from "../billing/rate-rules.js";

/** The most routes a table holds. */
export const MAX_ROUTES = 1000;
/** The most carriers one route names. */
export const MAX_ROUTE_CARRIERS = 16;

/** What the carrier and route methods need besides the request's EntityManager. */
export interface CarrierAdminDeps {
  clock: Clock;
  em(ctx: HandlerContext): EntityManager;
  /** The answering process's link to each carrier, by name ("Bound", "Connecting", "Down"; absent: "-"). */
  carrierLinks?: () => ReadonlyMap<string, string>;
  /**
   * Tells this process's dispatcher that carriers or routes changed (others notice within
   * seconds); the change is answered once this process has read it, so its next dispatch uses it.
   */
  routingChanged?: () => Promise<void>;
}

const NAME_RE = /^[A-Za-z0-9._-]{1,64}$/;
/** "Failover, RoundRobin or LeastCost", for the refusals. */
const STRATEGY_LIST = `${ROUTE_STRATEGIES.slice(0, -1).join(", ")} or ${ROUTE_STRATEGIES[ROUTE_STRATEGIES.length - 1]}`;
const PREFIX_RE = /^\+[0-9]{1,15}$/;

function problem(field: string, message: string, code: FieldProblem["code"] = "InvalidParameter"): FieldProblem {
  return { field, code, message };
}

function checkKind(kind: string, field = "Kind"): CarrierKind | FieldProblem {
  const known = CARRIER_KINDS.find((k) => k === kind);
  if (kind === "") return problem(field, `${field} is required: ${CARRIER_KINDS.join(", ")}.`, "MissingParameter");
  return known ?? problem(field, `${field} must be ${CARRIER_KINDS.join(", ")}; got ${quoted(kind)}.`);
}

/** The problem with a Url for a kind of carrier, or undefined when it is fine. */
export function urlProblem(kind: CarrierKind, url: string): FieldProblem | undefined {
  if (kind === "simulator") {
    return url === "" || url.startsWith("simulator:")
      ? undefined
      : problem("Url", `Url of a simulator carrier must be simulator:// or empty; got ${quoted(url)}.`);
  }
  if (url === "") return problem("Url", "Url is required.", "MissingParameter");
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return problem("Url", `Url must be an absolute URL; got ${quoted(publicUrl(url) || "(unreadable)")}.`);
  }
  if (kind === "smpp") {
    if (u.protocol !== "smpp:" && u.protocol !== "smpps:")
      return problem("Url", "Url of an smpp carrier must be smpp://system_id:password@host:port or smpps://….");
    if (!u.hostname || !u.username) return problem("Url", "Url of an smpp carrier must name the system_id and the host: smpp://system_id:password@host:port.");
    return undefined;
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") return problem("Url", "Url of a kannel carrier must be its http(s) sendsms URL.");
  return undefined;
}

function checkTps(tps: number | undefined, out: FieldProblem[]): void {
  if (tps !== undefined && (!Number.isFinite(tps) || tps < 0 || tps > 100_000))
    out.push(problem("Tps", `Tps must be a number from 0 (no limit) to 100000; got ${tps}.`));
}

function checkWindow(window: number | undefined, out: FieldProblem[]): void {
  if (window !== undefined && (window < 1 || window > 1000)) out.push(problem("Window", `Window must be from 1 to 1000; got ${window}.`));
}

function checkSystemType(systemType: string | undefined, out: FieldProblem[]): void {
  if (systemType !== undefined && systemType.length > 12) out.push(problem("SystemType", "SystemType must be at most 12 characters."));
}

function checkCarrierName(name: string, out: FieldProblem[]): void {
  if (name === "") out.push(problem("Name", "Name is required.", "MissingParameter"));
  else if (!NAME_RE.test(name)) out.push(problem("Name", `Name must be 1 to 64 letters, digits, '.', '_' or '-'; got ${quoted(name)}.`));
}

/**
 * A CostCard (docs/billing.md#carrier-costs-and-least-cost-routing): the name of an existing rate
 * card, null for "" (none), or a problem. An unknown card is a 400 naming CostCard, not a 404: it
 * is a reference in the body, as an account's RateCard is.
 */
async function checkCostCard(em: EntityManager, costCard: string, out: FieldProblem[]): Promise<string | null | undefined> {
  if (costCard === "") return null;
  const shape = cardNameProblem(costCard, "CostCard");
  if (shape) out.push(shape);
  else if (!(await findRateCard(em, costCard))) out.push(problem("CostCard", `CostCard ${quoted(costCard)} is not a rate card.`));
  else return costCard;
  return undefined;
}

/** A carrier as the operator sees it: the Url without its password, this process's link, its CostCard ("": none). */
export function toCarrierPb(c: CarrierRecord, link: string, warning?: string): CarrierPb {
  return create(CarrierSchema, {
    carrierSid: c.sid,
    name: c.name,
    kind: c.kind,
    url: publicUrl(c.url),
    tps: c.tps,
    window: c.window,
    link,
    warning,
    costCard: c.costCard ?? "",
  });
}

/** AddCarrier's Warning while the route table is empty (issue 41): nothing changed for the messages, and what the first route table does. */
export function defaultRouteWarning(name: string): string {
  return (
    `The route table is empty: the environment's carrier (the default route) keeps taking every message and ${name} gets none until a route names it. ` +
    `The first route table you set (PUT /admin/v1/Routes, npx switchboard replace-routes) replaces that default route, and a message no route matches ` +
    `then fails with NoRoute: end the table with a route without Prefix and AccountSid.`
  );
}

/** How a route reads in a refusal: "Routes[0] (Prefix +61, any account)". */
function describeRoute(r: RouteRecord, i: number): string {
  return `Routes[${i}] (${r.prefix === null ? "any destination" : `Prefix ${r.prefix}`}, ${r.accountSid === null ? "any account" : `AccountSid ${r.accountSid}`})`;
}

/**
 * Routes an earlier route shadows completely (issue 41): every message the later one matches, the
 * earlier matches first (its Prefix absent or a prefix of the later's, its AccountSid absent or the
 * same), so the later route would never carry a message. One problem per such route, naming the
 * first route that shadows it.
 */
export function shadowedRoutes(routes: RouteRecord[]): FieldProblem[] {
  const problems: FieldProblem[] = [];
  routes.forEach((later, j) => {
    const i = routes.findIndex(
      (earlier, k) =>
        k < j &&
        (earlier.prefix === null || (later.prefix !== null && later.prefix.startsWith(earlier.prefix))) &&
        (earlier.accountSid === null || earlier.accountSid === later.accountSid),
    );
    if (i >= 0) {
      problems.push(
        problem(
          `Routes[${j}]`,
          `${describeRoute(later, j)} would never be used: ${describeRoute(routes[i], i)} comes first and matches every message it matches. Remove it, or move it before Routes[${i}].`,
        ),
      );
    }
  });
  return problems;
}

/** Checks a route table field by field (Routes[i].Field); returns the routes as stored. */
function checkRoutes(req: ReplaceRoutesRequest): { routes: RouteRecord[]; problems: FieldProblem[] } {
  const problems: FieldProblem[] = [];
  if (req.routes.length > MAX_ROUTES) problems.push(problem("Routes", `Routes holds at most ${MAX_ROUTES} routes; got ${req.routes.length}.`));
  const routes = req.routes.map((r, i): RouteRecord => {
    const at = `Routes[${i}]`;
    if (r.prefix !== undefined && !PREFIX_RE.test(r.prefix)) {
      problems.push(problem(`${at}.Prefix`, `${at}.Prefix must be an E164 prefix such as +61 (+ and 1 to 15 digits); got ${quoted(r.prefix)}.`));
    }
    if (r.accountSid !== undefined && !isSid(r.accountSid, "AC"))
      problems.push(problem(`${at}.AccountSid`, `${at}.AccountSid must be an AccountSid; got ${quoted(r.accountSid)}.`));
    if (r.carriers.length === 0) problems.push(problem(`${at}.Carriers`, `${at}.Carriers must name at least one CarrierSid.`, "MissingParameter"));
    if (r.carriers.length > MAX_ROUTE_CARRIERS) problems.push(problem(`${at}.Carriers`, `${at}.Carriers names at most ${MAX_ROUTE_CARRIERS} carriers.`));
    r.carriers.forEach((c, j) => {
      if (!isSid(c, "CR")) problems.push(problem(`${at}.Carriers[${j}]`, `${at}.Carriers[${j}] must be a CarrierSid; got ${quoted(c)}.`));
      else if (r.carriers.indexOf(c) !== j) problems.push(problem(`${at}.Carriers[${j}]`, `${at}.Carriers[${j}] names ${c} twice.`));
    });
    const strategy = ROUTE_STRATEGIES.find((s) => s === r.strategy);
    if (r.strategy === "") problems.push(problem(`${at}.Strategy`, `${at}.Strategy is required: ${STRATEGY_LIST}.`, "MissingParameter"));
    else if (!strategy) problems.push(problem(`${at}.Strategy`, `${at}.Strategy must be ${STRATEGY_LIST}; got ${quoted(r.strategy)}.`));
    return { prefix: r.prefix ?? null, accountSid: r.accountSid ?? null, carriers: [...r.carriers], strategy: (strategy ?? "Failover") as RouteStrategy };
  });
  // Shadowing is judged on routes whose own fields are fine (a bad prefix says nothing of what it matches).
  if (problems.length === 0) problems.push(...shadowedRoutes(routes));
  return { routes, problems };
}

function routeTable(routes: RouteRecord[]) {
  return create(RouteTableSchema, {
    routes: routes.map((r) =>
      create(RouteSchema, { prefix: r.prefix ?? undefined, accountSid: r.accountSid ?? undefined, carriers: r.carriers, strategy: r.strategy }),
    ),
  });
}

/** The carrier and route methods of AdminService. */
export function createCarrierAdmin(
  deps: CarrierAdminDeps,
): Pick<ServiceImpl<typeof AdminService>, "listCarriers" | "addCarrier" | "updateCarrier" | "removeCarrier" | "getRoutes" | "replaceRoutes"> {
  const link = (name: string) => deps.carrierLinks?.().get(name) ?? "-";
  const changed = async () => deps.routingChanged?.();
  return {
    async listCarriers(_req: unknown, ctx: HandlerContext) {
      const carriers = await listCarriers(deps.em(ctx));
      return create(ListCarriersResponseSchema, { carriers: carriers.map((c) => toCarrierPb(c, link(c.name))) });
    },

    async addCarrier(req: AddCarrierRequest, ctx: HandlerContext) {
      const em = deps.em(ctx);
      const problems: FieldProblem[] = [];
      checkCarrierName(req.name, problems);
      const kind = checkKind(req.kind);
      if (typeof kind === "string") {
        const p = urlProblem(kind, req.url);
        if (p) problems.push(p);
      } else problems.push(kind);
      checkTps(req.tps, problems);
      checkWindow(req.window, problems);
      checkSystemType(req.systemType, problems);
      // Absent or "": no cost card.
      const costCard = req.costCard === undefined ? null : await checkCostCard(em, req.costCard, problems);
      if (problems.length > 0) throw fieldErrors(problems);
      const now = deps.clock.now();
      const added = await insertCarrier(em, {
        sid: newSid("CR"),
        name: req.name,
        kind: kind as CarrierKind,
        url: req.url,
        tps: req.tps ?? 0,
        window: req.window ?? 10,
        systemType: req.systemType ?? "",
        costCard: costCard ?? null,
        createdAt: now,
        updatedAt: now,
      });
      await changed();
      // Nothing changes for the messages while no route names the carrier: say so, and what the first route table does.
      const unrouted = (await listRoutes(em)).length === 0;
      return toCarrierPb(added, link(added.name), unrouted ? defaultRouteWarning(added.name) : undefined);
    },

    async updateCarrier(req: UpdateCarrierRequest, ctx: HandlerContext) {
      const em = deps.em(ctx);
      if (!isSid(req.carrierSid, "CR")) throw notFound("Carrier", req.carrierSid);
      const current = await findCarrier(em, req.carrierSid);
      if (!current) throw notFound("Carrier", req.carrierSid);
      const problems: FieldProblem[] = [];
      if (req.name !== undefined) checkCarrierName(req.name, problems);
      let kind: CarrierKind = current.kind;
      if (req.kind !== undefined) {
        const k = checkKind(req.kind);
        if (typeof k === "string") kind = k;
        else problems.push(k);
      }
      // A new kind needs a Url of that kind; a new Url is checked against the kind it will have.
      if (req.url !== undefined || kind !== current.kind) {
        const p = urlProblem(kind, req.url ?? current.url);
        if (p) problems.push(p);
      }
      checkTps(req.tps, problems);
      checkWindow(req.window, problems);
      checkSystemType(req.systemType, problems);
      // Absent: unchanged; "": cleared.
      const costCard = req.costCard === undefined ? undefined : await checkCostCard(em, req.costCard, problems);
      if (problems.length > 0) throw fieldErrors(problems);
      const updated = await updateCarrier(
        em,
        current.sid,
        {
          name: req.name,
          kind: req.kind === undefined ? undefined : kind,
          url: req.url,
          tps: req.tps,
          window: req.window,
          systemType: req.systemType,
          costCard,
        },
        deps.clock.now(),
      );
      if (!updated) throw notFound("Carrier", req.carrierSid);
      await changed();
      return toCarrierPb(updated, link(updated.name));
    },

    async removeCarrier(req: RemoveCarrierRequest, ctx: HandlerContext) {
      const em = deps.em(ctx);
      if (!isSid(req.carrierSid, "CR")) throw notFound("Carrier", req.carrierSid);
      const outcome = await em.transactional((tx) => deleteUnroutedCarrier(tx, req.carrierSid));
      if (outcome === "missing") throw notFound("Carrier", req.carrierSid);
      if (outcome === "routed") {
        throw apiError("CarrierInUse", `Carrier ${req.carrierSid} is named by a route; replace the route table without it first.`);
      }
      await changed();
      return create(RemoveCarrierResponseSchema, { carrierSid: req.carrierSid });
    },

    async getRoutes(_req: unknown, ctx: HandlerContext) {
      return routeTable(await listRoutes(deps.em(ctx)));
    },

    async replaceRoutes(req: ReplaceRoutesRequest, ctx: HandlerContext) {
      const em = deps.em(ctx);
      const { routes, problems } = checkRoutes(req);
      if (problems.length > 0) throw fieldErrors(problems);
      await em.transactional(async (tx) => {
        // The carriers named are locked until the table is in: none is removed meanwhile.
        const found = await lockCarriers(tx, [...new Set(routes.flatMap((r) => r.carriers))]);
        const unknown: FieldProblem[] = [];
        const accounts = await existingAccountSids(tx, [...new Set(routes.flatMap((r) => (r.accountSid === null ? [] : [r.accountSid])))]);
        routes.forEach((r, i) => {
          if (r.accountSid !== null && !accounts.has(r.accountSid))
            unknown.push(problem(`Routes[${i}].AccountSid`, `Routes[${i}].AccountSid: no account ${r.accountSid}.`));
        });
        routes.forEach((r, i) =>
          r.carriers.forEach((c, j) => {
            if (!found.has(c)) unknown.push(problem(`Routes[${i}].Carriers[${j}]`, `Routes[${i}].Carriers[${j}]: no carrier ${c}.`));
          }),
        );
        if (unknown.length > 0) throw fieldErrors(unknown);
        await replaceRoutes(tx, routes, deps.clock.now());
      });
      await changed();
      return routeTable(routes);
    },
  };
}
