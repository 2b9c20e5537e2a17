import calculateSlot from 'cluster-key-slot';
import { CommandFlag } from '../commands/command-flags.js';
import { refusalReason, type CommandFamily, CLIENT_COMMANDS, LOCAL_COMMANDS, MULTI_KEY_COMMANDS, TRACKING_COMMANDS } from '../commands/proxy-handling.js';
import { encodeArray, encodeCommand, encodeError, encodeSimple } from '../resp/encode.js';
import { splitAggregate } from '../resp/decode.js';
import { ProxyError } from '../errors.js';
import { blockItems, TransactionBlock, type BlockOutcome } from '../routing/transaction-block.js';
import { execSplit } from './cross-slot/transaction-split.js';
import { everyShard, execApart, runsApart } from './transaction-apart.js';
import { partsBySlot } from '../routing/slot-parts.js';
import type { ReplyEntry } from '../client/reply-queue.js';
import { localReply, NO_REPLY, parseDbIndex } from './local.js';
import { oneShotTo } from './script.js';
import { LOCAL_CLUSTER_COMMANDS } from './cluster.js';
import { publishNode, publishReply, refusesUnsubscribeUnsubscribed, unsubscribeNow } from './pubsub.js';
import { Transaction, type QueuedCommand } from '../client/transaction-state.js';
import { watchCrossSlotError } from './watch-lane.js';
import { WatchLane } from '../client/watch-lane.js';
import { keysRead, sendBlockOnTrackingLane } from './tracking.js';
import type { CommandRequest, Handler, HandlerSession } from '../client/handler-session.js';
import { execReplyNames } from '../keys/reply-names.js';

const OK = encodeSimple('OK');
const QUEUED = encodeSimple('QUEUED');

/**
 * MULTI, EXEC, DISCARD, WATCH, UNWATCH.
 *
 * Without WATCH a transaction needs no connection of its own: respool answers MULTI and each
 * +QUEUED itself (after Valkey's own queue-time checks: the command exists, its arity, its keys
 * in one slot, not a no-multi command), and at EXEC writes MULTI … EXEC as one block on the
 * shared link of the transaction's slot (nothing interleaves inside one write). The upstream's
 * +OK/+QUEUED are dropped; EXEC's reply is the client's. EXEC is never re-sent: a lost link
 * gives the client an error saying it may or may not have run.
 *
 * SELECT inside MULTI (standalone upstream): forwarded in the block, so the commands after it
 * run in its database as on Valkey; a last `SELECT <the link's database>` (its reply dropped
 * from EXEC's array) puts the shared link back before EXEC, and the client's database becomes,
 * once EXEC's reply is back, the one its last SELECT that ran switched to (a barrier: later
 * commands wait for EXEC's reply). In a cluster SELECT is respool's (only 0), answered at EXEC.
 */
export const transaction: Handler = (session, req) => {
  const state = session.state;
  switch (req.command) {
    case 'multi':
      state.transaction = new Transaction();
      return session.replyNow(OK);
    case 'exec':
      return session.replyNow(encodeError(ProxyError.execWithoutMulti()));
    case 'discard':
      return session.replyNow(encodeError(ProxyError.discardWithoutMulti()));
    case 'unwatch':
      return session.replyNow(OK); // nothing is watched outside a lease
    case 'watch':
      return watch(session, req);
  }
};

/**
 * WATCH opens the client's leased lane (watch-lane.ts): a connection of its own to the keys'
 * primary, held until EXEC, DISCARD, UNWATCH, RESET or close. Keys in several slots: CROSSSLOT.
 */
function watch(session: HandlerSession, req: CommandRequest): void {
  const ctx = session.ctx;
  if (ctx.isCluster() && spansSlots(req.args)) return session.replyNow(encodeError(watchCrossSlotError(session)));
  const slot = ctx.router.slotOf(req.spec, req.args, ctx.commands());
  if (typeof slot !== 'number') return session.replyNow(slot);
  const raw = Buffer.from(req.raw);
  const keys = req.args.map((a) => a.toString('latin1'));
  session.runExclusive(() => {
    const entry = session.reserve();
    const node = ctx.router.primaryFor(slot);
    if (node === undefined) return entry.fill(encodeError(ProxyError.slotNotServed(slot)));
    const state = session.state;
    ctx.dedicated.acquire(node.host, node.port, state.protocol, state.db, state.acl.upstream).then(
      (conn) => {
        if (session.closed) return ctx.dedicated.release(conn, true);
        const lane = new WatchLane(conn, session);
        for (let i = 1; i < keys.length; i++) lane.watched.add(keys[i]!);
        state.lane = lane;
        state.lease = { abandon: () => lane.end(false) };
        lane.send(raw, entry, (reply) => {
          if (reply[0] === 0x2d) lane.end(true); // WATCH refused (MOVED, …): nothing is watched
        });
      },
      (err: Error) => entry.fill(encodeError(err.message)),
    );
  });
}

/** WATCH's keys (args 1…) in a cluster hash to more than one slot. */
function spansSlots(args: readonly Buffer[]): boolean {
  const first = calculateSlot(args[1]!);
  for (let i = 2; i < args.length; i++) if (calculateSlot(args[i]!) !== first) return true;
  return false;
}

/**
 * Called for every request while the client is inside MULTI. Returns false for the commands
 * that are not queued (EXEC, DISCARD, QUIT, RESET: handled here or by their own family).
 */
export function queueInTransaction(session: HandlerSession, req: CommandRequest, family: CommandFamily): boolean {
  const tx = session.state.transaction!;
  const { spec, command, args } = req;
  if (command === 'exec') {
    session.state.transaction = null;
    if (session.ctx.runningScripts.longRunning().length > 0) whenNotBusy(session, (busy) => busy === null ? exec(session, tx) : session.replyNow(encodeError(ProxyError.execAbortBecause(errorLine(busy)))));
    else exec(session, tx);
    return true;
  }
  if (command === 'discard') {
    session.state.transaction = null;
    session.replyNow(OK);
    return true;
  }
  if (command === 'quit' || command === 'reset') return false;
  const refusal = queueTimeError(session, tx, req, family);
  if (refusal !== null) {
    tx.dirty = true;
    session.replyNow(encodeError(refusal));
    return true;
  }
  if (!(spec!.flags & CommandFlag.ALLOW_BUSY) && session.ctx.runningScripts.longRunning().length > 0) {
    // A script runs long somewhere: as on one busy server, a command queued now gets BUSY and
    // the transaction is aborted at EXEC.
    const copy: CommandRequest = { ...req, args: args.map((a) => Buffer.from(a)), raw: Buffer.from(req.raw) };
    whenNotBusy(session, (busy) => {
      if (busy === null) return queue(session, tx, copy, apartRun(session, copy, family));
      tx.dirty = true;
      session.replyNow(busy);
    });
    return true;
  }
  queue(session, tx, req, apartRun(session, req, family));
  return true;
}

/** How a whole-keyspace command runs at EXEC, apart from the block (transaction-apart.ts); undefined: in the block. */
function apartRun(session: HandlerSession, req: CommandRequest, family: CommandFamily): QueuedCommand['apart'] {
  if (!runsApart(session, family, req.command)) return undefined;
  return everyShard(session, { raw: Buffer.from(req.raw), args: req.args.map((a) => Buffer.from(a)), spec: req.spec!, command: req.command });
}

/**
 * Queues a command that runs apart from the block at EXEC, in its place (a namespace's FLUSHDB,
 * DBSIZE …: namespace-scope.ts). `req` is the caller's copy.
 */
export function queueApart(session: HandlerSession, req: CommandRequest, run: NonNullable<QueuedCommand['apart']>): void {
  queue(session, session.state.transaction!, req, run);
}

/**
 * Runs `then` with Valkey's BUSY error if a node is busy running a script (running-scripts.ts),
 * else null; later requests wait for it (the queue-time verdict and EXEC's must come in order).
 */
function whenNotBusy(session: HandlerSession, then: (busy: Buffer | null) => void): void {
  session.runExclusive(() => {
    const entry = session.reserve();
    session.ctx.runningScripts.busyReply((address) => oneShotTo(session, address)).then((busy) => {
      // `then` queues its replies behind this placeholder, which is then filled with nothing:
      // filled first, it would lift the barrier and let later requests (EXEC) in too early.
      then(busy);
      entry.fill(NO_REPLY);
    });
  });
}

function errorLine(reply: Buffer): string {
  return reply.toString('utf8', 1, reply.length - 2);
}

function queue(session: HandlerSession, tx: Transaction, req: CommandRequest, apart: QueuedCommand['apart']): void {
  const { command, args } = req;
  const raw = Buffer.from(req.raw);
  tx.bytes += raw.length;
  // Against a standalone upstream SELECT runs in the block (see the comment at the top).
  const select = command === 'select' && !session.ctx.isCluster();
  // respool's own commands (and UNSUBSCRIBE, whose state is respool's) are answered at EXEC.
  const local = (LOCAL_COMMANDS.has(command) && command !== 'ping' && command !== 'echo' && !select) || UNSUBSCRIBES.has(command) || CLIENT_COMMANDS.has(command) || LOCAL_CLUSTER_COMMANDS.has(command);
  let target: number | null | undefined;
  if (select) {
    const db = parseDbIndex(args[1]!);
    target = typeof db === 'number' ? db : null;
    tx.selects = true;
  }
  const split = splitParts(session, req);
  tx.queued.push({
    raw,
    command,
    slot: split === null ? keySlot(session, req) : split.parts[0]!.slot,
    split,
    localArgs: local ? args.map((a) => Buffer.from(a)) : null,
    channel: command === 'publish' ? Buffer.from(args[1]!) : undefined,
    select: target,
    replyNames: session.state.queuedReplyNames,
    writes: parkedKeysWritten(session, req),
    reads: session.state.tracking === null ? undefined : (keysRead(session, req) ?? undefined),
    apart,
  });
  session.replyNow(QUEUED);
}

/** A write's keys (copied) while clients are parked at respool, so that EXEC can serve them before it answers; else undefined. */
function parkedKeysWritten(session: HandlerSession, req: CommandRequest): Buffer[] | undefined {
  if (req.spec === undefined || (req.spec.flags & CommandFlag.WRITE) === 0 || !session.ctx.parking.waitingOnAny()) return undefined;
  return session.ctx.commands().keyIndexes(req.spec, req.args).map((i) => Buffer.from(req.args[i]!));
}

/** The slot of a queued command's keys in a cluster (queueTimeError checked they share one); -1 keyless. */
function keySlot(session: HandlerSession, req: CommandRequest): number {
  if (req.spec === undefined || !session.ctx.isCluster()) return -1;
  const keys = session.ctx.commands().keyIndexes(req.spec, req.args);
  return keys.length === 0 ? -1 : calculateSlot(req.args[keys[0]!]!);
}

/**
 * MGET, MSET, DEL, UNLINK, EXISTS, TOUCH whose keys span slots, in a cluster with
 * transactions.crossSlot split: one part per slot (cross-slot/multi-key.ts), each in its slot's block at
 * EXEC, their replies merged into the command's (cross-slot/transaction-split.ts). Null otherwise.
 */
function splitParts(session: HandlerSession, req: CommandRequest): QueuedCommand['split'] {
  const { spec, args } = req;
  if (spec === undefined || !MULTI_KEY_COMMANDS.has(spec.name) || !splitsTransactions(session)) return null;
  const keys = session.ctx.commands().keyIndexes(spec, args);
  if (keys.length < 2) return null;
  const parts = partsBySlot(spec.name, args, keys);
  return parts.length > 1 ? { keys, parts } : null;
}

function splitsTransactions(session: HandlerSession): boolean {
  return session.ctx.isCluster() && session.ctx.config.transactions.crossSlot === 'split' && session.state.tracking === null;
}

/** Pub/sub commands that are ordinary commands upstream, fine inside a transaction. */
const QUEUEABLE_PUBSUB: ReadonlySet<string> = new Set(['publish', 'pubsub|numsub', 'pubsub|numpat', 'pubsub|channels', 'unsubscribe', 'punsubscribe', 'sunsubscribe']);
/** Answered by respool at EXEC (its confirmations become their elements of EXEC's array). */
const UNSUBSCRIBES: ReadonlySet<string> = new Set(['unsubscribe', 'punsubscribe', 'sunsubscribe']);

/**
 * What respool refuses to queue, after admission (admission.ts: unknown command, arity, no-multi,
 * answered by dispatch) and the ACL: what it cannot carry in one block on a shared link.
 */
function queueTimeError(session: HandlerSession, tx: Transaction, req: CommandRequest, family: CommandFamily): string | null {
  const { args } = req;
  const spec = req.spec!;
  if (TRACKING_COMMANDS.has(spec.name)) return ProxyError.trackingInMulti(spec.name);
  // What respool holds for the client (subscriptions, MONITOR's leases) or refuses outright must
  // not reach a shared link inside MULTI … EXEC.
  if (UNSUBSCRIBES.has(spec.name) && (session.state.subscriptions?.total() ?? 0) === 0 && refusesUnsubscribeUnsubscribed(session.ctx)) {
    return ProxyError.notSubscribed(spec.name as 'unsubscribe');
  }
  if (family === 'pubsub' && !QUEUEABLE_PUBSUB.has(spec.name)) return ProxyError.notQueueable(spec.name, 'subscriptions are respool\'s, not the shared link\'s');
  if (family === 'monitor') return ProxyError.notQueueable(spec.name, 'MONITOR is a mode of the client, not a command a transaction runs');
  if (family === 'refused') return ProxyError.refused(spec.name, refusalReason(spec) ?? '');
  if (family === 'cluster' && !LOCAL_CLUSTER_COMMANDS.has(spec.name)) return ProxyError.notQueueable(spec.name, "it runs on its slot's owner, not where the transaction runs");
  const limit = session.ctx.config.limits.maxQueryBytesPerClient;
  if (tx.bytes + req.raw.length > limit) return ProxyError.transactionTooLarge(limit);
  if (spec.name === 'select' && session.state.tracking !== null && !session.ctx.isCluster()) {
    const db = parseDbIndex(args[1]!);
    if (typeof db === 'number' && db !== session.state.db) return ProxyError.selectWhileTracking();
  }
  if (session.ctx.isCluster()) {
    const keys = session.ctx.commands().keyIndexes(spec, args);
    if (keys.length > 0) {
      const slot = calculateSlot(args[keys[0]!]!);
      let spans = false;
      for (let i = 1; i < keys.length; i++) if (calculateSlot(args[keys[i]!]!) !== slot) spans = true;
      // A multi-key command over several slots is split into its slots' blocks (splitParts).
      if (spans && !(MULTI_KEY_COMMANDS.has(spec.name) && splitsTransactions(session))) return ProxyError.crossSlot();
      const hook = session.ctx.router.keyedHook;
      for (const k of spans ? keys : [keys[0]!]) {
        const refusal = hook?.refuseInTransaction(args, spans ? [k] : keys, spans ? calculateSlot(args[k]!) : slot, req.command) ?? null;
        if (refusal !== null) return refusal;
      }
      if (spans) tx.crossSlot = true;
      if (tx.slot < 0) tx.slot = slot;
      else if (tx.slot !== slot) tx.crossSlot = true;
    }
  }
  return null;
}

function exec(session: HandlerSession, tx: Transaction): void {
  const ctx = session.ctx;
  // Valkey's cluster check at EXEC comes before EXECABORT; split, the transaction is one server's.
  if (tx.crossSlot && ctx.config.transactions.crossSlot === 'refuse') {
    ctx.metrics?.crossSlotTransactions.refused.inc();
    return session.replyNow(encodeError(ProxyError.crossSlot()));
  }
  if (tx.dirty) return session.replyNow(encodeError(ProxyError.execAbort()));
  tx.slowLogMark = ctx.observer?.logs.slow.mark() ?? null;
  const forwarded = tx.queued.filter((q) => q.localArgs === null);
  // The commands EXEC ran count as the client's (tot-cmds), as Valkey counts each one it calls.
  const ran = (reply: Buffer): Buffer => {
    session.state.execRan(reply);
    return execReplyNames(tx.queued.map((q) => q.replyNames), reply); // a popped key, KEYS, SCAN … as the client's (keys/reply-names.ts)
  };
  if (forwarded.length === 0) {
    // Nothing for the upstream (empty, or only respool's own commands): answer here.
    session.replyNow(ran(spliceLocalReplies(session, tx, [])));
    return;
  }
  ctx.metrics?.commandCounter('exec').inc();
  const lanes = session.state.tracking;
  // Whole-keyspace commands in a cluster run on every shard, each in its place (transaction-apart.ts);
  // later requests wait for EXEC's reply, as the pieces leave one after another.
  if (forwarded.some((q) => q.apart !== undefined)) {
    if (tx.selects) return session.replyNow(encodeError(ProxyError.respool('SELECT and a namespace\'s FLUSHDB, DBSIZE … cannot share a transaction: send them in transactions of their own')));
    if (tx.crossSlot) return session.replyNow(encodeError(ProxyError.respool('a transaction split by slot cannot also run a whole-keyspace command (FLUSHALL, DBSIZE, KEYS …) on every shard: send it in a transaction of its own')));
    return session.runExclusive(() => {
      const entry = session.reserve();
      execApart(session, tx, forwarded, (replies) => entry.fill(Buffer.isBuffer(replies) ? replies : ran(spliceLocalReplies(session, tx, replies))));
    });
  }
  if (tx.crossSlot) {
    if (lanes !== null) return session.replyNow(encodeError(ProxyError.crossSlotTransactionTracking()));
    ctx.metrics?.crossSlotTransactions.split.inc();
    return execSplit(session, forwarded, (replies) => ran(spliceLocalReplies(session, tx, replies)));
  }
  const commands = forwarded.map((q) => q.raw);
  // The database of the links the block goes on is the client's (a tracking lane's: 0): a last
  // SELECT puts the link back there (see the comment at the top).
  if (tx.selects) commands.push(encodeCommand(['SELECT', String(session.state.db)]));
  // Writes to keys clients are parked on: EXEC answers once they are served, as Valkey serves its
  // blocked clients before it answers the EXEC that fed them (parking/parked-pops.ts).
  const written = tx.selects ? [] : forwarded.flatMap((q) => q.writes ?? []);
  const db = session.state.db;
  const finish = (entry: ReplyEntry, outcome: BlockOutcome): void => {
    const reply = ran(execReply(session, tx, forwarded, outcome));
    if (written.length > 0 && outcome.kind === 'reply' && outcome.reply[0] === 0x2a /* ran */) ctx.parking.afterServing(db, written, () => entry.fill(reply));
    else entry.fill(reply);
  };
  // CLIENT TRACKING on: the block runs on the client's lane for its slot (reads in it are tracked).
  if (lanes !== null) return sendBlockOnTrackingLane(session, lanes, tx.slot, forwarded.flatMap((q) => q.reads ?? []), (entry) => blockItems(commands, '', (o) => finish(entry, o)));
  const send = (): void => {
    const entry = session.reserve();
    // A keyless transaction that publishes runs where respool's subscriptions are held, so its
    // PUBLISH counts can be given as one server would (handlers/pubsub.ts).
    const publishAt = tx.slot < 0 && forwarded.some((q) => q.command === 'publish') ? publishNode(session) : undefined;
    tx.publishCounts = publishAt !== undefined;
    if (publishAt !== undefined) return void ctx.router.send({ to: 'block', client: session, node: publishAt, items: blockItems(commands, publishAt.address, (o) => finish(entry, o)) });
    new TransactionBlock(ctx.router, session, tx.slot, commands, (o) => finish(entry, o)).send();
  };
  // A SELECT inside: later commands wait for EXEC's reply, which says the client's database.
  if (tx.selects) session.runExclusive(send);
  else send();
}

/**
 * The client's EXEC reply from its block's outcome. The node queues the commands only at EXEC,
 * so a check that Valkey makes at EXEC for commands queued earlier (NOREPLICAS, OOM, READONLY …
 * after a state change) fails here at queue time instead: EXEC then says "previous errors", and
 * the first such error is the reason Valkey would give ("EXECABORT … because of: <error>").
 */
function execReply(session: HandlerSession, tx: Transaction, forwarded: readonly QueuedCommand[], outcome: BlockOutcome): Buffer {
  if (outcome.kind === 'failed') return encodeError(outcome.error);
  const frame = outcome.reply;
  if (outcome.queueError !== null && frame.toString('latin1', 1, 10) === 'EXECABORT') return encodeError(ProxyError.execAbortBecause(outcome.queueError));
  const reply = tx.selects ? afterSelects(session, forwarded, frame) : frame;
  return tx.queued.length !== forwarded.length || tx.publishCounts ? withLocalReplies(session, tx, reply) : reply;
}

/**
 * EXEC's reply to a block with SELECTs in it: the client is now in the database of the last
 * SELECT that ran (+OK in its element), and the last element — the SELECT that put the link
 * back — is dropped. An error or nil: nothing ran, nothing changes.
 */
function afterSelects(session: HandlerSession, forwarded: readonly QueuedCommand[], frame: Buffer): Buffer {
  const parts = frame[0] === 0x2a /* * */ ? splitAggregate(frame) : null;
  if (parts === null || parts.length !== forwarded.length + 1) return frame;
  let db = -1;
  forwarded.forEach((q, i) => {
    if (q.select !== undefined && q.select !== null && parts[i]![0] === 0x2b /* + */) db = q.select;
  });
  if (db >= 0) session.state.select(db);
  return encodeArray(parts.slice(0, -1));
}

/** EXEC's array from the upstream, with respool's own commands' replies put back in their places. */
function withLocalReplies(session: HandlerSession, tx: Transaction, frame: Buffer): Buffer {
  const upstream = frame[0] === 0x2a /* * */ ? splitAggregate(frame) : null;
  if (upstream === null) return frame; // an error or nil: nothing ran
  return spliceLocalReplies(session, tx, upstream);
}

function spliceLocalReplies(session: HandlerSession, tx: Transaction, upstream: Buffer[]): Buffer {
  // What the upstream counted for PUBLISH included respool's own subscriptions as they were when
  // EXEC ran, before any UNSUBSCRIBE of this transaction is applied below.
  const countedUpstream = tx.queued.map((q) => (q.channel !== undefined ? session.ctx.pubsub.countsFor(q.channel).upstream : 0));
  const out: Buffer[] = [];
  let next = 0;
  const splice = () => tx.queued.forEach((q, i) => {
    if (q.localArgs === null) {
      const reply = Buffer.from(upstream[next++]!);
      out.push(tx.publishCounts && q.channel !== undefined ? publishReply(session, q.channel, reply, countedUpstream[i]) : reply);
    } else if (UNSUBSCRIBES.has(q.command)) {
      out.push(unsubscribeNow(session, q.command as 'unsubscribe', q.localArgs.slice(1)).frame);
    } else {
      const reply = localReply(session, q.command, q.localArgs);
      out.push(reply === NO_REPLY ? OK : reply); // CLIENT REPLY inside MULTI still takes its place
    }
  });
  const slow = session.ctx.observer?.logs.slow;
  if (slow !== undefined && tx.slowLogMark !== null) slow.resetsBefore(tx.slowLogMark, splice);
  else splice();
  return encodeArray(out);
}

export type { ReplyEntry };
