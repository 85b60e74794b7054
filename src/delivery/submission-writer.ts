import type { MikroORM } from "@mikro-orm/sql";
import type { Logger } from "pino";
import type { Clock } from "../common/clock.js";
import { isDatabaseUnavailable } from "../common/pg-errors.js";
import { recordSubmissions, type Submission } from "./receipts.js";
import { recordSegments } from "./segment-store.js";

/** A submission the carrier accepted, with its segments' ids for a carrier that reports per segment. */
export type AcceptedSubmission = Submission & { segmentIds?: string[]; startedAt?: Date };

export interface SubmissionWriterOptions {
  orm: MikroORM;
  clock: Clock;
  /** The dispatcher's claim time: a write is retried for half of it. */
  claimMs: number;
  log?: Logger;
}

/**
 * The dispatcher's write of submissions the carrier accepted, in one statement (with their segments'
 * ids in one transaction, for a carrier that reports per segment). A database error here is not the
 * carrier's refusal: the carrier holds these messages, so keep trying to record that while the
 * claims last (the database may be back in a moment); if the claims run out first, the messages
 * are in doubt and handled as after a crash. The carrier's report may have landed first (the
 * message is already Submitted, Delivered or Failed): recordSubmissions keeps that status but
 * still records when it was submitted.
 */
export function createSubmissionWriter(opts: SubmissionWriterOptions): (done: AcceptedSubmission[]) => Promise<void> {
  return async (done) => {
    if (done.length === 0) return;
    const deadline = performance.now() + opts.claimMs / 2;
    // A carrier that reports per segment: the segments' ids are committed with the submissions.
    const segmented = done.flatMap((d) =>
      d.segmentIds && d.segmentIds.length > 0
        ? [{ messageSid: d.messageSid, segmentIds: d.segmentIds, at: d.at, startedAt: d.startedAt, carrier: d.carrier ?? "" }]
        : [],
    );
    for (let attempt = 1; ; attempt++) {
      try {
        if (segmented.length === 0) await recordSubmissions(opts.orm.em.fork(), done);
        else {
          await opts.orm.em.fork().transactional(async (tx) => {
            await recordSubmissions(tx, done);
            await recordSegments(tx, segmented, opts.clock.now());
          });
        }
        return;
      } catch (err) {
        const wait = Math.min(5000, 250 * 2 ** attempt);
        if (!isDatabaseUnavailable(err) || performance.now() + wait > deadline) throw err;
        opts.log?.warn({ count: done.length, attempt, err }, "could not record submissions the carrier accepted; retrying");
        await new Promise((r) => setTimeout(r, wait));
      }
    }
  };
}
