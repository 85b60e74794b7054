/**
 * The parts of a bind's long texts, held in memory until the last comes (then joined into one
 * message), bounded: at most MAX_OPEN_TEXTS texts open per bind, and a text whose parts stop
 * coming is given up after PART_TIMEOUT_MS. Each part's submit_sm_resp waits for its text: the
 * joined message's MessageSid, once stored, or the text's refusal.
 */

/** How long a long text's parts wait for the rest. */
export const PART_TIMEOUT_MS = 60_000;
/** Long texts a bind may have open at once; a part of one more is refused. */
export const MAX_OPEN_TEXTS = 64;

/** What the joiner hands back for a part. */
export type PartOutcome<T> =
  /** The text is whole: its bytes in order, and every part's waiter (this one included). */
  | { kind: "whole"; bytes: Buffer; first: T; waiters: T[] }
  /** Held: answered when the text is whole or given up. */
  | { kind: "held" }
  /** Too many texts open: answer this part at once with a refusal. */
  | { kind: "full" };

interface OpenText<T> {
  parts: Map<number, { bytes: Buffer; waiter: T }>;
  total: number;
  /** Waiters of parts sent twice (the same seq): answered with the text too. */
  extra: T[];
  timer: NodeJS.Timeout;
}

/** One bind's open long texts. `onExpired` gets the waiters of a text given up. */
export class PartJoiner<T> {
  private readonly open = new Map<string, OpenText<T>>();

  constructor(
    private readonly onExpired: (waiters: T[]) => void,
    private readonly timeoutMs = PART_TIMEOUT_MS,
    private readonly maxOpen = MAX_OPEN_TEXTS,
  ) {}

  /** Texts open now. */
  get size(): number {
    return this.open.size;
  }

  /** Adds a part of the text `key` (its sender, recipient and reference). */
  add(key: string, part: { total: number; seq: number }, bytes: Buffer, waiter: T): PartOutcome<T> {
    let text = this.open.get(`${key}|${part.total}`);
    if (!text) {
      if (this.open.size >= this.maxOpen) return { kind: "full" };
      const full = `${key}|${part.total}`;
      const timer = setTimeout(() => {
        const t = this.open.get(full);
        if (!t) return;
        this.open.delete(full);
        this.onExpired([...[...t.parts.values()].map((p) => p.waiter), ...t.extra]);
      }, this.timeoutMs);
      timer.unref();
      text = { parts: new Map(), total: part.total, extra: [], timer };
      this.open.set(full, text);
    }
    const again = text.parts.get(part.seq);
    if (again) text.extra.push(again.waiter);
    text.parts.set(part.seq, { bytes, waiter });
    if (text.parts.size < text.total) return { kind: "held" };
    clearTimeout(text.timer);
    this.open.delete(`${key}|${part.total}`);
    const ordered = [...text.parts.entries()].sort((a, b) => a[0] - b[0]);
    return {
      kind: "whole",
      bytes: Buffer.concat(ordered.map(([, p]) => p.bytes)),
      first: ordered[0]![1].waiter,
      waiters: [...ordered.map(([, p]) => p.waiter), ...text.extra],
    };
  }

  /** Gives up every open text (the bind ends), handing their waiters to `onExpired`. */
  clear(): void {
    for (const t of this.open.values()) {
      clearTimeout(t.timer);
      this.onExpired([...[...t.parts.values()].map((p) => p.waiter), ...t.extra]);
    }
    this.open.clear();
  }
}
