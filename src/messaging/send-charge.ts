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
import { findMessageKeys, type MessageKeyRow } from "./idempotency-key-store.js";
import type { SendFacts } from "./message-send-store.js";
import { type ChargeRule, IDEMPOTENCY_TTL_MS, type SendItem, sendOf } from "./send-steps.js";

const fail = <O>(error: unknown): ItemOutcome<O> => ({ ok: false, error });

/**
 * The charge of the sends judged in a transaction (keyed, leased, forwards), in send order, as the
 * one-statement path takes it (sb_charge): a send its balance cannot cover is refused.
 *
 * A keyed send refused may be the repeat of a send with the same Idempotency-Key that another
 * transaction was storing when this one read its facts: that send's charge held the balance row
 * this charge waited for, so its key is committed now. Such a repeat is answered as a repeat
 * (`keyAnswer`: the first message, or IdempotencyKeyReused) and taken out of `toStore`, not refused
 * for the funds the first send took (docs/api.md#idempotency-key: a repeat waits for the first).
 */
export async function chargeJudged<O>(
  tx: EntityManager,
  charge: ChargeRule,
  items: SendItem[],
  toStore: number[],
  outcomes: ItemOutcome<O>[],
  facts: SendFacts[],
  keyAnswer: (item: SendItem, key: MessageKeyRow) => ItemOutcome<O>,
): Promise<void> {
  const priced = toStore.filter((i) => amountOf(facts[i], charge.amountFact) > 0n);
  if (priced.length === 0) return;
  const results = await chargeSends(
    tx,
    priced.map((i) => ({ accountSid: items[i].account.sid, amount: amountOf(facts[i], charge.amountFact), messageSid: items[i].sid })),
    items[priced[0]].now,
  );
  const refusedKeyed: number[] = [];
  results.forEach((r, n) => {
    const i = priced[n];
    if (r.accepted) return;
    outcomes[i] = fail(charge.refuse(items[i], sendOf(items[i])!, facts[i]));
    if (items[i].idemKey !== undefined) refusedKeyed.push(i);
  });
  if (refusedKeyed.length === 0) return;
  const keys = await findMessageKeys(
    tx,
    refusedKeyed.map((i) => ({ accountSid: items[i].account.sid, key: items[i].idemKey! })),
    new Date(items[refusedKeyed[0]].now.getTime() - IDEMPOTENCY_TTL_MS),
  );
  const byKey = new Map(keys.map((k) => [`${k.account_sid}\n${k.key}`, k]));
  for (const i of refusedKeyed) {
    const key = byKey.get(`${items[i].account.sid}\n${items[i].idemKey}`);
    if (!key) continue;
    outcomes[i] = keyAnswer(items[i], key);
    toStore.splice(toStore.indexOf(i), 1);
  }
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
