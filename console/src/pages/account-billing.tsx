// An account's billing, on its page: Balance, BillingMode, CreditLimit and PriceUnit (as GetAccount
// gives them), its ledger newest first a page at a time (ListBalanceEntries, the operator's read
// of what the account reads on /v2), and the operator's top-up or adjustment (AddBalanceEntry).
// Amounts stay the service's decimal strings: the page never does arithmetic on money. A refusal
// marks the field the service names, with its message under it; after an entry is added the
// balance and the ledger are read again, so the page shows what the service holds.
import { useState } from "preact/hooks";
import type { Account } from "../../../gen/switchboard/admin/v1/admin_pb.js";
import { admin, fieldProblemsOf, isSignedOut, messageOf } from "../api";
import { LoadState, onSignedOut, TableWrap, useLoad, when } from "../ui";

const PAGE = 25;
const FIELDS = ["Type", "Amount", "Reference"] as const;
type Field = (typeof FIELDS)[number];

type Outcome = { ok: true; text: string } | { ok: false; text: string; problems: { field: string; message: string }[] };

function Ledger(props: { accountSid: string; priceUnit: string }) {
  const [skip, setSkip] = useState(0);
  const ledger = useLoad(
    () => admin.listBalanceEntries({ accountSid: props.accountSid, resultsCount: PAGE, resultsSkip: skip }),
    `${props.accountSid} ${skip}`,
  );
  const total = ledger.data?.totalCount ?? 0;
  const entries = ledger.data?.balanceEntries ?? [];
  return (
    <>
      <h4 id="ledger-heading">Ledger</h4>
      <LoadState loading={ledger.loading} error={ledger.error} />
      {ledger.data &&
        (total === 0 ? (
          <p>No entry yet: the balance is 0.00 until the first charge, top-up or adjustment.</p>
        ) : (
          <>
            <p aria-live="polite">
              Entries {skip + 1} to {skip + entries.length} of {total}, newest first; amounts in {props.priceUnit}.
            </p>
            <TableWrap label="Ledger">
              <table>
                <thead>
                  <tr>
                    <th scope="col">Time</th>
                    <th scope="col">Type</th>
                    <th scope="col">Amount</th>
                    <th scope="col">Balance after</th>
                    <th scope="col">Message or reference</th>
                    <th scope="col">Entry</th>
                  </tr>
                </thead>
                <tbody>
                  {entries.map((e) => (
                    <tr key={e.entryId}>
                      <th scope="row">{when(e.created)}</th>
                      <td>{e.type}</td>
                      <td class="money">{e.amount}</td>
                      <td class="money">{e.balanceAfter}</td>
                      <td>{e.messageSid ? <a href={`#/messages/${e.messageSid}`}>{e.messageSid}</a> : e.reference}</td>
                      <td>{e.entryId}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </TableWrap>
            {total > PAGE && (
              <div class="pager">
                <button type="button" disabled={skip === 0} onClick={() => setSkip(Math.max(0, skip - PAGE))}>
                  Newer entries
                </button>
                <button type="button" disabled={skip + PAGE >= total} onClick={() => setSkip(skip + PAGE)}>
                  Older entries
                </button>
              </div>
            )}
          </>
        ))}
    </>
  );
}

function EntryForm(props: { account: Account; onAdded: () => void }) {
  const [outcome, setOutcome] = useState<Outcome>();
  const [busy, setBusy] = useState(false);
  const unit = props.account.priceUnit;
  const problemsAt = (field: Field) => (outcome && !outcome.ok ? outcome.problems.filter((p) => p.field === field) : []);
  /** An input's error attributes and the message under it, for the field the service names. */
  const fieldError = (field: Field) => {
    const found = problemsAt(field);
    const id = `entry-error-${field}`;
    return {
      attrs: found.length > 0 ? { "aria-invalid": true as const, "aria-describedby": id } : {},
      note:
        found.length > 0 ? (
          <span class="field-error" id={id}>
            {found.map((p) => p.message).join(" ")}
          </span>
        ) : null,
    };
  };
  const submit = async (e: Event) => {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const data = new FormData(form);
    const get = (k: string) => String(data.get(k) ?? "");
    setBusy(true);
    try {
      // Sent as typed: the service checks the amount (its sign, its decimals) and names what is wrong.
      const entry = await admin.addBalanceEntry({
        accountSid: props.account.accountSid,
        type: get("type"),
        amount: get("amount"),
        reference: get("reference"),
      });
      const what = entry.type === "TopUp" ? "Top-up" : "Adjustment";
      setOutcome({ ok: true, text: `${what} of ${entry.amount} ${unit} added; the balance is ${entry.balanceAfter} ${unit}.` });
      form.reset();
      props.onAdded();
    } catch (err) {
      if (isSignedOut(err)) onSignedOut();
      setOutcome({ ok: false, text: messageOf(err), problems: fieldProblemsOf(err) });
    } finally {
      setBusy(false);
    }
  };
  const type = fieldError("Type");
  const amount = fieldError("Amount");
  const reference = fieldError("Reference");
  return (
    <form class="settings" onSubmit={submit} noValidate aria-labelledby="entry-heading">
      <h4 id="entry-heading">Top up or adjust the balance</h4>
      <label for="entry-type">Type</label>
      <select id="entry-type" name="type" {...type.attrs}>
        <option value="TopUp">Top-up (adds to the balance)</option>
        <option value="Adjustment">Adjustment (a correction; a leading - takes from the balance)</option>
      </select>
      {type.note}
      <label for="entry-amount">Amount in {unit} (at most 6 decimal places, such as 12.50)</label>
      <input id="entry-amount" name="amount" inputMode="decimal" autocomplete="off" {...amount.attrs} />
      {amount.note}
      <label for="entry-reference">Reference (an invoice or ticket; optional, at most 255 characters)</label>
      <input id="entry-reference" name="reference" maxLength={255} autocomplete="off" {...reference.attrs} />
      {reference.note}
      <button type="submit" disabled={busy}>
        Add to the ledger
      </button>
      <p role="status" class={outcome && !outcome.ok ? "status error" : "status"}>
        {outcome ? (outcome.ok ? outcome.text : `Error: ${outcome.text}`) : ""}
      </p>
    </form>
  );
}

/** The billing part of an account's page; `onChanged` reads the account (and so its Balance) again. */
export function AccountBilling(props: { account: Account; onChanged: () => void }) {
  const a = props.account;
  // Bumped by every entry added: the ledger starts again from its first page, with the new entry.
  const [version, setVersion] = useState(0);
  return (
    <section aria-labelledby="billing-heading">
      <h3 id="billing-heading">Billing</h3>
      <dl class="figures" data-testid="billing">
        <div>
          <dt>Balance</dt>
          <dd data-testid="balance">
            {a.balance} {a.priceUnit}
          </dd>
        </div>
        <div>
          <dt>Billing mode</dt>
          <dd data-testid="billing-mode">{a.billingMode}</dd>
        </div>
        <div>
          <dt>Credit limit</dt>
          <dd data-testid="credit-limit">{a.creditLimit === undefined ? "None" : `${a.creditLimit} ${a.priceUnit}`}</dd>
        </div>
        <div>
          <dt>Rate card</dt>
          <dd data-testid="rate-card">{a.rateCard === "" ? "The deployment's default" : a.rateCard}</dd>
        </div>
      </dl>
      <p>
        <a href={`#/usage/${a.accountSid}`}>Usage of this account</a>: messages, price, cost and margin per day.
      </p>
      <EntryForm
        account={a}
        onAdded={() => {
          setVersion((v) => v + 1);
          props.onChanged();
        }}
      />
      <Ledger key={version} accountSid={a.accountSid} priceUnit={a.priceUnit} />
    </section>
  );
}
