// A task's updates as A2A v1.0 StreamResponse objects (a2a.proto `StreamResponse`, JSON names), the
// payloads of SSE streams (SendStreamingMessage, SubscribeToTask) and of push notifications:
//   the first record        {task}             (streams begin with the Task, A2A §3.1.2, §3.1.6)
//   a change of status      {statusUpdate}     (state, timestamp, the status message)
//   a preview               {statusUpdate}     state working, the preview as its message (text and/or data part)
//   completed               {artifactUpdate} then {statusUpdate}: the result, then the final state
// A record change that leaves the status as it was (a receipt checked, a payment noted) is no event.
import type { TaskRecord, TaskUpdate } from '../node/operations.js';
import type { Preview } from '../protocol/preview.js';
import { contextOf, resultArtifact, toStatus, toTask } from './tasks.js';

export type StreamResponse = Record<string, unknown>;

/** Turns one task's updates into StreamResponses, remembering what it has said so far. */
export class TaskEvents {
  private context: string | null = null;
  /** The last status told, without its timestamp and message id: a record that repeats it is no event. */
  private lastStatus = '';
  private artifactSent = false;

  /**
   * `startWith`: `task` for a stream (its first event is the Task), `status` for a push notification
   * (the webhook is told the status as it stands, then each change).
   */
  constructor(private readonly startWith: 'task' | 'status') {}

  next(u: TaskUpdate): StreamResponse[] {
    if (u.type === 'preview') return this.context === null ? [] : [this.preview(u.task, u.at, u.preview)];
    const r = u.record;
    if (this.context === null) {
      this.context = contextOf(r);
      this.lastStatus = statusKey(r);
      if (this.startWith === 'task') {
        this.artifactSent = r.state === 'completed';
        return [{ task: toTask(r) }];
      }
      return [...this.artifact(r), this.status(r)];
    }
    const key = statusKey(r);
    if (key === this.lastStatus) return [];
    this.lastStatus = key;
    return [...this.artifact(r), this.status(r)];
  }

  /** The result, once, before the final status that closes the stream. */
  private artifact(r: TaskRecord): StreamResponse[] {
    const artifact = resultArtifact(r);
    if (!artifact || this.artifactSent) return [];
    this.artifactSent = true;
    return [{ artifactUpdate: { taskId: r.task, contextId: contextOf(r), artifact, lastChunk: true } }];
  }

  private status(r: TaskRecord): StreamResponse {
    return { statusUpdate: { taskId: r.task, contextId: contextOf(r), status: toStatus(r) } };
  }

  /** A preview is the task's status for now (working), not output: a status message, never an artifact. */
  private preview(task: string, at: number, preview: Preview): StreamResponse {
    const parts: Record<string, unknown>[] = [];
    if (preview.text !== undefined) parts.push({ text: preview.text });
    if (preview.data !== undefined) parts.push({ data: preview.data });
    const message = {
      messageId: `${task}-preview-${at}`,
      taskId: task,
      contextId: this.context,
      role: 'ROLE_AGENT',
      parts,
      metadata: { 'anet.preview': true },
    };
    const status = { state: 'TASK_STATE_WORKING', timestamp: new Date(at).toISOString(), message };
    // The next record is an event even when its status is the one before the preview: it replaces the preview.
    this.lastStatus = '';
    return { statusUpdate: { taskId: task, contextId: this.context, status } };
  }
}

/** A status as far as a client can tell two apart: the state and what its message says. */
function statusKey(r: TaskRecord): string {
  const { state, message } = toStatus(r) as { state: string; message?: { parts: unknown; metadata: unknown } };
  return JSON.stringify([state, message?.parts ?? null, message?.metadata ?? null]);
}
