// Issue 21, SPEC §12: how a tool of `anet mcp` that follows a task (src/mcp/follow.ts) turns the task's
// updates into progress notifications and a client's cancellation into one `cancel` of the task, in the
// orders the end-to-end tests cannot arrange: cancelled before the task has an id, cancelled twice,
// cancelled after the answer, and the session closing.
import test from 'ava';
import { TaskFollow, type Extra } from '../src/mcp/follow.js';
import type { TaskRecord, TaskUpdate } from '../src/node/operations.js';

function fakeExtra(progressToken?: string) {
  const abort = new AbortController();
  const sent: { progress: number; message: string }[] = [];
  const extra = {
    signal: abort.signal,
    _meta: progressToken === undefined ? undefined : { progressToken },
    sendNotification: async (n: { params: { progress: number; message: string } }) => void sent.push(n.params),
  } as unknown as Extra;
  return { extra, abort, sent };
}

const record = (task: string, state: TaskRecord['state']): TaskUpdate => ({ type: 'record', record: { task, state } as TaskRecord });
const tick = () => new Promise((r) => setImmediate(r));

test('issue 21 / SPEC §12: a request cancelled before its task has an id cancels the task once its first record comes, and only once', async (t) => {
  const { extra, abort } = fakeExtra();
  const cancelled: string[] = [];
  const follow = new TaskFollow(
    extra,
    (task) => cancelled.push(task),
    () => true,
  );
  abort.abort();
  await tick();
  t.deepEqual(cancelled, [], 'no task yet');
  follow.onUpdate(record('aa11', 'submitted'));
  follow.onUpdate(record('aa11', 'working'));
  abort.abort();
  await tick();
  t.deepEqual(cancelled, ['aa11']);
});

test("issue 21 / SPEC §12: pay_task's task is known from its input; a cancellation after the answer, or as the session closes, cancels nothing", async (t) => {
  const paying = fakeExtra();
  const cancelled: string[] = [];
  new TaskFollow(
    paying.extra,
    (task) => cancelled.push(task),
    () => true,
    'bb22',
  );
  paying.abort.abort();
  await tick();
  t.deepEqual(cancelled, ['bb22'], 'cancelled before any update');

  const late = fakeExtra();
  const answered = new TaskFollow(
    late.extra,
    (task) => cancelled.push(task),
    () => true,
    'cc33',
  );
  answered.end();
  late.abort.abort();
  const closing = fakeExtra();
  new TaskFollow(
    closing.extra,
    (task) => cancelled.push(task),
    () => false,
    'dd44',
  );
  closing.abort.abort();
  await tick();
  t.deepEqual(cancelled, ['bb22']);
});

test('issue 21 / SPEC §12: progress goes only to a client that gave a progressToken, counting up, with the state or the preview text; none after the answer', async (t) => {
  const silent = fakeExtra();
  new TaskFollow(
    silent.extra,
    () => {},
    () => true,
  ).onUpdate(record('ee55', 'working'));
  t.deepEqual(silent.sent, []);

  const { extra, sent } = fakeExtra('tok');
  const follow = new TaskFollow(
    extra,
    () => {},
    () => true,
  );
  follow.onUpdate(record('ff66', 'submitted'));
  follow.onUpdate({ type: 'preview', task: 'ff66', at: 1, preview: { text: 'half way' } });
  follow.onUpdate({ type: 'preview', task: 'ff66', at: 2, preview: { data: { percent: 90 } } });
  follow.onUpdate(record('ff66', 'completed'));
  follow.end();
  follow.onUpdate(record('ff66', 'completed'));
  t.deepEqual(sent, [
    { progressToken: 'tok', progress: 1, message: 'submitted' },
    { progressToken: 'tok', progress: 2, message: 'half way' },
    { progressToken: 'tok', progress: 3, message: '{"percent":90}' },
    { progressToken: 'tok', progress: 4, message: 'completed' },
  ] as unknown as typeof sent);
});
