// `anet call`, `anet tasks`, `anet task` (SPEC §12): capability calls to other nodes and their records.
import { setTimeout as sleep } from 'node:timers/promises';
import { askDaemon, run } from '../node/open.js';
import { CliError, printJson, processIo, usageError, type Io } from './output.js';
import { transferBars, type Bars } from './progress.js';
import { FileCheckError, filesFromPaths, startUploads, uploadedArg, type FileToSend, type Uploads } from '../node/caller/files.js';
import { blobStatus } from '../hub-client/blobs.js';
import { sealedSize } from '../protocol/blob-seal.js';
import type { FileRef } from '../protocol/file-ref.js';
import { isAid } from '../identity/cid.js';
import type { TaskRecord, TaskUpdate } from '../node/operations.js';
import { CHAT } from '../protocol/messages.js';

/** How long `anet call` waits for the final answer before leaving the task to `anet task <id>`. */
const WAIT_MS = 150_000;
/** How often `anet call` asks the hub how much of its files the provider has read. */
const DOWNLOAD_POLL_MS = 1_000;
const FINAL = ['completed', 'failed', 'rejected', 'canceled'];
/** How long `anet call` waits for a task canceled after its upload failed to settle before it says so. */
const SETTLE_MS = 10_000;

/**
 * Progress of a long call on stderr (stdout keeps the data): each change of state, a line every 5 s, and
 * each preview the provider sends (anet-preview, at most 4 a second).
 */
function progress(io: Io): { update(u: TaskUpdate): void; stop(): void } {
  const started = Date.now();
  // A task just sent is `submitted`: said only if it still is 5 s later.
  let last = 'submitted';
  let lastAt = started;
  const since = () => `${Math.round((Date.now() - started) / 1000)} s`;
  return {
    update(u) {
      if (u.type === 'preview') return io.err(`task ${u.task}: ${clean(previewLine(u.preview))} (${since()})`);
      const r = u.record;
      const now = Date.now();
      if (FINAL.includes(r.state) || (r.state === last && now - lastAt < 5_000)) return;
      last = r.state;
      lastAt = now;
      io.err(
        `task ${r.task}: ${r.state === 'submitted' ? 'sent, waiting for the provider' : 'working'} (${Math.round((now - started) / 1000)} s)`,
      );
    },
    stop() {},
  };
}

export async function cmdCall(
  io: Io,
  dataDir: string,
  aid: string | undefined,
  capability: string | undefined,
  args: string | undefined,
  files: string[],
  json: boolean,
): Promise<void> {
  if (!aid || !capability) throw usageError('call needs the AID and the capability: anet call <aid> <capability> --args JSON');
  if (!isAid(aid)) throw usageError(`"${aid}" is not a full AID (bafyrei...)`);
  const argsText = args ?? '{}';
  try {
    JSON.parse(argsText);
  } catch {
    throw usageError(`--args is not JSON: ${argsText.slice(0, 80)}`);
  }
  const attached = files.length ? await uploadPaths(io, dataDir, files) : null;
  const show = progress(io);
  // The provider reads the files while the call runs: how far, as the hub tells it.
  const reading = attached ? watchDownload(attached.hub, attached.uploads.refs, attached.bars) : null;
  let task: string | undefined;
  const onUpdate = (u: TaskUpdate) => {
    if (u.type === 'record') task ??= u.record.task;
    show.update(u);
  };
  // Through the daemon as in-process, the updates come as they happen (the daemon streams them back).
  const refs = attached?.uploads.refs ?? [];
  const req = { aid, capability, args: argsText, files: refs.map(uploadedArg), waitMs: WAIT_MS, onUpdate };
  const calling = run(dataDir, 'call', req);
  try {
    let first: TaskRecord;
    try {
      first = attached ? await alongUploads(dataDir, calling, attached.uploads, () => task, onUpdate) : await calling;
    } catch (err) {
      // No task names the files (the node refused the call, or is not there): they go from the hub.
      if (attached) await attached.uploads.stop();
      throw err;
    }
    return finishTask(io, first, show, json);
  } finally {
    reading?.stop();
    attached?.bars.end();
  }
}

/**
 * The call's answer, while its files' uploads go on (the provider reads each file as it comes): a call
 * that ends first stops them (its blobs go); an upload that fails cancels the task and is the error; a
 * wait that ends before the uploads do goes on watching the task once they are done.
 */
async function alongUploads(
  dataDir: string,
  calling: Promise<TaskRecord>,
  uploads: Uploads,
  task: () => string | undefined,
  onUpdate: (u: TaskUpdate) => void,
): Promise<TaskRecord> {
  const uploaded = uploads.done.then(
    () => null,
    (err: Error) => err,
  );
  const first = await Promise.race([calling.then((r) => ({ r })), uploaded.then((err) => ({ err }))]);
  if ('r' in first && FINAL.includes(first.r.state)) {
    await uploads.stop();
    return first.r;
  }
  const failed = 'err' in first ? first.err : await uploaded;
  if (failed) {
    const id = task();
    // Through a daemon only: a node opened by this process for the call is busy with it (and sees the
    // provider's read fail on the deleted blobs).
    if (id) await askDaemon(dataDir, 'cancel', { task: id }).catch(() => undefined);
    // The call's record settles soon (canceled, or failed on the deleted blobs); a task that never reached
    // its provider would wait out the whole wait: the error is not held that long.
    await Promise.race([calling.catch(() => undefined), sleep(SETTLE_MS, undefined, { ref: false })]);
    throw new CliError(`the upload of the call's files failed: ${failed.message}`, 1);
  }
  const r = await calling;
  if (FINAL.includes(r.state) || r.state === 'input-required') return r;
  // The wait ended while the files were still going up: it starts again now that they are all there.
  return run(dataDir, 'watch', { task: r.task, waitMs: WAIT_MS, onUpdate });
}

/**
 * `--file` paths: checked (all of them before any byte leaves), then sealed and their uploads to the
 * node's hub started here, in the CLI, read from disk as they go, with progress; the node gets their
 * references.
 */
async function uploadPaths(io: Io, dataDir: string, paths: string[]): Promise<{ uploads: Uploads; hub: string; bars: Bars }> {
  const hub = await hubOf(dataDir);
  let files: FileToSend[];
  try {
    files = await filesFromPaths(paths);
  } catch (err) {
    if (err instanceof FileCheckError) throw new CliError(err.message, 2);
    throw err;
  }
  const bars = transferBars(io, ['upload', 'provider reading'], process.stderr.isTTY && io === processIo ? process.stderr : undefined);
  try {
    // The upload's rate counts from here, its first pass over the files included.
    bars.of('upload').begin();
    const uploads = await startUploads(hub, files, (done, total) => bars.of('upload').update(done, total));
    return { uploads, hub, bars };
  } catch (err) {
    bars.end();
    throw err;
  }
}

/**
 * The hub the node uses: the running daemon says (it checked the config when it started; reading it here
 * would load the config's schema, ~0.2 s of the command's start), else the config.
 */
async function hubOf(dataDir: string): Promise<string> {
  const running = await askDaemon(dataDir, 'ping', {});
  if (running?.hub) return running.hub;
  const { readConfig } = await import('../config/load.js');
  const { config, problems } = await readConfig(dataDir);
  if (!config) throw new CliError(`cannot read the config: ${problems[0]?.message ?? 'unknown problem'}; run \`anet doctor\``, 2);
  return config.hub.replace(/\/+$/, '');
}

/** Polls the hub for how much of the files the provider has read; stops when told or when all is read. */
function watchDownload(hub: string, refs: FileRef[], bars: Bars): { stop(): void } {
  const bar = bars.of('provider reading');
  // From now (the task goes out): its first poll already finds megabytes read.
  bar.begin();
  const total = refs.reduce((s, r) => s + sealedSize(r.size, r.chunk), 0);
  let stopped = false;
  const poll = async () => {
    while (!stopped) {
      // Unref'd: the command ends when the call does, not a poll later.
      await new Promise((r) => setTimeout(r, DOWNLOAD_POLL_MS).unref());
      const served = await Promise.all(
        refs.map((r) =>
          blobStatus(hub, r.cid)
            .then((s) => s?.served ?? null)
            .catch(() => null),
        ),
      );
      if (stopped) return;
      // A blob gone from the hub was read and deleted (or never will be): nothing more to show.
      if (served.some((s) => s === null)) return;
      const done = served.reduce<number>((a, s) => a + (s ?? 0), 0);
      if (done > 0) bar.update(done, total);
      if (done >= total) return;
    }
  };
  void poll();
  return {
    stop() {
      stopped = true;
    },
  };
}

/** Prints the task as the wait left it (ended, waiting for the operator, or still under way). */
function finishTask(io: Io, record: TaskRecord, show: ReturnType<typeof progress>, json: boolean): void {
  show.stop();
  if (json) printJson(io, record);
  else printRecord(io, record);
  if (record.state !== 'completed' || receiptFailed(record)) throw new CliError('', 1);
}

export async function cmdPay(io: Io, dataDir: string, id: string | undefined, json: boolean): Promise<void> {
  if (!id) throw usageError('pay needs a task id, as `anet tasks` prints it');
  const show = progress(io);
  const first = await run(dataDir, 'pay', { task: id, waitMs: WAIT_MS, onUpdate: show.update });
  return finishTask(io, first, show, json);
}

/** `anet cancel <task>`: declines a quote, or asks the provider to stop a running task (issue 21). */
export async function cmdCancel(io: Io, dataDir: string, id: string | undefined, json: boolean): Promise<void> {
  if (!id) throw usageError('cancel needs a task id, as `anet tasks` prints it');
  let r: TaskRecord;
  try {
    r = await run(dataDir, 'cancel', { task: id });
  } catch (err) {
    if ((err as { remoteName?: string }).remoteName === 'CancelError' || (err as Error).name === 'CancelError')
      throw new CliError((err as Error).message, 1);
    throw err;
  }
  if (json) printJson(io, r);
  else if (r.state === 'canceled') io.out(`task ${r.task} canceled${r.reason ? ` (${r.reason})` : ''}`);
  else
    io.out(
      FINAL.includes(r.state)
        ? `task ${r.task} ended ${r.state} before the cancel reached its provider`
        : `task ${r.task} is still ${r.state}: its provider has not answered the cancel yet; see \`anet task ${r.task}\``,
    );
  if (r.state !== 'canceled') throw new CliError('', 1);
}

/** A preview as one line: its text, else its data as JSON (cut to a line's worth). */
function previewLine(p: { text?: string; data?: Record<string, unknown> }): string {
  const line = p.text ?? JSON.stringify(p.data);
  return line.length > 200 ? `${line.slice(0, 199)}…` : line;
}

export async function cmdReject(io: Io, dataDir: string, id: string | undefined, json: boolean): Promise<void> {
  if (!id) throw usageError('reject needs a task id, as `anet tasks` prints it');
  const r = await run(dataDir, 'reject', { task: id });
  if (json) return printJson(io, r);
  io.out(`rejected the quote of task ${r.task}; the provider was told and nothing was paid`);
}

/** Words from another node, printed without control characters (no terminal escapes from peers). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const clean = (text: string) => text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, '?');

/** A completed capability call whose receipt did not verify is reported, and `anet call` exits 1. */
const receiptFailed = (r: TaskRecord) => r.state === 'completed' && r.capability !== CHAT && !r.receipt?.startsWith('bafy');

function printRecord(io: Io, r: TaskRecord): void {
  if (r.state === 'completed') {
    io.out(clean(JSON.stringify(r.result, null, 2)));
    if (r.capability === CHAT) return;
    io.out(
      receiptFailed(r)
        ? `receipt NOT verified: ${clean(String(r.receipt ?? 'none'))}; do not rely on this result`
        : `receipt ${r.receipt} (signed by the provider, verified)`,
    );
    if (r.payment?.status === 'payment-completed')
      io.out(`paid ${r.payment.quote!.amount} credits (hub transaction ${clean(String(r.payment.hubTx))})`);
    return;
  }
  if (r.state === 'input-required' && r.payment) {
    printQuote(io, r);
    return;
  }
  if (r.state === 'submitted' || r.state === 'working') {
    io.out(`task ${r.task} is ${r.state}: no final answer yet; see \`anet task ${r.task}\``);
    return;
  }
  const retry = r.retryAfterMs !== null ? ` (retry after ${Math.ceil(r.retryAfterMs / 1000)} s)` : '';
  const words = r.message ? `: ${clean(r.message)}` : r.detail ? ` (${clean(r.detail)})` : '';
  io.out(`${r.state}: ${r.reason}${words}${retry}`);
  if (r.explanation) io.out(r.explanation);
}

function printQuote(io: Io, r: TaskRecord): void {
  const p = r.payment!;
  if (!p.quote) {
    io.out(`task ${r.task} asks for a payment whose quote cannot be paid: ${clean(String(p.quoteError))}`);
    io.out(`run \`anet reject ${r.task}\` to end it`);
    return;
  }
  const until = new Date(p.expiresAt).toTimeString().slice(0, 8);
  io.out(`task ${r.task} waits for payment: ${p.quote.amount} credits to ${r.to} for ${r.capability} (the quote stands until ${until})`);
  if (p.why) io.out(`not paid automatically: ${clean(p.why)}`);
  io.out(`run \`anet pay ${r.task}\` to pay it, or \`anet reject ${r.task}\``);
}

export async function cmdTasks(io: Io, dataDir: string, json: boolean): Promise<void> {
  const rows = await run(dataDir, 'tasks', {});
  if (json) return printJson(io, rows);
  if (rows.length === 0) return io.out('no tasks sent yet');
  for (const r of rows) io.out(`${r.task}  ${r.state.padEnd(9)}  ${r.capability}  ${r.to}${r.reason ? `  ${r.reason}` : ''}`);
}

export async function cmdTask(io: Io, dataDir: string, id: string | undefined, json: boolean): Promise<void> {
  if (!id) throw usageError('task needs a task id, as `anet tasks` prints it');
  const r = await run(dataDir, 'task', { id });
  if (!r) throw new CliError(`no task ${id}`, 1);
  if (json) return printJson(io, r);
  io.out(`task ${r.task}: ${r.capability} on ${r.to}, ${r.state}`);
  printRecord(io, r);
}

/** How long `anet send` waits: a text task may wait for an operator, so only briefly. */
const SEND_WAIT_MS = 15_000;

export async function cmdSend(io: Io, dataDir: string, aid: string | undefined, words: string[], json: boolean): Promise<void> {
  if (!aid || words.length === 0) throw usageError('send needs the AID and the text: anet send <aid> TEXT');
  if (!isAid(aid)) throw usageError(`"${aid}" is not a full AID (bafyrei...)`);
  const text = words.join(' ');
  const show = progress(io);
  // Only previews: the send returns as soon as the other side has the task.
  const record = await run(dataDir, 'send', { aid, text, waitMs: SEND_WAIT_MS, onUpdate: (u) => u.type === 'preview' && show.update(u) });
  if (json) printJson(io, record);
  else if (record.state === 'completed') io.out(clean(String((record.result as { text?: unknown })?.text ?? '')));
  else printRecord(io, record);
  if (record.state !== 'completed' && record.state !== 'working' && record.state !== 'submitted') throw new CliError('', 1);
}

export async function cmdInbox(io: Io, dataDir: string, json: boolean): Promise<void> {
  const rows = await run(dataDir, 'inbox', {});
  if (json) return printJson(io, rows);
  if (rows.length === 0) return io.out('the inbox is empty');
  for (const r of rows) io.out(`${r.task}  ${r.from}  ${clean(r.text.length > 80 ? `${r.text.slice(0, 77)}...` : r.text)}`);
}

export async function cmdReply(io: Io, dataDir: string, task: string | undefined, words: string[], json: boolean): Promise<void> {
  if (!task || words.length === 0) throw usageError('reply needs the task id and the text: anet reply <task> TEXT');
  const text = words.join(' ');
  const entry = await run(dataDir, 'reply', { task, text });
  if (json) return printJson(io, { ...entry, answer: text });
  io.out(`answered ${entry.from}`);
}
