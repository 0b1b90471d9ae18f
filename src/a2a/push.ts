// Push notifications of the local A2A endpoint (A2A v1.0 §3.1.7–3.1.10, §4.3): a client registers a
// webhook for a task, and each update of the task is POSTed to it as a StreamResponse (events.ts).
//
// - The webhook is on this machine only: http(s) to a loopback host (127.0.0.0/8, [::1], localhost), or
//   a Unix socket written `unix:///absolute/path.sock` (POSTed at `/`). The endpoint acts as this node and
//   must not become a way to reach other hosts (the SSRF §13.2 warns of), so anything else is refused.
// - Each config has its own queue: its POSTs go one at a time, in the order of the updates; a failed POST
//   (no answer, not 2xx, or no answer in PUSH_TIMEOUT_MS) is tried again after 250 ms, 500 ms, 1 s, 2 s,
//   then given up (logged) and the next update goes.
// - The client's credentials go as §4.3.3 says: `authentication` {scheme, credentials} as
//   `Authorization: <scheme> <credentials>`; `token` as `X-A2A-Notification-Token` (the header A2A SDKs
//   use for it), both when both are given.
// - Configs live in the daemon's memory: a daemon restart forgets them (the client creates them again).
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isAbsolute } from 'node:path';
import { stringify as stringifyLossless } from 'lossless-json';
import type { Operate, TaskUpdate } from '../node/operations.js';
import { randomHex } from '../util/random.js';
import { TaskEvents, type StreamResponse } from './events.js';

/** A webhook that does not answer in this long has failed this attempt (§4.3.3 recommends 10–30 s). */
export const PUSH_TIMEOUT_MS = 10_000;
/** The waits before the 2nd, 3rd, ... attempt of one POST; after the last, the update is given up. */
export const PUSH_BACKOFF_MS = [250, 500, 1_000, 2_000] as const;
/** Configs a task may have at once (each is a queue and a follower). */
export const MAX_CONFIGS_PER_TASK = 10;
/**
 * Updates a config's queue holds at most: a webhook that fails keeps each POST ~40 s (five tries), and the
 * oldest update is dropped past this (a status is superseded by the next; the final one comes last).
 */
export const MAX_QUEUED_UPDATES = 64;
/** Ended tasks whose configs are kept for Get and List; an older one's configs are forgotten. */
export const MAX_ENDED_TASKS = 1000;
/** How long a task is followed for its webhooks at most (a working task is given up after a day's silence). */
const FOLLOW_MS = 25 * 3_600_000;

/** A config as the client gave it (TaskPushNotificationConfig without tenant), its id filled in. */
export interface PushConfig {
  id: string;
  taskId: string;
  url: string;
  token?: string;
  authentication?: { scheme: string; credentials?: string };
}

/** A refusal of the client's config: the endpoint answers it as invalid params. */
export class PushConfigError extends Error {}

type Target = { kind: 'unix'; socketPath: string } | { kind: 'http'; url: URL };

/** Where a webhook URL points, or a PushConfigError saying why it cannot be used. */
export function webhookTarget(text: string): Target {
  if (text.startsWith('unix://')) {
    const socketPath = text.slice('unix://'.length);
    if (!isAbsolute(socketPath)) throw new PushConfigError(`the webhook "${text}" is not unix:///absolute/path`);
    return { kind: 'unix', socketPath };
  }
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new PushConfigError(`the webhook "${text}" is not a URL`);
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || !isLoopbackHost(url.hostname))
    throw new PushConfigError(
      `the webhook "${text}" is not on this machine: it must be http(s) to 127.0.0.0/8, [::1] or localhost, or unix:///path.sock`,
    );
  return { kind: 'http', url };
}

/** `hostname` as URL gives it (IPv4 normalised, IPv6 in brackets). */
function isLoopbackHost(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname);
}

interface Entry {
  config: PushConfig;
  target: Target;
  queue: StreamResponse[];
  sending: boolean;
  deleted: boolean;
}

/** The configs of the endpoint, by task, and the followers that feed them. */
export class PushConfigs {
  private readonly byTask = new Map<string, Map<string, Entry>>();
  /** The tasks followed for their configs; aborted once the last config of the task is removed. */
  private readonly followed = new Map<string, AbortController>();
  /** Ended tasks whose configs are still kept, oldest first (each once: a Set keeps insertion order). */
  private readonly ended = new Set<string>();
  private closed = false;

  constructor(
    private readonly operate: Operate,
    private readonly log: (line: string) => void,
  ) {}

  /** Checks a client's config (from CreateTaskPushNotificationConfig or SendMessage) before it is kept. */
  read(taskId: string, raw: Record<string, unknown>): { config: PushConfig; target: Target } {
    if (typeof raw.url !== 'string' || raw.url === '') throw new PushConfigError('url is required: where to POST the updates');
    const target = webhookTarget(raw.url);
    const config: PushConfig = { id: typeof raw.id === 'string' && raw.id !== '' ? raw.id : randomHex(8), taskId, url: raw.url };
    if (typeof raw.token === 'string' && raw.token !== '') config.token = raw.token;
    const auth = raw.authentication as { scheme?: unknown; credentials?: unknown } | undefined;
    if (auth !== undefined) {
      if (typeof auth !== 'object' || auth === null || typeof auth.scheme !== 'string' || auth.scheme === '')
        throw new PushConfigError('authentication.scheme is required with authentication (e.g. Bearer)');
      config.authentication = { scheme: auth.scheme, ...(typeof auth.credentials === 'string' ? { credentials: auth.credentials } : {}) };
    }
    return { config, target };
  }

  /** Keeps a checked config (one with the same id is replaced) and follows its task; gives the config. */
  add({ config, target }: { config: PushConfig; target: Target }): PushConfig {
    const configs = this.byTask.get(config.taskId) ?? new Map<string, Entry>();
    const old = configs.get(config.id);
    if (!old && configs.size >= MAX_CONFIGS_PER_TASK)
      throw new PushConfigError(`task ${config.taskId} has ${MAX_CONFIGS_PER_TASK} push notification configs already`);
    if (old) old.deleted = true;
    configs.set(config.id, { config, target, queue: [], sending: false, deleted: false });
    this.byTask.set(config.taskId, configs);
    this.follow(config.taskId);
    return config;
  }

  get(taskId: string, id: string): PushConfig | null {
    return this.byTask.get(taskId)?.get(id)?.config ?? null;
  }

  list(taskId: string): PushConfig[] {
    return [...(this.byTask.get(taskId)?.values() ?? [])].map((e) => e.config);
  }

  /** Idempotent (§3.1.10): a config already gone is no error. Its queue stops before its next POST. */
  remove(taskId: string, id: string): void {
    const configs = this.byTask.get(taskId);
    const entry = configs?.get(id);
    if (!entry) return;
    entry.deleted = true;
    configs!.delete(id);
    if (configs!.size > 0) return;
    // No webhook left to feed: the task is followed no more (a config added from now on follows it anew).
    this.byTask.delete(taskId);
    const follower = this.followed.get(taskId);
    this.followed.delete(taskId);
    follower?.abort();
  }

  close(): void {
    this.closed = true;
    for (const configs of this.byTask.values()) for (const e of configs.values()) e.deleted = true;
    this.byTask.clear();
    for (const follower of this.followed.values()) follower.abort();
  }

  /**
   * One follower a task, shared by its configs: the webhooks get the status as it stands when the task
   * is first followed, then each change, until it ends. A config added later joins from then on.
   */
  private follow(taskId: string): void {
    if (this.followed.has(taskId)) return;
    const follower = new AbortController();
    this.followed.set(taskId, follower);
    const events = new TaskEvents('status');
    const onUpdate = (u: TaskUpdate) => {
      for (const event of events.next(u)) this.enqueue(taskId, event);
    };
    this.operate('watch', { task: taskId, waitMs: FOLLOW_MS, onUpdate, signal: follower.signal })
      .catch(
        (err) => follower.signal.aborted || this.log(`push notifications: task ${taskId} cannot be followed: ${(err as Error).message}`),
      )
      .finally(() => {
        if (this.followed.get(taskId) !== follower) return;
        this.followed.delete(taskId);
        if (!follower.signal.aborted) this.forgetLater(taskId);
      });
  }

  /**
   * The task has ended (or was given up): its configs stay readable (Get, List) until MAX_ENDED_TASKS
   * later tasks have ended, so a daemon that runs for months does not keep every config it was given.
   */
  private forgetLater(taskId: string): void {
    // A config created on a task that had ended follows it again: the task moves to the end, still once.
    this.ended.delete(taskId);
    this.ended.add(taskId);
    if (this.ended.size <= MAX_ENDED_TASKS) return;
    const oldest = this.ended.values().next().value!;
    this.ended.delete(oldest);
    if (!this.followed.has(oldest)) this.byTask.delete(oldest);
  }

  private enqueue(taskId: string, event: StreamResponse): void {
    for (const entry of this.byTask.get(taskId)?.values() ?? []) {
      if (entry.queue.length >= MAX_QUEUED_UPDATES) entry.queue.shift();
      entry.queue.push(event);
      if (!entry.sending) void this.drain(entry);
    }
  }

  /** Sends a config's queue in order, one POST at a time. */
  private async drain(entry: Entry): Promise<void> {
    entry.sending = true;
    try {
      for (let event = entry.queue.shift(); event !== undefined; event = entry.queue.shift()) {
        await this.deliver(entry, event);
      }
    } finally {
      entry.sending = false;
    }
  }

  /** One update to one webhook: tried, then again after each backoff, until it is taken or given up. */
  private async deliver(entry: Entry, event: StreamResponse): Promise<void> {
    const body = stringifyLossless(event)!;
    for (let attempt = 0; ; attempt++) {
      if (entry.deleted || this.closed) return;
      const failure = await post(entry, body).then(
        (status) => (status >= 200 && status < 300 ? null : `HTTP ${status}`),
        (err: Error) => err.message,
      );
      if (failure === null) return;
      const wait = PUSH_BACKOFF_MS[attempt];
      if (wait === undefined) {
        this.log(
          `push notification to ${entry.config.url} for task ${entry.config.taskId} given up after ${attempt + 1} attempts: ${failure}`,
        );
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
}

/** POSTs one notification; resolves with the webhook's status. */
function post(entry: Entry, body: string): Promise<number> {
  const { config, target } = entry;
  const headers: Record<string, string | number> = { 'content-type': 'application/a2a+json', 'content-length': Buffer.byteLength(body) };
  if (config.authentication?.credentials) headers.authorization = `${config.authentication.scheme} ${config.authentication.credentials}`;
  if (config.token) headers['x-a2a-notification-token'] = config.token;
  return new Promise((resolve, reject) => {
    const done = (res: IncomingMessage) => {
      res.resume(); // the answer's body is not read: only its status counts
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', reject);
    };
    const options = { method: 'POST', headers, timeout: PUSH_TIMEOUT_MS, agent: false as const };
    const req =
      target.kind === 'unix'
        ? httpRequest({ ...options, socketPath: target.socketPath, path: '/' }, done)
        : (target.url.protocol === 'https:' ? httpsRequest : httpRequest)(target.url, options, done);
    req.on('timeout', () => req.destroy(new Error(`no answer in ${PUSH_TIMEOUT_MS} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}
