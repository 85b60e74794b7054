// SMPP: the binds open on every process, and an account's SMPP credentials, read and set
// (docs/smpp-server.md). The password is written, never shown: the API never answers it.
import { useState } from "preact/hooks";
import { admin } from "../api";
import { LoadState, PageHeading, StatusLine, TableWrap, useAction, useLoad, when } from "../ui";

export function Smpp() {
  const binds = useLoad(() => admin.listSmppBinds({}), "binds");
  const [accountSid, setAccountSid] = useState("");
  const creds = useLoad(() => (accountSid ? admin.getSmppCredentials({ accountSid }) : Promise.resolve(undefined)), accountSid);
  const action = useAction();
  const look = (e: Event) => {
    e.preventDefault();
    setAccountSid(new FormData(e.currentTarget as HTMLFormElement).get("accountSid")?.toString().trim() ?? "");
  };
  const save = async (e: Event) => {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const data = new FormData(form);
    const get = (k: string) => data.get(k)?.toString() ?? "";
    const maxBinds = get("maxBinds").trim();
    const ok = await action.run(
      () =>
        admin.setSmppCredentials({
          accountSid,
          systemId: get("systemId"),
          password: get("password"),
          propertySid: get("propertySid").trim(),
          maxBinds: maxBinds === "" ? undefined : Number(maxBinds),
          allowedAddresses: get("allowedAddresses")
            .split(/[\s,]+/)
            .filter(Boolean),
          deliverReplies: form.querySelector<HTMLInputElement>("#smpp-replies")!.checked,
        }),
      `SMPP credentials of ${accountSid} saved.`,
    );
    if (ok) {
      form.querySelector<HTMLInputElement>("#smpp-password")!.value = "";
      creds.reload();
    }
  };
  const c = creds.data;
  const rows = binds.data?.binds ?? [];
  return (
    <section>
      <PageHeading>SMPP</PageHeading>
      <h3>Open binds</h3>
      <LoadState loading={binds.loading} error={binds.error} />
      {binds.data &&
        (rows.length === 0 ? (
          <p>No SMPP bind is open.</p>
        ) : (
          <TableWrap label="Open SMPP binds">
            <table>
              <thead>
                <tr>
                  <th scope="col">System ID</th>
                  <th scope="col">Account</th>
                  <th scope="col">Address</th>
                  <th scope="col">Mode</th>
                  <th scope="col">Since</th>
                  <th scope="col">In flight</th>
                </tr>
              </thead>
              <tbody>
                {rows.map((b) => (
                  <tr key={`${b.address}-${b.since}`}>
                    <th scope="row">{b.systemId}</th>
                    <td>{b.accountSid}</td>
                    <td>{b.address}</td>
                    <td>{b.mode}</td>
                    <td>{when(b.since)}</td>
                    <td>{b.inFlight}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableWrap>
        ))}
      <button type="button" onClick={binds.reload}>
        Refresh
      </button>
      <h3>An account's credentials</h3>
      <form class="row" onSubmit={look}>
        <label for="smpp-account">AccountSid</label>
        <input id="smpp-account" name="accountSid" required defaultValue={accountSid} />
        <button type="submit">Show</button>
      </form>
      {accountSid && <LoadState loading={creds.loading} error={creds.error?.includes("not found") ? undefined : creds.error} />}
      {accountSid && !creds.loading && (
        <form class="settings" onSubmit={save} aria-labelledby="smpp-form-heading" key={`${accountSid}-${c?.updated ?? "new"}`}>
          <h4 id="smpp-form-heading">{c ? `Credentials of ${accountSid} (set ${when(c.updated)})` : `${accountSid} has no SMPP credentials yet`}</h4>
          <label for="smpp-system-id">System ID (1 to 15 characters, unique)</label>
          <input id="smpp-system-id" name="systemId" required maxLength={15} defaultValue={c?.systemId ?? ""} />
          <label for="smpp-password">Password (1 to 8 characters; required: a save sets it again)</label>
          <input id="smpp-password" name="password" type="password" required maxLength={8} autoComplete="new-password" />
          <label for="smpp-property">PropertySid its sends are made for</label>
          <input id="smpp-property" name="propertySid" required defaultValue={c?.propertySid ?? ""} />
          <label for="smpp-max">Most binds at once (1 to 100); empty for 4</label>
          <input id="smpp-max" name="maxBinds" type="number" min={1} max={100} defaultValue={c?.maxBinds.toString() ?? ""} />
          <label for="smpp-allowed">Allowed addresses (CIDRs, space-separated); empty for any</label>
          <input id="smpp-allowed" name="allowedAddresses" defaultValue={c?.allowedAddresses.join(" ") ?? ""} />
          <label class="check">
            <input id="smpp-replies" type="checkbox" name="deliverReplies" defaultChecked={c?.deliverReplies ?? false} />
            Deliver replies to the account's numbers to its binds as deliver_sm
          </label>
          <button type="submit">Save SMPP credentials</button>
        </form>
      )}
      <StatusLine status={action.status} />
    </section>
  );
}
