// Usage: what the accounts sent between two UTC days, what they were charged (Price), what the
// carriers cost the operator (Cost) and the Margin, from the operator's GetUsage: per day (a uPlot
// chart, and the same figures as a table for reading and for screen readers) and by account or
// by carrier. `#/usage/AC…` opens it for one account (the account page links to it).
import type { ComponentChild } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import uPlot from "uplot";
import type { OperatorUsageResponse, OperatorUsageRow } from "../../../gen/switchboard/admin/v1/admin_pb.js";
import { admin } from "../api";
import { microsOf, sumAmounts } from "../money";
import { LoadState, PageHeading, TableWrap, useLoad } from "../ui";

// Margin is dashed: where nothing cost anything it equals Price, and would hide it.
const SERIES = [
  { key: "price", label: "Price", stroke: "#1f5fa8", dash: undefined },
  { key: "cost", label: "Cost", stroke: "#b3261e", dash: undefined },
  { key: "margin", label: "Margin", stroke: "#1b7a3d", dash: [8, 5] },
] as const;

/** The x axis's steps: whole days, a week, four weeks (never hours: each point is a day). */
const DAY_STEPS = [1, 2, 7, 14, 28, 56, 91].map((n) => n * 86_400);

const DAY_MS = 86_400_000;

/** A UTC day, YYYY-MM-DD. */
const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/** Every UTC day from start to end, both included (none when either is not a day or end is before start). */
function daysBetween(start: string, end: string): string[] {
  const from = Date.parse(`${start}T00:00:00Z`);
  const to = Date.parse(`${end}T00:00:00Z`);
  if (Number.isNaN(from) || Number.isNaN(to) || to < from || to - from > 366 * DAY_MS) return [];
  const days: string[] = [];
  for (let t = from; t <= to; t += DAY_MS) days.push(dayOf(t));
  return days;
}

interface Query {
  startDate: string;
  endDate: string;
  accountSid: string;
  groupBy: "Account" | "Carrier";
}

/** The chart of Price, Cost and Margin per day; days without usage are 0. */
function DayChart(props: { days: string[]; rows: OperatorUsageRow[]; unit: string }) {
  const box = useRef<HTMLDivElement>(null);
  const byDay = new Map(props.rows.map((r) => [r.date ?? "", r]));
  // Only the chart's pixels come from numbers (uPlot draws doubles); every figure shown as text is
  // the service's exact decimal string, or an exact sum of them.
  const data: uPlot.AlignedData = [
    props.days.map((d) => Date.parse(`${d}T00:00:00Z`) / 1000),
    ...SERIES.map((s) => props.days.map((d) => Number(microsOf(byDay.get(d)?.[s.key] ?? "")) / 1e6)),
  ];
  useEffect(() => {
    if (!box.current) return;
    const width = () => Math.max(280, Math.min(900, box.current!.clientWidth));
    const plot = new uPlot(
      {
        width: width(),
        height: 260,
        legend: { show: false },
        // Room on the right for the last day's label, centred under its point.
        padding: [16, 48, 0, 0],
        // Days are UTC days: the axis says them in UTC, whatever the browser's zone.
        tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"),
        series: [{}, ...SERIES.map((s) => ({ label: s.label, stroke: s.stroke, width: 2, dash: s.dash ? [...s.dash] : undefined, points: { show: true } }))],
        axes: [
          { incrs: DAY_STEPS, space: 70, values: (_u: uPlot, splits: number[]) => splits.map((t) => dayOf(t * 1000)) },
          { label: `${props.unit} per day` },
        ],
      },
      data,
      box.current,
    );
    const resize = () => plot.setSize({ width: width(), height: 260 });
    addEventListener("resize", resize);
    return () => {
      removeEventListener("resize", resize);
      plot.destroy();
    };
  }, [JSON.stringify(data)]);
  const total = (k: (typeof SERIES)[number]["key"]) => sumAmounts(props.rows.map((r) => r[k]));
  const summary = SERIES.map((s) => `${s.label} ${total(s.key)} ${props.unit}`).join(", ");
  return (
    <figure>
      <div
        ref={box}
        class="chart"
        role="img"
        aria-label={`Price, cost and margin per day from ${props.days[0]} to ${props.days[props.days.length - 1]}. Totals: ${summary}.`}
      />
      <figcaption>
        <ul class="legend" data-testid="usage-legend">
          {SERIES.map((s) => (
            <li key={s.key}>
              <span class="swatch" style={{ background: s.stroke }} aria-hidden="true" />
              {s.label}
              {s.dash ? " (dashed)" : ""}: {total(s.key)} {props.unit} in the days
            </li>
          ))}
        </ul>
      </figcaption>
    </figure>
  );
}

/** A usage table: one row per group, and the totals. */
function UsageTable(props: { label: string; first: string; rows: OperatorUsageRow[]; name: (r: OperatorUsageRow) => ComponentChild }) {
  const rows = props.rows;
  return (
    <TableWrap label={props.label}>
      <table>
        <thead>
          <tr>
            <th scope="col">{props.first}</th>
            <th scope="col">Messages</th>
            <th scope="col">Segments</th>
            <th scope="col">Price</th>
            <th scope="col">Cost</th>
            <th scope="col">Margin</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((r, i) => (
            <tr key={i}>
              <th scope="row">{props.name(r)}</th>
              <td>{String(r.messages)}</td>
              <td>{String(r.segments)}</td>
              <td class="money">{r.price}</td>
              <td class="money">{r.cost}</td>
              <td class="money">{r.margin}</td>
            </tr>
          ))}
        </tbody>
        <tfoot>
          <tr>
            <th scope="row">Total</th>
            <td>{String(rows.reduce((n, r) => n + r.messages, 0n))}</td>
            <td>{String(rows.reduce((n, r) => n + r.segments, 0n))}</td>
            <td class="money">{sumAmounts(rows.map((r) => r.price))}</td>
            <td class="money">{sumAmounts(rows.map((r) => r.cost))}</td>
            <td class="money">{sumAmounts(rows.map((r) => r.margin))}</td>
          </tr>
        </tfoot>
      </table>
    </TableWrap>
  );
}

/** The answers to one query: the days' chart and table, then the breakdown. */
function UsageFigures(props: { query: Query; perDay: OperatorUsageResponse; grouped: OperatorUsageResponse }) {
  const { query, perDay, grouped } = props;
  const unit = perDay.priceUnit;
  const days = daysBetween(query.startDate, query.endDate);
  return (
    <>
      <p class="muted" data-testid="usage-scope">
        {query.accountSid ? `Account ${query.accountSid}` : "Every account"}, UTC days {query.startDate} to {query.endDate}; amounts in {unit}. Price is what
        the accounts were charged (refunds deducted), Cost what the carriers cost the operator.
      </p>
      <h3>Per day</h3>
      {days.length > 0 && <DayChart days={days} rows={perDay.usage} unit={unit} />}
      {perDay.usage.length === 0 ? (
        <p>No message was sent in these days.</p>
      ) : (
        <UsageTable label="Usage per day" first="Day" rows={perDay.usage} name={(r) => r.date ?? ""} />
      )}
      <h3>{query.groupBy === "Carrier" ? "By carrier" : "By account"}</h3>
      {grouped.usage.length === 0 ? (
        <p>No message was sent in these days.</p>
      ) : query.groupBy === "Carrier" ? (
        <UsageTable label="Usage by carrier" first="Carrier" rows={grouped.usage} name={(r) => (r.carrier ? r.carrier : "Not handed to a carrier")} />
      ) : (
        <UsageTable
          label="Usage by account"
          first="Account"
          rows={grouped.usage}
          name={(r) => <a href={`#/accounts/${r.accountSid ?? ""}`}>{r.accountSid}</a>}
        />
      )}
    </>
  );
}

export function Usage(props: { accountSid?: string }) {
  const today = Date.now();
  const [query, setQuery] = useState<Query>({
    startDate: dayOf(today - 6 * DAY_MS),
    endDate: dayOf(today),
    accountSid: props.accountSid ?? "",
    groupBy: "Account",
  });
  // The answer keeps the query it answers: while the next one loads, the page still shows the last one whole.
  const usage = useLoad(async () => {
    const asked = { startDate: query.startDate, endDate: query.endDate, accountSid: query.accountSid };
    const [perDay, grouped] = await Promise.all([admin.getUsage({ ...asked, groupBy: "Day" }), admin.getUsage({ ...asked, groupBy: query.groupBy })]);
    return { query, perDay, grouped };
  }, JSON.stringify(query));
  const submit = (e: Event) => {
    e.preventDefault();
    const form = new FormData(e.currentTarget as HTMLFormElement);
    const get = (k: string) => String(form.get(k) ?? "").trim();
    setQuery({
      startDate: get("startDate"),
      endDate: get("endDate"),
      accountSid: get("accountSid"),
      groupBy: get("groupBy") === "Carrier" ? "Carrier" : "Account",
    });
  };
  const shown = usage.data;
  return (
    <section>
      <PageHeading>Usage</PageHeading>
      <form class="filters" onSubmit={submit} aria-label="Usage to show">
        <div>
          <label for="u-start">First day (UTC)</label>
          <input id="u-start" name="startDate" type="date" required defaultValue={query.startDate} />
        </div>
        <div>
          <label for="u-end">Last day (UTC), included</label>
          <input id="u-end" name="endDate" type="date" required defaultValue={query.endDate} />
        </div>
        <div>
          <label for="u-account">AccountSid (empty: every account)</label>
          <input id="u-account" name="accountSid" autocomplete="off" defaultValue={query.accountSid} />
        </div>
        <div>
          <label for="u-group">Breakdown</label>
          <select id="u-group" name="groupBy">
            <option value="Account" selected={query.groupBy === "Account"}>
              By account
            </option>
            <option value="Carrier" selected={query.groupBy === "Carrier"}>
              By carrier
            </option>
          </select>
        </div>
        <div>
          <button type="submit">Show usage</button>
        </div>
      </form>
      <LoadState loading={usage.loading} error={usage.error} />
      {shown && <UsageFigures {...shown} />}
    </section>
  );
}
