// Running a README's shell blocks as written: its fenced code blocks, and the process group of a
// script whose commands start programs in the background (`cmd &`), ended when the test ends.
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import type { ExecutionContext } from 'ava';
import { until } from './wait.js';

export interface CodeBlock {
  /** The fence's info string: `sh`, `sh systemd`, `text`, or '' for a bare fence. */
  info: string;
  /** 1-based line of the opening fence. */
  line: number;
  /** The content, without the indentation of the fence (a block inside a list item). */
  code: string;
}

/** The fenced code blocks of a Markdown text, in order (CommonMark: ``` or ~~~, closed by a longer-or-equal run). */
export function codeBlocks(markdown: string): CodeBlock[] {
  const lines = markdown.split('\n');
  const blocks: CodeBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^( *)(`{3,}|~{3,})\s*(.*?)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const [, indent, fence] = open as unknown as [string, string, string, string];
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length; j++) {
      const close = /^\s*(`{3,}|~{3,})\s*$/.exec(lines[j]!);
      if (close && close[1]![0] === fence[0] && close[1]!.length >= fence.length) break;
      // Remove up to the fence's indentation, as a Markdown renderer does.
      body.push(lines[j]!.replace(new RegExp(`^ {0,${indent.length}}`), ''));
    }
    blocks.push({ info: open[3]!, line: i + 1, code: body.length ? `${body.join('\n')}\n` : '' });
    i = j;
  }
  return blocks;
}

/** Whether a process group still has a live (not zombie) member. Linux: /proc; elsewhere kill(-pgid, 0). */
export function groupAlive(pgid: number): boolean {
  let entries: string[];
  try {
    entries = readdirSync('/proc').filter((e) => /^\d+$/.test(e));
  } catch {
    try {
      process.kill(-pgid, 0);
      return true;
    } catch {
      return false;
    }
  }
  for (const pid of entries) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue;
    }
    // pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so split after the last ')'.
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(pgrp) === pgid && state !== 'Z') return true;
  }
  return false;
}

/** Whether the group is gone within about `ms` (polled). */
function groupGone(pgid: number, ms: number): Promise<boolean> {
  return until(() => !groupAlive(pgid), `process group ${pgid} to end`, Math.ceil(ms / 20)).then(
    () => true,
    () => false,
  );
}

/** SIGTERM to the group, then SIGKILL to whatever is left after `ms`. */
export async function endGroup(pgid: number, ms = 5000): Promise<void> {
  const signal = (s: NodeJS.Signals) => {
    try {
      process.kill(-pgid, s);
    } catch {
      // nothing left in the group
    }
  };
  if (!groupAlive(pgid)) return;
  signal('SIGTERM');
  if (!(await groupGone(pgid, ms))) signal('SIGKILL');
  await groupGone(pgid, 2000);
}

export interface ScriptRun {
  code: number | null;
  /** True when the script was stopped for taking longer than `ms`. */
  timedOut: boolean;
  stdout: string;
  stderr: string;
  /** The script's process group: what it started with `&` stays in it after the script ends. */
  pgid: number;
}

/**
 * Runs `script` with bash (stopping at the first failing command, tracing each to stderr) in a process
 * group of its own; t.teardown ends the group, so the programs the script left running end too.
 */
export function runBash(
  t: ExecutionContext,
  script: string,
  opts: { cwd: string; env: NodeJS.ProcessEnv; ms: number },
): Promise<ScriptRun> {
  const child = spawn('bash', ['-eux', '-o', 'pipefail', '-c', script, 'readme'], {
    cwd: opts.cwd,
    env: opts.env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const pgid = child.pid!;
  t.teardown(() => endGroup(pgid));
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr!.on('data', (d) => (stderr += d));
  return new Promise((resolve) => {
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      void endGroup(pgid);
    }, opts.ms);
    const done = (code: number | null) => {
      clearTimeout(timer);
      resolve({ code, timedOut, stdout, stderr, pgid });
    };
    child.on('close', done);
    // A background program that kept the script's stdout or stderr keeps them open: stop reading 1 s on.
    child.on('exit', (code) => void setTimeout(() => done(code), 1000).unref());
  });
}
