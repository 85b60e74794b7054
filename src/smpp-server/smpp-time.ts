/**
 * SMPP 3.4 times (its section on time formats): `YYMMDDhhmmsstnnp`, 16 characters. `p` is `+` or `-` for an absolute
 * time whose local clock is `nn` quarter hours ahead of (or behind) UTC, or `R` for a time
 * relative to now (`YY` years, `MM` months, `DD` days, then hours, minutes, seconds; `tnn` 0).
 * Read with the injected clock, never the machine's: a relative time is from the `now` given.
 */

/** A time that is not an SMPP time. */
export class SmppTimeError extends Error {}

const FORMAT = /^(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})(\d)(\d{2})([+\-R])$/;

/** The moment an SMPP time names, or undefined for the empty string (none given); throws SmppTimeError. */
export function parseSmppTime(text: string, now: Date): Date | undefined {
  if (text === "") return undefined;
  const m = FORMAT.exec(text);
  if (!m) throw new SmppTimeError(`"${text}" is not an SMPP time (YYMMDDhhmmsstnnp, 16 characters)`);
  const [yy, mo, dd, hh, mi, ss, tenths, nn] = m.slice(1, 9).map(Number) as [number, number, number, number, number, number, number, number];
  const p = m[9];
  if (p === "R") {
    // Calendar arithmetic in UTC: a month from 31 January is 3 March, as Date rolls it.
    const d = new Date(now.getTime());
    d.setUTCFullYear(d.getUTCFullYear() + yy, d.getUTCMonth() + mo, d.getUTCDate() + dd);
    return new Date(d.getTime() + ((hh * 60 + mi) * 60 + ss) * 1000);
  }
  if (mo < 1 || mo > 12 || dd < 1 || dd > 31 || hh > 23 || mi > 59 || ss > 59 || nn > 48) {
    throw new SmppTimeError(`"${text}" is not a valid SMPP absolute time`);
  }
  const local = Date.UTC(2000 + yy, mo - 1, dd, hh, mi, ss, tenths * 100);
  // The day must exist (no 31 April): Date.UTC would roll it over.
  if (new Date(local).getUTCDate() !== dd) throw new SmppTimeError(`"${text}" names a day that does not exist`);
  const offsetMs = nn * 15 * 60_000;
  return new Date(p === "+" ? local - offsetMs : local + offsetMs);
}

/** `YYMMDDhhmm` in UTC, as the customary receipt text writes its dates. */
export function receiptDate(d: Date): string {
  const two = (n: number) => String(n).padStart(2, "0");
  return `${two(d.getUTCFullYear() % 100)}${two(d.getUTCMonth() + 1)}${two(d.getUTCDate())}${two(d.getUTCHours())}${two(d.getUTCMinutes())}`;
}

/** An absolute SMPP time in UTC (`…000+`), as query_sm_resp's final_date writes it. */
export function smppAbsoluteTime(d: Date): string {
  const two = (n: number) => String(n).padStart(2, "0");
  return `${receiptDate(d)}${two(d.getUTCSeconds())}000+`;
}
