import { nodeCrypto } from '../util/lazy-builtins.js';
import type { FleetState } from './fleet-state.js';

const ASK = 'peer-ask';
const ACK = 'peer-ack';

interface Waiting {
  expected: Set<string>;
  done: () => void;
}

/**
 * In a fleet, one member asks every other live member to do something now and waits until they
 * did — the fleet's counterpart of workers/peer-broadcast.ts (each worker of an instance is a
 * member of its own, so this reaches them too): a namespace's flush, say, whose tracking clients
 * sit on every member. Over the fleet's bus:
 *
 *   asker  → bus  { t: 'peer-ask', id, topic, p, from }   every member but the asker runs topic's handler
 *   member → bus  { t: 'peer-ack', id, m }                 the asker counts them
 *
 * ask() resolves once every member live when it asked has acked, or after its timeout (a member
 * gone meanwhile, a bus that lost a message), or at once without the bus or other members.
 */
export class FleetBroadcast {
  private readonly waiting = new Map<string, Waiting>();
  private readonly handlers = new Map<string, (payload: unknown) => Promise<void> | void>();

  constructor(private readonly state: FleetState) {
    state.on(ASK, (m) => this.onAsk(m));
    state.on(ACK, (m) => this.onAck(m));
  }

  /** What this member does when another asks for `topic`. */
  handle(topic: string, handler: (payload: unknown) => Promise<void> | void): void {
    this.handlers.set(topic, handler);
  }

  /** Every other live member runs `topic`'s handler with `payload`; resolves once all did (or after timeoutMs). */
  ask(topic: string, payload: unknown, timeoutMs: number): Promise<void> {
    const self = this.state.memberId;
    const expected = new Set(this.state.liveMembers().filter((m) => m !== self));
    if (!this.state.subscribed || expected.size === 0) return Promise.resolve();
    const id = `${self}/${nodeCrypto().randomBytes(6).toString('hex')}`;
    return new Promise((resolve) => {
      const timer = setTimeout(() => done(), timeoutMs);
      const done = () => {
        clearTimeout(timer);
        this.waiting.delete(id);
        resolve();
      };
      this.waiting.set(id, { expected, done });
      this.state.publish({ t: ASK, id, topic, p: payload, from: self }).catch(() => done());
    });
  }

  private onAsk(m: Record<string, unknown>): void {
    if (m['from'] === this.state.memberId) return; // the asker acts for its own clients itself
    const id = m['id'];
    const ack = () => void this.state.publish({ t: ACK, id, m: this.state.memberId }).catch(() => undefined);
    void Promise.resolve(this.handlers.get(String(m['topic']))?.(m['p'])).then(ack, ack);
  }

  private onAck(m: Record<string, unknown>): void {
    const waiting = this.waiting.get(String(m['id']));
    if (waiting === undefined) return;
    waiting.expected.delete(String(m['m']));
    if (waiting.expected.size === 0) waiting.done();
  }
}
