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
  /** While followed (follow()): the most lines kept of one script run (the slow log's length: older ones could not stay in it). */
  keepLines?: () => number;
}

/**
 * One script or function a node ran, while followed (follow()): its EVAL / FCALL line and the
 * `lua` lines after it, as the node's MONITOR printed them (client/script-commands.ts reads them).
 */
export interface ScriptRun {
  /** The connection that ran it, as the node shows it ("127.0.0.1:53422"). */
  readonly client: string;
  /** The EVAL / FCALL line's arguments, as printed (quoted, escaped: Valkey's sdscatrepr). */
  readonly call: Buffer;
  /** Each command's arguments, as printed: the last keepLines() of them. */
  readonly lines: Buffer[];
}

const FLEET = Buffer.from(FLEET_TAG);
const LUA = Buffer.from(' lua] ');
/** A lost connection is opened again after this (while anyone monitors). */
const REOPEN_MS = 1000;
/** Sent on a node's MONITOR connection: its reply comes after every line of what the node ran before it. */
const SETTLE = encodeCommand(['PING', 'respool-settle']);
/** The reply (a bulk string: the node's monitor lines are simple strings). */
const SETTLED = Buffer.from('$14\r\nrespool-settle\r\n');
/** The longest a script's reply waits for its node's lines (settleWithin). */
const SCRIPT_LINES_WAIT_MS = 1000;
/** The script runs a followed node keeps unclaimed (runs nobody claims: other clients of the node, scripts in a MULTI). */
const MAX_RUNS = 256;
/** The commands that start a script run, as a MONITOR line's first argument prints them (lower case). */
const SCRIPT_COMMANDS: ReadonlySet<string> = new Set(['"eval"', '"evalsha"', '"eval_ro"', '"evalsha_ro"', '"fcall"', '"fcall_ro"']);

interface Monitored {
  readonly conn: MonitorConnection;
  /** MONITOR answered (or failed). */
  readonly ready: Promise<void>;
  /** settle() callers, in the order their PINGs went out. */
  readonly settles: Array<() => void>;
  /** While followed: the node's script runs not claimed yet, oldest first. */
  readonly runs: ScriptRun[];
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
 *   follow   : the slow log, while it logs every command (client/script-commands.ts), follows the
 *              nodes too — monitored as for MONITOR, whether or not anyone monitors — and each
 *              node's script runs are kept (ScriptRun: the EVAL / FCALL line, the lines after it)
 *              until claimed by the script call that ran them (runsOn)
 */
export class ScriptLineRelay {
  private readonly connections = new Map<string, Monitored>();
  /** Someone monitors respool. */
  private monitoring = false;
  /** The slow log follows the nodes' script runs. */
  private following = false;

  constructor(private readonly options: ScriptLineRelayOptions) {}

  private get active(): boolean {
    return this.monitoring || this.following;
  }

  /** Someone monitors now: every node is monitored; resolves once they all answered. */
  start(): Promise<void> {
    this.monitoring = true;
    return this.sync();
  }

  /** Nobody monitors any more. */
  stop(): void {
    this.monitoring = false;
    if (!this.following) this.closeAll('nobody monitors respool');
  }

  /**
   * The slow log follows the nodes' script runs from now on (`on`), or no more: every node is
   * monitored while either it or a MONITOR client wants it. Resolves once every node answered.
   */
  follow(on: boolean): Promise<void> {
    this.following = on;
    if (on) return this.sync();
    if (!this.monitoring) this.closeAll('the slow log no longer logs every command');
    else for (const m of this.connections.values()) m.runs.length = 0;
    return Promise.resolve();
  }

  /** The script runs of the node at `address` not claimed yet, oldest first (the caller takes what it claims); null: not followed. */
  runsOn(address: string): ScriptRun[] | null {
    return this.following ? this.connections.get(address)?.runs ?? null : null;
  }

  private closeAll(reason: string): void {
    const open = [...this.connections.values()];
    this.connections.clear();
    for (const { conn } of open) conn.close(reason);
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

  /** settle(), at most SCRIPT_LINES_WAIT_MS: a node that stopped answering holds no script's reply longer. */
  settleWithin(address: string): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, SCRIPT_LINES_WAIT_MS);
      timer.unref();
    });
    return Promise.race([this.settle(address), late]).finally(() => clearTimeout(timer));
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
    let run: ScriptRun | null = null; // while followed: the script run the lua lines now belong to
    const settles: Array<() => void> = [];
    const runs: ScriptRun[] = [];
    conn.onStream = (frame) => {
      if (frame[0] === 0x24 /* $ */) {
        if (frame.equals(SETTLED)) settles.shift()?.();
        return;
      }
      const lua = frame.indexOf(LUA);
      if (lua < 0 || lua > 40) {
        respoolsOwn = frame.includes(FLEET);
        run = this.following && !respoolsOwn ? scriptRun(frame) : null;
        if (run !== null && runs.push(run) > MAX_RUNS) runs.shift();
        return;
      }
      if (respoolsOwn) return;
      this.options.deliver(Buffer.from(frame));
      if (run !== null) {
        const keep = this.options.keepLines?.() ?? MAX_RUNS;
        run.lines.push(Buffer.from(frame.subarray(lua + LUA.length, frame.length - 2)));
        if (run.lines.length > 2 * keep + 16) run.lines.splice(0, run.lines.length - keep); // older ones could not stay in the log
      }
    };
    const ready = conn.call(['MONITOR']).then(() => undefined, () => undefined);
    conn.once('close', () => {
      for (const resolve of settles.splice(0)) resolve();
      if (this.connections.get(address)?.conn !== conn) return;
      this.connections.delete(address);
      if (this.active) setTimeout(() => void this.sync(), REOPEN_MS).unref();
    });
    this.connections.set(address, { conn, ready, settles, runs });
  }
}

/** A MONITOR line that runs a script or function (`+<time> [<db> <client>] "eval" …\r\n`): its run, lines to come; else null. */
function scriptRun(frame: Buffer): ScriptRun | null {
  const open = frame.indexOf(0x5b /* [ */);
  const args = open < 0 ? -1 : frame.indexOf('] "', open);
  if (args < 0) return null;
  const start = args + 2;
  const space = frame.indexOf(0x20, start);
  const first = frame.toString('latin1', start, space < 0 ? frame.length - 2 : space).toLowerCase();
  if (!SCRIPT_COMMANDS.has(first)) return null;
  const db = frame.indexOf(0x20, open);
  return { client: frame.toString('latin1', db + 1, args), call: Buffer.from(frame.subarray(start, frame.length - 2)), lines: [] };
}
