import net from 'node:net';

/**
 * A TCP relay that puts network faults between respool and one node (this kernel has no netem
 * and no iptables): each connection it accepts gets a connection of its own to the target, and
 * every chunk read on one side is written to the other after the faults set now. For tests
 * (test/helpers/fault-relay.ts) and benches (build/harness/fault-relay.js).
 *
 *   delay     : toNode / toClient ms added to every chunk in that direction, plus 0…jitterMs
 *   hold back : a share of chunks (holdShare) waits holdMs more — a lost segment and its
 *               retransmission as an application sees it: that chunk and every later one in its
 *               direction arrive late, none out of order, none lost
 *   bandwidth : bytesPerSecond per direction and connection (0: no cap)
 *   blackhole : connections are accepted and kept, nothing is relayed either way (a node that
 *               stopped answering, a half-open link); turned off, relaying resumes with what
 *               arrives next (what came meanwhile is gone)
 *   halfClose : the relay ends its side towards each client (FIN) and relays nothing more to it
 *   reset     : every connection is destroyed with a TCP reset (RST)
 *
 * Order: a chunk leaves no earlier than the one before it in its direction. Bounded: a
 * direction with more than MAX_QUEUED_BYTES waiting pauses its reader until it drains.
 */
export interface FaultSettings {
  /** Added to every chunk towards the node and towards the client (ms). */
  delayMs: { toNode: number; toClient: number };
  /** Up to this much more, uniformly at random, per chunk (ms). */
  jitterMs: number;
  /** Share (0…1) of chunks held back holdMs more. */
  holdShare: number;
  holdMs: number;
  /** Per direction and connection; 0: no cap. */
  bytesPerSecond: number;
  blackhole: boolean;
}

const DEFAULTS: FaultSettings = { delayMs: { toNode: 0, toClient: 0 }, jitterMs: 0, holdShare: 0, holdMs: 200, bytesPerSecond: 0, blackhole: false };

/** Bytes one direction may hold before its reader is paused. */
const MAX_QUEUED_BYTES = 8 * 1024 * 1024;

/** One direction of one relayed connection: chunks waiting for their release time, in order. */
class Direction {
  private readonly queue: Array<{ chunk: Buffer; at: number }> = [];
  private queuedBytes = 0;
  private lastAt = 0;
  private timer: NodeJS.Timeout | null = null;
  /** Nothing more is written (half-closed or destroyed). */
  stopped = false;
  /** The reading side sent FIN: end the writing side once every chunk before it has left. */
  private ending = false;

  constructor(
    private readonly from: net.Socket,
    private readonly to: net.Socket,
    private readonly settings: () => FaultSettings,
    private readonly delayOf: (s: FaultSettings) => number,
  ) {
    from.on('data', (chunk: Buffer) => this.take(chunk));
  }

  private take(chunk: Buffer): void {
    const s = this.settings();
    if (s.blackhole || this.stopped) return;
    const now = performance.now();
    let at = now + this.delayOf(s) + (s.jitterMs > 0 ? Math.random() * s.jitterMs : 0);
    if (s.holdShare > 0 && Math.random() < s.holdShare) at += s.holdMs;
    at = Math.max(at, this.lastAt);
    // Capped: a chunk takes its own size's time on the wire, after the one before it.
    if (s.bytesPerSecond > 0) at += (chunk.length * 1000) / s.bytesPerSecond;
    this.lastAt = at;
    this.queue.push({ chunk, at });
    this.queuedBytes += chunk.length;
    if (this.queuedBytes > MAX_QUEUED_BYTES) this.from.pause();
    this.schedule();
  }

  private schedule(): void {
    if (this.timer !== null || this.queue.length === 0) return;
    const wait = Math.max(0, this.queue[0]!.at - performance.now());
    this.timer = setTimeout(() => {
      this.timer = null;
      this.release();
    }, wait);
  }

  private release(): void {
    const now = performance.now();
    while (this.queue.length > 0 && this.queue[0]!.at <= now + 0.5) {
      const { chunk } = this.queue.shift()!;
      this.queuedBytes -= chunk.length;
      if (!this.stopped && !this.to.destroyed) this.to.write(chunk);
    }
    if (this.queuedBytes <= MAX_QUEUED_BYTES / 2 && this.from.isPaused()) this.from.resume();
    if (this.ending && this.queue.length === 0 && !this.stopped) this.to.end();
    this.schedule();
  }

  /** The reading side ended (FIN): passed on after what it sent before. */
  endWhenDrained(): void {
    this.ending = true;
    if (this.queue.length === 0 && !this.stopped) this.to.end();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.queue.length = 0;
    this.queuedBytes = 0;
  }
}

interface Relayed {
  readonly client: net.Socket;
  readonly node: net.Socket;
  readonly toNode: Direction;
  readonly toClient: Direction;
}

export class FaultRelay {
  private settings: FaultSettings = { ...DEFAULTS, delayMs: { ...DEFAULTS.delayMs } };
  private readonly open = new Set<Relayed>();
  /** Connections accepted so far. */
  accepted = 0;

  private constructor(
    private readonly server: net.Server,
    readonly host: string,
    readonly port: number,
  ) {}

  /** A relay on a free loopback port to `target`, with `faults` set from the start. */
  static async start(target: { host: string; port: number }, faults: Partial<FaultSettings> = {}): Promise<FaultRelay> {
    let relay: FaultRelay | null = null;
    // allowHalfOpen: a FIN is passed on (endWhenDrained), not answered at once.
    const server = net.createServer({ noDelay: true, allowHalfOpen: true }, (client) => relay!.accept(client, target));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ port: 0, host: '127.0.0.1' }, resolve);
    });
    relay = new FaultRelay(server, '127.0.0.1', (server.address() as net.AddressInfo).port);
    relay.set(faults);
    return relay;
  }

  /** Changes the faults for every chunk read from now on (open connections included). */
  set(faults: Partial<FaultSettings>): void {
    this.settings = { ...this.settings, ...faults, delayMs: { ...this.settings.delayMs, ...faults.delayMs } };
  }

  get current(): Readonly<FaultSettings> {
    return this.settings;
  }

  /** Connections open now. */
  get connections(): number {
    return this.open.size;
  }

  /** Ends the relay's side towards every client (FIN); nothing more reaches them. */
  halfClose(): void {
    for (const c of this.open) {
      c.toClient.stop();
      c.client.end();
    }
  }

  /** Destroys every connection with a TCP reset towards the client (and closes the node's side). */
  reset(): void {
    for (const c of [...this.open]) {
      c.toNode.stop();
      c.toClient.stop();
      c.client.resetAndDestroy();
      c.node.destroy();
    }
  }

  async close(): Promise<void> {
    for (const c of [...this.open]) {
      c.client.destroy();
      c.node.destroy();
    }
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: net.Socket, target: { host: string; port: number }): void {
    this.accepted++;
    const node = net.connect({ host: target.host, port: target.port, noDelay: true, allowHalfOpen: true });
    const settings = () => this.settings;
    const relayed: Relayed = {
      client,
      node,
      toNode: new Direction(client, node, settings, (s) => s.delayMs.toNode),
      toClient: new Direction(node, client, settings, (s) => s.delayMs.toClient),
    };
    this.open.add(relayed);
    const end = (): void => {
      if (!this.open.delete(relayed)) return;
      relayed.toNode.stop();
      relayed.toClient.stop();
      client.destroy();
      node.destroy();
    };
    client.on('error', end).on('close', end);
    node.on('error', end).on('close', end);
    // A FIN from either side: passed on once what it sent before has left.
    client.on('end', () => relayed.toNode.endWhenDrained());
    node.on('end', () => relayed.toClient.endWhenDrained());
  }
}
