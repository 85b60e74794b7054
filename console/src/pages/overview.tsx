// Overview: the last hour per minute (a uPlot chart, and the same figures as a table for screen
// readers), the queue, the webhook backlog and each carrier's link; read again every 5 seconds.
import { useEffect, useRef, useState } from "preact/hooks";
import uPlot from "uplot";
import type { CarrierStatus, ListCarriersResponse, Stats } from "../../../gen/switchboard/admin/v1/admin_pb.js";
import { admin, isSignedOut, messageOf } from "../api";
import { onSignedOut, PageHeading, TableWrap, when } from "../ui";

/** How often the page reads the figures again. */
export const REFRESH_MS = 5000;

const SERIES = [
  { key: "accepted", label: "Accepted", stroke: "#1f5fa8" },
  { key: "submitted", label: "Submitted", stroke: "#6b4c9a" },
  { key: "delivered", label: "Delivered", stroke: "#1b7a3d" },
  { key: "failed", label: "Failed", stroke: "#b3261e" },
] as const;

function Chart(props: { stats: Stats }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot>();
  const data: uPlot.AlignedData = [props.stats.minutes.map((m) => Number(m.minute)), ...SERIES.map((s) => props.stats.minutes.map((m) => m[s.key]))];
  useEffect(() => {
    if (!box.current) return;
    const width = () => Math.max(280, Math.min(900, box.current!.clientWidth));
    plot.current = new uPlot(
      {
        width: width(),
        height: 260,
        legend: { show: false },
        series: [{}, ...SERIES.map((s) => ({ label: s.label, stroke: s.stroke, width: 2 }))],
        axes: [{}, { label: "per minute" }],
      },
      data,
      box.current,
    );
    const resize = () => plot.current?.setSize({ width: width(), height: 260 });
    addEventListener("resize", resize);
    return () => {
      removeEventListener("resize", resize);
      plot.current?.destroy();
    };
  }, []);
  useEffect(() => plot.current?.setData(data), [props.stats]);
  const total = (k: (typeof SERIES)[number]["key"]) => props.stats.minutes.reduce((n, m) => n + m[k], 0);
  const summary = SERIES.map((s) => `${s.label} ${total(s.key)}`).join(", ");
  return (
    <figure>
      <div ref={box} class="chart" role="img" aria-label={`Sends per minute over the last hour. Totals: ${summary}.`} />
      <figcaption>
        <ul class="legend">
          {SERIES.map((s) => (
            <li key={s.key}>
              <span class="swatch" style={{ background: s.stroke }} aria-hidden="true" />
              {s.label}: {total(s.key)} in the hour
            </li>
          ))}
        </ul>
      </figcaption>
    </figure>
  );
}

export function Overview() {
  const [stats, setStats] = useState<Stats>();
  const [carriers, setCarriers] = useState<ListCarriersResponse>();
  const [own, setOwn] = useState<CarrierStatus>();
  const [error, setError] = useState("");
  useEffect(() => {
    let live = true;
    const read = async () => {
      try {
        const [s, c, o] = await Promise.all([admin.getStats({}), admin.listCarriers({}), admin.getCarrierStatus({})]);
        if (!live) return;
        setStats(s);
        setCarriers(c);
        setOwn(o);
        setError("");
      } catch (e) {
        if (isSignedOut(e)) onSignedOut();
        if (live) setError(messageOf(e));
      }
    };
    void read();
    const timer = setInterval(() => void read(), REFRESH_MS);
    return () => {
      live = false;
      clearInterval(timer);
    };
  }, []);
  const recent = stats?.minutes.slice(-10).reverse() ?? [];
  return (
    <section aria-labelledby="overview-heading">
      <PageHeading>
        <span id="overview-heading">Overview</span>
      </PageHeading>
      {error && (
        <p role="alert" class="status error">
          Error: {error}
        </p>
      )}
      {!stats && !error && <p aria-live="polite">Loading…</p>}
      {stats && (
        <>
          <p class="muted">
            As of {when(stats.now)}; read again every {REFRESH_MS / 1000} seconds.
          </p>
          <h3>Queue and webhooks</h3>
          <dl class="figures" data-testid="figures">
            <div>
              <dt>Queue depth</dt>
              <dd data-testid="queue-depth">{stats.queueDepth}</dd>
            </div>
            <div>
              <dt>Dispatcher lag</dt>
              <dd>{String(stats.dispatcherLagSeconds)} s</dd>
            </div>
            <div>
              <dt>Scheduled for later</dt>
              <dd>{stats.scheduledLater}</dd>
            </div>
            <div>
              <dt>Webhook backlog</dt>
              <dd data-testid="webhook-backlog">{stats.webhookBacklog}</dd>
            </div>
            <div>
              <dt>Webhooks due</dt>
              <dd>{stats.webhooksDue}</dd>
            </div>
            <div>
              <dt>Webhook lag</dt>
              <dd>{String(stats.webhookLagSeconds)} s</dd>
            </div>
          </dl>
          <h3>Sends in the last hour</h3>
          <Chart stats={stats} />
          <details>
            <summary>The last 10 minutes as a table</summary>
            <TableWrap label="Sends per minute">
              <table>
                <caption>Sends per minute, newest first</caption>
                <thead>
                  <tr>
                    <th scope="col">Minute</th>
                    {SERIES.map((s) => (
                      <th scope="col" key={s.key}>
                        {s.label}
                      </th>
                    ))}
                  </tr>
                </thead>
                <tbody>
                  {recent.map((m) => (
                    <tr key={String(m.minute)}>
                      <th scope="row">{when(m.minute)}</th>
                      {SERIES.map((s) => (
                        <td key={s.key}>{m[s.key]}</td>
                      ))}
                    </tr>
                  ))}
                </tbody>
              </table>
            </TableWrap>
          </details>
        </>
      )}
      {carriers && (
        <>
          <h3>Carrier links</h3>
          {own && own.carrier !== "" && (
            <p>
              This process's carrier (CARRIER): {own.carrier}
              {own.link !== "" ? `, link ${own.link}${own.lastError ? ` (last error: ${own.lastError})` : ""}` : ", no standing link"}.
            </p>
          )}
          {carriers.carriers.length === 0 ? (
            <p>No carriers are configured: the deployment's CARRIER takes every message.</p>
          ) : (
            <TableWrap label="Carrier links">
              <table>
                <thead>
                  <tr>
                    <th scope="col">Carrier</th>
                    <th scope="col">Kind</th>
                    <th scope="col">Link</th>
                  </tr>
                </thead>
                <tbody>
                  {carriers.carriers.map((c) => (
                    <tr key={c.carrierSid}>
                      <th scope="row">{c.name}</th>
                      <td>{c.kind}</td>
                      <td>{c.link === "-" ? "no standing link" : c.link}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </TableWrap>
          )}
        </>
      )}
    </section>
  );
}
