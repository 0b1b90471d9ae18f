// What a tool that follows a task (call_capability, send_text, pay_task) owes its MCP client while it
// runs: each update of the task as a progress notification, when the client asked for progress, and its
// cancellation passed on to the task itself, so a client that gives up on a call does not leave the
// provider working (and a paid hold held) for nothing. A session that closes is not a cancellation: the
// task is the node's, and its answer stays readable (get_task, `anet tasks`) from the next session.
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { ServerNotification, ServerRequest } from '@modelcontextprotocol/sdk/types.js';
import type { OnUpdate, TaskUpdate } from '../node/operations.js';

export type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/** The progress message of an update: a preview's text (or its data as JSON), else the task's state. */
export function progressMessage(u: TaskUpdate): string {
  if (u.type === 'record') return u.record.state;
  return u.preview.text ?? JSON.stringify(u.preview.data ?? {});
}

export class TaskFollow {
  /** The task's id: known from the tool's input (pay_task), else from its first record update. */
  private task: string | null;
  private progress = 0;
  private cancelWanted = false;
  private cancelSent = false;
  private ended = false;

  constructor(
    private readonly extra: Extra,
    /** Cancels the task (the `cancel` operation); called at most once. */
    private readonly cancel: (task: string) => void,
    /** Whether the session is still open (the SDK aborts every request's signal as it closes, too). */
    private readonly sessionOpen: () => boolean,
    task?: string,
  ) {
    this.task = task ?? null;
    if (extra.signal.aborted) this.onAbort();
    else extra.signal.addEventListener('abort', this.onAbort, { once: true });
  }

  readonly onUpdate: OnUpdate = (u) => {
    if (this.ended) return;
    if (u.type === 'record') {
      this.task ??= u.record.task;
      // Cancelled before the task had an id: it is cancelled now it has one.
      if (this.cancelWanted) this.sendCancel();
    }
    this.notify(progressMessage(u));
  };

  /** The tool has its answer: no more progress, and a cancellation now comes too late to matter. */
  end(): void {
    this.ended = true;
    this.extra.signal.removeEventListener('abort', this.onAbort);
  }

  private readonly onAbort = () => {
    // The SDK aborts for a client's notifications/cancelled, and for a closing session just before it
    // drops its transport: a microtask later, only the first still has one.
    queueMicrotask(() => {
      if (this.ended || !this.sessionOpen()) return;
      this.cancelWanted = true;
      this.sendCancel();
    });
  };

  private sendCancel(): void {
    if (this.cancelSent || this.task === null) return;
    this.cancelSent = true;
    this.cancel(this.task);
  }

  private notify(message: string): void {
    const progressToken = this.extra._meta?.progressToken;
    // Progress only for a client that asked (MCP: a progressToken in the request), and never after a
    // cancellation (the SDK drops those notifications anyway).
    if (progressToken === undefined || this.extra.signal.aborted) return;
    this.progress += 1;
    const params = { progressToken, progress: this.progress, message };
    void this.extra.sendNotification({ method: 'notifications/progress', params }).catch(() => {});
  }
}
