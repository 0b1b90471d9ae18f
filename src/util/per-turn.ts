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
  let forgetting = false;
  const endOfTurn = () => {
    seen.clear();
    forgetting = false;
  };
  return (key) => {
    if (seen.has(key)) return seen.get(key) as V;
    const value = look(key);
    seen.set(key, value);
    if (!forgetting) {
      forgetting = true;
      setImmediate(endOfTurn);
    }
    return value;
  };
}
