import { encodeCommand, encodeError } from '../resp/encode.js';
import { ASKING } from '../routing/redirect-follower.js';
import { ProxyError } from '../errors.js';
import type { Topology } from '../cluster/topology.js';
import { ignoreReply, type LinkRequest } from '../upstream/link.js';
import type { LeasedConnection } from '../upstream/leased-connection.js';
import type { HandlerSession } from './handler-session.js';
import { clientInvalidation, invalidatedKeys, storedTrackingPrefixes } from '../keys/tracking-names.js';
import { deliverInvalidation, encodeTrackingLine, redirBrokenPush, type TrackingLine } from './tracking-redirect.js';
import type { TrackedKeyReader, TrackedKeys } from './tracked-keys.js';
import { encodeBulk } from '../resp/encode.js';

// A CLIENT TRACKING client's lanes (handlers/tracking.ts is the command and its routing: see
// there for the whole picture): one leased connection per node, the options they were sent,
// their listeners for REDIRECT, and what happens when one is lost.

const CLIENT_ID = encodeCommand(['CLIENT', 'ID']);
/** Valkey's invalidation after FLUSHALL (tracking.c): a null key list = forget every key. */
const INVALIDATE_ALL = Buffer.from('>2\r\n$10\r\ninvalidate\r\n_\r\n');
/** How long a BCAST client waits before trying again a lane to a primary that could not be opened. */
const BCAST_RETRY_MS = 1000;

/** What CLIENT TRACKING ON asks for (parsed by handlers/tracking.ts). */
export interface TrackingOptions {
  bcast: boolean;
  optin: boolean;
  optout: boolean;
  noloop: boolean;
  prefixes: Buffer[];
}


/** One request on a lane, its reply copied; rejects when the lane fails first. */
export function request(conn: LeasedConnection, raw: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    conn.send(raw, { sentAt: 0, onReply: (frame) => resolve(Buffer.from(frame)), onLinkFailure: (error) => reject(new Error(error)) });
  });
}

/** The error line of an error reply, without "-" and CRLF. */
function errorText(reply: Buffer): string {
  return reply.toString('utf8', 1, reply.length - 2);
}

/** Valkey's invalidation of one key (tracking.c sendTrackingMessage), `key` as the node stores it. */
function invalidationOf(key: Buffer): Buffer {
  return Buffer.concat([INVALIDATE_ONE, encodeBulk(key, 3)]);
}
const INVALIDATE_ONE = Buffer.from('>2\r\n$10\r\ninvalidate\r\n*1\r\n');

/** The longest null invalidation (`>2 $10 invalidate $-1` and its RESP2/RESP3 forms). */
const NULL_INVALIDATION_MAX_BYTES = 32;

/** A tracking client's lanes: one leased connection per node, all in the same tracking mode. */

export class TrackingLanes implements TrackedKeyReader {
  /** The options of the last accepted ON (Valkey resets the flags at each ON). */
  options: Omit<TrackingOptions, 'prefixes'>;
  /** The protocol the lanes speak (the client's when they were opened). */
  protocol: 2 | 3;
  /** CLIENT CACHING given and not consumed yet: the line to send before the next command. */
  caching: Buffer | null = null;
  /** The CACHING line that applies to the command being dispatched now (noteCommand). */
  current: Buffer | null = null;
  /** The respool client REDIRECT names (0: none): its invalidations go there (tracking-redirect.ts). */
  redirectTo = 0;
  /** The redirect target has gone (Valkey's tracking_broken_redir, shown by TRACKINGINFO). */
  brokenRedirect = false;
  /** BCAST prefixes accepted so far (Valkey keeps adding them), latin1 → bytes. */
  private readonly prefixes = new Map<string, Buffer>();
  private readonly lanes = new Map<string, LeasedConnection>();
  /** Per node address: the connection a redirecting lane sends its invalidations to, and its upstream id. */
  private readonly listeners = new Map<string, { conn: LeasedConnection; id: number }>();
  private readonly opening = new Map<string, Promise<LeasedConnection>>();
  private closed = false;
  /**
   * An "invalidate everything" was passed on and the client sent no command since. One flush
   * through respool reaches every node, and each node sends its tracking connections one; Valkey
   * sends one. Later ones say nothing new — the client's cache is empty already — and are dropped.
   */
  private everythingInvalidated = false;
  /**
   * Namespace flushes running now (handlers/namespace-scope.ts): the nodes' per-key
   * invalidations meanwhile are the flush's own and are not passed on; endFlush sends the one
   * "invalidate everything" a server's FLUSHDB sends instead.
   */
  private flushing = 0;
  /** BCAST: the topology whose every primary has a lane (null: check again). */
  private bcastComplete: Topology | null = null;
  private readonly retryAt = new Map<string, number>();
  /** The keys this client has in respool's tracking table (kept by the table: tracked-keys.ts). */
  readonly trackedKeys = new Set<string>();
  /** respool's tracking table (its backend's; absent in stand-in contexts). */
  private readonly table: TrackedKeys | undefined;

  constructor(
    private readonly session: HandlerSession,
    options: TrackingOptions,
    redirect: number,
  ) {
    this.table = session.ctx.trackedKeys;
    this.protocol = session.state.protocol;
    this.options = { bcast: false, optin: false, optout: false, noloop: false };
    this.accept(options, redirect);
  }

  /** An ON line Valkey accepted: its flags and redirect replace the old ones, its prefixes add to them. */
  accept(options: TrackingOptions, redirect: number): void {
    const { bcast, optin, optout, noloop } = options;
    this.options = { bcast, optin, optout, noloop };
    for (const p of options.prefixes) this.prefixes.set(p.toString('latin1'), p);
    this.redirectTo = redirect;
    this.brokenRedirect = false;
  }

  /** BCAST's prefixes as the client gave them, accepted so far. */
  clientPrefixes(): Buffer[] {
    return [...this.prefixes.values()];
  }

  get laneCount(): number {
    return this.lanes.size;
  }

  /** The ON line that puts a new lane in the client's tracking state. */
  onLine(): TrackingLine {
    const args: Buffer[] = [];
    const push = (...words: Array<string | Buffer>) => words.forEach((w) => args.push(typeof w === 'string' ? Buffer.from(w) : w));
    push('CLIENT', 'TRACKING', 'ON');
    let redirectAt = -1;
    if (this.redirectTo !== 0) {
      push('REDIRECT', String(this.redirectTo));
      redirectAt = args.length - 1;
    }
    const o = this.options;
    if (o.bcast) {
      push('BCAST');
      // An empty prefix means every key: Valkey registers "" for BCAST without PREFIX too. Under
      // a namespace or colocation rules the node matches the stored names (keys/tracking-names.ts).
      const names = this.session.state.acl.keyNames;
      const prefixes = [...this.prefixes.values()];
      if (names != null) for (const p of storedTrackingPrefixes(names, prefixes)) push('PREFIX', p);
      else if (!prefixes.some((p) => p.length === 0)) for (const p of prefixes) push('PREFIX', p);
    }
    if (o.optin) push('OPTIN');
    if (o.optout) push('OPTOUT');
    if (o.noloop) push('NOLOOP');
    return { args, redirectAt };
  }

  /** `line` as this lane must receive it (REDIRECT to the lane's listener, opened if needed). */
  async lineFor(conn: LeasedConnection, line: TrackingLine): Promise<Buffer> {
    if (line.redirectAt < 0) return encodeTrackingLine(line, null);
    return encodeTrackingLine(line, await this.listen(conn.host, conn.port, conn.address));
  }

  /** The open lane to this node, if any. */
  ready(address: string): LeasedConnection | undefined {
    return this.lanes.get(address);
  }

  /** Any open lane (keyless commands). */
  anyLane(): LeasedConnection | undefined {
    for (const conn of this.lanes.values()) return conn;
    return undefined;
  }

  openLanes(): LeasedConnection[] {
    return [...this.lanes.values()];
  }

  /** Lanes being opened now (a later ON waits for them, so it reaches them too). */
  pendingOpens(): Array<Promise<unknown>> {
    return [...this.opening.values()];
  }

  /** The lane to host:port: open, being opened (the same promise), or opened now with `first` (default: onLine()). */
  lane(host: string, port: number, first?: TrackingLine): Promise<LeasedConnection> {
    const address = `${host}:${port}`;
    const ready = this.lanes.get(address);
    if (ready !== undefined) return Promise.resolve(ready);
    let p = this.opening.get(address);
    if (p === undefined) {
      const opening = this.open(host, port, address, first ?? this.onLine());
      p = opening;
      this.opening.set(address, opening);
      const done = () => {
        if (this.opening.get(address) === opening) this.opening.delete(address);
      };
      opening.then(done, done);
    }
    return p;
  }

  private async open(host: string, port: number, address: string, first: TrackingLine): Promise<LeasedConnection> {
    const ctx = this.session.ctx;
    const conn = await ctx.dedicated.acquire(host, port, this.protocol, 0, this.session.state.acl.upstream);
    if (this.closed) {
      ctx.dedicated.release(conn, false);
      throw new Error(ProxyError.trackingTurnedOff());
    }
    conn.setDeadline(ctx.config.timeouts.commandMs);
    let reply: Buffer;
    try {
      reply = await request(conn, await this.lineFor(conn, first));
    } catch (err) {
      ctx.dedicated.release(conn, false);
      this.unlisten(address);
      throw err;
    }
    if (reply[0] === 0x2d || this.closed) {
      ctx.dedicated.release(conn, false);
      this.unlisten(address);
      throw new Error(reply[0] === 0x2d ? errorText(reply) : ProxyError.trackingTurnedOff());
    }
    conn.onPush = (frame) => {
      // With REDIRECT the node sends this lane's invalidations to its listener instead.
      if (this.redirectTo !== 0) return;
      if (this.forgetInvalidated(frame)) this.deliver(frame);
    };
    conn.once('close', () => this.lost(address, conn));
    this.lanes.set(address, conn);
    this.retryAt.delete(address);
    return conn;
  }

  /** A lane closed under the client: keys tracked there can no longer be invalidated. */
  private lost(address: string, conn: LeasedConnection): void {
    if (this.lanes.get(address) !== conn) return; // closed by respool
    this.lanes.delete(address);
    this.unlisten(address);
    this.bcastComplete = null;
    this.session.ctx.dedicated.release(conn, false);
    this.session.ctx.log.debug({ node: address, reason: conn.closeReason }, 'tracking lane lost');
    if (this.closed) return;
    this.table?.forgetReader(this);
    if (this.redirectTo !== 0) this.invalidation(INVALIDATE_ALL);
    else if (this.protocol === 3) this.deliver(INVALIDATE_ALL);
  }

  /** The listener on this node (opened now if there is none): its upstream client id. */
  private async listen(host: string, port: number, address: string): Promise<number> {
    const known = this.listeners.get(address);
    if (known !== undefined) return known.id;
    const ctx = this.session.ctx;
    const conn = await ctx.dedicated.acquire(host, port, 3, 0, this.session.state.acl.upstream);
    conn.setDeadline(ctx.config.timeouts.commandMs);
    let reply: Buffer;
    try {
      reply = await request(conn, CLIENT_ID);
    } catch (err) {
      ctx.dedicated.release(conn, false);
      throw err;
    }
    const raced = this.listeners.get(address); // two lines for one node at once: keep the first
    if (raced !== undefined || this.closed || reply[0] !== 0x3a /* : */) {
      ctx.dedicated.release(conn, false);
      if (raced !== undefined) return raced.id;
      throw new Error(this.closed ? ProxyError.trackingTurnedOff() : errorText(reply));
    }
    const id = Number(reply.toString('latin1', 1, reply.length - 2));
    conn.onPush = (frame) => {
      if (this.forgetInvalidated(frame)) this.invalidation(frame);
    };
    conn.once('close', () => {
      if (this.listeners.get(address)?.conn !== conn) return;
      // The lane now redirects to an id that is gone: it can no longer invalidate anything.
      const lane = this.lanes.get(address);
      if (lane !== undefined) lane.close('its tracking listener closed');
      else this.unlisten(address);
    });
    this.listeners.set(address, { conn, id });
    return id;
  }

  private unlisten(address: string): void {
    const listener = this.listeners.get(address);
    if (listener === undefined) return;
    this.listeners.delete(address);
    listener.conn.onPush = null;
    this.session.ctx.dedicated.release(listener.conn, false);
  }

  /**
   * An invalidation from a node: the keys it names (every key for a null list) leave respool's
   * table for this client. False for an "invalidate everything" that says nothing new (see
   * everythingInvalidated): it is not passed on.
   */
  private forgetInvalidated(frame: Buffer): boolean {
    // A null invalidation is a few dozen bytes: longer pushes name keys, and need no parse here.
    const everything = frame.length <= NULL_INVALIDATION_MAX_BYTES && invalidatedKeys(frame) === null;
    if (this.flushing > 0 && !everything) return false;
    if (everything) {
      if (this.everythingInvalidated) return false;
      this.everythingInvalidated = true;
      this.table?.forgetReader(this);
      return true;
    }
    const table = this.table;
    if (table === undefined || this.trackedKeys.size === 0) return true;
    const keys = invalidatedKeys(frame); // keys/tracking-names.ts: a key list, or undefined for no invalidation (a null one is short: above)
    if (keys) for (const key of keys) table.forget(this, key);
    return true;
  }

  /**
   * A namespace flush starts removing this client's namespace's keys (see `flushing`). Its keys
   * leave respool's tracking table now, as a server frees its table when the flush runs (INFO's
   * tracking_total_keys reads 0 while the keys are still being removed).
   */
  beginFlush(): void {
    this.flushing++;
    this.table?.forgetReader(this);
  }

  /**
   * The namespace flush has removed its keys. The nodes queued their invalidations on this
   * client's lanes and listeners before the replies to a PING sent on each now, so once those are
   * in, one "invalidate everything" says it all, as one server's FLUSHDB does (after the
   * flushing client's reply: a push waits behind the replies owed).
   */
  async endFlush(): Promise<void> {
    const conns = [...this.lanes.values(), ...[...this.listeners.values()].map((l) => l.conn)];
    await Promise.all(conns.map((conn) => conn.call(['PING']).catch(() => null)));
    if (--this.flushing > 0 || this.closed) return;
    this.everythingInvalidated = false; // one flush, one message
    if (!this.forgetInvalidated(INVALIDATE_ALL)) return;
    if (this.redirectTo !== 0) this.invalidation(INVALIDATE_ALL);
    else this.deliver(INVALIDATE_ALL);
  }

  /** respool's tracking table evicted `key` (a stored name): Valkey's invalidation, where Valkey would send it. */
  evicted(key: Buffer): void {
    if (this.closed) return;
    const push = invalidationOf(key);
    if (this.redirectTo !== 0) this.invalidation(push);
    else this.deliver(push);
  }

  /** An invalidation on the client's own connection: RESP3 only, as Valkey (a RESP2 client without REDIRECT gets none). */
  private deliver(frame: Buffer): void {
    if (this.session.state.protocol !== 3) return;
    const push = this.clientNames(frame);
    if (push !== null) this.session.push(Buffer.from(push));
  }

  /**
   * A command about to go on a lane: a read-only one's keys enter respool's tracking table, as
   * Valkey's call() remembers them (trackingRememberKeys): not in BCAST mode, and under OPTIN only
   * after CLIENT CACHING yes, under OPTOUT unless CLIENT CACHING no. `keys` are read at once, not
   * kept (views of the request's buffer will do).
   */
  noteRead(keys: readonly Buffer[], caching: Buffer | null): void {
    const table = this.table;
    if (table === undefined || keys.length === 0 || this.options.bcast || this.closed) return;
    if (this.options.optin ? caching === null : this.options.optout && caching !== null) return;
    table.remember(this, keys);
  }

  /** An invalidation for a redirecting client: to its target, or "redirect broken" (tracking-redirect.ts). */
  private invalidation(frame: Buffer): void {
    if (this.closed || this.redirectTo === 0) return;
    const push = this.clientNames(frame);
    if (push === null) return; // only keys this client cannot reach
    if (deliverInvalidation(this.session.ctx.sessionById(this.redirectTo), push)) return;
    this.brokenRedirect = true;
    if (this.session.state.protocol === 3) this.session.push(redirBrokenPush(this.redirectTo));
  }

  /** An invalidation with this client's key names (its namespace, colocation rules), or null when it names none of its keys. */
  private clientNames(push: Buffer): Buffer | null {
    const names = this.session.state.acl.keyNames;
    return names === null ? push : clientInvalidation(names, push);
  }

  /** Closes a lane the client leaves; `graceful`: once its outstanding replies came back. */
  drop(conn: LeasedConnection, graceful: boolean): void {
    if (this.lanes.get(conn.address) === conn) {
      this.lanes.delete(conn.address);
      this.unlisten(conn.address);
    }
    const dedicated = this.session.ctx.dedicated;
    conn.onPush = null;
    if (!graceful || conn.inflightCount === 0 || conn.state !== 'ready') return dedicated.release(conn, false);
    const done = () => dedicated.release(conn, false);
    conn.once('settled', done);
    conn.once('close', done);
  }

  /** Tracking off (OFF, RESET, close): every lane closed, opens under way closed when they finish. */
  close(graceful: boolean): void {
    this.closed = true;
    this.table?.forgetReader(this);
    for (const conn of [...this.lanes.values()]) this.drop(conn, graceful);
    for (const address of [...this.listeners.keys()]) this.unlisten(address);
    this.caching = null;
    this.current = null;
  }

  /**
   * Called for every command of a tracking client before dispatch: follows a protocol change,
   * and decides whether a pending CLIENT CACHING applies to this command (`current`) — Valkey
   * clears its flag after any command but CLIENT ones, except between MULTI and EXEC/DISCARD.
   */
  noteCommand(command: string, inTransaction: boolean): void {
    this.everythingInvalidated = false;
    if (this.protocol !== this.session.state.protocol) {
      // HELLO changed the protocol: the lanes reply in the old one. New lanes open lazily.
      for (const conn of [...this.lanes.values()]) this.drop(conn, true);
      this.protocol = this.session.state.protocol;
      this.bcastComplete = null;
    }
    this.current = null;
    if (this.caching === null || command === 'client' || command.startsWith('client|') || command === 'multi') return;
    if (inTransaction && command !== 'exec' && command !== 'discard') return;
    this.current = this.caching;
    this.caching = null;
  }

  /** BCAST: every primary needs a lane (writes anywhere are broadcast); missing ones open in the background. */
  ensureBcast(): void {
    if (!this.options.bcast || this.closed) return;
    const ctx = this.session.ctx;
    const topology = ctx.router.topology();
    if (topology === null || topology === this.bcastComplete) return;
    let complete = true;
    const now = Date.now();
    for (const node of topology.primaries()) {
      if (this.lanes.has(node.address)) continue;
      complete = false;
      if (this.opening.has(node.address) || (this.retryAt.get(node.address) ?? 0) > now) continue;
      this.lane(node.host, node.port).catch((err: Error) => {
        this.retryAt.set(node.address, Date.now() + BCAST_RETRY_MS);
        ctx.log.debug({ node: node.address, error: err.message }, 'tracking lane (BCAST) not opened');
      });
    }
    if (complete) this.bcastComplete = topology;
  }

  /**
   * Sends one command on a lane (after the CACHING line that applies to it); its reply goes to
   * `done`. MOVED and ASK are followed on the new owner's lane, as the redirect follower decides (routing/redirect-follower.ts).
   */
  send(conn: LeasedConnection, raw: Buffer, caching: Buffer | null, command: string, done: (reply: Buffer) => void, redirects = 0): void {
    if (caching !== null) conn.send(caching, ignoreReply());
    conn.send(raw, {
      sentAt: 0,
      onReply: (frame) => {
        if (frame[0] === 0x2d && this.redirect(frame, conn, raw, caching, command, done, redirects)) return;
        done(Buffer.from(frame));
      },
      onLinkFailure: (error) => done(encodeError(error)),
    });
  }

  private redirect(frame: Buffer, conn: LeasedConnection, raw: Buffer, caching: Buffer | null, command: string, done: (reply: Buffer) => void, redirects: number): boolean {
    const step = this.session.ctx.router.redirects.step(frame, conn.address, redirects, command);
    if (step === null) return false;
    if (step.kind === 'limit') {
      done(step.error);
      return true;
    }
    this.lane(step.host, step.port).then(
      (next) => {
        if (step.kind === 'moved') return this.send(next, raw, caching, command, done, redirects + 1);
        // ASKING must come right before the command, and clears Valkey's CACHING flag: an OPTIN
        // read that cannot be tracked is followed by "forget everything" instead.
        next.send(ASKING, ignoreReply());
        this.send(next, raw, null, command, (reply) => {
          done(reply);
          if (caching !== null && this.options.optin && this.protocol === 3) this.session.push(INVALIDATE_ALL);
        }, redirects + 1);
      },
      (err: Error) => done(encodeError(err.message)),
    );
    return true;
  }
}
