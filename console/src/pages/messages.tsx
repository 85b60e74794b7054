// Messages: the operator's search (account, property, To, status, time range), newest first, a page at a time.
import { useState } from "preact/hooks";
import { admin } from "../api";
import { LoadState, PageHeading, TableWrap, useLoad, when } from "../ui";

const PAGE = 25;
const STATUSES = ["Scheduled", "Processing", "Submitted", "Delivered", "Failed", "Canceled", "Received"];

interface Filters {
  accountSid: string;
  propertySid: string;
  to: string;
  status: string;
  from: string;
  until: string;
}

const EMPTY: Filters = { accountSid: "", propertySid: "", to: "", status: "", from: "", until: "" };

/** A datetime-local value, read as UTC, in Unix seconds; 0 when empty. */
const unix = (v: string) => (v === "" ? 0n : BigInt(Math.floor(Date.parse(`${v}Z`) / 1000)));

export function Messages() {
  const [filters, setFilters] = useState<Filters>(EMPTY);
  const [skip, setSkip] = useState(0);
  const result = useLoad(
    () =>
      admin.searchMessages({
        accountSid: filters.accountSid,
        propertySid: filters.propertySid,
        to: filters.to,
        status: filters.status,
        createdFrom: unix(filters.from),
        createdTo: unix(filters.until),
        resultsCount: PAGE,
        resultsSkip: skip,
      }),
    JSON.stringify([filters, skip]),
  );
  const submit = (e: Event) => {
    e.preventDefault();
    const form = new FormData(e.currentTarget as HTMLFormElement);
    const get = (k: string) => String(form.get(k) ?? "").trim();
    setFilters({
      accountSid: get("accountSid"),
      propertySid: get("propertySid"),
      to: get("to"),
      status: get("status"),
      from: get("from"),
      until: get("until"),
    });
    setSkip(0);
  };
  const total = result.data?.totalCount ?? 0;
  return (
    <section>
      <PageHeading>Messages</PageHeading>
      <form class="filters" onSubmit={submit} role="search" aria-label="Search messages">
        <div>
          <label for="f-account">AccountSid</label>
          <input id="f-account" name="accountSid" defaultValue={filters.accountSid} />
        </div>
        <div>
          <label for="f-property">PropertySid</label>
          <input id="f-property" name="propertySid" defaultValue={filters.propertySid} />
        </div>
        <div>
          <label for="f-to">To</label>
          <input id="f-to" name="to" inputMode="tel" placeholder="+14155550123" defaultValue={filters.to} />
        </div>
        <div>
          <label for="f-status">Status</label>
          <select id="f-status" name="status">
            <option value="">Any</option>
            {STATUSES.map((s) => (
              <option key={s} selected={filters.status === s}>
                {s}
              </option>
            ))}
          </select>
        </div>
        <div>
          <label for="f-from">Created from (UTC)</label>
          <input id="f-from" name="from" type="datetime-local" defaultValue={filters.from} />
        </div>
        <div>
          <label for="f-until">Created before (UTC)</label>
          <input id="f-until" name="until" type="datetime-local" defaultValue={filters.until} />
        </div>
        <button type="submit">Search</button>
      </form>
      <LoadState loading={result.loading} error={result.error} />
      {result.data && (
        <>
          <p aria-live="polite">
            {total === 0 ? "No message matches." : `Messages ${skip + 1} to ${skip + result.data.messages.length} of ${total}, newest first.`}
          </p>
          {result.data.messages.length > 0 && (
            <TableWrap label="Matching messages">
              <table>
                <thead>
                  <tr>
                    <th scope="col">Message</th>
                    <th scope="col">Created</th>
                    <th scope="col">From</th>
                    <th scope="col">To</th>
                    <th scope="col">Status</th>
                    <th scope="col">Account</th>
                  </tr>
                </thead>
                <tbody>
                  {result.data.messages.map((m) => (
                    <tr key={m.messageSid}>
                      <th scope="row">
                        <a href={`#/messages/${m.messageSid}`}>{m.messageSid}</a>
                      </th>
                      <td>{when(m.created)}</td>
                      <td>{m.from}</td>
                      <td>{m.to}</td>
                      <td>{m.status}</td>
                      <td>{m.accountSid}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </TableWrap>
          )}
          <div class="pager">
            <button type="button" disabled={skip === 0} onClick={() => setSkip(Math.max(0, skip - PAGE))}>
              Newer
            </button>
            <button type="button" disabled={skip + PAGE >= total} onClick={() => setSkip(skip + PAGE)}>
              Older
            </button>
          </div>
        </>
      )}
    </section>
  );
}
