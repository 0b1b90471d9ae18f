// Where the tools of `anet mcp` run their operations: through the daemon when one runs (it serves its
// control socket's requests side by side), else on one node opened in this process and shared by every
// call in flight. An MCP client may call tools in parallel, and a node's store has one owner at a time
// (LevelDB's lock): opening a node per call made the calls wait for each other, a 2 s get_balance behind
// a 50 s call_capability, and a cancel behind the call it cancels.
import { askDaemon } from '../node/open.js';
import type { Node } from '../node/node.js';
import { operate, type ArgsOf, type OpName, type Operate, type ResultOf } from '../node/operations.js';

/** The node's operations over the data dir, for `anet mcp`. */
export function nodeOperations(dataDir: string, log: (line: string) => void = () => {}): Operate {
  const local = new SharedNode(dataDir, log);
  return async (op, args) => {
    // While the node is open here, this process owns the store, so no daemon can be running.
    if (!local.inUse) {
      const remote = await askDaemon(dataDir, op, args);
      if (remote !== undefined) return remote;
    }
    return local.run(op, args);
  };
}

/**
 * One node opened in this process while operations use it: opened by the first, closed when the last
 * ends (so `anet start` or a CLI command can own the store between calls), never opened twice at once.
 */
export class SharedNode {
  private node: Promise<Node> | null = null;
  private users = 0;
  /** The last close, which a new open waits for (the store's lock is released only once it is done). */
  private closing: Promise<void> = Promise.resolve();

  constructor(
    private readonly dataDir: string,
    private readonly log: (line: string) => void,
  ) {}

  get inUse(): boolean {
    return this.users > 0;
  }

  async run<K extends OpName>(op: K, args: ArgsOf<K>): Promise<ResultOf<K>> {
    this.users++;
    try {
      this.node ??= this.closing.then(() => this.open());
      return await operate(await this.node, op, args);
    } finally {
      if (--this.users === 0) this.release();
    }
  }

  private async open(): Promise<Node> {
    // Loaded only without a daemon, as in open.ts: through a daemon the node's code is never loaded.
    const { Node } = await import('../node/node.js');
    // The actor host is started at once, as the daemon does: started on first use by two operations at
    // the same time, each would start one.
    return Node.open(this.dataDir, { runtime: true, log: this.log });
  }

  private release(): void {
    const opened = this.node;
    this.node = null;
    if (!opened) return;
    this.closing = opened.then(
      (node) => node.close().catch((err: Error) => this.log(`closing the node: ${err.message}`)),
      () => {}, // the open failed: the operations waiting for it were told
    );
  }
}
