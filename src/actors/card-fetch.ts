// The extended-card fetch actor (kind `card-fetch-v2`, machines/card-fetch.ts): one per provider and card
// kind. The only place its id is made; each method journals one event and returns the machine's state as
// a typed view, so the reader (src/reader/fetch.ts) never reads a snapshot's context by a cast. The first
// version (kind `card-fetch`) is frozen and only replayed: nothing sends to it.
import type { ActorHost } from '../runtime/host.js';
import type { CardFetchContext, CardFetchEvent } from '../../machines/card-fetch.js';

export const CARD_FETCH_KIND = 'card-fetch-v2';

/** Which extended card: `list` while we hold the provider's contact credential, else `general`. */
export type FetchKind = 'list' | 'general';
export const FETCH_KINDS: readonly FetchKind[] = ['list', 'general'];

/** One actor per provider and kind: the list card held before a removal is not the general one after. */
export const cardFetchId = (aid: string, kind: FetchKind) => `${CARD_FETCH_KIND}/${aid}/${kind}`;

export type CardFetchState = 'idle' | 'waiting' | 'cached' | 'guarded';

/** The machine's state as its callers read it. */
export interface CardFetchView {
  state: CardFetchState;
  context: CardFetchContext;
}

/** What the wrapper uses of the host. */
export type FetchHost = Pick<ActorHost, 'send' | 'state'>;

type Reply = Omit<Extract<CardFetchEvent, { type: 'REPLY' }>, 'type'>;

export interface CardFetchActor {
  readonly id: string;
  /** NEED: the reader wants the card extending public seq `publicSeq`; the machine decides what happens. */
  need(at: number, publicSeq: string, requestId: string): Promise<CardFetchView>;
  /** REPLY: the provider's answer to `requestId` as judged, or `unreachable` when it could not be asked. */
  reply(reply: Reply): Promise<CardFetchView>;
  /** TICK: the wait for a reply may be over. */
  tick(at: number): Promise<CardFetchView>;
  /** The state as it stands (journals nothing); undefined before the first event. */
  read(): Promise<CardFetchView | undefined>;
}

export function cardFetch(host: FetchHost, aid: string, kind: FetchKind): CardFetchActor {
  const id = cardFetchId(aid, kind);
  const send = async (event: CardFetchEvent) => view(await host.send(id, CARD_FETCH_KIND, undefined, event));
  return {
    id,
    need: (at, publicSeq, requestId) => send({ type: 'NEED', at, publicSeq, requestId }),
    reply: (reply) => send({ type: 'REPLY', ...reply }),
    tick: (at) => send({ type: 'TICK', at }),
    read: async () => {
      const snap = await host.state(id);
      return snap && view(snap);
    },
  };
}

/** Whether the actor waits for the reply to `requestId`. */
export const waitsFor = (v: CardFetchView | undefined, requestId: string): v is CardFetchView =>
  v?.state === 'waiting' && v.context.requestId === requestId;

function view(snap: { value: unknown; context: unknown }): CardFetchView {
  // The one place a card-fetch snapshot is typed: the kind's machine has these states and this context.
  return { state: snap.value as CardFetchState, context: snap.context as CardFetchContext };
}
