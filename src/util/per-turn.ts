/**
 * `look`, remembered by key until the end of this turn of the event loop (setImmediate): decisions made
 * together — the calls of one slice of a burst — share one look at the file system instead of a dozen
 * system calls each. The next turn looks again; a change the process makes itself calls `forget` so that
 * what it does next sees the change at once. `look` must not throw (return the failure instead): a throw
 * is not remembered.
 */
export function perTurn<K, V>(look: (key: K) => V): { look: (key: K) => V; forget: () => void } {
  const seen = new Map<K, V>();
  let forgetting = false;
  const forget = () => seen.clear();
  const endOfTurn = () => {
    seen.clear();
    forgetting = false;
  };
  return {
    look: (key) => {
      if (seen.has(key)) return seen.get(key) as V;
      const value = look(key);
      seen.set(key, value);
      if (!forgetting) {
        forgetting = true;
        setImmediate(endOfTurn).unref();
      }
      return value;
    },
    forget,
  };
}
