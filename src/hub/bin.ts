#!/usr/bin/env node
// `anet-hub`: the hub on its own (src/hub/main.ts). It loads the hub's modules and what they build on,
// none of the node's: test/hub-bin.test.ts checks what a running `anet-hub start` has loaded.
import { hubMain } from './main.js';

// `anet-hub invite | head`: a reader that closed the pipe is not an error of ours.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw err;
  });
}

const io = {
  out: (line: string) => void process.stdout.write(`${line}\n`),
  err: (line: string) => void process.stderr.write(`${line}\n`),
};

process.exitCode = await hubMain(process.argv.slice(2), io);
