// Sender IDs: the review queue of Pending sender ID applications across accounts, each registered or rejected.
import { admin } from "../api";
import { LoadState, PageHeading, StatusLine, TableWrap, useAction, useLoad } from "../ui";

export function SenderIds() {
  const queue = useLoad(() => admin.listSenderIds({ status: "Pending" }), "pending");
  const action = useAction();
  const review = async (senderIdSid: string, name: string, country: string, status: "Registered" | "Rejected") => {
    const done = `Sender ID ${name} (${country}, ${senderIdSid}) is ${status === "Registered" ? "registered" : "rejected"}.`;
    if (await action.run(() => admin.reviewSenderId({ senderIdSid, status }), done)) queue.reload();
  };
  const rows = queue.data?.senderIds ?? [];
  return (
    <section>
      <PageHeading>Sender IDs</PageHeading>
      <p>
        Pending sender ID applications, oldest first. Registering one lets its account send from that name to the country where SENDER_ID_REGISTRATION requires
        it; rejecting frees the name.
      </p>
      <StatusLine status={action.status} />
      <LoadState loading={queue.loading} error={queue.error} />
      {queue.data &&
        (rows.length === 0 ? (
          <p>No sender ID waits for review.</p>
        ) : (
          <TableWrap label="Pending sender IDs">
            <table>
              <thead>
                <tr>
                  <th scope="col">Sender ID</th>
                  <th scope="col">Country</th>
                  <th scope="col">Account</th>
                  <th scope="col">Use case</th>
                  <th scope="col">Review</th>
                </tr>
              </thead>
              <tbody>
                {rows.map((s) => (
                  <tr key={s.senderIdSid} data-sender-id={s.senderIdSid}>
                    <th scope="row">
                      {s.senderId}
                      <br />
                      <span class="muted">{s.senderIdSid}</span>
                    </th>
                    <td>{s.country}</td>
                    <td>{s.accountSid}</td>
                    <td>{s.useCase}</td>
                    <td class="actions">
                      <button
                        type="button"
                        onClick={() => void review(s.senderIdSid, s.senderId, s.country, "Registered")}
                        aria-label={`Register ${s.senderId} for ${s.country} (${s.senderIdSid})`}
                      >
                        Register
                      </button>
                      <button
                        type="button"
                        class="danger"
                        onClick={() => void review(s.senderIdSid, s.senderId, s.country, "Rejected")}
                        aria-label={`Reject ${s.senderId} for ${s.country} (${s.senderIdSid})`}
                      >
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
