// One message: its record, its timeline (accepted, claimed, submitted, receipt, every webhook
// attempt), its webhook calls with a Retry for a failed one, and its lease's reply chain.
import { admin } from "../api";
import { LoadState, PageHeading, StatusLine, TableWrap, useAction, useLoad, when } from "../ui";

export function MessagePage(props: { sid: string }) {
  const t = useLoad(() => admin.getMessageTimeline({ messageSid: props.sid }), props.sid);
  const action = useAction();
  const m = t.data?.message;
  const retry = async (webhookId: string) => {
    if (await action.run(() => admin.retryWebhook({ webhookId }), `Webhook call ${webhookId} is queued again.`)) t.reload();
  };
  return (
    <section>
      <PageHeading>Message {props.sid}</PageHeading>
      <p>
        <a href="#/messages">Back to the search</a>
      </p>
      <LoadState loading={t.loading} error={t.error} />
      {t.data && m && (
        <>
          <h3>Record</h3>
          <dl class="record">
            {(
              [
                ["Status", m.status],
                ["Direction", m.direction],
                ["Account", m.accountSid],
                ["Property", m.propertySid],
                ["From", m.from],
                ["To", m.to],
                ["Text", m.redacted ? "(redacted)" : m.text],
                ["Segments", `${m.numSegments} (${m.encoding})`],
                ["Carrier", m.carrier],
                // What the operator pays the carrier for it (its CostCard at hand-over); never on /v2.
                ["Carrier cost", t.data.cost && `${t.data.cost} ${m.priceUnit}`],
                ["Error", [m.errorCode, m.carrierError].filter(Boolean).join(": ")],
                ["Created", when(m.created)],
                ["Submitted", when(m.submitted)],
                ["Delivered", when(m.delivered)],
                ["Lease", t.data.leaseSid],
                ["Dispatch attempts", String(t.data.dispatchAttempts)],
              ] as const
            ).map(([k, v]) => (
              <div key={k}>
                <dt>{k}</dt>
                <dd>{v || "—"}</dd>
              </div>
            ))}
          </dl>
          <h3>Timeline</h3>
          <ol class="timeline" data-testid="timeline">
            {t.data.events.map((e, i) => (
              <li key={i}>
                <strong>{e.kind}</strong> <span class="muted">{when(e.at)}</span>
                <br />
                {e.detail}
              </li>
            ))}
          </ol>
          <h3>Webhook calls</h3>
          <StatusLine status={action.status} />
          {t.data.webhooks.length === 0 ? (
            <p>No webhook call was queued for this message.</p>
          ) : (
            <TableWrap label="Webhook calls">
              <table>
                <thead>
                  <tr>
                    <th scope="col">Call</th>
                    <th scope="col">Status</th>
                    <th scope="col">Attempts</th>
                    <th scope="col">
                      <span class="visually-hidden">Action</span>
                    </th>
                  </tr>
                </thead>
                <tbody>
                  {t.data.webhooks.map((w) => (
                    <tr key={w.webhookId}>
                      <th scope="row">
                        {w.eventType} {w.method} {w.url}
                        <br />
                        <span class="muted">{w.webhookId}</span>
                      </th>
                      <td>{w.status}</td>
                      <td>
                        <ul class="plain">
                          {w.attemptLog.map((a, i) => (
                            <li key={i}>
                              {when(a.attempted)}: {a.statusCode ? `HTTP ${a.statusCode}` : "no answer"} in {a.durationMs} ms{a.error ? ` (${a.error})` : ""}
                            </li>
                          ))}
                        </ul>
                      </td>
                      <td>
                        {w.status === "Failed" && (
                          <button type="button" onClick={() => void retry(w.webhookId)} aria-label={`Retry webhook call ${w.webhookId}`}>
                            Retry
                          </button>
                        )}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </TableWrap>
          )}
          <h3>Reply chain</h3>
          {t.data.replyChain.length === 0 ? (
            <p>No other message on its lease.</p>
          ) : (
            <ol>
              {t.data.replyChain.map((r) => (
                <li key={r.messageSid}>
                  <a href={`#/messages/${r.messageSid}`}>{r.messageSid}</a> {r.direction} {r.from} → {r.to}, {r.status}, {when(r.created)}
                </li>
              ))}
            </ol>
          )}
        </>
      )}
    </section>
  );
}
