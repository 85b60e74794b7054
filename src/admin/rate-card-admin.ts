/**
 * The operator's rate cards (docs/billing.md): AdminService's ListRateCards,
 * GetRateCard, ReplaceRateCard, StageRateImport and CommitRateImport. Every field is checked here
 * with billing/rate-rules.ts (a 400 naming it, nothing changed); the statements are in
 * billing/rate-card-store.ts.
 */
import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { EntityManager } from "@mikro-orm/sql";
import {
  type AdminService,
  type CommitRateImportRequest,
  type GetRateCardRequest,
  type ListRateCardsRequest,
  ListRateCardsResponseSchema,
  type RateCard as RateCardPb,
  RateCardSchema,
  RateImportSchema,
  RateSchema,
  type Rate as RatePb,
  type ReplaceRateCardRequest,
  type StageRateImportRequest,
} from "../../gen/switchboard/admin/v1/admin_pb.js";
import { type Clock, unixSeconds } from "../common/clock.js";
import { fieldErrors, type FieldProblem, notFound, quoted } from "../common/errors.js";
import { formatMoney } from "../common/money.js";
import { DEFAULT_PAGE, pageOf } from "../common/paging.js";
import { isSid, newSid } from "../common/sid.js";
import { cardNameProblem, checkRate, firstDuplicate, type Rate } from "../billing/rate-rules.js";
import {
  commitImport,
  findRateCard,
  listRateCards,
  pageRates,
  purgeStaleImports,
  type RateCardSummary,
  replaceRates,
  stageRates,
  stagedLines,
} from "../billing/rate-card-store.js";

/** The most field problems one answer lists: a deck of bad rows is answered with its first few. */
const MAX_PROBLEMS = 10;
/** How long an import may stay staged without its commit. */
const IMPORT_TTL_MS = 24 * 3600_000;

/** What the rate card methods need besides the request's EntityManager. */
export interface RateCardAdminDeps {
  clock: Clock;
  em(ctx: HandlerContext): EntityManager;
}

function toRatePb(r: Rate): RatePb {
  return create(RateSchema, { prefix: r.prefix, pricePerSegment: formatMoney(r.pricePerSegment), effectiveFrom: BigInt(r.effectiveFrom) });
}

function toCardPb(c: RateCardSummary, rates: Rate[] = []): RateCardPb {
  return create(RateCardSchema, {
    name: c.name,
    rateCount: c.rateCount,
    created: BigInt(unixSeconds(c.createdAt)),
    updated: BigInt(unixSeconds(c.updatedAt)),
    rates: rates.map(toRatePb),
  });
}

function checkName(name: string): void {
  const p = cardNameProblem(name);
  if (p) throw fieldErrors([p]);
}

/** The rates of a request checked, each bad field named by `field(i)` ("Rates[i]." or "Line n: "); a 400 with the first few problems. */
function checkRates(rates: readonly RatePb[], field: (i: number) => string): Rate[] {
  const problems: FieldProblem[] = [];
  const checked: Rate[] = [];
  for (let i = 0; i < rates.length && problems.length < MAX_PROBLEMS; i++) {
    const r = checkRate(rates[i], field(i));
    if (Array.isArray(r)) problems.push(...r);
    else checked.push(r);
  }
  if (problems.length > 0) throw fieldErrors(problems.slice(0, MAX_PROBLEMS));
  return checked;
}

/** Creates the rate card methods of AdminService. */
export function createRateCardAdmin(
  deps: RateCardAdminDeps,
): Pick<ServiceImpl<typeof AdminService>, "listRateCards" | "getRateCard" | "replaceRateCard" | "stageRateImport" | "commitRateImport"> {
  const withFirstPage = async (em: EntityManager, card: RateCardSummary) => toCardPb(card, await pageRates(em, card.name, DEFAULT_PAGE, 0));
  return {
    async listRateCards(req: ListRateCardsRequest, ctx: HandlerContext) {
      const em = deps.em(ctx);
      const { limit, offset, problems } = pageOf(req);
      if (problems.length > 0) throw fieldErrors(problems);
      const { cards, total } = await listRateCards(em, limit, offset);
      return create(ListRateCardsResponseSchema, { rateCards: cards.map((c) => toCardPb(c)), totalCount: total });
    },

    async getRateCard(req: GetRateCardRequest, ctx: HandlerContext) {
      const em = deps.em(ctx);
      const { limit, offset, problems } = pageOf(req);
      if (problems.length > 0) throw fieldErrors(problems);
      const card = cardNameProblem(req.name) ? null : await findRateCard(em, req.name);
      if (!card) throw notFound("Rate card", quoted(req.name));
      const after = req.afterPrefix === "" ? undefined : { prefix: req.afterPrefix, effectiveFrom: Number(req.afterEffectiveFrom) };
      return toCardPb(card, await pageRates(em, card.name, limit, offset, after));
    },

    async replaceRateCard(req: ReplaceRateCardRequest, ctx: HandlerContext) {
      const em = deps.em(ctx);
      checkName(req.name);
      const rates = checkRates(req.rates, (i) => `Rates[${i}].`);
      const dup = firstDuplicate(rates);
      if (dup) {
        const r = rates[dup.again];
        const field = `Rates[${dup.again}].Prefix`;
        const message = `${field}: ${r.prefix} with EffectiveFrom ${r.effectiveFrom} is given already (Rates[${dup.first}]).`;
        throw fieldErrors([{ field, code: "InvalidParameter", message }]);
      }
      const card = await em.transactional((tx) => replaceRates(tx, req.name, rates, deps.clock.now()));
      return withFirstPage(em, card);
    },

    async stageRateImport(req: StageRateImportRequest, ctx: HandlerContext) {
      const em = deps.em(ctx);
      checkName(req.name);
      if (req.importSid !== "" && !isSid(req.importSid, "RI")) throw notFound("Rate import", req.importSid);
      const importSid = req.importSid === "" ? newSid("RI") : req.importSid;
      const now = deps.clock.now();
      const staged = await em.transactional(async (tx) => {
        const before = await stagedLines(tx, importSid, req.name);
        if (req.importSid !== "" && before.rows === 0) throw notFound("Rate import", req.importSid);
        const firstLine = req.firstLine ?? before.lastLine + 1;
        if (firstLine < 1) throw fieldErrors([{ field: "FirstLine", code: "InvalidParameter", message: `FirstLine must be 1 or more; got ${firstLine}.` }]);
        const rates = checkRates(req.rates, (i) => `Line ${firstLine + i}: `);
        if (
          !(await stageRates(
            tx,
            importSid,
            req.name,
            rates.map((rate, i) => ({ line: firstLine + i, rate })),
            now,
          ))
        ) {
          throw fieldErrors([{ field: "FirstLine", code: "InvalidParameter", message: `Lines from ${firstLine} are staged already in import ${importSid}.` }]);
        }
        if (req.importSid === "") await purgeStaleImports(tx, new Date(now.getTime() - IMPORT_TTL_MS));
        return before.rows + rates.length;
      });
      return create(RateImportSchema, { importSid, name: req.name, staged });
    },

    async commitRateImport(req: CommitRateImportRequest, ctx: HandlerContext) {
      const em = deps.em(ctx);
      checkName(req.name);
      if (!isSid(req.importSid, "RI")) throw notFound("Rate import", req.importSid);
      const outcome = await em.transactional((tx) => commitImport(tx, req.importSid, req.name, deps.clock.now()));
      if (outcome.kind === "missing") throw notFound("Rate import", req.importSid);
      if (outcome.kind === "duplicate") {
        const field = `Line ${outcome.line}`;
        const message = `${field}: ${outcome.prefix} with EffectiveFrom ${outcome.effectiveFrom} is given already on line ${outcome.firstLine}.`;
        throw fieldErrors([{ field, code: "InvalidParameter", message }]);
      }
      return withFirstPage(em, outcome.card);
    },
  };
}
