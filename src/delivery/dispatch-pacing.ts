import type { MikroORM } from "@mikro-orm/sql";
import type { Logger } from "pino";
import type { Clock } from "../common/clock.js";
import { failUnsubmitted } from "./receipts.js";
import { type ClaimedRow, deferMessages, pastValidity } from "../messaging/message-store.js";
import { findDispatchRates } from "../accounts/account-store.js";
import { textEncoding } from "../common/sms-text.js";
import { dispatchRateSpec } from "../limits/account-limits.js";
import type { SharedAllowance } from "../limits/shared-allowance.js";

/** How long an account's MessagesPerSecond is reused, ms: an operator's change shows within it. */
const DISPATCH_RATES_TTL_MS = 1000;
/** With the shared store unreachable, a capped account's claimed messages are due again after this, ms. */
const STORE_DOWN_DEFER_MS = 1000;

/** What the dispatcher's pacing step needs (dispatcher.ts DispatcherOptions). */
export interface PacingOptions {
  orm: MikroORM;
  clock: Clock;
  log?: Logger;
  /** The shared buckets of the accounts' MessagesPerSecond (docs/limits.md); absent: no account is paced. */
  shared?: SharedAllowance;
  /** Counts the messages a round gave back to the queue (throttled) and failed QueueTimeout, per account. */
  onPaced?: (accountSid: string, throttled: number, timedOut: number) => void;
}

/** The dispatcher's MessagesPerSecond step: of a round's claimed messages, those that go out now (the rest are deferred or failed). */
export function createPacing(opts: PacingOptions): (rows: ClaimedRow[], now: Date) => Promise<ClaimedRow[]> {
  /** Accounts' MessagesPerSecond (null: none), and when they were read (performance.now()). */
  const rates = new Map<string, { rate: number | null; at: number }>();

  async function dispatchRates(sids: string[]): Promise<Map<string, number>> {
    const t = performance.now();
    const stale = sids.filter((sid) => {
      const r = rates.get(sid);
      return !r || t - r.at >= DISPATCH_RATES_TTL_MS;
    });
    if (stale.length > 0) {
      const found = await findDispatchRates(opts.orm.em.fork(), stale);
      if (rates.size > 10_000) rates.clear();
      for (const sid of stale) rates.set(sid, { rate: found.get(sid) ?? null, at: t });
    }
    const out = new Map<string, number>();
    for (const sid of sids) {
      const r = rates.get(sid)?.rate;
      if (r != null && r > 0) out.set(sid, r);
    }
    return out;
  }

  /**
   * The accounts' MessagesPerSecond (docs/limits.md), one step of the round: the segments of each
   * capped account's claimed messages are taken from its shared bucket (every account of the
   * round in one call to the store); what the grant covers goes out, in due order, and the rest
   * goes back to the queue, due when the bucket will hold it (so the next rounds rarely claim it
   * early). A message whose ValidityPeriod ended while it waited fails QueueTimeout instead. The
   * accounts without a cap pass untouched, so one account's full queue never delays another's
   * messages beyond the round-robin share they already had. The shared store unreachable: the
   * capped accounts' messages wait (never an unlimited pass).
   */
  async function paced(rows: ClaimedRow[], now: Date): Promise<ClaimedRow[]> {
    if (!opts.shared || rows.length === 0) return rows;
    const capped = await dispatchRates([...new Set(rows.map((r) => r.account_sid))]);
    if (capped.size === 0) return rows;
    const byAccount = new Map<string, ClaimedRow[]>();
    for (const r of rows) {
      if (!capped.has(r.account_sid)) continue;
      const list = byAccount.get(r.account_sid);
      if (list) list.push(r);
      else byAccount.set(r.account_sid, [r]);
    }
    const expired = await pastValidity(
      opts.orm.em.fork(),
      [...byAccount.values()].flat().map((r) => r.sid),
      now,
    );
    const shared = opts.shared;
    const go = new Set<ClaimedRow>();
    const deferred: { sid: string; at: Date }[] = [];
    const timedOut: ClaimedRow[] = [];
    await Promise.all(
      [...byAccount].map(async ([sid, list]) => {
        const rate = capped.get(sid)!;
        const spec = dispatchRateSpec(rate);
        const live = list.filter((r) => !expired.has(r.sid));
        timedOut.push(...list.filter((r) => expired.has(r.sid)));
        const segments = live.map((r) => textEncoding(r.text || " ").numSegments);
        const want = segments.reduce((a, b) => a + b, 0);
        const key = `mps:${sid}`;
        let granted: number;
        try {
          // A message of more segments than the bucket holds goes alone, on a full bucket (its debt
          // delays the next); otherwise as many segments as the bucket holds now.
          if (segments.length > 0 && segments[0] > spec.burst) granted = (await shared.take(key, segments[0], spec)).ok ? segments[0] : 0;
          else granted = await shared.takeUpTo(key, want, spec);
        } catch (err) {
          opts.log?.warn({ accountSid: sid, err }, "shared limits unreachable: the account's capped messages wait");
          for (const r of live) deferred.push({ sid: r.sid, at: new Date(now.getTime() + STORE_DOWN_DEFER_MS) });
          return;
        }
        let used = 0;
        let i = 0;
        for (; i < live.length && used + segments[i] <= granted; i++) {
          used += segments[i];
          go.add(live[i]);
        }
        const sent = i;
        if (granted > used) shared.giveBack(key, granted - used, spec);
        // The rest, each due when the bucket will have refilled its segments, counted from the
        // take (a moment after the round began: counted from the round, the next claim would come
        // a little early and find the bucket a fraction of a token short).
        const takenAt = Math.max(now.getTime(), opts.clock.now().getTime());
        let owed = 0;
        for (; i < live.length; i++) {
          owed += segments[i];
          deferred.push({ sid: live[i].sid, at: new Date(takenAt + Math.ceil((owed * 1000) / rate)) });
        }
        opts.onPaced?.(sid, live.length - sent, list.length - live.length);
      }),
    );
    await deferMessages(
      opts.orm.em.fork(),
      deferred.map((d) => d.sid),
      deferred.map((d) => d.at),
    );
    if (timedOut.length > 0) {
      opts.log?.info(
        { count: timedOut.length, messageSids: timedOut.slice(0, 50).map((r) => r.sid) },
        "messages queued past their ValidityPeriod: failed QueueTimeout",
      );
      await opts.orm.em.fork().transactional((tx) =>
        failUnsubmitted(
          tx,
          timedOut.map((r) => ({ messageSid: r.sid, status: "Failed" as const, errorCode: "QueueTimeout", at: now, now })),
        ),
      );
    }
    return rows.filter((r) => !capped.has(r.account_sid) || go.has(r));
  }

  return paced;
}
