import { FLEET_TAG } from '../fleet/fleet-store.js';
import { encodeCommand } from '../resp/encode.js';

/** A MONITOR connection to one node, as the relay uses it (upstream/link.ts Link). */
export interface MonitorConnection {
  /** Frames after MONITOR's +OK: the node's monitor lines. */
  onStream: ((frame: Buffer) => void) | null;
  call(args: ReadonlyArray<string | Buffer | number>): Promise<Buffer>;
  /** Writes a request whose reply comes on the stream (after MONITOR's +OK). */
  writeToStream(data: Buffer): void;
  close(reason?: string): void;
  once(event: 'close', fn: () => void): unknown;
}

export interface ScriptLineRelayOptions {
  /** The nodes now (the topology's primaries and replicas: a script may run on either). */
  nodes: () => ReadonlyArray<{ readonly host: string; readonly port: number; readonly address: string }>;
  /** Opens a connection to a node (respool's own identity; MONITOR needs the node's admin permission). */
  open: (host: string, port: number) => MonitorConnection;
  /** A line to give every client that monitors respool. */
  deliver: (line: Buffer) => void;
}

const FLEET = Buffer.from(FLEET_TAG);
const LUA = Buffer.from(' lua] ');
/** A lost connection is opened again after this (while anyone monitors). */
const REOPEN_MS = 1000;
/** Sent on a node's MONITOR connection: its reply comes after every line of what the node ran before it. */
const SETTLE = encodeCommand(['PING', 'respool-settle']);
/** The reply (a bulk string: the node's monitor lines are simple strings). */
const SETTLED = Buffer.from('$14\r\nrespool-settle\r\n');

interface Monitored {
  readonly conn: MonitorConnection;
  /** MONITOR answered (or failed). */
  readonly ready: Promise<void>;
  /** settle() callers, in the order their PINGs went out. */
  readonly settles: Array<() => void>;
}

/**
 * The commands scripts and functions run on the nodes, for respool's MONITOR clients. Valkey's
 * MONITOR prints each one as a `[<db> lua]` line after the EVAL / FCALL line; respool's own feed
 * (monitor-feed.ts) sees only what clients send it. While anyone monitors respool, one MONITOR
 * connection to every node of the topology relays the node's `lua` lines as they are — and no
 * other line: the rest is traffic respool's own feed shows once, in its clients' words. The lines
 * of respool's own scripts (the fleet's state, under {respool-fleet}) are not relayed: a node
 * prints a script's lines right after its EVAL line, so the EVAL line tells whose they are.
 *
 *   ready    : start() resolves once every node answered MONITOR (or failed), so MONITOR's +OK to
 *              the client comes when the next script's lines will be seen
 *   topology : sync() monitors nodes that came, closes the ones that left
 *   lost     : a connection lost while anyone monitors is opened again after REOPEN_MS
 *   settle   : settle(node) resolves once every line of what that node ran so far was relayed (a
 *              PING on its MONITOR connection, whose reply follows them): monitor-feed.ts holds
 *              later client lines until a script's lines are in
 */
export class ScriptLineRelay {
  private readonly connections = new Map<string, Monitored>();
  private active = false;

  constructor(private readonly options: ScriptLineRelayOptions) {}

  /** Someone monitors now: every node is monitored; resolves once they all answered. */
  start(): Promise<void> {
    this.active = true;
    return this.sync();
  }

  /** Nobody monitors any more. */
  stop(): void {
    this.active = false;
    const open = [...this.connections.values()];
    this.connections.clear();
    for (const { conn } of open) conn.close('nobody monitors respool');
  }

  /** Resolves once every line of what the node at `address` ran so far was relayed (at once: not monitored). */
  settle(address: string): Promise<void> {
    const monitored = this.connections.get(address);
    if (monitored === undefined) return Promise.resolve();
    return monitored.ready.then(() => new Promise<void>((resolve) => {
      if (this.connections.get(address) !== monitored) return resolve();
      monitored.settles.push(resolve);
      monitored.conn.writeToStream(SETTLE);
    }));
  }

  /** The topology changed (or a connection was lost): monitor exactly its nodes. */
  sync(): Promise<void> {
    if (!this.active) return Promise.resolve();
    const nodes = this.options.nodes();
    const wanted = new Set(nodes.map((n) => n.address));
    for (const [address, { conn }] of this.connections) {
      if (wanted.has(address)) continue;
      this.connections.delete(address);
      conn.close('node left the topology');
    }
    for (const node of nodes) if (!this.connections.has(node.address)) this.open(node.host, node.port, node.address);
    return Promise.all([...this.connections.values()].map((c) => c.ready)).then(() => undefined);
  }

  private open(host: string, port: number, address: string): void {
    const conn = this.options.open(host, port);
    let respoolsOwn = false; // the last EVAL / FCALL line was one of respool's own scripts
    const settles: Array<() => void> = [];
    conn.onStream = (frame) => {
      if (frame[0] === 0x24 /* $ */) {
        if (frame.equals(SETTLED)) settles.shift()?.();
        return;
      }
      const lua = frame.indexOf(LUA);
      if (lua < 0 || lua > 40) {
        respoolsOwn = frame.includes(FLEET);
        return;
      }
      if (!respoolsOwn) this.options.deliver(Buffer.from(frame));
    };
    const ready = conn.call(['MONITOR']).then(() => undefined, () => undefined);
    conn.once('close', () => {
      for (const resolve of settles.splice(0)) resolve();
      if (this.connections.get(address)?.conn !== conn) return;
      this.connections.delete(address);
      if (this.active) setTimeout(() => void this.sync(), REOPEN_MS).unref();
    });
    this.connections.set(address, { conn, ready, settles });
  }
}
