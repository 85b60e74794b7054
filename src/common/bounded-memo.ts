/** A map of at most `max` entries that forgets its oldest half at once (see createBoundedMemo). */
export interface BoundedMemo<K, V> {
  /** The value, or undefined when absent (or forgotten). */
  get(key: K): V | undefined;
  set(key: K, value: V): void;
  delete(key: K): void;
}

/**
 * Creates a bounded memo of two generations: entries go to the young one; when it holds half of
 * `max`, it becomes the old one and the previous old one is dropped whole; a hit in the old one is
 * copied to the young one. Every operation is O(1). Evicting a Map's first key one by one
 * (`delete(keys().next().value)`) is not: V8 leaves deleted entries as holes that the next
 * `keys()` walks past, and that walk was ~3 % of a send's CPU in the E164 memo (docs/benchmarks.md).
 */
export function createBoundedMemo<K, V>(max: number): BoundedMemo<K, V> {
  const half = Math.max(1, Math.ceil(max / 2));
  let young = new Map<K, V>();
  let old = new Map<K, V>();
  const set = (key: K, value: V) => {
    if (young.size >= half && !young.has(key)) {
      old = young;
      young = new Map();
    }
    young.set(key, value);
  };
  return {
    get(key) {
      const v = young.get(key);
      if (v !== undefined) return v;
      const o = old.get(key);
      if (o !== undefined) set(key, o);
      return o;
    },
    set,
    delete(key) {
      young.delete(key);
      old.delete(key);
    },
  };
}
