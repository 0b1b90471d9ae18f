/**
 * `look`, remembered by key until the end of this turn of the event loop (setImmediate): decisions made
 * together — the calls of one slice of a burst — share one look at the file system instead of a dozen
 * system calls each. The next turn looks again, so a change is seen by every decision of a later turn.
 * The immediate is kept referenced on purpose: an unreferenced one lets the loop block in its poll phase
 * with the value still remembered, and the first callbacks after a long wait would see a stale look.
 * `look` must not throw (return the failure instead): a throw is not remembered.
 */
export function perTurn<K, V>(look: (key: K) => V): (key: K) => V {
  const seen = new Map<K, V>();
  const endOfTurn = () => seen.clear();
  return (key) => {
    if (seen.has(key)) return seen.get(key) as V;
    const value = look(key);
    // The first look of a turn: the end of the turn forgets it, with every look after it.
    if (seen.size === 0) setImmediate(endOfTurn);
    seen.set(key, value);
    return value;
  };
}
