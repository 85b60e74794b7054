/**
 * The charge step of the sends the pipeline judges in a transaction (send-pipeline.ts: keyed,
 * leased, forwards), as the storing statement takes it for the others (message-send-store.ts):
 * in send order, after every rule, before the leased senders (docs/billing.md#the-charge-on-the-send).
 */
import type { EntityManager } from "@mikro-orm/sql";
import { ConnectError } from "@connectrpc/connect";
import { chargeSends, refundMessage } from "../billing/balance-store.js";
import { errorCodeOf } from "../common/errors.js";
import type { ItemOutcome } from "../common/group-commit.js";
import type { SendFacts } from "./message-send-store.js";
import { type ChargeRule, type SendItem, sendOf } from "./send-steps.js";

const fail = <O>(error: unknown): ItemOutcome<O> => ({ ok: false, error });

/**
 * The charge of the sends judged in a transaction (keyed, leased, forwards), in send order, as the
 * one-statement path takes it (sb_charge): a send its balance cannot cover is refused.
 */
export async function chargeJudged<O>(
  tx: EntityManager,
  charge: ChargeRule,
  items: SendItem[],
  toStore: number[],
  outcomes: ItemOutcome<O>[],
  facts: SendFacts[],
): Promise<void> {
  const priced = toStore.filter((i) => amountOf(facts[i], charge.amountFact) > 0n);
  if (priced.length === 0) return;
  const results = await chargeSends(
    tx,
    priced.map((i) => ({ accountSid: items[i].account.sid, amount: amountOf(facts[i], charge.amountFact), messageSid: items[i].sid })),
    items[priced[0]].now,
  );
  results.forEach((r, n) => {
    const i = priced[n];
    if (!r.accepted) outcomes[i] = fail(charge.refuse(items[i], sendOf(items[i])!, facts[i]));
  });
}

/** Gives back the charge of a send refused its leased sender after it was charged (no number free, or the recipient's lease limit). */
export async function refundUnleased<O>(
  tx: EntityManager,
  items: SendItem[],
  toStore: number[],
  outcomes: ItemOutcome<O>[],
  facts: SendFacts[],
  amountFact: string,
): Promise<void> {
  for (const i of toStore) {
    const o = outcomes[i];
    if (items[i].leased && o !== undefined && !o.ok && isLeaseRefusal(o.error) && amountOf(facts[i], amountFact) > 0n)
      await refundMessage(tx, items[i].account.sid, items[i].sid, items[i].now);
  }
}

/** Whether a send was refused by allocateLeases (its only refusals: the rules of leased senders). */
const isLeaseRefusal = (err: unknown) => {
  if (!(err instanceof ConnectError)) return false;
  const code = errorCodeOf(err);
  return code === "LeaseLimitReached" || code === "NoLeasedNumberAvailable";
};

/** A send's amount to charge from its facts (micro-units; 0 when unpriced). */
const amountOf = (f: SendFacts, fact: string): bigint => (f[fact] === null || f[fact] === undefined ? 0n : BigInt(f[fact] as string));
