// Numbers: owned and pool numbers, with the live leases on each pool number.
import { useState } from "preact/hooks";
import { admin } from "../api";
import { LoadState, PageHeading, TableWrap, useLoad, when } from "../ui";

const PAGE = 100;

export function Numbers() {
  const [kind, setKind] = useState<"all" | "pool" | "owned">("all");
  const [skip, setSkip] = useState(0);
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
                  {list.data.numbers.map((n) => (
                    <tr key={n.number}>
                      <th scope="row">{n.number}</th>
                      <td>{n.pool ? "Lease pool" : n.accountSid}</td>
                      <td>{n.pool ? n.liveLeases : "—"}</td>
                      <td>{n.addressSid || "—"}</td>
                      <td>{when(n.created)}</td>
                    </tr>
                  ))}
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
