import { defineEntity, p } from "@mikro-orm/core";

/**
 * How a route spreads its messages over its carriers: in order (Failover), evenly (RoundRobin), or
 * cheapest first by the carriers' CostCard for each message's destination (LeastCost).
 */
export const ROUTE_STRATEGIES = ["Failover", "RoundRobin", "LeastCost"] as const;
/** One of ROUTE_STRATEGIES. */
export type RouteStrategy = (typeof ROUTE_STRATEGIES)[number];

/** Schema of one route of the ordered route table (table `routes`), replaced as a whole. */
export const RouteRowEntity = defineEntity({
  name: "RouteRow",
  tableName: "routes",
  properties: {
    position: p.integer().primary().autoincrement(false),
    // An E164 prefix such as +61; null: any destination.
    prefix: p.string().length(16).nullable(),
    // null: any account.
    accountSid: p.string().length(32).nullable(),
    // The carriers' Sids, in order.
    carriers: p.array().columnType("text[]"),
    strategy: p.string().length(16).$type<RouteStrategy>(),
    updatedAt: p.datetime(),
  },
});

/** One route: which carriers take the messages it matches. */
export class RouteRow extends RouteRowEntity.class {}
RouteRowEntity.setClass(RouteRow);
