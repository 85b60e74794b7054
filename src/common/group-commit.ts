/**
 * Group commit: callers submit items one by one, and the items waiting at the same time are
 * written together in one transaction (one commit, one WAL flush for all of them). Each caller
 * is answered only after its batch committed, so an answer still means "durable".
 *
 * While `maxInFlight` batches run, new items wait; when one finishes, everything waiting (up to
 * `maxBatch`) goes in the next. Under light load a batch holds one item and adds no delay (the
 * next batch starts on the next turn of the event loop). A batch whose transaction fails as a
 * whole is retried item by item, so one bad row never fails its neighbours.
 */

/** What a batch returns for one item: its value, or the error that item alone is answered with. */
export type ItemOutcome<O> = { ok: true; value: O } | { ok: false; error: unknown };

/** Options of createGroupCommit. */
export interface GroupCommitOptions<I, O> {
  /**
   * Writes the items in one transaction and returns one outcome per item, in order. Per-item
   * failures that leave the transaction usable (a rule check, say) are outcomes; a throw means
   * nothing was committed, and the items are then run again one at a time.
   */
  run: (items: I[]) => Promise<ItemOutcome<O>[]>;
  /** Largest batch (default 256). */
  maxBatch?: number;
  /** Batches running at once (default 2): one can wait for its commit while the next is built. */
  maxInFlight?: number;
  /**
   * How long the first waiting item waits for others before its batch starts, ms (default 0:
   * the next turn of the event loop). For work nobody waits on, such as delivery reports.
   */
  lingerMs?: number;
  /**
   * An item's exclusive key (undefined: none). Items with the same key never run in two batches
   * at once: while a batch holds a key, its items wait for the next batch, which then takes them
   * all. For items whose batches would queue on one row lock anyway (an account's balance): the
   * second batch would wait for the first's commit while holding a connection, smaller.
   */
  exclusive?: (item: I) => string | undefined;
}

/** A group committer. */
export interface GroupCommit<I, O> {
  /** Queues one item; resolves after the transaction that wrote it committed. */
  submit(item: I): Promise<O>;
  /** Items waiting plus items in running batches. */
  pending(): number;
}

interface Waiting<I, O> {
  item: I;
  resolve: (value: O) => void;
  reject: (error: unknown) => void;
}

/** Creates a group committer around a batch writer. */
export function createGroupCommit<I, O>(opts: GroupCommitOptions<I, O>): GroupCommit<I, O> {
  const maxBatch = opts.maxBatch ?? 256;
  const maxInFlight = opts.maxInFlight ?? 2;
  const lingerMs = opts.lingerMs ?? 0;
  // Waiting items are queue[head…]: a batch is taken by moving head, not by copying the rest of the
  // queue (reports can wait by the thousand while a drain outruns their statements).
  let queue: Waiting<I, O>[] = [];
  let head = 0;
  let inFlight = 0;
  let running = 0;
  let scheduled = false;

  const settle = (w: Waiting<I, O>, outcome: ItemOutcome<O> | undefined) => {
    if (!outcome) w.reject(new Error("group commit: the batch writer returned no outcome for an item"));
    else if (outcome.ok) w.resolve(outcome.value);
    else w.reject(outcome.error);
  };

  async function runBatch(batch: Waiting<I, O>[]): Promise<void> {
    let outcomes: ItemOutcome<O>[];
    try {
      outcomes = await opts.run(batch.map((w) => w.item));
    } catch (err) {
      if (batch.length === 1) {
        batch[0].reject(err);
        return;
      }
      // Nothing was committed: each item gets a transaction of its own, so that only the
      // item that caused the failure fails.
      for (const w of batch) {
        try {
          settle(w, (await opts.run([w.item]))[0]);
        } catch (e) {
          w.reject(e);
        }
      }
      return;
    }
    batch.forEach((w, i) => settle(w, outcomes[i]));
  }

  const exclusive = opts.exclusive;
  /** The exclusive keys the running batches hold. */
  const held = new Set<string>();

  /** The next batch from the head of the queue: up to maxBatch waiting items, in order. */
  function takeHead(): Waiting<I, O>[] {
    const end = Math.min(queue.length, head + maxBatch);
    const batch = head === 0 && end === queue.length ? queue : queue.slice(head, end);
    head = end;
    if (head === queue.length) {
      queue = [];
      head = 0;
    } else if (head >= 4096 && head * 2 >= queue.length) {
      queue = queue.slice(head);
      head = 0;
    }
    return batch;
  }

  /**
   * The next batch while a running batch holds exclusive keys: the waiting items, in order, whose
   * key no running batch holds (up to maxBatch); the others stay queued, in order. Empty when
   * every waiting item is held.
   */
  function takeFree(): Waiting<I, O>[] {
    const batch: Waiting<I, O>[] = [];
    const rest: Waiting<I, O>[] = [];
    for (let i = head; i < queue.length; i++) {
      const w = queue[i];
      const key = batch.length < maxBatch ? exclusive!(w.item) : undefined;
      if (batch.length < maxBatch && (key === undefined || !held.has(key))) batch.push(w);
      else rest.push(w);
    }
    queue = rest;
    head = 0;
    return batch;
  }

  function flush(): void {
    scheduled = false;
    while (inFlight < maxInFlight && queue.length > head) {
      // Nothing held (the usual case): the head of the queue, as without exclusive keys.
      const batch = exclusive && held.size > 0 ? takeFree() : takeHead();
      if (batch.length === 0) return;
      const keys: string[] = [];
      if (exclusive)
        for (const w of batch) {
          const key = exclusive(w.item);
          if (key !== undefined && !held.has(key)) {
            held.add(key);
            keys.push(key);
          }
        }
      inFlight++;
      running += batch.length;
      void runBatch(batch).finally(() => {
        inFlight--;
        running -= batch.length;
        for (const k of keys) held.delete(k);
        if (queue.length > head) schedule();
      });
    }
  }

  function schedule(): void {
    if (scheduled) return;
    scheduled = true;
    // setImmediate, not a microtask: requests read in the same I/O phase join the same batch.
    if (lingerMs > 0) setTimeout(flush, lingerMs);
    else setImmediate(flush);
  }

  return {
    submit(item) {
      return new Promise<O>((resolve, reject) => {
        queue.push({ item, resolve, reject });
        if (inFlight < maxInFlight) schedule();
      });
    },
    pending: () => queue.length - head + running,
  };
}
