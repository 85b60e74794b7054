/**
 * Rate cards kept in this process's memory (docs/billing.md#rate-lookup-per-send), so that a send
 * is priced without the statement that stores it probing the card's index for every prefix of its
 * destination (up to 15 probes of a card of any size). Exact whatever another process changes:
 * each cached price travels with its card's version, and the statement takes it only where the
 * account's card is still at that version (versions come from one sequence, so no two cards share
 * one); anywhere else (a card replaced a moment ago, an account moved to another card, a card not
 * loaded yet) the statement looks the rate up itself, as it would without this cache.
 *
 * A card is loaded in the background the first time a send needs it (that send is priced by the
 * statement), and its version is checked again at most once per `recheckMs` while sends use it; a
 * changed card is loaded anew. Cards of more than `maxRates` rates are not kept.
 */
import type { MikroORM } from "@mikro-orm/core";
import type { EntityManager } from "@mikro-orm/sql";
import type { Rate } from "./rate-rules.js";
import { cardVersions, loadCard } from "./rate-card-store.js";

/** A send's rate from the cache: the card's version it was read from and the price of one segment (null: the card has no rate for it then). */
export interface CachedRate {
  version: string;
  perSegment: bigint | null;
}

/** The rate cards this process keeps. */
export interface RateCache {
  /** The rate of `destination` (E164) on `card` at `at`, or undefined when the card is not in memory (it is then loaded for the next sends). */
  rateFor(card: string, destination: string, at: Date): CachedRate | undefined;
}

/** Options of createRateCache. */
export interface RateCacheOptions {
  orm: MikroORM;
  /** How often a card in use has its version checked, ms (default 1000). */
  recheckMs?: number;
  /** The largest card kept, in rates (default 2,000,000: about 200 MB at most for such a card). */
  maxRates?: number;
  /** A failed load or check (the cache then keeps what it had; sends are priced by the statement meanwhile). */
  onError?: (err: unknown) => void;
  /** Monotonic milliseconds; default performance.now. */
  now?: () => number;
}

/** One prefix's rates, oldest EffectiveFrom first: from[i] (ms) and price[i]. */
interface PrefixRates {
  from: number[];
  price: bigint[];
}

/** A card in memory; or (byPrefix null) one found missing or too large at checkedAt, tried again after recheckMs. */
interface CardEntry {
  version: string;
  byPrefix: Map<string, PrefixRates> | null;
  /** The lengths the card's prefixes have, longest first: the only ones worth a probe. */
  lengths: readonly number[];
  checkedAt: number;
}

/** The longest prefix that E164 numbers have ("+" and 15 digits). */
const LONGEST_PREFIX = 16;
/** Every prefix length, longest first ("+" and a digit at least). */
const ALL_LENGTHS: readonly number[] = Array.from({ length: LONGEST_PREFIX - 1 }, (_, i) => LONGEST_PREFIX - i);

/** The lengths `byPrefix` has, longest first: a deck of mobile ranges has two or three, so a send probes those and not 15. */
function prefixLengths(byPrefix: ReadonlyMap<string, PrefixRates>): number[] {
  return [...new Set([...byPrefix.keys()].map((k) => k.length))].sort((a, b) => b - a);
}

function indexRates(rates: readonly Rate[]): Map<string, PrefixRates> {
  const byPrefix = new Map<string, PrefixRates>();
  const sorted = [...rates].sort((a, b) => a.effectiveFrom - b.effectiveFrom);
  for (const r of sorted) {
    let p = byPrefix.get(r.prefix);
    if (!p) byPrefix.set(r.prefix, (p = { from: [], price: [] }));
    p.from.push(r.effectiveFrom * 1000);
    p.price.push(r.pricePerSegment);
  }
  return byPrefix;
}

function indexedEntry(version: string, byPrefix: Map<string, PrefixRates>, checkedAt: number): CardEntry {
  return { version, byPrefix, lengths: prefixLengths(byPrefix), checkedAt };
}

/**
 * The rule of sql/sb_rate_for.sql on a card in memory: of the prefixes of `destination` (2 to 16
 * characters) with a rate in effect at `atMs`, the longest; of its rates, the latest EffectiveFrom
 * not after `atMs`. Null: none. `lengths` (longest first) are the prefix lengths to probe: the
 * card's own, so that a 13-digit number on a deck of 2- and 9-character prefixes costs two probes.
 */
export function lookupRate(
  byPrefix: ReadonlyMap<string, PrefixRates>,
  destination: string,
  atMs: number,
  lengths: readonly number[] = ALL_LENGTHS,
): bigint | null {
  for (const n of lengths) {
    if (n > destination.length) continue;
    const p = byPrefix.get(destination.slice(0, n));
    if (!p) continue;
    for (let i = p.from.length - 1; i >= 0; i--) if (p.from[i] <= atMs) return p.price[i];
  }
  return null;
}

/** Creates an empty cache; it fills itself as sends name cards. */
export function createRateCache(opts: RateCacheOptions): RateCache {
  const recheckMs = opts.recheckMs ?? 1000;
  const maxRates = opts.maxRates ?? 2_000_000;
  const now = opts.now ?? (() => performance.now());
  const onError = opts.onError ?? (() => undefined);
  const cards = new Map<string, CardEntry>();
  // Cards being loaded, and whether a version check is running: one of each at a time.
  const loading = new Set<string>();
  let checking = false;
  const em = (): EntityManager => opts.orm.em.fork() as EntityManager;

  function load(card: string): void {
    if (loading.has(card)) return;
    loading.add(card);
    loadCard(em(), card, maxRates)
      .then((snap) => {
        cards.set(card, snap ? indexedEntry(snap.version, indexRates(snap.rates), now()) : { version: "", byPrefix: null, lengths: [], checkedAt: now() });
      })
      .catch(onError)
      .finally(() => loading.delete(card));
  }

  function recheck(): void {
    if (checking) return;
    checking = true;
    const names = [...cards.entries()].filter(([, e]) => e.byPrefix !== null).map(([name]) => name);
    const at = now();
    cardVersions(em(), names)
      .then((versions) => {
        for (const name of names) {
          const entry = cards.get(name);
          if (!entry) continue;
          const version = versions.get(name);
          if (version === undefined) cards.delete(name);
          else if (version !== entry.version) load(name);
          else entry.checkedAt = at;
        }
      })
      .catch(onError)
      .finally(() => (checking = false));
  }

  return {
    rateFor(card, destination, at) {
      const entry = cards.get(card);
      if (!entry || entry.byPrefix === null) {
        if (!entry || now() - entry.checkedAt >= recheckMs) load(card);
        return undefined;
      }
      if (now() - entry.checkedAt >= recheckMs) recheck();
      return { version: entry.version, perSegment: lookupRate(entry.byPrefix, destination, at.getTime(), entry.lengths) };
    },
  };
}
