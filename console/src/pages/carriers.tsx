// Carriers and routes: each carrier with its link and CostCard (changed in place: UpdateCarrier), a
// new carrier, and the route table edited as a form (route-form.tsx) and saved whole
// (ReplaceRoutes replaces it at once, as the CLI's --json-file does).
import type { Carrier } from "../../../gen/switchboard/admin/v1/admin_pb.js";
import { admin } from "../api";
import { LoadState, PageHeading, StatusLine, TableWrap, useAction, useLoad } from "../ui";
import { RouteForm } from "./route-form";

function formValue(form: FormData, name: string): string {
  return String(form.get(name) ?? "").trim();
}

/** The rate cards a carrier's CostCard may name ("": none). */
function CostCardOptions(props: { cards: string[] }) {
  return (
    <>
      <option value="">None</option>
      {props.cards.map((c) => (
        <option key={c} value={c}>
          {c}
        </option>
      ))}
    </>
  );
}

/** A carrier's CostCard as a select of the rate cards, saved on change (UpdateCarrier; "" clears it). */
function CostCardCell(props: { carrier: Carrier; cards: string[]; onSaved: () => void }) {
  const action = useAction();
  const c = props.carrier;
  // A card the list does not hold (past its first page) still shows as the current value.
  const cards = c.costCard === "" || props.cards.includes(c.costCard) ? props.cards : [...props.cards, c.costCard];
  const save = async (costCard: string) => {
    const ok = await action.run(
      () => admin.updateCarrier({ carrierSid: c.carrierSid, costCard }),
      costCard === "" ? `Carrier ${c.name} has no cost card now.` : `Carrier ${c.name} costs by rate card ${costCard} now.`,
    );
    if (ok) props.onSaved();
  };
  return (
    <td>
      <select aria-label={`Cost card of ${c.name}`} value={c.costCard} onChange={(e) => void save(e.currentTarget.value)}>
        <CostCardOptions cards={cards} />
      </select>
      <StatusLine status={action.status} />
    </td>
  );
}

export function Carriers() {
  const carriers = useLoad(() => admin.listCarriers({}), "carriers");
  const routes = useLoad(() => admin.getRoutes({}), "routes");
  const rateCards = useLoad(() => admin.listRateCards({ resultsCount: 1000 }), "rate-cards");
  const cardNames = rateCards.data?.rateCards.map((c) => c.name) ?? [];
  const action = useAction();
  const add = async (e: Event) => {
    e.preventDefault();
    const el = e.currentTarget as HTMLFormElement;
    const f = new FormData(el);
    const tps = formValue(f, "tps");
    const win = formValue(f, "window");
    const ok = await action.run(
      () =>
        admin.addCarrier({
          name: formValue(f, "name"),
          kind: formValue(f, "kind"),
          url: formValue(f, "url"),
          tps: tps === "" ? undefined : Number(tps),
          window: win === "" ? undefined : Number(win),
          costCard: formValue(f, "costCard") || undefined,
        }),
      `Carrier ${formValue(f, "name")} is added.`,
    );
    if (ok) {
      el.reset();
      carriers.reload();
    }
  };
  return (
    <section>
      <PageHeading>Carriers and routes</PageHeading>
      <h3>Carriers</h3>
      <LoadState loading={carriers.loading} error={carriers.error} />
      {carriers.data &&
        (carriers.data.carriers.length === 0 ? (
          <p>No carrier is configured: the deployment's CARRIER takes every message.</p>
        ) : (
          <TableWrap label="Carriers">
            <table>
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">CarrierSid</th>
                  <th scope="col">Kind</th>
                  <th scope="col">Url</th>
                  <th scope="col">Link</th>
                  <th scope="col">Cost card</th>
                </tr>
              </thead>
              <tbody>
                {carriers.data.carriers.map((c) => (
                  <tr key={c.carrierSid}>
                    <th scope="row">{c.name}</th>
                    <td>{c.carrierSid}</td>
                    <td>{c.kind}</td>
                    <td>{c.url}</td>
                    <td>{c.link === "-" ? "no standing link" : c.link}</td>
                    <CostCardCell carrier={c} cards={cardNames} onSaved={carriers.reload} />
                  </tr>
                ))}
              </tbody>
            </table>
          </TableWrap>
        ))}
      <h3>Add a carrier</h3>
      <form class="settings" onSubmit={add}>
        <label for="c-name">Name</label>
        <input id="c-name" name="name" required maxLength={64} />
        <label for="c-kind">Kind</label>
        <select id="c-kind" name="kind">
          <option value="smpp">SMPP</option>
          <option value="kannel">Kannel</option>
          <option value="simulator">Simulator</option>
        </select>
        <label for="c-url">Url (smpp://system_id:password@host:port, Kannel's sendsms URL, or simulator://)</label>
        <input id="c-url" name="url" required />
        <label for="c-tps">Submissions per second per link (empty: no limit)</label>
        <input id="c-tps" name="tps" type="number" min={0} step="any" />
        <label for="c-window">SMPP window, 1 to 1000 (empty: 10)</label>
        <input id="c-window" name="window" type="number" min={1} max={1000} />
        <label for="c-cost-card">Cost card: the rate card of what this carrier costs per segment (LeastCost routes by it; none: no cost known)</label>
        <select id="c-cost-card" name="costCard">
          <CostCardOptions cards={cardNames} />
        </select>
        <button type="submit">Add carrier</button>
        <StatusLine status={action.status} />
      </form>
      <h3>Route table</h3>
      <p>
        In order: the first route whose Prefix and AccountSid match a message carries it. Each route names its carriers in order, with Strategy Failover,
        RoundRobin or LeastCost (the cheapest carrier up for each message, by the carriers' cost cards). Save replaces the whole table.
      </p>
      {routes.data && carriers.data && carriers.data.carriers.length > 0 && routes.data.routes.length === 0 && (
        <p role="note">
          The route table is empty: the deployment's CARRIER still takes every message and the carriers above get none. Saving a route table replaces that
          default route; a message no route matches then fails with NoRoute, so end the table with a route without Prefix and AccountSid.
        </p>
      )}
      <LoadState loading={routes.loading} error={routes.error} />
      {routes.data && carriers.data && <RouteForm routes={routes.data.routes} carriers={carriers.data.carriers} onSaved={routes.reload} />}
    </section>
  );
}
