// Numbers: owned and pool numbers, with the live leases on each pool number (a disclosure row
// listing each lease's recipient, account, property and times, from ListLeases).
import { Fragment } from "preact";
import { useState } from "preact/hooks";
import { admin } from "../api";
import { LoadState, PageHeading, TableWrap, useLoad, when } from "../ui";

const PAGE = 100;
/** Live leases a number's row lists (the API's largest page). */
const LEASES = 1000;

/** The live leases of one pool number, newest first. */
function LeaseTable(props: { number: string }) {
  const leases = useLoad(() => admin.listLeases({ number: props.number, resultsCount: LEASES }), props.number);
  return (
    <>
      <LoadState loading={leases.loading} error={leases.error} />
      {leases.data &&
        (leases.data.leases.length === 0 ? (
          <p>No live lease on {props.number}.</p>
        ) : (
          <table class="leases">
            <caption>Live leases of {props.number}</caption>
            <thead>
              <tr>
                <th scope="col">Recipient</th>
                <th scope="col">Account</th>
                <th scope="col">Property</th>
                <th scope="col">Message</th>
                <th scope="col">Leased</th>
                <th scope="col">Expires</th>
              </tr>
            </thead>
            <tbody>
              {leases.data.leases.map((l) => (
                <tr key={l.leaseSid}>
                  <th scope="row">{l.recipient}</th>
                  <td>
                    <a href={`#/accounts/${l.accountSid}`}>{l.accountSid}</a>
                  </td>
                  <td>{l.propertySid || "—"}</td>
                  <td>
                    <a href={`#/messages/${l.messageSid}`}>{l.messageSid}</a>
                  </td>
                  <td>{when(l.created)}</td>
                  <td>{when(l.expires)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        ))}
    </>
  );
}

export function Numbers() {
  const [kind, setKind] = useState<"all" | "pool" | "owned">("all");
  const [skip, setSkip] = useState(0);
  const [shown, setShown] = useState<ReadonlySet<string>>(new Set());
  const toggle = (number: string) =>
    setShown((s) => {
      const next = new Set(s);
      if (next.has(number)) next.delete(number);
      else next.add(number);
      return next;
    });
  const list = useLoad(
    () => admin.listNumbers({ pool: kind === "all" ? undefined : kind === "pool", resultsCount: PAGE, resultsSkip: skip }),
    `${kind} ${skip}`,
  );
  const total = list.data?.totalCount ?? 0;
  return (
    <section>
      <PageHeading>Numbers</PageHeading>
      <fieldset class="inline">
        <legend>Show</legend>
        {(
          [
            ["all", "All numbers"],
            ["pool", "Lease pool"],
            ["owned", "Owned by accounts"],
          ] as const
        ).map(([value, label]) => (
          <label key={value}>
            <input
              type="radio"
              name="kind"
              value={value}
              checked={kind === value}
              onChange={() => {
                setKind(value);
                setSkip(0);
              }}
            />
            {label}
          </label>
        ))}
      </fieldset>
      <LoadState loading={list.loading} error={list.error} />
      {list.data && (
        <>
          <p aria-live="polite">{total === 0 ? "No number." : `Numbers ${skip + 1} to ${skip + list.data.numbers.length} of ${total}.`}</p>
          {list.data.numbers.length > 0 && (
            <TableWrap label="Numbers">
              <table>
                <thead>
                  <tr>
                    <th scope="col">Number</th>
                    <th scope="col">Owner</th>
                    <th scope="col">Live leases</th>
                    <th scope="col">Address</th>
                    <th scope="col">Added</th>
                  </tr>
                </thead>
                <tbody>
                  {list.data.numbers.map((n) => {
                    const open = shown.has(n.number);
                    const rowId = `leases-${n.number.replace(/\W/g, "")}`;
                    return (
                      <Fragment key={n.number}>
                        <tr>
                          <th scope="row">{n.number}</th>
                          <td>{n.pool ? "Lease pool" : n.accountSid}</td>
                          <td>
                            {!n.pool ? (
                              "—"
                            ) : n.liveLeases === 0 ? (
                              "0"
                            ) : (
                              <button
                                type="button"
                                aria-expanded={open}
                                aria-controls={rowId}
                                aria-label={`${open ? "Hide" : "Show"} the ${n.liveLeases} live lease${n.liveLeases === 1 ? "" : "s"} of ${n.number}`}
                                onClick={() => toggle(n.number)}
                              >
                                {n.liveLeases} {open ? "▾" : "▸"}
                              </button>
                            )}
                          </td>
                          <td>{n.addressSid || "—"}</td>
                          <td>{when(n.created)}</td>
                        </tr>
                        {open && (
                          <tr id={rowId}>
                            <td colSpan={5}>
                              <LeaseTable number={n.number} />
                            </td>
                          </tr>
                        )}
                      </Fragment>
                    );
                  })}
                </tbody>
              </table>
            </TableWrap>
          )}
          <div class="pager">
            <button type="button" disabled={skip === 0} onClick={() => setSkip(Math.max(0, skip - PAGE))}>
              Previous
            </button>
            <button type="button" disabled={skip + PAGE >= total} onClick={() => setSkip(skip + PAGE)}>
              Next
            </button>
          </div>
        </>
      )}
    </section>
  );
}
