// The route table as a form: one fieldset per route, in order (the first match carries a message),
// with its Prefix, AccountSid, carriers (each a select of the configured carriers, in failover
// order) and Strategy; rows are added, removed and moved, and Save replaces the whole table
// (ReplaceRoutes). A refusal's field problems (Routes[i].Field) are listed by the form and shown
// next to the input they name.
import { useEffect, useState } from "preact/hooks";
import type { Carrier, Route } from "../../../gen/switchboard/admin/v1/admin_pb.js";
import { admin, fieldProblemsOf, isSignedOut, messageOf } from "../api";
import { onSignedOut } from "../ui";

const STRATEGIES = ["Failover", "RoundRobin", "LeastCost"] as const;
const STRATEGY_LABELS: Record<(typeof STRATEGIES)[number], string> = {
  Failover: "Failover (the first carrier up)",
  RoundRobin: "RoundRobin (spread over those up)",
  LeastCost: "LeastCost (the cheapest up by CostCard)",
};

interface Row {
  key: number;
  prefix: string;
  accountSid: string;
  carriers: string[];
  strategy: string;
}

let nextKey = 0;
const rowOf = (r?: Route): Row => ({
  key: nextKey++,
  prefix: r?.prefix ?? "",
  accountSid: r?.accountSid ?? "",
  carriers: r ? [...r.carriers] : [""],
  strategy: r?.strategy ?? "Failover",
});

type Outcome = { ok: true; text: string } | { ok: false; text: string; problems: { field: string; message: string }[] };

export function RouteForm(props: { routes: Route[]; carriers: Carrier[]; onSaved: () => void }) {
  const [rows, setRows] = useState<Row[]>(() => props.routes.map(rowOf));
  const [outcome, setOutcome] = useState<Outcome>();
  useEffect(() => setRows(props.routes.map(rowOf)), [props.routes]);

  const update = (i: number, change: Partial<Row>) => setRows((rs) => rs.map((r, j) => (j === i ? { ...r, ...change } : r)));
  const move = (i: number, by: number) =>
    setRows((rs) => {
      const next = [...rs];
      const [r] = next.splice(i, 1);
      next.splice(i + by, 0, r);
      return next;
    });
  const problemsAt = (field: string) => (outcome && !outcome.ok ? outcome.problems.filter((p) => p.field === field) : []);
  const errorId = (field: string) => `route-error-${field.replace(/\W/g, "-")}`;
  /** An input's error attributes and the message under it, for the field the API names. */
  const fieldError = (field: string) => {
    const found = problemsAt(field);
    return {
      attrs: found.length > 0 ? { "aria-invalid": true as const, "aria-describedby": errorId(field) } : {},
      note:
        found.length > 0 ? (
          <span class="field-error" id={errorId(field)}>
            {found.map((p) => p.message).join(" ")}
          </span>
        ) : null,
    };
  };

  const save = async (e: Event) => {
    e.preventDefault();
    // The first table replaces the default route (the deployment's CARRIER takes every message while the table is empty).
    if (
      props.routes.length === 0 &&
      rows.length > 0 &&
      !confirm(
        "Replace the default route? While the route table is empty the deployment's CARRIER takes every message; once saved, only these routes count and a message none matches fails with NoRoute.",
      )
    )
      return;
    try {
      await admin.replaceRoutes({
        routes: rows.map((r) => ({
          prefix: r.prefix.trim() === "" ? undefined : r.prefix.trim(),
          accountSid: r.accountSid.trim() === "" ? undefined : r.accountSid.trim(),
          carriers: r.carriers,
          strategy: r.strategy,
        })),
      });
      setOutcome({ ok: true, text: "The route table is replaced." });
      props.onSaved();
    } catch (err) {
      if (isSignedOut(err)) onSignedOut();
      setOutcome({ ok: false, text: messageOf(err), problems: fieldProblemsOf(err) });
    }
  };

  return (
    <form class="routes" onSubmit={save} noValidate>
      {rows.length === 0 && <p>No route: the deployment's CARRIER takes every message.</p>}
      {rows.map((r, i) => {
        const at = `Routes[${i}]`;
        const id = (what: string) => `route-${r.key}-${what}`;
        const prefix = fieldError(`${at}.Prefix`);
        const account = fieldError(`${at}.AccountSid`);
        const carriers = fieldError(`${at}.Carriers`);
        const strategy = fieldError(`${at}.Strategy`);
        return (
          <fieldset key={r.key} class="route">
            <legend>Route {i + 1}</legend>
            <div class="route-fields">
              <div>
                <label for={id("prefix")}>Prefix (E164, such as +61; empty: any destination)</label>
                <input id={id("prefix")} value={r.prefix} onInput={(e) => update(i, { prefix: e.currentTarget.value })} {...prefix.attrs} />
                {prefix.note}
              </div>
              <div>
                <label for={id("account")}>AccountSid (empty: any account)</label>
                <input id={id("account")} value={r.accountSid} onInput={(e) => update(i, { accountSid: e.currentTarget.value })} {...account.attrs} />
                {account.note}
              </div>
              <div>
                <label for={id("strategy")}>Strategy</label>
                <select id={id("strategy")} value={r.strategy} onChange={(e) => update(i, { strategy: e.currentTarget.value })} {...strategy.attrs}>
                  {STRATEGIES.map((s) => (
                    <option key={s} value={s}>
                      {STRATEGY_LABELS[s]}
                    </option>
                  ))}
                </select>
                {strategy.note}
              </div>
            </div>
            <fieldset class="route-carriers">
              <legend>Carriers of route {i + 1}, in order</legend>
              {carriers.note}
              {r.carriers.map((c, j) => {
                const one = fieldError(`${at}.Carriers[${j}]`);
                return (
                  <div class="row" key={j}>
                    <label for={id(`carrier-${j}`)}>Carrier {j + 1}</label>
                    <select
                      id={id(`carrier-${j}`)}
                      value={c}
                      onChange={(e) => update(i, { carriers: r.carriers.map((x, k) => (k === j ? e.currentTarget.value : x)) })}
                      {...one.attrs}
                    >
                      <option value="">Choose a carrier</option>
                      {props.carriers.map((k) => (
                        <option key={k.carrierSid} value={k.carrierSid}>
                          {k.name} ({k.carrierSid})
                        </option>
                      ))}
                      {c !== "" && !props.carriers.some((k) => k.carrierSid === c) && <option value={c}>{c} (not configured)</option>}
                    </select>
                    <button
                      type="button"
                      aria-label={`Remove carrier ${j + 1} of route ${i + 1}`}
                      onClick={() => update(i, { carriers: r.carriers.filter((_, k) => k !== j) })}
                    >
                      Remove
                    </button>
                    {one.note}
                  </div>
                );
              })}
              <button type="button" onClick={() => update(i, { carriers: [...r.carriers, ""] })}>
                Add a carrier to route {i + 1}
              </button>
            </fieldset>
            <div class="actions">
              <button type="button" disabled={i === 0} onClick={() => move(i, -1)}>
                Move route {i + 1} up
              </button>
              <button type="button" disabled={i === rows.length - 1} onClick={() => move(i, 1)}>
                Move route {i + 1} down
              </button>
              <button type="button" onClick={() => setRows((rs) => rs.filter((_, j) => j !== i))}>
                Remove route {i + 1}
              </button>
            </div>
          </fieldset>
        );
      })}
      <div class="actions">
        <button type="button" onClick={() => setRows((rs) => [...rs, rowOf()])}>
          Add a route
        </button>
        <button type="submit">Save the route table</button>
      </div>
      <div role="status" class={outcome && !outcome.ok ? "status error" : "status"}>
        {outcome?.ok && outcome.text}
        {outcome && !outcome.ok && (
          <>
            <p>Error: {outcome.text}</p>
            {outcome.problems.length > 0 && (
              <ul aria-label="Problems with the route table">
                {outcome.problems.map((p) => (
                  <li key={p.field + p.message}>
                    <strong>{p.field}</strong>: {p.message}
                  </li>
                ))}
              </ul>
            )}
          </>
        )}
      </div>
    </form>
  );
}
