import { encodeCommand, encodeError, encodeInteger, encodeSimple } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import { parseRedirect } from '../routing/redirect.js';
import type { Topology } from '../cluster/topology.js';
import type { CommandFamily } from '../commands/proxy-handling.js';
import type { LinkRequest } from '../upstream/link.js';
import type { DedicatedConnection } from '../upstream/dedicated-connection.js';
import type { ReplyEntry } from '../session/reply-queue.js';
import type { CommandRequest, Handler, HandlerSession } from './types.js';
import { keyed } from './keyed.js';
import { allShards } from './all-shards.js';
import { deliverInvalidation, encodeTrackingLine, redirBrokenPush, rewriteTrackingInfo, type TrackingLine } from './tracking-redirect.js';

/**
 * CLIENT TRACKING (client-side caching) with invalidations delivered as RESP3 pushes on the
 * client's own connection. Keys are tracked per upstream connection, so a tracking client gets
 * connections of its own: one leased connection ("lane") per node it touches, each sent the
 * client's tracking options first; the lanes' `invalidate` pushes are the client's pushes.
 *
 *   opened by : CLIENT TRACKING ON [BCAST] [PREFIX p …] [OPTIN|OPTOUT] [NOLOOP] — a lease to one
 *               primary (every primary with BCAST), sent the client's own line: Valkey validates
 *               the options, its reply is the client's (an error drops the lanes). More lanes
 *               open lazily, sent the accumulated options, when a command needs another node; a
 *               BCAST client also gets lanes to primaries that appear later (in the background).
 *               A later ON goes to every lane (Valkey's checks against the current state).
 *   commands  : while tracking is on, keyed, keyless, script and multi-key commands go on the
 *               lane of the primary owning their slot (any lane for keyless ones), in order;
 *               opening a lane is a lane switch (runExclusive). MOVED/ASK are followed on the
 *               new owner's lane. Read strategies and split hot keys do not apply (a split key
 *               is refused: its copies would be neither written nor tracked); keys of several
 *               slots are CROSSSLOT (no splitting). MULTI … EXEC held by respool runs on the lane
 *               of its slot (transaction.ts), so reads inside it are tracked as on Valkey.
 *               Commands that keep their own paths: local ones (respool answers), blocking
 *               commands and WATCH … EXEC (their own leases: reads there are not tracked, and
 *               NOLOOP does not cover their writes), pub/sub, MONITOR; whole-data-set commands
 *               (KEYS, SCAN, DBSIZE, FLUSHALL … in a cluster) go on shared links after the
 *               client's earlier replies (barrier), as they read no keys Valkey would track.
 *   CACHING   : CLIENT CACHING YES|NO is checked here with Valkey's texts and remembered; it is
 *               sent on the lane just before the client's next command (dropped reply), and
 *               consumed by that command as Valkey's tracking_caching flag is (CLIENT commands
 *               and commands queued inside MULTI keep it for the next one / for EXEC).
 *   closed by : CLIENT TRACKING OFF (after earlier replies: barrier), RESET (once each lane's
 *               outstanding replies came back), the client's close, a protocol change (HELLO:
 *               the lanes speak the old protocol; new ones open lazily). Lanes are always closed,
 *               never reused: their tracking state is not reusable.
 *   lane lost : its in-flight commands fail; the client gets `invalidate` with a null key list
 *               (Valkey's "flush everything", as after FLUSHALL) since keys tracked there would
 *               no longer be invalidated; the next command to that node opens a new lane.
 *   RESP2     : tracking works (Valkey tracks the keys) but, as on Valkey without REDIRECT,
 *               no invalidation reaches a RESP2 connection.
 *   REDIRECT  : to a respool client id; each lane gets a listener connection on its node and
 *               is sent REDIRECT <listener's id>; the listener's pushes go to the respool client
 *               as Valkey would send them (tracking-redirect.ts).
 *   bounds    : the dedicated pool's (dedicated.maxPerNode, maxTotal, acquireTimeoutMs); each
 *               lane's oldest outstanding command may wait timeouts.commandMs; pushes count
 *               against pubsub.maxOutputBytesPerClient like pub/sub messages.
 */
export const tracking: Handler = (session, req) => {
  const spec = req.spec!;
  const n = req.args.length;
  if ((spec.arity > 0 && spec.arity !== n) || n < -spec.arity) return session.replyNow(encodeError(ProxyError.wrongArity(req.command)));
  switch (req.command) {
    case 'client|tracking':
      return clientTracking(session, req);
    case 'client|caching':
      return clientCaching(session, req);
    case 'client|getredir':
      // The respool id given to REDIRECT (0 without one) while tracking is on, -1 otherwise (as Valkey).
      return session.replyNow(session.state.tracking === null ? MINUS_ONE : encodeInteger(session.state.tracking.redirectTo));
    case 'client|trackinginfo':
      return trackingInfo(session, req);
    default:
      return session.replyNow(encodeError(ProxyError.notLocal(req.command)));
  }
};

const OK = encodeSimple('OK');
const MINUS_ONE = encodeInteger(-1);
const ASKING = encodeCommand(['ASKING']);
const PING = encodeCommand(['PING']);
const TRACKINGINFO = encodeCommand(['CLIENT', 'TRACKINGINFO']);
const CLIENT_ID = encodeCommand(['CLIENT', 'ID']);
const CACHING_YES = encodeCommand(['CLIENT', 'CACHING', 'yes']);
const CACHING_NO = encodeCommand(['CLIENT', 'CACHING', 'no']);
/** Valkey's invalidation after FLUSHALL (tracking.c): a null key list = forget every key. */
const INVALIDATE_ALL = Buffer.from('>2\r\n$10\r\ninvalidate\r\n_\r\n');
/** How long a BCAST client waits before trying again a lane to a primary that could not be opened. */
const BCAST_RETRY_MS = 1000;

/** Families that keep their own paths while tracking is on (see the class comment). */
const OWN_PATHS: ReadonlySet<CommandFamily> = new Set(['local', 'info', 'transaction', 'blocking', 'monitor', 'pubsub', 'refused', 'tracking', 'allShards', 'clients', 'cluster']);

export interface TrackingOptions {
  bcast: boolean;
  optin: boolean;
  optout: boolean;
  noloop: boolean;
  prefixes: Buffer[];
}

/**
 * CLIENT TRACKING ON|OFF [REDIRECT id] [BCAST] [PREFIX p …] [OPTIN] [OPTOUT] [NOLOOP], parsed in
 * Valkey's order (networking.c clientCommand): a syntax error where Valkey finds one; REDIRECT's
 * id must name a respool client that exists now (`exists`). The checks between options are
 * Valkey's (on a lane).
 */
export function parseTracking(
  args: readonly Buffer[],
  exists: (id: number) => boolean,
): { on: boolean; options: TrackingOptions; redirect: number; line: TrackingLine } | { error: string } {
  const options: TrackingOptions = { bcast: false, optin: false, optout: false, noloop: false, prefixes: [] };
  let redirect = 0;
  let redirectAt = -1;
  for (let j = 3; j < args.length; j++) {
    const more = args.length - 1 - j > 0;
    const option = args[j]!.toString('latin1').toLowerCase();
    if (option === 'redirect' && more) {
      j++;
      if (redirect !== 0) return { error: ProxyError.trackingRedirectTwice() };
      const text = args[j]!.toString('latin1');
      if (!/^-?\d{1,19}$/.test(text) || !Number.isSafeInteger(Number(text))) return { error: ProxyError.notAnInteger() };
      redirect = Number(text);
      redirectAt = j;
      if (!exists(redirect)) return { error: ProxyError.trackingRedirectNoClient() };
    } else if (option === 'bcast') options.bcast = true;
    else if (option === 'optin') options.optin = true;
    else if (option === 'optout') options.optout = true;
    else if (option === 'noloop') options.noloop = true;
    else if (option === 'prefix' && more) options.prefixes.push(Buffer.from(args[++j]!));
    else return { error: ProxyError.syntax() };
  }
  const mode = args[2]!.toString('latin1').toLowerCase();
  if (mode !== 'on' && mode !== 'off') return { error: ProxyError.syntax() };
  return { on: mode === 'on', options, redirect, line: { args: args.map((a) => Buffer.from(a)), redirectAt } };
}

function ignored(): LinkRequest {
  return { sentAt: 0, onReply() {}, onLinkFailure() {} };
}

/** One request on a lane, its reply copied; rejects when the lane fails first. */
function request(conn: DedicatedConnection, raw: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    conn.send(raw, { sentAt: 0, onReply: (frame) => resolve(Buffer.from(frame)), onLinkFailure: (error) => reject(new Error(error)) });
  });
}

/** The error line of an error reply, without "-" and CRLF. */
function errorText(reply: Buffer): string {
  return reply.toString('utf8', 1, reply.length - 2);
}

/** A tracking client's lanes: one leased connection per node, all in the same tracking mode. */
export class TrackingLanes {
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
  private readonly lanes = new Map<string, DedicatedConnection>();
  /** Per node address: the connection a redirecting lane sends its invalidations to, and its upstream id. */
  private readonly listeners = new Map<string, { conn: DedicatedConnection; id: number }>();
  private readonly opening = new Map<string, Promise<DedicatedConnection>>();
  private closed = false;
  /** BCAST: the topology whose every primary has a lane (null: check again). */
  private bcastComplete: Topology | null = null;
  private readonly retryAt = new Map<string, number>();

  constructor(
    private readonly session: HandlerSession,
    options: TrackingOptions,
    redirect: number,
  ) {
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
      // An empty prefix means every key: Valkey registers "" for BCAST without PREFIX too.
      if (![...this.prefixes.values()].some((p) => p.length === 0)) for (const p of this.prefixes.values()) push('PREFIX', p);
    }
    if (o.optin) push('OPTIN');
    if (o.optout) push('OPTOUT');
    if (o.noloop) push('NOLOOP');
    return { args, redirectAt };
  }

  /** `line` as this lane must receive it (REDIRECT to the lane's listener, opened if needed). */
  async lineFor(conn: DedicatedConnection, line: TrackingLine): Promise<Buffer> {
    if (line.redirectAt < 0) return encodeTrackingLine(line, null);
    return encodeTrackingLine(line, await this.listen(conn.host, conn.port, conn.address));
  }

  /** The open lane to this node, if any. */
  ready(address: string): DedicatedConnection | undefined {
    return this.lanes.get(address);
  }

  /** Any open lane (keyless commands). */
  anyLane(): DedicatedConnection | undefined {
    for (const conn of this.lanes.values()) return conn;
    return undefined;
  }

  openLanes(): DedicatedConnection[] {
    return [...this.lanes.values()];
  }

  /** Lanes being opened now (a later ON waits for them, so it reaches them too). */
  pendingOpens(): Array<Promise<unknown>> {
    return [...this.opening.values()];
  }

  /** The lane to host:port: open, being opened (the same promise), or opened now with `first` (default: onLine()). */
  lane(host: string, port: number, first?: TrackingLine): Promise<DedicatedConnection> {
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

  private async open(host: string, port: number, address: string, first: TrackingLine): Promise<DedicatedConnection> {
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
      if (this.redirectTo === 0 && this.session.state.protocol === 3) this.session.push(Buffer.from(frame));
    };
    conn.once('close', () => this.lost(address, conn));
    this.lanes.set(address, conn);
    this.retryAt.delete(address);
    return conn;
  }

  /** A lane closed under the client: keys tracked there can no longer be invalidated. */
  private lost(address: string, conn: DedicatedConnection): void {
    if (this.lanes.get(address) !== conn) return; // closed by respool
    this.lanes.delete(address);
    this.unlisten(address);
    this.bcastComplete = null;
    this.session.ctx.dedicated.release(conn, false);
    this.session.ctx.log.debug({ node: address, reason: conn.closeReason }, 'tracking lane lost');
    if (this.closed) return;
    if (this.redirectTo !== 0) this.invalidation(INVALIDATE_ALL);
    else if (this.protocol === 3 && this.session.state.protocol === 3) this.session.push(INVALIDATE_ALL);
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
    conn.onPush = (frame) => this.invalidation(frame);
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

  /** An invalidation for a redirecting client: to its target, or "redirect broken" (tracking-redirect.ts). */
  private invalidation(push: Buffer): void {
    if (this.closed || this.redirectTo === 0) return;
    if (deliverInvalidation(this.session.ctx.sessionById(this.redirectTo), push)) return;
    this.brokenRedirect = true;
    if (this.session.state.protocol === 3) this.session.push(redirBrokenPush(this.redirectTo));
  }

  /** Closes a lane the client leaves; `graceful`: once its outstanding replies came back. */
  drop(conn: DedicatedConnection, graceful: boolean): void {
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
   * `done`. MOVED and ASK are followed on the new owner's lane within cluster.maxRedirects.
   */
  send(conn: DedicatedConnection, raw: Buffer, caching: Buffer | null, command: string, done: (reply: Buffer) => void, redirects = 0): void {
    if (caching !== null) conn.send(caching, ignored());
    conn.send(raw, {
      sentAt: 0,
      onReply: (frame) => {
        if (frame[0] === 0x2d && this.redirect(frame, conn, raw, caching, command, done, redirects)) return;
        done(Buffer.from(frame));
      },
      onLinkFailure: (error) => done(encodeError(error)),
    });
  }

  private redirect(frame: Buffer, conn: DedicatedConnection, raw: Buffer, caching: Buffer | null, command: string, done: (reply: Buffer) => void, redirects: number): boolean {
    const redirect = parseRedirect(frame);
    if (redirect === null || (redirect.kind !== 'moved' && redirect.kind !== 'ask')) return false;
    const ctx = this.session.ctx;
    const max = ctx.config.cluster.maxRedirects;
    if (redirects >= max) {
      done(encodeError(ProxyError.tooManyRedirects(command, max)));
      return true;
    }
    if (redirect.kind === 'moved') ctx.router.learnRedirect(frame, conn.address);
    else ctx.metrics?.redirectCounter('ask').inc();
    const host = redirect.host || conn.host;
    this.lane(host, redirect.port).then(
      (next) => {
        if (redirect.kind === 'moved') return this.send(next, raw, caching, command, done, redirects + 1);
        // ASKING must come right before the command, and clears Valkey's CACHING flag: an OPTIN
        // read that cannot be tracked is followed by "forget everything" instead.
        next.send(ASKING, ignored());
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

/**
 * Every request of a tracking client (dispatch, after the session modes): true when it went on a
 * lane (or waits for one); false when its family keeps its own path.
 */
export function onTrackingLane(session: HandlerSession, lanes: TrackingLanes, req: CommandRequest, family: CommandFamily): boolean {
  const ctx = session.ctx;
  if (family === 'allShards' && ctx.isCluster() && req.spec !== undefined) {
    // Fan-out on shared links, once the lanes have answered everything before it (order).
    const copy: CommandRequest = { ...req, args: req.args.map((a) => Buffer.from(a)), raw: Buffer.from(req.raw) };
    session.runExclusive(() => allShards(session, copy));
    return true;
  }
  if (OWN_PATHS.has(family) && family !== 'allShards') return false;
  const slot = ctx.router.slotOf(req.spec, req.args, ctx.commands());
  if (typeof slot !== 'number') {
    session.replyNow(slot);
    return true;
  }
  const hook = ctx.router.keyedHook;
  if (slot >= 0 && hook !== null && req.spec !== undefined) {
    const keys = ctx.commands().keyIndexes(req.spec, req.args);
    if (hook.refuseInTransaction(req.args, keys, slot, req.command) !== null) {
      session.replyNow(encodeError(ProxyError.trackingSplitKey(req.command)));
      return true;
    }
  }
  lanes.ensureBcast();
  ctx.metrics?.commandCounter(req.command).inc();
  const caching = lanes.current;
  const raw = Buffer.from(req.raw);
  const command = req.command;
  onLaneFor(session, lanes, slot, (conn, entry) => lanes.send(conn, raw, caching, command, (reply) => entry.fill(reply)));
  return true;
}

/**
 * Runs `use` with the lane for `slot` (the slot's primary; any lane for -1) and a new reply
 * entry: at once when the lane is open, else as a lane switch (later requests wait).
 */
function onLaneFor(session: HandlerSession, lanes: TrackingLanes, slot: number, use: (conn: DedicatedConnection, entry: ReplyEntry) => void): void {
  const ctx = session.ctx;
  let conn = slot < 0 ? lanes.anyLane() : undefined;
  let node = conn === undefined ? ctx.router.primaryFor(slot) : undefined;
  if (conn === undefined) {
    if (node === undefined) return session.replyNow(encodeError(slot < 0 ? ProxyError.topologyUnknown() : ProxyError.slotNotServed(slot)));
    conn = lanes.ready(node.address);
  }
  if (conn !== undefined) return use(conn, session.reserve());
  const target = node!;
  session.runExclusive(() => {
    const entry = session.reserve();
    lanes.lane(target.host, target.port).then(
      (c) => use(c, entry),
      (err: Error) => entry.fill(encodeError(err.message)),
    );
  });
}

/**
 * MULTI … EXEC held by respool, for a tracking client: the block goes on the lane of its slot
 * (after the CACHING line that applies to EXEC), so reads inside it are tracked. `items` builds
 * the block for the entry that EXEC's reply fills.
 */
export function sendBlockOnTrackingLane(session: HandlerSession, lanes: TrackingLanes, slot: number, items: (entry: ReplyEntry) => ReadonlyArray<{ data: Buffer; req: LinkRequest }>): void {
  const caching = lanes.current;
  lanes.ensureBcast();
  onLaneFor(session, lanes, slot, (conn, entry) => {
    if (caching !== null) conn.send(caching, ignored());
    for (const { data, req } of items(entry)) conn.send(data, req);
  });
}

/** CLIENT TRACKING ON|OFF … */
function clientTracking(session: HandlerSession, req: CommandRequest): void {
  const parsed = parseTracking(req.args, (id) => session.ctx.sessionById(id) !== undefined);
  if ('error' in parsed) return session.replyNow(encodeError(parsed.error));
  const state = session.state;
  const current = state.tracking;
  if (!parsed.on) {
    if (current === null) return session.replyNow(OK); // as Valkey: OFF when off is fine
    // After the lanes answered everything before it; its state is gone with the connections.
    return session.runExclusive(() => {
      current.close(false);
      if (state.tracking === current) state.tracking = null;
      session.replyNow(OK);
    });
  }
  const ctx = session.ctx;
  session.runExclusive(() => {
    const entry = session.reserve();
    if (current === null) {
      // First ON: a lane per primary with BCAST, else one lane (any primary). Each is sent the
      // client's own line; Valkey's verdict is the reply, and an error leaves tracking off.
      const lanes = new TrackingLanes(session, parsed.options, parsed.redirect);
      const topology = ctx.router.topology();
      const any = ctx.router.primaryFor(-1);
      const nodes = topology === null ? [] : parsed.options.bcast ? topology.primaries() : any === undefined ? [] : [any];
      if (nodes.length === 0) return entry.fill(encodeError(ProxyError.topologyUnknown()));
      Promise.all(nodes.map((n) => lanes.lane(n.host, n.port, parsed.line))).then(
        () => {
          if (session.closed) return lanes.close(false);
          state.tracking = lanes;
          entry.fill(OK);
        },
        (err: Error) => {
          lanes.close(false);
          entry.fill(encodeError(err.message));
        },
      );
      return;
    }
    // Tracking already on: the line goes to every lane (Valkey checks it against their state).
    void (async () => {
      await Promise.allSettled(current.pendingOpens());
      if (current.laneCount === 0) {
        const node = ctx.router.primaryFor(-1);
        if (node === undefined) return entry.fill(encodeError(ProxyError.topologyUnknown()));
        try {
          await current.lane(node.host, node.port);
        } catch (err) {
          return entry.fill(encodeError((err as Error).message));
        }
      }
      const conns = current.openLanes();
      const replies = await Promise.all(conns.map(async (c) => request(c, await current.lineFor(c, parsed.line)).catch((err: Error) => encodeError(err.message))));
      const accepted = replies[0]![0] !== 0x2d;
      if (accepted) current.accept(parsed.options, parsed.redirect);
      // A lane that answered differently from the first no longer shares the client's state.
      replies.forEach((r, i) => {
        if ((r[0] !== 0x2d) !== accepted) current.drop(conns[i]!, false);
      });
      entry.fill(replies[0]!);
    })();
  });
}

/** CLIENT CACHING YES|NO: Valkey's checks (networking.c), then remembered for the next command. */
function clientCaching(session: HandlerSession, req: CommandRequest): void {
  const lanes = session.state.tracking;
  if (lanes === null) return session.replyNow(encodeError(ProxyError.cachingNotTracking()));
  const option = req.args[2]!.toString('latin1').toLowerCase();
  if (option === 'yes') {
    if (!lanes.options.optin) return session.replyNow(encodeError(ProxyError.cachingYesNotOptin()));
    lanes.caching = CACHING_YES;
  } else if (option === 'no') {
    if (!lanes.options.optout) return session.replyNow(encodeError(ProxyError.cachingNoNotOptout()));
    lanes.caching = CACHING_NO;
  } else {
    return session.replyNow(encodeError(ProxyError.syntax()));
  }
  session.replyNow(OK);
}

/**
 * CLIENT TRACKINGINFO: tracking off → any node's answer on a shared link (tracking is off there
 * too); on → a lane's, which holds the client's tracking state (a pending CACHING is shown as
 * Valkey shows it, then cleared on the lane with a PING so it applies to nothing else).
 */
function trackingInfo(session: HandlerSession, req: CommandRequest): void {
  const lanes = session.state.tracking;
  if (lanes === null) return keyed(session, req);
  const caching = lanes.caching;
  onLaneFor(session, lanes, -1, (conn, entry) => {
    if (caching !== null) conn.send(caching, ignored());
    conn.send(TRACKINGINFO, {
      sentAt: 0,
      onReply: (frame) => entry.fill(rewriteTrackingInfo(Buffer.from(frame), lanes.redirectTo, lanes.brokenRedirect)),
      onLinkFailure: (error) => entry.fill(encodeError(error)),
    });
    if (caching !== null) conn.send(PING, ignored());
  });
}
