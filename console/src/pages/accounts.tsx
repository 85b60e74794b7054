// Accounts: the list and a new account; one account's SMS switch, token rotation (the new token
// shown once), billing (account-billing.tsx: balance, ledger, top-ups), properties, settings (REST
// compatibility, limits, opt-out texts and keywords, allowed countries, retention and redaction,
// the low-balance webhook) and its opt-out list.
import { useState } from "preact/hooks";
import type { Account } from "../../../gen/switchboard/admin/v1/admin_pb.js";
import { admin } from "../api";
import { AccountBilling } from "./account-billing";
import { LoadState, PageHeading, StatusLine, TableWrap, useAction, useLoad, when } from "../ui";

function formValue(e: Event, name: string): string {
  return String(new FormData(e.currentTarget as HTMLFormElement).get(name) ?? "");
}

function AccountList() {
  const list = useLoad(() => admin.listAccounts({ resultsCount: 200 }), "accounts");
  const action = useAction();
  const [created, setCreated] = useState<{ sid: string; token: string; secret: string }>();
  const create = async (e: Event) => {
    e.preventDefault();
    const name = formValue(e, "name").trim();
    const form = e.currentTarget as HTMLFormElement;
    await action.run(async () => {
      const a = await admin.createAccount({ name });
      setCreated({ sid: a.accountSid, token: a.token, secret: a.webhookSecret });
      form.reset();
      list.reload();
    }, `Account ${name} is created.`);
  };
  return (
    <>
      <h3>New account</h3>
      <form class="row" onSubmit={create}>
        <label for="new-account">Name</label>
        <input id="new-account" name="name" required maxLength={255} />
        <button type="submit">Create account</button>
      </form>
      <StatusLine status={action.status} />
      {created && (
        <div class="secret" role="group" aria-label="The new account's secrets">
          <p>Shown once: give these to the account's owner now.</p>
          <dl>
            <dt>AccountSid</dt>
            <dd>
              <a href={`#/accounts/${created.sid}`}>{created.sid}</a>
            </dd>
            <dt>Token</dt>
            <dd>
              <code>{created.token}</code>
            </dd>
            <dt>Webhook secret</dt>
            <dd>
              <code>{created.secret}</code>
            </dd>
          </dl>
        </div>
      )}
      <h3>All accounts</h3>
      <LoadState loading={list.loading} error={list.error} />
      {list.data && (
        <TableWrap label="Accounts">
          <table>
            <thead>
              <tr>
                <th scope="col">Account</th>
                <th scope="col">AccountSid</th>
                <th scope="col">SMS</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {list.data.accounts.map((a) => (
                <tr key={a.accountSid}>
                  <th scope="row">
                    <a href={`#/accounts/${a.accountSid}`}>{a.name}</a>
                  </th>
                  <td>{a.accountSid}</td>
                  <td>{a.smsEnabled ? "Enabled" : "Disabled"}</td>
                  <td>{when(a.created)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      )}
    </>
  );
}

function Settings(props: { account: Account; onSaved: () => void }) {
  const a = props.account;
  const action = useAction();
  const save = async (e: Event) => {
    e.preventDefault();
    const get = (k: string) => formValue(e, k);
    // An empty field sends 0, which clears the setting.
    const orClear = (k: string) => (get(k).trim() === "" ? 0 : Number(get(k)));
    const countries = get("allowedCountries")
      .split(/[\s,]+/)
      .filter(Boolean)
      .map((c) => ({ kind: { case: "stringValue" as const, value: c.toUpperCase() } }));
    const ok = await action.run(
      () =>
        admin.updateAccount({
          accountSid: a.accountSid,
          restCompatibility: get("restCompatibility"),
          optOutText: get("optOutText"),
          optInText: get("optInText"),
          helpText: get("helpText"),
          optOutKeywords: (e.currentTarget as HTMLFormElement).querySelector<HTMLInputElement>("#s-keywords")!.checked,
          smartEncoding: (e.currentTarget as HTMLFormElement).querySelector<HTMLInputElement>("#s-smart")!.checked,
          allowedCountries: { values: countries },
          retentionDays: orClear("retentionDays"),
          redactAfterDays: orClear("redactAfterDays"),
          sendRatePerSecond: orClear("sendRatePerSecond"),
          sendRateBurst: orClear("sendRateBurst"),
          messagesPerSecond: orClear("messagesPerSecond"),
          dailySegmentQuota: orClear("dailySegmentQuota"),
          // An empty field sends "", which clears it; the same values again change nothing (docs/billing.md#low-balance).
          lowBalanceThreshold: get("lowBalanceThreshold").trim(),
          lowBalanceWebhookUri: get("lowBalanceWebhookUri").trim(),
        }),
      "Settings saved.",
    );
    if (ok) props.onSaved();
  };
  return (
    <form class="settings" onSubmit={save} aria-labelledby="settings-heading">
      <h3 id="settings-heading">Settings</h3>
      <label for="s-compat">REST compatibility</label>
      <select id="s-compat" name="restCompatibility">
        <option value="None" selected={a.restCompatibility === "None"}>
          None (Switchboard's own format)
        </option>
        <option value="FoneDynamics" selected={a.restCompatibility === "FoneDynamics"}>
          FoneDynamics
        </option>
      </select>
      <label for="s-optout">Opt-out answer (STOP); empty for the default</label>
      <textarea id="s-optout" name="optOutText" maxLength={1600} defaultValue={a.optOutText} />
      <label for="s-optin">Opt-in answer (START); empty for the default</label>
      <textarea id="s-optin" name="optInText" maxLength={1600} defaultValue={a.optInText} />
      <label for="s-help">HELP answer; empty for the default</label>
      <textarea id="s-help" name="helpText" maxLength={1600} defaultValue={a.helpText} />
      <label class="check">
        <input id="s-keywords" type="checkbox" name="optOutKeywords" defaultChecked={a.optOutKeywords} />
        Act on STOP, START and HELP texted to the account's numbers
      </label>
      <label class="check">
        <input id="s-smart" type="checkbox" name="smartEncoding" defaultChecked={a.smartEncoding} />
        Smart encoding: replace curly quotes, dashes and other look-alikes with GSM-7 characters
      </label>
      <label for="s-countries">Allowed countries (ISO codes, e.g. AU NZ); empty for the deployment's default</label>
      <input id="s-countries" name="allowedCountries" defaultValue={a.allowedCountries.join(" ")} />
      <label for="s-retention">Retention in days (1 to 36500); empty for the deployment's</label>
      <input id="s-retention" name="retentionDays" type="number" min={1} max={36500} defaultValue={a.retentionDays?.toString() ?? ""} />
      <label for="s-redact">Redact texts after days (1 to 36500); empty for never</label>
      <input id="s-redact" name="redactAfterDays" type="number" min={1} max={36500} defaultValue={a.redactAfterDays?.toString() ?? ""} />
      <fieldset>
        <legend>Limits for the whole deployment, in segments</legend>
        <label for="s-rate">Request rate per second (up to 100000); empty for the deployment's SEND_RATE_LIMIT</label>
        <input id="s-rate" name="sendRatePerSecond" type="number" min={0} max={100000} step="any" defaultValue={a.sendRatePerSecond?.toString() ?? ""} />
        <label for="s-burst">Request burst (1 to 1000000); empty for the default</label>
        <input id="s-burst" name="sendRateBurst" type="number" min={1} max={1000000} defaultValue={a.sendRateBurst?.toString() ?? ""} />
        <label for="s-mps">Messages per second handed to carriers (up to 100000); empty for no cap</label>
        <input id="s-mps" name="messagesPerSecond" type="number" min={0} max={100000} step="any" defaultValue={a.messagesPerSecond?.toString() ?? ""} />
        <label for="s-quota">Daily segment quota (1 to 1000000000, UTC day); empty for none</label>
        <input id="s-quota" name="dailySegmentQuota" type="number" min={1} max={1000000000} defaultValue={a.dailySegmentQuota?.toString() ?? ""} />
        <p data-testid="segments-today">Segments today: {a.segmentsToday ?? 0}</p>
      </fieldset>
      <fieldset>
        <legend>Low balance: one BalanceLow webhook when a charge takes the balance below the threshold</legend>
        <label for="s-low-threshold">Low-balance threshold in {a.priceUnit} (e.g. 10.00, or -5.00 on credit); empty for none</label>
        <input id="s-low-threshold" name="lowBalanceThreshold" inputMode="decimal" defaultValue={a.lowBalanceThreshold ?? ""} />
        <label for="s-low-uri">Low-balance webhook URI (http or https); empty for none</label>
        <input id="s-low-uri" name="lowBalanceWebhookUri" type="url" maxLength={2048} defaultValue={a.lowBalanceWebhookUri} />
      </fieldset>
      <button type="submit">Save settings</button>
      <StatusLine status={action.status} />
    </form>
  );
}

function AccountDetail(props: { sid: string }) {
  const account = useLoad(() => admin.getAccount({ accountSid: props.sid }), props.sid);
  const properties = useLoad(() => admin.listProperties({ accountSid: props.sid }), props.sid);
  const optOuts = useLoad(() => admin.listAccountOptOuts({ accountSid: props.sid, resultsCount: 200 }), props.sid);
  const action = useAction();
  const [token, setToken] = useState("");
  const a = account.data;
  const toggleSms = () =>
    a &&
    void action
      .run(() => admin.updateAccount({ accountSid: a.accountSid, smsEnabled: !a.smsEnabled }), a.smsEnabled ? "SMS is disabled." : "SMS is enabled.")
      .then(account.reload);
  const rotate = async () => {
    if (!confirm("Issue a new token? The current one stops working at once.")) return;
    await action.run(async () => setToken((await admin.rotateToken({ accountSid: props.sid })).token), "A new token is issued; the old one no longer works.");
  };
  const addProperty = async (e: Event) => {
    e.preventDefault();
    const name = formValue(e, "name").trim();
    const form = e.currentTarget as HTMLFormElement;
    if (await action.run(() => admin.createProperty({ accountSid: props.sid, name }), `Property ${name} is created.`)) {
      form.reset();
      properties.reload();
    }
  };
  return (
    <>
      <p>
        <a href="#/accounts">All accounts</a>
      </p>
      <LoadState loading={account.loading} error={account.error} />
      {a && (
        <>
          <h3>{a.name}</h3>
          <dl class="record">
            <div>
              <dt>AccountSid</dt>
              <dd>{a.accountSid}</dd>
            </div>
            <div>
              <dt>SMS</dt>
              <dd data-testid="sms-state">{a.smsEnabled ? "Enabled" : "Disabled"}</dd>
            </div>
            <div>
              <dt>Created</dt>
              <dd>{when(a.created)}</dd>
            </div>
          </dl>
          <div class="actions">
            <button type="button" onClick={toggleSms}>
              {a.smsEnabled ? "Disable SMS" : "Enable SMS"}
            </button>
            <button type="button" class="danger" onClick={() => void rotate()}>
              Rotate token
            </button>
          </div>
          <StatusLine status={action.status} />
          {token && (
            <div class="secret" role="group" aria-label="The new token">
              <p>Shown once: give it to the account's owner now.</p>
              <p>
                <code data-testid="new-token">{token}</code>
              </p>
            </div>
          )}
          <AccountBilling account={a} onChanged={account.reload} />
          <h3>Properties</h3>
          <LoadState loading={properties.loading} error={properties.error} />
          {properties.data && (
            <ul>
              {properties.data.properties.map((p) => (
                <li key={p.propertySid}>
                  {p.name} ({p.propertySid}), SMS {p.smsEnabled ? "enabled" : "disabled"}
                </li>
              ))}
            </ul>
          )}
          <form class="row" onSubmit={addProperty}>
            <label for="new-property">New property name</label>
            <input id="new-property" name="name" required maxLength={255} />
            <button type="submit">Add property</button>
          </form>
          <Settings account={a} onSaved={account.reload} />
          <h3>Opt-out list</h3>
          <LoadState loading={optOuts.loading} error={optOuts.error} />
          {optOuts.data &&
            (optOuts.data.optOuts.length === 0 ? (
              <p>No number has opted out of this account's messages.</p>
            ) : (
              <TableWrap label="Opt-out list">
                <table>
                  <thead>
                    <tr>
                      <th scope="col">Number</th>
                      <th scope="col">Source</th>
                      <th scope="col">Since</th>
                    </tr>
                  </thead>
                  <tbody>
                    {optOuts.data.optOuts.map((o) => (
                      <tr key={o.number}>
                        <th scope="row">{o.number}</th>
                        <td>{o.source}</td>
                        <td>{when(o.created)}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </TableWrap>
            ))}
        </>
      )}
    </>
  );
}

export function Accounts(props: { selected?: string }) {
  return (
    <section>
      <PageHeading>Accounts</PageHeading>
      {props.selected ? <AccountDetail sid={props.selected} /> : <AccountList />}
    </section>
  );
}
