// Stopping a long-running command (`anet daemon`, `anet-hub start`): the first SIGINT or SIGTERM asks
// for a clean stop; a second one, while that stop (or the start before it) is under way, quits at once.

/**
 * Resolves on the first SIGINT or SIGTERM. Listened for from the call on, so a signal during a start is
 * kept for when the start has finished; a second signal exits the process there and then (128 + signal).
 */
export function untilSignal(): Promise<void> {
  return new Promise((resolve) => {
    const first = () => {
      process.off('SIGINT', first);
      process.off('SIGTERM', first);
      process.once('SIGINT', () => process.exit(130));
      process.once('SIGTERM', () => process.exit(143));
      resolve();
    };
    process.on('SIGINT', first);
    process.on('SIGTERM', first);
  });
}
