// Bytes held for clients while their request bodies arrive: the hub's bodies outside the relay
// (src/hub/server.ts) and the relay's sends and upstream frames (src/hub/relay.ts) each have one.
/**
 * Bytes held for clients, in all and per client, taken as they arrive: the bytes of request bodies being
 * received (a body that declares 16 MiB and sends nothing holds nothing), and no client more than its
 * share however many connections it opens.
 */
export class Budget {
  used = 0;
  private readonly clients = new Map<string, number>();

  constructor(
    readonly total: number,
    readonly perClient: number,
  ) {}

  take(client: string, bytes: number): boolean {
    const mine = this.clients.get(client) ?? 0;
    if (this.used + bytes > this.total || mine + bytes > this.perClient) return false;
    this.used += bytes;
    if (bytes > 0) this.clients.set(client, mine + bytes);
    return true;
  }

  give(client: string, bytes: number): void {
    if (bytes <= 0) return;
    this.used -= bytes;
    const left = (this.clients.get(client) ?? 0) - bytes;
    if (left > 0) this.clients.set(client, left);
    else this.clients.delete(client);
  }

  /** What `client` holds now. */
  of(client: string): number {
    return this.clients.get(client) ?? 0;
  }
}
