// Progress of long transfers on stderr (issue 20): on a terminal one line redrawn in place, with a bar per
// transfer (bytes, total, rate: a call's upload and the provider's reading run at once); otherwise — a
// log, a pipe, a test — one plain line per transfer at each tenth, so a log of a 512 MiB call holds ten
// lines for each, not thousands.
import type { Io } from './output.js';
import { mib } from '../protocol/relay.js';

export interface Bar {
  /** The transfer starts now: its rate counts from here (else from its first update). */
  begin(): void;
  update(done: number, total: number): void;
}

export interface Bars {
  /** The bar of the transfer named `what` (one of the names the bars were made with). */
  of(what: string): Bar;
  /** Ends the terminal's line (its cursor goes to the next line). */
  end(): void;
}

const WIDTH = 20;
/** A terminal's line is redrawn at most this often. */
const REDRAW_MS = 100;

interface State {
  what: string;
  started: number;
  done: number;
  total: number;
  /** Tenths said so far (lines only). */
  tenth: number;
}

const rate = (s: State) => `${mib(s.done / Math.max(0.001, (Date.now() - s.started) / 1000))}/s`;

function drawn(s: State): string {
  const fill = Math.round((s.total > 0 ? Math.min(1, s.done / s.total) : 1) * WIDTH);
  return `${s.what} [${'#'.repeat(fill)}${' '.repeat(WIDTH - fill)}] ${mib(s.done)} of ${mib(s.total)}, ${rate(s)}`;
}

/** `tty`: write `\r` redraws of one line to this stream instead of lines to `io.err`. */
export function transferBars(io: Io, names: string[], tty?: NodeJS.WriteStream): Bars {
  const states = new Map(names.map((what) => [what, { what, started: 0, done: 0, total: 0, tenth: 0 } as State]));
  let drawnAt = 0;
  let last = '';
  const redraw = (force: boolean) => {
    if (!tty || (!force && Date.now() - drawnAt < REDRAW_MS)) return;
    drawnAt = Date.now();
    const line = [...states.values()]
      .filter((s) => s.total > 0)
      .map(drawn)
      .join(' · ');
    // Padded over what the last line held: a shorter one leaves none of it behind.
    tty.write(`\r${line.padEnd(last.length)}`);
    last = line;
  };
  return {
    of(what) {
      const s = states.get(what);
      if (!s) throw new Error(`no transfer "${what}" among ${names.join(', ')}`);
      const begin = () => {
        if (s.started === 0) s.started = Date.now();
      };
      return {
        begin,
        update(done, total) {
          begin();
          s.done = done;
          s.total = total;
          if (tty) return redraw(done >= total);
          // Lines from the first tenth on: a 0% line says nothing.
          const now = Math.floor((total > 0 ? Math.min(1, done / total) : 1) * 10);
          if (now <= s.tenth) return;
          s.tenth = now;
          io.err(`${what}: ${now * 10}% (${mib(done)} of ${mib(total)}, ${rate(s)})`);
        },
      };
    },
    end() {
      if (!tty || !last) return;
      redraw(true);
      tty.write('\n');
      last = '';
    },
  };
}
