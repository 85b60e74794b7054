/** The source of "now" for every rule that depends on time; tests inject a controllable one. */
export interface Clock {
  now(): Date;
}

/** The real wall clock. */
export const systemClock: Clock = { now: () => new Date() };

/** A clock that stands still until moved, for tests of time boundaries. */
export class ManualClock implements Clock {
  private t: number;
  constructor(start: Date | number = Date.UTC(2026, 0, 1)) {
    this.t = typeof start === "number" ? start : start.getTime();
  }
  now(): Date {
    return new Date(this.t);
  }
  /** Moves the clock forward by ms milliseconds. */
  advance(ms: number): void {
    this.t += ms;
  }
  /** Sets the clock to an absolute time. */
  set(time: Date | number): void {
    this.t = typeof time === "number" ? time : time.getTime();
  }
}

/** Unix seconds of a date (0 for none), the API's time format. */
export function unixSeconds(d: Date | null | undefined): number {
  return d ? Math.floor(d.getTime() / 1000) : 0;
}
