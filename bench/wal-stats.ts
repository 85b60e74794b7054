/**
 * What a stretch of WAL holds, by relation and record type, read with pg_waldump (bench/life.ts).
 * The index entries a message costs are counted here rather than derived: each B-tree leaf entry
 * written is one WAL record (INSERT_LEAF, or INSERT_POST into a deduplicated posting list, or a
 * level-0 SPLIT_L / SPLIT_R that carries the new entry with the split), whatever the reason it was
 * written (an insert, or an update that could not be heap-only).
 */
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";

/** The records of one relation (or, for records without a block, of one resource manager). */
export interface RelationWal {
  records: number;
  bytes: number;
  /** Full-page images among its block references. */
  fpi: number;
  /** Records by type, e.g. "Heap/HOT_UPDATE", "Btree/INSERT_LEAF", "Btree/SPLIT_L level 0". */
  byType: Map<string, number>;
}

/** WAL between two LSNs: by relfilenode ("<db oid>/<relfilenode>"), and "-/<rmgr>" for records that modify no block (commits). */
export type WalByRelation = Map<string, RelationWal>;

// rmgr: Heap        len (rec/tot):     54/   306, tx:        740, lsn: 0/0155E6F8, prev 0/0155E6C0, desc: HOT_UPDATE off 3 ..., blkref #0: rel 1663/16384/16385 blk 0 FPW
const RECORD = /^rmgr: (\S+)\s+len \(rec\/tot\):\s*\d+\/\s*(\d+), tx:\s*\d+, lsn: \S+, prev \S+, desc: (\S+)(.*)$/;
const BLOCK = /blkref #0: rel \d+\/(\d+)\/(\d+)/;

/** Reads the WAL from `start` to `end` (LSNs as PostgreSQL prints them) in `walDir` with `waldump`. */
export async function walByRelation(waldump: string, walDir: string, start: string, end: string): Promise<WalByRelation> {
  const out: WalByRelation = new Map();
  const proc = spawn(waldump, ["-p", walDir, "-s", start, "-e", end], { stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  proc.stderr.setEncoding("utf8").on("data", (s: string) => (stderr += s));
  const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)));
  for await (const line of createInterface({ input: proc.stdout })) {
    const m = RECORD.exec(line);
    if (!m) continue;
    const [, rmgr, tot, desc, rest] = m;
    const block = BLOCK.exec(rest);
    const key = block ? `${block[1]}/${block[2]}` : `-/${rmgr}`;
    let type = `${rmgr}/${desc.replace(/\+INIT$/, "")}`;
    // A split's level tells a leaf split (which carries the new entry) from an upper one.
    if (/^SPLIT_[LR]$/.test(desc)) type += ` level ${/level (\d+)/.exec(rest)?.[1] ?? "?"}`;
    let r = out.get(key);
    if (!r) out.set(key, (r = { records: 0, bytes: 0, fpi: 0, byType: new Map() }));
    r.records++;
    r.bytes += Number(tot);
    r.fpi += (rest.match(/ FPW/g) ?? []).length;
    r.byType.set(type, (r.byType.get(type) ?? 0) + 1);
  }
  const code = await exited;
  // pg_waldump exits 1 when it reaches the end of the WAL written so far before `end`: the records read are still all there.
  if (code !== 0 && !/invalid record length|could not find a valid record/.test(stderr)) throw new Error(`pg_waldump failed (${code}): ${stderr}`);
  return out;
}

/** B-tree leaf entries written: plain and posting-list inserts, and leaf splits (each carries the entry that caused it). */
export function leafEntries(r: RelationWal | undefined): number {
  if (!r) return 0;
  const n = (t: string) => r.byType.get(t) ?? 0;
  return n("Btree/INSERT_LEAF") + n("Btree/INSERT_POST") + n("Btree/SPLIT_L level 0") + n("Btree/SPLIT_R level 0");
}
