import cluster, { type Worker } from 'node:cluster';

/**
 * With `workers: N`, one worker asks every other to do something now and waits until they did:
 * a namespace's flush, say, whose tracking clients sit on every worker (each must stop passing on
 * the nodes' per-key invalidations before the keys go, then send one "invalidate everything").
 *
 *   worker → supervisor   ask   { topic, seq, payload }   passed to every other worker
 *   supervisor → asker    sent  { seq, count }            how many acks to wait for
 *   worker → supervisor   ack   { seq, to }               passed to the asker
 *
 * Outside workers (a lone process) ask() resolves at once: there is nobody else.
 */
export const PEER_BROADCAST_MESSAGE = 'respool:peer-broadcast';

type BroadcastMessage =
  | { type: typeof PEER_BROADCAST_MESSAGE; kind: 'ask'; topic: string; seq: number; payload: unknown; from?: number }
  | { type: typeof PEER_BROADCAST_MESSAGE; kind: 'sent'; seq: number; count: number }
  | { type: typeof PEER_BROADCAST_MESSAGE; kind: 'ack'; seq: number; to: number };

export function isBroadcastMessage(msg: unknown): msg is BroadcastMessage {
  return (msg as { type?: unknown } | null)?.type === PEER_BROADCAST_MESSAGE;
}

interface Waiting {
  expected: number | null;
  acks: number;
  done: () => void;
}

/** A worker's end. */
export class PeerBroadcast {
  private seq = 0;
  private readonly waiting = new Map<number, Waiting>();
  private readonly handlers = new Map<string, (payload: unknown) => Promise<void> | void>();

  constructor() {
    if (!cluster.isWorker) return;
    process.on('message', (msg: unknown) => {
      if (isBroadcastMessage(msg)) this.receive(msg);
    });
  }

  /** What this worker does when another asks for `topic`. */
  handle(topic: string, handler: (payload: unknown) => Promise<void> | void): void {
    this.handlers.set(topic, handler);
  }

  /** Every other worker runs `topic`'s handler with `payload`; resolves once all did (or after timeoutMs). */
  ask(topic: string, payload: unknown, timeoutMs: number): Promise<void> {
    if (!cluster.isWorker || process.send === undefined || !process.connected) return Promise.resolve();
    const seq = ++this.seq;
    return new Promise((resolve) => {
      const timer = setTimeout(() => finish(), timeoutMs);
      const finish = () => {
        clearTimeout(timer);
        this.waiting.delete(seq);
        resolve();
      };
      this.waiting.set(seq, { expected: null, acks: 0, done: finish });
      process.send!({ type: PEER_BROADCAST_MESSAGE, kind: 'ask', topic, seq, payload } satisfies BroadcastMessage);
    });
  }

  private receive(msg: BroadcastMessage): void {
    if (msg.kind === 'ask') {
      const from = msg.from;
      const ack = () => {
        if (from !== undefined && process.send !== undefined && process.connected) process.send({ type: PEER_BROADCAST_MESSAGE, kind: 'ack', seq: msg.seq, to: from } satisfies BroadcastMessage);
      };
      void Promise.resolve(this.handlers.get(msg.topic)?.(msg.payload)).then(ack, ack);
      return;
    }
    const waiting = this.waiting.get(msg.seq);
    if (waiting === undefined) return;
    if (msg.kind === 'sent') waiting.expected = msg.count;
    else waiting.acks++;
    if (waiting.expected !== null && waiting.acks >= waiting.expected) waiting.done();
  }
}

/** The supervisor's part: an ask to every other worker (the asker told how many), an ack to its asker. */
export function relayBroadcast(from: number, msg: BroadcastMessage, workers: readonly Worker[]): void {
  const live = (w: Worker | undefined): w is Worker => w !== undefined && !w.isDead() && w.isConnected();
  if (msg.kind === 'ack') {
    const asker = workers[msg.to];
    if (live(asker)) asker.send(msg);
    return;
  }
  if (msg.kind !== 'ask') return;
  let count = 0;
  workers.forEach((worker, index) => {
    if (index === from || !live(worker)) return;
    worker.send({ ...msg, from });
    count++;
  });
  const asker = workers[from];
  if (live(asker)) asker.send({ type: PEER_BROADCAST_MESSAGE, kind: 'sent', seq: msg.seq, count } satisfies BroadcastMessage);
}
