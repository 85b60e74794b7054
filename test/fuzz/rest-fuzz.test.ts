/**
 * Property-based fuzzing of every REST route (enumerated from the descriptors, so a new route is
 * covered without being listed): random and hostile methods, paths, Sids, query strings,
 * headers, credentials, content types and bodies. Whatever comes in:
 * - the answer comes (within 20 s) and is never a 5xx;
 * - a 4xx is exactly the documented error body with a documented ErrorCode and its status;
 * - an error writes nothing (every table's digest is unchanged); successes may write;
 * - nothing of tenant B's appears in an answer to anyone but B and the operator.
 *
 * FUZZ_RUNS sets the runs per route, FUZZ_SEED the seed (FUZZ_RANDOM=1 for a new one).
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createServices } from "../../src/app.js";
import type { RestRoute } from "../../src/rest/rest-routes.js";
import { ADMIN_TOKEN, createTestApp, type TestApp } from "../support/harness.js";
import { apiRestRoutes, apiServices, changedTables, dbDigest, isOperatorService, restAnswerProblems, rpcMethods, withTimeout } from "../support/surface.js";
import {
  authorization,
  bodyText,
  FuzzTally,
  fuzzRuns,
  idempotencyKey,
  jsonContentType,
  jsonObjectFor,
  pathSegment,
  propertyParams,
  queryString,
  isOperatorAuthOf,
} from "./arbitraries.js";
import { createFuzzWorld, type FuzzWorld } from "./world-hints.js";

const isOperatorAuth = (auth: string | undefined) => isOperatorAuthOf(ADMIN_TOKEN, auth);

/** Routes the descriptors give today; a new one raises this count (and is fuzzed like the others). */
const EXPECTED_ROUTES = 63;
const RUNS = fuzzRuns(40);
const ANSWER_WITHIN_MS = 20_000;
const ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"] as const;

const services = await apiServices();
const routes = apiRestRoutes(services);
const tally = new FuzzTally("REST routes");

let t: TestApp;
let world: FuzzWorld;
let digest: Record<string, string>;

beforeAll(async () => {
  // Wrong credentials by the hundred from one address: without this, the limit on guessing would answer most cases 429 unchecked.
  t = await createTestApp({ engine: { loops: false }, config: { authFailures: { perAddress: 0, perAccount: 0, windowMs: 60_000 } } });
  world = await createFuzzWorld(t.app, Math.floor(t.clock.now().getTime() / 1000));
  digest = await dbDigest(t.db.orm);
}, 120_000);

afterAll(async () => {
  if (tally.cases > 0) tally.report(RUNS);
  await t?.close();
});

describe("the enumeration", () => {
  it(`finds every route of every served service (${EXPECTED_ROUTES})`, () => {
    const served = createServices({
      orm: t.db.orm,
      config: { adminToken: ADMIN_TOKEN, webhookAllowPrivate: false, noAlphaCountries: new Set(), bodyLimit: 1 },
    });
    expect(services.map((s) => s.typeName)).toStrictEqual(served.map((s) => s.service.typeName).sort());
    expect(routes).toHaveLength(EXPECTED_ROUTES);
    // Every RPC method has a REST binding, so fuzzing the routes reaches every method.
    expect(new Set(routes.map((r) => r.rpc))).toStrictEqual(new Set(rpcMethods(services).map((m) => m.method)));
  });
});

/** A REST request as generated. */
interface RestCase {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: string | Buffer | undefined;
}

function restCase(route: RestRoute): fc.Arbitrary<RestCase> {
  const operator = isOperatorService(route.service);
  const { hints, a, b } = world;
  const input = route.rpc.input;
  const pathNames = new Set(route.pathFields.map((f) => f.name));
  const queryFields = input.fields.filter((f) => !pathNames.has(f.name) && (f.fieldKind === "scalar" || f.fieldKind === "enum"));
  const queryNames = queryFields.flatMap((f) => [f.jsonName, f.name]);
  const fieldOf = (name: string) => queryFields.find((f) => f.jsonName === name || f.name === name)?.name;

  const path = fc.tuple(...route.pathFields.map((f) => pathSegment(world.own(f, operator), world.others(f, operator)))).map((segments) => {
    let i = 0;
    return route.template.replace(/\{[^}]+\}/g, () => segments[i++]);
  });
  const adminAuth = `Bearer ${ADMIN_TOKEN}`;
  const auth = operator ? authorization([adminAuth], [a.auth], [a.accountSid]) : authorization([a.auth], [b.auth], [a.accountSid, b.accountSid]);
  const object = jsonObjectFor(input, hints);
  const body = route.body === "" ? fc.oneof({ weight: 9, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: bodyText(object) }) : bodyText(object);

  return fc
    .record({
      method: fc.oneof({ weight: 9, arbitrary: fc.constant(route.method as string) }, { weight: 1, arbitrary: fc.constantFrom(...ALL_METHODS) }),
      path,
      query: queryString(queryNames, hints, fieldOf),
      auth,
      idem: idempotencyKey,
      contentType: jsonContentType,
      body,
    })
    .map(({ method, path, query, auth, idem, contentType, body }) => {
      const headers: Record<string, string> = {};
      if (auth !== undefined) headers.authorization = auth;
      if (idem !== undefined) headers["idempotency-key"] = idem;
      if (contentType !== undefined) headers["content-type"] = contentType;
      return { method, url: path + query, headers, body };
    });
}

async function check(c: RestCase): Promise<void> {
  const what = `${c.method} ${c.url.slice(0, 200)}`;
  const res = await withTimeout(
    t.app.inject({ method: c.method as (typeof ALL_METHODS)[number], url: c.url, headers: c.headers, ...(c.body === undefined ? {} : { payload: c.body }) }),
    ANSWER_WITHIN_MS,
    what,
  );
  tally.add(res.statusCode);
  const problems = restAnswerProblems(res, c.method);
  const after = await dbDigest(t.db.orm);
  if (res.statusCode >= 400) {
    const changed = changedTables(digest, after);
    if (changed.length > 0) problems.push(`answered ${res.statusCode} but wrote to ${changed.join(", ")}`);
  }
  digest = after;
  // B itself and the operator may see B's data; nobody else.
  if (c.headers.authorization !== world.b.auth && !isOperatorAuth(c.headers.authorization)) {
    const leaked = world.b.secrets.filter((s) => res.body.includes(s));
    if (leaked.length > 0) problems.push(`B's data in the answer: ${leaked.join(", ")}`);
  }
  if (problems.length > 0) throw new Error(`${what}: ${problems.join("; ")}\n${res.statusCode} ${res.body.slice(0, 500)}`);
}

describe("every REST route survives hostile input", () => {
  it.each(routes.map((r, i) => [`${r.method} ${r.template}`, r, i] as const))(
    "%s",
    async (_name, route, index) => {
      await fc.assert(fc.asyncProperty(restCase(route), check), propertyParams(index, RUNS));
    },
    300_000,
  );
});
