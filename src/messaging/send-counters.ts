/** What the send pipeline counts for the metrics (docs/operations.md#metrics), per process. */
export interface SendCounters {
  /** A send stored with an alphanumeric sender not Registered for `country`, which SENDER_ID_REGISTRATION labels. */
  unregisteredSenderId(country: string): void;
  /** The totals since the process started, by country. */
  unregisteredSenderIds(): ReadonlyMap<string, number>;
}

/** Counters kept in memory (by country: at most the countries SENDER_ID_REGISTRATION lists). */
export function createSendCounters(): SendCounters {
  const byCountry = new Map<string, number>();
  return {
    unregisteredSenderId: (country) => void byCountry.set(country, (byCountry.get(country) ?? 0) + 1),
    unregisteredSenderIds: () => byCountry,
  };
}
