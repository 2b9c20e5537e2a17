import calculateSlot from 'cluster-key-slot';
import { wrongArity } from '../commands/command-table.js';
import { encodeError } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import { ClientSubscriptions, keyName, nameKey } from '../pubsub/client-subscriptions.js';
import { encodeConfirmation, type ConfirmationKind } from '../pubsub/replies.js';
import type { Subscriber, SubscriptionKind } from '../pubsub/hub.js';
import { refused } from './refused.js';
import { keyed } from './keyed.js';
import { encodeArray, encodeInteger } from '../resp/encode.js';
import { splitAggregate } from '../resp/decode.js';
import type { CallOwner } from '../routing/upstream-call.js';
import type { ClusterNode } from '../cluster/topology.js';
import type { CommandRequest, Handler, HandlerSession } from '../client/handler-session.js';
import type { ReplyEntry } from '../client/reply-queue.js';
import { catchesNotifications, clientMessages, clientShardChannel, notificationPatterns, storedChannelName } from '../keys/channel-names.js';

interface Operation {
  readonly kind: SubscriptionKind;
  /** The confirmation's kind word, which is also the command's name. */
  readonly confirm: ConfirmationKind;
  readonly subscribe: boolean;
}

const OPERATIONS: Readonly<Record<string, Operation>> = {
  subscribe: { kind: 'channel', confirm: 'subscribe', subscribe: true },
  psubscribe: { kind: 'pattern', confirm: 'psubscribe', subscribe: true },
  ssubscribe: { kind: 'shard', confirm: 'ssubscribe', subscribe: true },
  unsubscribe: { kind: 'channel', confirm: 'unsubscribe', subscribe: false },
  punsubscribe: { kind: 'pattern', confirm: 'punsubscribe', subscribe: false },
  sunsubscribe: { kind: 'shard', confirm: 'sunsubscribe', subscribe: false },
};

/**
 * The SUBSCRIBE family, multiplexed over respool's subscriber connections (pubsub/hub.ts),
 * answered as Valkey 8.0 answers it (pubsub/replies.ts says which bytes and which counts).
 *
 *   the client's record : state.subscriptions (ClientSubscriptions) changes when the request is
 *                         handled, in request order, as Valkey's own per-client dicts do — so each
 *                         confirmation carries exactly the count Valkey would, and RESP2
 *                         subscribed mode starts with the request (state.subscribedResp2).
 *   (P|S)SUBSCRIBE      : the confirmations are encoded at once, one per argument; a reply
 *                         entry is reserved (its place in request order) and filled with them when
 *                         the hub confirms the names upstream. The hub delivers messages only
 *                         after that, and session.push() queues them behind every reply owed, so a
 *                         message never precedes its confirmation nor lands inside a reply. If the
 *                         hub fails the request, the entry gets the error and the record drops the
 *                         names the hub no longer holds for this client.
 *   (P|S)UNSUBSCRIBE    : answered at once from the record (a reply queued behind earlier ones);
 *                         the hub stops delivering those names immediately.
 *   close, RESET        : the hub forgets the client (onClose hook; resetSubscriptions()).
 *
 * Counts of a request that the hub fails are already in the confirmations of later requests
 * handled before the failure (the record assumed success); only that rare path differs from Valkey.
 */
export const pubsub: Handler = (session, req) => {
  if (req.command === 'publish') return publish(session, req);
  if (req.command === 'pubsub|numsub') return numsub(session, req);
  if (req.command === 'pubsub|numpat' && session.state.acl.keyNames?.namespace != null) return namespaceNumpat(session, req, session.state.acl.keyNames.namespace);
  if (req.command === 'pubsub|numpat' || req.command === 'pubsub|channels') return atClassicNode(session, req);
  const op = OPERATIONS[req.command];
  if (op === undefined) return refused(session, req);
  const { args, spec } = req;
  // Valkey checks the slots of SSUBSCRIBE / SUNSUBSCRIBE's channels before anything else (cluster.c getNodeByQuery).
  if (op.kind === 'shard' && args.length > 2 && session.ctx.isCluster() && !sameSlot(args)) {
    return session.replyNow(encodeError(ProxyError.crossSlot()));
  }
  if (op.subscribe) subscribe(session, op, req);
  else unsubscribe(session, op, req);
};

function sameSlot(args: Buffer[]): boolean {
  const slot = calculateSlot(args[1]!);
  for (let i = 2; i < args.length; i++) if (calculateSlot(args[i]!) !== slot) return false;
  return true;
}

/**
 * Channels handled per event-loop turn. One SUBSCRIBE of 100,000 channels would otherwise hold
 * the loop (~8 µs per channel) and every other client with it: past this many, the channels are
 * taken CHUNK at a time, one turn each. The confirmations keep their order and come before any
 * message (one reply entry per chunk, all reserved at once), and the client's later requests wait
 * until every chunk is confirmed (runExclusive), as if one server ran the command at once.
 */
const SUBSCRIBE_CHUNK = 2000;

function subscribe(session: HandlerSession, op: Operation, req: CommandRequest): void {
  const names = req.args.slice(1);
  if (names.length <= SUBSCRIBE_CHUNK) return subscribeInto(session, op, req.command, names, session.reserve(true));
  const copies = names.map((n) => Buffer.from(n)); // the read buffer is reused between turns
  session.runExclusive(() => {
    const entries = Array.from({ length: Math.ceil(copies.length / SUBSCRIBE_CHUNK) }, () => session.reserve(true));
    let chunk = 0;
    const step = (): void => {
      const entry = entries[chunk]!;
      if (session.closed) return entry.fill(encodeError(ProxyError.shuttingDown()));
      subscribeInto(session, op, req.command, copies.slice(chunk * SUBSCRIBE_CHUNK, (chunk + 1) * SUBSCRIBE_CHUNK), entry);
      if (++chunk < entries.length) setImmediate(step);
    };
    step();
  });
}

function subscribeInto(session: HandlerSession, op: Operation, command: string, names: Buffer[], entry: ReplyEntry): void {
  const state = session.state;
  const subs = (state.subscriptions ??= new ClientSubscriptions());
  const owner = subs.owner ?? adopt(session, subs);
  const kind = op.kind;
  const frames: Buffer[] = [];
  for (const name of names) {
    subs.add(kind, name);
    frames.push(encodeConfirmation(state.protocol, op.confirm, name, subs.countFor(kind)));
  }
  const confirmations = frames.length === 1 ? frames[0]! : Buffer.concat(frames);
  // `names` are views into the read buffer; done may run long after this call.
  const keys = names.map(nameKey);
  const stored = hubNames(session, kind, names);
  const storedKeys = stored === names ? keys : stored.map(nameKey);
  const hub = session.ctx.pubsub;
  const catchAll = kind === 'pattern' ? notificationCatchAll(session, names) : [];
  hub.subscribe(owner, kind, stored, (error) => {
    // The notification patterns before the confirmation: a write right after it is notified.
    if (error === null && catchAll.length > 0) return hub.subscribe(owner, 'pattern', catchAll, (e) => entry.fill(e === null ? confirmations : encodeError(e)));
    if (error === null) return entry.fill(confirmations);
    keys.forEach((key, i) => {
      if (!hub.holdsName(owner, kind, keyName(storedKeys[i]!))) subs.remove(kind, key);
    });
    session.ctx.metrics?.commandErrorCounter(command, 'proxy').inc();
    entry.fill(encodeError(error));
  });
}

function unsubscribe(session: HandlerSession, op: Operation, req: CommandRequest): void {
  const { frame, ok } = unsubscribeNow(session, op.confirm as UnsubscribeCommand, req.args.slice(1));
  session.replyNow(frame, ok);
}

/**
 * Whether (P|S)UNSUBSCRIBE from a client holding nothing is refused with NOSUB: only Valkey 8.0.0
 * and 8.0.1 do that (valkey-io/valkey#759, reverted by #1265 as a breaking change: Celery's result
 * consumer fails on it). Redis and later Valkey confirm with count 0, so respool answers as the
 * nodes it fronts would.
 */
export function refusesUnsubscribeUnsubscribed(ctx: HandlerSession['ctx']): boolean {
  const version = ctx.serverVersion();
  return ctx.serverName() === 'valkey' && (version === '8.0.0' || version === '8.0.1');
}

export type UnsubscribeCommand = 'unsubscribe' | 'punsubscribe' | 'sunsubscribe';

/**
 * (P|S)UNSUBSCRIBE `names` (none: every name of that kind the client holds), applied now to the
 * client's record and the hub: the confirmations (one per name, as Valkey sends them; `ok`) or
 * the error of a client holding nothing. Also what a transaction answers for a queued
 * (P|S)UNSUBSCRIBE at EXEC (Valkey runs it there, its confirmations are EXEC's element).
 */
export function unsubscribeNow(session: HandlerSession, command: UnsubscribeCommand, names: Buffer[]): { frame: Buffer; ok: boolean } {
  const state = session.state;
  const subs = state.subscriptions;
  const kind = OPERATIONS[command]!.kind;
  const protocol = state.protocol;
  if (subs === null || subs.owner === null || subs.total() === 0) {
    if (refusesUnsubscribeUnsubscribed(session.ctx)) return { frame: encodeError(ProxyError.notSubscribed(command)), ok: false };
    // Holding nothing: one confirmation per name (or one nil-name one), each with count 0.
    const frames = (names.length === 0 ? [null] : names).map((name) => encodeConfirmation(protocol, command, name, 0));
    return { frame: frames.length === 1 ? frames[0]! : Buffer.concat(frames), ok: true };
  }
  const frames: Buffer[] = [];
  if (names.length === 0) {
    const held = subs.names(kind);
    // Holding none of this kind (but something else): one confirmation with a nil name.
    if (held.length === 0) frames.push(encodeConfirmation(protocol, command, null, subs.countFor(kind)));
    for (const name of held) {
      subs.remove(kind, name);
      frames.push(encodeConfirmation(protocol, command, name, subs.countFor(kind)));
    }
  } else {
    for (const name of names) {
      subs.remove(kind, name);
      frames.push(encodeConfirmation(protocol, command, name, subs.countFor(kind)));
    }
  }
  session.ctx.pubsub.unsubscribe(subs.owner, kind, hubNamesToLeave(session, kind, names, subs));
  return { frame: frames.length === 1 ? frames[0]! : Buffer.concat(frames), ok: true };
}

/** The session as the hub's Subscriber: messages become pushes queued behind every reply owed. */
class SessionSubscriber implements Subscriber {
  constructor(private readonly session: HandlerSession) {}

  get id(): number {
    return this.session.id;
  }

  get protocol(): 2 | 3 {
    return this.session.protocol;
  }

  get closed(): boolean {
    return this.session.closed;
  }

  deliver(frame: Buffer): void {
    const names = this.session.state.acl.keyNames;
    const messages = names === null ? frame : clientMessages(names, frame, () => this.session.state.subscriptions?.names('pattern') ?? []);
    if (messages.length > 0) this.session.push(messages);
  }

  /** As Valkey's pubsubShardUnsubscribeAllChannelsInSlot: an sunsubscribe push with the client's shard count. */
  shardChannelLost(stored: Buffer): void {
    const names = this.session.state.acl.keyNames;
    const channel = names === null ? stored : clientShardChannel(names, stored);
    const subs = this.session.state.subscriptions;
    if (subs === null || !subs.remove('shard', channel)) return;
    this.session.push(encodeConfirmation(this.session.protocol, 'sunsubscribe', channel, subs.shardCount()));
  }
}

/**
 * The names the hub subscribes for a client's: behind its namespace (keys/channel-names.ts). The
 * client's record keeps its own names — its confirmations, its ACL checks; the hub's deliveries
 * come back through SessionSubscriber as the client's names.
 */
function hubNames(session: HandlerSession, kind: SubscriptionKind, names: Buffer[]): Buffer[] {
  const keyNames = session.state.acl.keyNames;
  if (keyNames === null) return names;
  return names.map((name) => storedChannelName(keyNames, name, kind === 'pattern'));
}

/**
 * The hub names a client no longer needs once it left `names` (already removed from `subs`): their
 * hub names, and for a namespaced client's patterns the notification patterns too — less those
 * its remaining patterns still need (two client patterns can share a hub pattern: `*` and
 * `__keyevent@*__:*` both use the latter).
 */
function hubNamesToLeave(session: HandlerSession, kind: SubscriptionKind, names: Buffer[], subs: ClientSubscriptions): Buffer[] {
  const leaving = hubNames(session, kind, names);
  const keyNames = session.state.acl.keyNames;
  if (kind !== 'pattern' || names.length === 0 || keyNames === null || keyNames.namespace === null) return leaving;
  const remaining = subs.names('pattern');
  const needed = new Set([...hubNames(session, kind, remaining), ...notificationCatchAll(session, remaining)].map((n) => n.toString('latin1')));
  return [...leaving, ...notificationPatterns(keyNames)].filter((n) => !needed.has(n.toString('latin1')));
}

/**
 * The hub patterns that catch the namespace's notifications, when one of a namespaced client's
 * new patterns can match notifications without naming them (`*`: keys/channel-names.ts
 * catchesNotifications); [] otherwise. Subscribing them again is harmless (the hub holds a name once).
 */
function notificationCatchAll(session: HandlerSession, patterns: Buffer[]): Buffer[] {
  const keyNames = session.state.acl.keyNames;
  if (keyNames === null || !patterns.some((p) => catchesNotifications(keyNames, p))) return [];
  return notificationPatterns(keyNames);
}

function adopt(session: HandlerSession, subs: ClientSubscriptions): Subscriber {
  const owner = new SessionSubscriber(session);
  subs.owner = owner;
  session.onClose(() => session.ctx.pubsub.unsubscribeAll(owner));
  return owner;
}

/**
 * RESET: the client leaves subscribed mode without confirmations (Valkey's
 * pubsubUnsubscribeAllChannels(c, 0) in resetCommand); the hub lets go of its names. Subscribe
 * requests still waiting upstream complete first (their confirmations stay ahead of +RESET).
 */
export function resetSubscriptions(session: HandlerSession): void {
  const subs = session.state.subscriptions;
  if (subs === null) return;
  if (subs.owner !== null) session.ctx.pubsub.unsubscribeAll(subs.owner);
  subs.clear();
}

/** In RESP2 subscribed mode, a command outside client-modes.ts' SUBSCRIBED_COMMANDS. */
export const refuseWhileSubscribed: Handler = (session, req) => {
  session.state.refusedNow = true; // refused before it runs: not counted (tot-cmds)
  session.replyNow(encodeError(ProxyError.subscribedContextOnly(req.command)));
};

/**
 * PUBLISH counts receivers as one server would: it goes to the node holding respool's classic
 * subscriptions, and the count that node gives for respool's own connection (1 for the channel,
 * 1 per matching pattern) is replaced by the number of respool clients that receive it. Other
 * subscribers of that node (not through respool) are counted as the node counts them. Without
 * respool subscriptions, an ordinary keyless command.
 */
function publish(session: HandlerSession, req: CommandRequest): void {
  const node = publishNode(session);
  if (node === undefined) return keyed(session, req);
  const channel = Buffer.from(req.args[1]!);
  const hub = session.ctx.pubsub;
  const send = (entry: ReplyEntry, raw: Buffer): void => {
    const owner: CallOwner = {
      client: session,
      onCallDone: (reply) => entry.fill(publishReply(session, channel, reply)),
    };
    session.ctx.metrics?.commandCounter('publish').inc();
    session.ctx.router.send({ to: 'node', owner, raw, command: 'publish', node, role: 'primary' });
  };
  if (hub.unsubscribesSettled) return send(session.reserve(), req.raw);
  // An UNSUBSCRIBE of respool's is still on its way to the node, which would count it: the
  // PUBLISH waits for its confirmation, and the client's later requests wait for the PUBLISH.
  const raw = Buffer.from(req.raw);
  session.runExclusive(() => {
    const entry = session.reserve();
    hub.afterUnsubscribes(() => send(entry, raw));
  });
}

/**
 * The node where a PUBLISH counts respool's subscribers (the one holding its classic
 * subscriptions; in cluster mode PUBLISH counts only the node's own subscribers), or undefined
 * when respool holds none. A PUBLISH inside MULTI … EXEC or a script counts right only there.
 */
export function publishNode(session: HandlerSession): ClusterNode | undefined {
  return classicNode(session, session.ctx.pubsub.countsFor(Buffer.alloc(0), true).address);
}

/**
 * A PUBLISH reply from publishNode(): respool's one upstream subscription (and each matching
 * pattern) replaced by the respool clients that receive `channel`. Anything but an integer as is.
 * `counted`: what the node counted for respool's own connection when the PUBLISH ran (a
 * transaction takes it before its own UNSUBSCRIBEs apply); by default, what it counts now.
 */
export function publishReply(session: HandlerSession, channel: Buffer, reply: Buffer, counted?: number): Buffer {
  if (reply[0] !== 0x3a /* : */) return reply;
  const now = session.ctx.pubsub.countsFor(channel);
  return encodeInteger(Number(reply.toString('latin1', 1, reply.length - 2)) - (counted ?? now.upstream) + now.clients);
}

/** PUBSUB NUMSUB: per channel, respool's subscribers in place of its one upstream subscription. */
function numsub(session: HandlerSession, req: CommandRequest): void {
  const hub = session.ctx.pubsub;
  const node = classicNode(session, hub.countsFor(Buffer.alloc(0), true).address);
  if (node === undefined) return keyed(session, req);
  const channels = req.args.slice(2).map((a) => Buffer.from(a));
  const entry = session.reserve();
  const owner: CallOwner = {
    client: session,
    onCallDone: (reply) => {
      const items = reply[0] === 0x2a /* * */ ? splitAggregate(reply) : null;
      if (items === null || items.length !== channels.length * 2) return entry.fill(reply);
      const out = items.map((item, i) => {
        if (i % 2 === 0 || item[0] !== 0x3a) return Buffer.from(item);
        const view = hub.countsFor(channels[(i - 1) / 2]!, true);
        return encodeInteger(Number(item.toString('latin1', 1, item.length - 2)) - view.upstream + view.clients);
      });
      entry.fill(encodeArray(out));
    },
  };
  session.ctx.metrics?.commandCounter('pubsub|numsub').inc();
  session.ctx.router.send({ to: 'node', owner, raw: req.raw, command: 'pubsub|numsub', node, role: 'primary' });
}

/**
 * PUBSUB NUMPAT / CHANNELS: asked of the node holding respool's classic subscriptions (respool's
 * patterns and channels are each held there once, as one server holds each once).
 */
function atClassicNode(session: HandlerSession, req: CommandRequest): void {
  const node = classicNode(session, session.ctx.pubsub.countsFor(Buffer.alloc(0), true).address);
  if (node === undefined) return keyed(session, req);
  const entry = session.reserve();
  session.ctx.metrics?.commandCounter(req.command).inc();
  session.ctx.router.send({ to: 'node', owner: entry, raw: req.raw, command: req.command, node, role: 'primary' });
}

/**
 * PUBSUB NUMPAT of a namespaced user: the node's count holds every namespace's patterns and the
 * catch-alls a namespaced PSUBSCRIBE * adds (notificationCatchAll), so the answer is counted
 * here, as a server of the namespace's own counts: the distinct patterns of the namespace's
 * clients on this respool (a fleet peer's clients are not seen).
 */
function namespaceNumpat(session: HandlerSession, req: CommandRequest, namespace: Buffer): void {
  const patterns = new Set<string>();
  for (const other of session.ctx.sessions()) {
    const ns = other.state.acl.keyNames?.namespace;
    if (ns == null || !ns.equals(namespace)) continue;
    for (const p of other.state.subscriptions?.patterns ?? []) patterns.add(p);
  }
  session.ctx.metrics?.commandCounter(req.command).inc();
  session.replyNow(encodeInteger(patterns.size));
}

/** The topology node holding respool's classic subscriptions, if any. */
function classicNode(session: HandlerSession, address: string | null): ClusterNode | undefined {
  if (address === null) return undefined;
  return session.ctx.router.topology()?.allNodes().find((n) => n.address === address);
}
