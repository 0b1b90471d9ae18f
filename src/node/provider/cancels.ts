// Calls a caller may cancel while they run (issue 21, PROTOCOL §6.8): each running capability call and
// each text task with the local agent has an abort controller here from the moment it is admitted (or
// paid) until it ends. `task.cancel` aborts it: the service request is dropped (the service sees its
// connection close) and the call ends `canceled`, its hold released. The node's stop aborts it too, but
// as a stop: the call is then left for the next start to end `interrupted`.

/** One running call's abort: `signal` ends its service request; `canceled()` says whether the caller asked. */
export interface Cancelable {
  signal: AbortSignal;
  canceled(): boolean;
  /** The call has ended: it can no longer be canceled. */
  close(): void;
}

export class Cancels {
  private readonly running = new Map<string, AbortController>();
  private readonly asked = new Set<string>();

  /** A call starting to run: aborted when the node stops (`stopping`) or its caller cancels it. */
  open(id: string, stopping: AbortSignal): Cancelable {
    const controller = new AbortController();
    // Not AbortSignal.any: a composite of the node-wide signal is kept as long as that signal lives.
    const onStop = () => controller.abort(stopping.reason);
    if (stopping.aborted) onStop();
    else stopping.addEventListener('abort', onStop, { once: true });
    this.running.set(id, controller);
    return {
      signal: controller.signal,
      canceled: () => this.asked.has(id),
      close: () => {
        stopping.removeEventListener('abort', onStop);
        if (this.running.get(id) === controller) this.running.delete(id);
        this.asked.delete(id);
      },
    };
  }

  /** The caller's `task.cancel`: true when the call was running (its request is being aborted). */
  cancel(id: string): boolean {
    const controller = this.running.get(id);
    if (!controller || controller.signal.aborted) return false;
    this.asked.add(id);
    controller.abort(new Error('the caller canceled the task'));
    return true;
  }
}
