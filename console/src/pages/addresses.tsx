// Addresses: the review queue of Pending addresses across accounts, each approved (Active) or rejected.
import { admin } from "../api";
import { LoadState, PageHeading, StatusLine, TableWrap, useAction, useLoad } from "../ui";

export function Addresses() {
  const queue = useLoad(() => admin.listAddresses({ status: "Pending" }), "pending");
  const action = useAction();
  const review = async (addressSid: string, status: "Active" | "Rejected") => {
    const done = `Address ${addressSid} is ${status === "Active" ? "approved (Active)" : "rejected"}.`;
    if (await action.run(() => admin.reviewAddress({ addressSid, status }), done)) queue.reload();
  };
  const rows = queue.data?.addresses ?? [];
  return (
    <section>
      <PageHeading>Addresses</PageHeading>
      <p>Pending addresses, oldest first. Approving makes an address Active: numbers can then be registered against it.</p>
      <StatusLine status={action.status} />
      <LoadState loading={queue.loading} error={queue.error} />
      {queue.data &&
        (rows.length === 0 ? (
          <p>No address waits for review.</p>
        ) : (
          <TableWrap label="Pending addresses">
            <table>
              <thead>
                <tr>
                  <th scope="col">Address</th>
                  <th scope="col">Account</th>
                  <th scope="col">Where</th>
                  <th scope="col">Review</th>
                </tr>
              </thead>
              <tbody>
                {rows.map((a) => (
                  <tr key={a.addressSid} data-address={a.addressSid}>
                    <th scope="row">
                      {a.friendly || a.addressSid}
                      <br />
                      <span class="muted">{a.addressSid}</span>
                    </th>
                    <td>{a.accountSid}</td>
                    <td>{[a.line1, a.line2, a.city, a.region, a.postalCode, a.countryCode].filter(Boolean).join(", ")}</td>
                    <td class="actions">
                      <button type="button" onClick={() => void review(a.addressSid, "Active")} aria-label={`Approve ${a.addressSid}`}>
                        Approve
                      </button>
                      <button type="button" class="danger" onClick={() => void review(a.addressSid, "Rejected")} aria-label={`Reject ${a.addressSid}`}>
                        Reject
                      </button>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableWrap>
        ))}
    </section>
  );
}
