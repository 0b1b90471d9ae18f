// Progress of a long transfer on stderr (issue 20): on a terminal one bar redrawn in place (bytes, total,
// rate); otherwise — a log, a pipe, a test — one plain line at each tenth, so a log of a 512 MiB call
// holds ten lines, not thousands.
import type { Io } from './output.js';
import { mib } from '../protocol/relay.js';

export interface Bar {
  update(done: number, total: number): void;
  /** Ends the bar's line (a terminal's cursor goes to the next line). */
  end(): void;
}

const WIDTH = 30;
/** A terminal's bar is redrawn at most this often. */
const REDRAW_MS = 100;

/** `tty`: write `\r` redraws to this stream instead of lines to `io.err`. */
export function transferBar(io: Io, what: string, tty?: NodeJS.WriteStream): Bar {
  const started = Date.now();
  // Lines from the first tenth on: a 0% line says nothing.
  let tenth = 0;
  let drawn = 0;
  let last = '';
  const rate = (done: number) => `${mib(done / Math.max(0.001, (Date.now() - started) / 1000))}/s`;
  return {
    update(done, total) {
      const part = total > 0 ? Math.min(1, done / total) : 1;
      if (tty) {
        if (Date.now() - drawn < REDRAW_MS && done < total) return;
        drawn = Date.now();
        const fill = Math.round(part * WIDTH);
        last = `\r${what} [${'#'.repeat(fill)}${' '.repeat(WIDTH - fill)}] ${mib(done)} of ${mib(total)}, ${rate(done)}`;
        tty.write(last);
        return;
      }
      const now = Math.floor(part * 10);
      if (now <= tenth) return;
      tenth = now;
      io.err(`${what}: ${now * 10}% (${mib(done)} of ${mib(total)}, ${rate(done)})`);
    },
    end() {
      if (tty && last) tty.write('\n');
    },
  };
}
