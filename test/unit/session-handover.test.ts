/**
 * A takeover's handover of client sessions (src/session/session-handover.ts), with fake sessions:
 * a plain one goes at once, with what it read and did not handle; a lasting state (a subscription)
 * is left to the drain at once; a passing one (a blocked call, a transaction) is served on and goes
 * once idle, with the request that follows put back unread; one held that stops being plain, or one
 * still waiting at the deadline, is left to the drain.
 */
import { describe, expect, it } from 'vitest';
import net from 'node:net';
import { handOverSessions, type ClientSnapshot, type HandedSession } from '../../src/session/session-handover.js';
import { TlsRelays } from '../../src/session/tls-relay.js';

/** The snapshot's fields, and the ones that decide whether a session is plain. */
interface FakeState extends Omit<ClientSnapshot, 'unread'> {
  transaction: object | null;
  lane: object | null;
  lease: object | null;
  blocked: boolean;
  subscriptions: { total(): number } | null;
  tracking: object | null;
  monitoring: boolean;
  replicaStream: boolean;
  repliesSuppressed: boolean;
  tenant: object | null;
}

class FakeSession {
  closed = false;
  readonly socket = new net.Socket();
  readonly state: FakeState = {
    protocol: 2, db: 0, name: null, libName: '', libVersion: '', user: null, transaction: null, lane: null, lease: null,
    blocked: false, subscriptions: null, tracking: null, monitoring: false, replicaStream: false, repliesSuppressed: false, tenant: null,
  };
  pending = 0;
  held = false;
  drained = false;
  /** What the session handled (chunks it was given and did not take back). */
  readonly handled: string[] = [];
  takeIdle: ((chunk: Buffer) => boolean) | null = null;

  constructor(init: Partial<FakeState> = {}) {
    Object.assign(this.state, init);
  }
  queryBytes(): number {
    return 0;
  }
  unreadOutputBytes(): number {
    return 0;
  }
  holdReading(): void {
    this.held = true;
    this.socket.pause();
  }
  socketClosed(): void {
    this.closed = true;
  }
  drain(): void {
    this.drained = true;
  }
  /** A chunk from the client, as ClientSession.socketData gets it. */
  receive(text: string): void {
    if (this.takeIdle?.(Buffer.from(text)) === true) return;
    this.handled.push(text);
  }
}

const asSessions = (sessions: FakeSession[]) => sessions as unknown as HandedSession[];

function run(sessions: FakeSession[], deadlineMs: number) {
  const handed: Array<{ session: FakeSession; snapshot: ClientSnapshot }> = [];
  const left: FakeSession[] = [];
  const done = handOverSessions(asSessions(sessions), (socket, snapshot) => {
    handed.push({ session: sessions.find((s) => s.socket === socket)!, snapshot });
  }, Date.now() + deadlineMs, new TlsRelays(), (s) => left.push(s as unknown as FakeSession));
  return { done, handed, left };
}

describe('handOverSessions', () => {
  it('hands a plain session over at once, held from reading, with its state', async () => {
    const plain = new FakeSession({ db: 3, name: 'worker', user: 'app', protocol: 3 });
    const { done, handed, left } = run([plain], 1000);
    expect(await done).toBe(1);
    expect(plain.held).toBe(true);
    expect(plain.closed).toBe(true);
    expect(left).toEqual([]);
    expect(handed[0]!.snapshot).toMatchObject({ db: 3, name: 'worker', user: 'app', protocol: 3, unread: '' });
  });

  it('leaves a subscriber to the drain at once', async () => {
    const subscriber = new FakeSession({ subscriptions: { total: () => 1 } });
    const { done, handed, left } = run([subscriber], 1000);
    expect(await done).toBe(0);
    expect(left).toEqual([subscriber]);
    expect(handed).toEqual([]);
    expect(subscriber.held).toBe(false);
  });

  it('serves a blocked session on, then hands it over between requests with the next one unread', async () => {
    const worker = new FakeSession({ blocked: true });
    worker.pending = 1;
    const { done, handed, left } = run([worker], 2000);
    await new Promise((r) => setTimeout(r, 20));
    expect(worker.held).toBe(false); // its BLPOP still waits: it keeps its session
    worker.receive('PING\r\n'); // pipelined behind the BLPOP while it is blocked: handled here
    worker.state.blocked = false; // the BLPOP answered …
    worker.pending = 0;
    worker.receive('*2\r\n$5\r\nBLPOP\r\n'); // … and the next one arrives: put back, not handled
    expect(await done).toBe(1);
    expect(worker.handled).toEqual(['PING\r\n']);
    expect(left).toEqual([]);
    expect(Buffer.from(handed[0]!.snapshot.unread, 'base64').toString()).toBe('*2\r\n$5\r\nBLPOP\r\n');
  });

  it('hands over a session whose transaction ended and that sends nothing more', async () => {
    const tx = new FakeSession({ transaction: {} });
    const { done, handed } = run([tx], 2000);
    await new Promise((r) => setTimeout(r, 10));
    tx.state.transaction = null; // EXEC answered
    expect(await done).toBe(1);
    expect(handed[0]!.snapshot.unread).toBe('');
  });

  it('leaves to the drain a session still in its transaction at the deadline, and a held one that stopped being plain', async () => {
    const stuck = new FakeSession({ transaction: {} });
    const turned = new FakeSession();
    turned.pending = 1; // a reply owed: held, not gone yet
    const { done, handed, left } = run([stuck, turned], 100);
    await new Promise((r) => setTimeout(r, 10));
    turned.state.transaction = {}; // a MULTI it had read before the hold ran
    expect(await done).toBe(0);
    expect(handed).toEqual([]);
    expect(left).toHaveLength(2);
    expect(left).toContain(stuck);
    expect(left).toContain(turned);
    expect(stuck.takeIdle).toBe(null);
  });
});
