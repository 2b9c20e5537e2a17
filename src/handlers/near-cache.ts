import calculateSlot from 'cluster-key-slot';
import { CommandFlag } from '../commands/command-flags.js';
import { encodeCommand } from '../resp/encode.js';
import type { CommandFamily } from '../commands/proxy-handling.js';
import type { CommandRequest, HandlerSession } from '../client/handler-session.js';
import type { ReplyEntry } from '../client/reply-queue.js';
import type { CachedRead, WriteMark } from '../nearcache/near-cache.js';
import { isWrongType, nil, rangeIndex } from '../nearcache/cached-value.js';
import { entryName } from '../nearcache/cache-store.js';
import { ReadCoalescing } from '../nearcache/read-coalescing.js';
import type { CallOwner } from '../routing/upstream-call.js';

// Where requests meet the near cache (nearcache/near-cache.ts): the reads it answers
// (handlers/keyed.ts asks cachedRead) and the writes that must pass it first (handlers/index.ts
// asks markWrite for every request that reaches a family's handler or MULTI's queue).

/** The reads the cache answers, and how many arguments each has then (-n: at least n). */
const READS: ReadonlyMap<string, { kind: CachedRead; arity: number }> = new Map(
  ([['get', 2], ['getrange', 4], ['strlen', 2], ['smembers', 2], ['sismember', 3], ['smismember', -3], ['scard', 2], ['lrange', 4], ['lindex', 3], ['llen', 2], ['zcard', 2], ['zscore', 3], ['zmscore', -3], ['zrange', -4], ['exists', 2], ['hget', 3], ['hmget', -3], ['hgetall', 2], ['hlen', 2], ['hexists', 3], ['hstrlen', 3]] as const)
    .map(([kind, arity]) => [kind, { kind, arity }]),
);

/** Reads whose arguments past the key are indexes. */
const INDEXED: ReadonlySet<CachedRead> = new Set(['getrange', 'lrange', 'lindex', 'zrange']);

/** Writes to every key of a database (or all of them): every entry goes. */
const EVERY_KEY: ReadonlySet<string> = new Set(['flushall', 'flushdb', 'swapdb']);

/** Scripts and functions with keys: each declared key may be written (the read-only forms may not). */
const SCRIPTS: ReadonlySet<string> = new Set(['eval', 'evalsha', 'fcall']);

/**
 * A read of one cached key (the READS above: strings, hashes, sets, lists): answered from memory, or by the key's fill (one node
 * read for all the reads that arrive meanwhile). True when the cache took the read; `sendOn`
 * then sends a copy of it to the node if the fill cannot answer it (a redirect, a failure).
 */
export function cachedRead(session: HandlerSession, req: CommandRequest, entry: ReplyEntry, sendOn: (req: CommandRequest) => void): boolean {
  const cache = session.ctx.nearCache;
  if (cache === undefined || !cache.active) return false;
  const read = READS.get(req.command);
  const n = req.args.length;
  if (read === undefined || (read.arity > 0 ? n !== read.arity : n < -read.arity)) return false;
  const key = req.args[1]!;
  if (!cache.matches(key)) return false;
  if (INDEXED.has(read.kind) && req.args.slice(2, read.kind === 'zrange' ? 4 : undefined).some((a) => rangeIndex(a) === null)) return false; // the node words the error
  if (read.kind === 'zrange' && (n > 5 || (n === 5 && req.args[4]!.toString('latin1').toUpperCase() !== 'WITHSCORES'))) return false; // BYSCORE, BYLEX, REV, LIMIT: the node's
  // Reads answered here never reach the router's hot-key sampling: sampled here, so a cached hot key stays ranked.
  const detector = session.ctx.hotKeys.detector;
  if (detector !== null && session.ctx.isCluster() && detector.shouldSample()) detector.record(key.toString('latin1'), calculateSlot(key));
  const metrics = session.ctx.metrics;
  const args = req.args.map((a) => Buffer.from(a));
  const kept: CommandRequest = { args, raw: Buffer.from(req.raw), spec: req.spec, command: req.command };
  const done = pending(session);
  const taken = cache.read(session.state.db, args[1]!, {
    kind: read.kind,
    fields: args.slice(2),
    protocol: session.state.protocol,
    answer: (reply) => {
      done();
      metrics?.commandCounter(req.command).inc();
      entry.fill(reply);
    },
    passOn: () => {
      sendOn(kept);
      done();
    },
  });
  if (!taken) done();
  return taken;
}

/** Counts a read the cache takes from this client until it is answered or sent on: the returned call, once. */
function pending(session: HandlerSession): () => void {
  const state = session.state;
  state.cacheReadsPending++;
  let counted = true;
  return () => {
    if (!counted) return;
    counted = false;
    state.cacheReadsPending--;
  };
}

/** Whether a request writes the keys it names: a write-flagged command, or a script or function that may write its declared keys. */
function writesItsKeys(req: CommandRequest, family: CommandFamily): boolean {
  return (req.spec!.flags & CommandFlag.WRITE) !== 0 || (family === 'script' && SCRIPTS.has(req.command));
}

/** Whether a request may write what the near cache holds (markWrite's test, without the keys): such a write waits for the client's pending cached reads. */
export function mayWriteCached(session: HandlerSession, req: CommandRequest, family: CommandFamily): boolean {
  if (req.spec === undefined || session.ctx.nearCache?.active !== true) return false;
  return req.command === 'exec' || EVERY_KEY.has(req.command) || writesItsKeys(req, family);
}

/**
 * A request that may write keys the cache holds: their entries go before it is sent, and no fill
 * of them is kept until its reply is in (inside MULTI: until EXEC's or DISCARD's). Called with
 * the keys as the nodes store them.
 */
export function markWrite(session: HandlerSession, req: CommandRequest, family: CommandFamily): void {
  const cache = session.ctx.nearCache;
  if (cache === undefined || !cache.active) return;
  const state = session.state;
  const queued = state.cacheWrites;
  if (queued !== null && queued.length > 0 && (req.command === 'exec' || req.command === 'discard' || req.command === 'reset')) {
    const marks = queued.splice(0);
    session.afterNextReply(() => marks.forEach((m) => endMark(session, m)));
    return;
  }
  const spec = req.spec;
  if (spec === undefined) return;
  let mark: WriteMark | null = null;
  if (EVERY_KEY.has(req.command)) mark = cache.beginWrite(state.db, null);
  else if (writesItsKeys(req, family)) {
    const keys = session.ctx.commands().keyIndexes(spec, req.args);
    if (keys.length === 0) return;
    mark = cache.beginWrite(state.db, keys.map((i) => req.args[i]!));
  }
  if (mark === null) return;
  openMarks(session).add(mark);
  if (state.transaction !== null || state.lane?.inMulti === true) (state.cacheWrites ??= []).push(mark); // ends with EXEC's reply
  else session.afterNextReply(() => endMark(session, mark));
}

/** The session's marks not ended yet; those left when it closes (a reply that never came) end then. */
function openMarks(session: HandlerSession): Set<WriteMark> {
  const state = session.state;
  if (state.cacheMarks === null) {
    const marks = (state.cacheMarks = new Set());
    const cache = session.ctx.nearCache!;
    session.onClose(() => {
      for (const m of marks) cache.endWrite(m);
      marks.clear();
    });
  }
  return state.cacheMarks;
}

function endMark(session: HandlerSession, mark: WriteMark): void {
  if (session.state.cacheMarks?.delete(mark) === true) session.ctx.nearCache!.endWrite(mark);
}

/**
 * MGET whose every key the cache holds or may fill: each key is a read of its own (answered from
 * memory, or by its fill), the replies joined in key order under one header. A key the cache
 * cannot answer (its fill met a redirect, a failure) is read alone with GET, as MGET would read
 * it (another type: nil). False when some key is not cached: MGET goes on as it came.
 */
export function cachedMget(session: HandlerSession, req: CommandRequest): boolean {
  const cache = session.ctx.nearCache;
  if (cache === undefined || !cache.active || req.args.length < 2) return false;
  for (let i = 1; i < req.args.length; i++) if (!cache.matches(req.args[i]!)) return false;
  const { ctx, state } = session;
  const entry = session.reserve();
  const keys = req.args.slice(1).map((a) => Buffer.from(a));
  const parts = new Array<Buffer | null>(keys.length).fill(null);
  let left = keys.length;
  const done = pending(session);
  const partDone = (i: number, reply: Buffer) => {
    parts[i] = reply;
    if (--left > 0) return;
    done();
    entry.fill(Buffer.concat([Buffer.from(`*${parts.length}\r\n`), ...(parts as Buffer[])]));
  };
  const getSpec = ctx.commands().get('get');
  const detector = ctx.hotKeys.detector;
  const cluster = ctx.isCluster();
  ctx.metrics?.commandCounter('mget').inc();
  keys.forEach((key, i) => {
    if (detector !== null && cluster && detector.shouldSample()) detector.record(key.toString('latin1'), calculateSlot(key));
    const alone = () => {
      const owner = { client: entry.client, onCallDone: (reply: Buffer) => partDone(i, isWrongType(reply) ? nil(state.protocol) : Buffer.from(reply)) };
      const get: CommandRequest = { args: [Buffer.from('GET'), key], raw: encodeCommand(['GET', key]), spec: getSpec, command: 'get' };
      const error = ctx.router.send({ to: 'keys', owner, request: get, table: ctx.commands() });
      if (error !== null) partDone(i, error);
    };
    const taken = cache.read(state.db, key, { kind: 'mgetpart', fields: [], protocol: state.protocol, answer: (reply) => partDone(i, reply), passOn: alone });
    if (!taken) alone();
  });
  return true;
}

/**
 * nearCache.coalesceAll: a read of one key the cache does not hold. Returns the owner to send it
 * with (the entry, or one that also answers the twins that join it meanwhile), or null when it
 * joined a twin in flight and needs no node read of its own.
 */
export function coalescedRead(session: HandlerSession, req: CommandRequest, entry: ReplyEntry): CallOwner | null {
  const coalescing = session.ctx.nearCache?.coalescing;
  const spec = req.spec;
  if (coalescing == null || spec === undefined || (spec.flags & (CommandFlag.READONLY | CommandFlag.BLOCKING)) !== CommandFlag.READONLY) return entry;
  const keys = session.ctx.commands().keyIndexes(spec, req.args);
  if (keys.length !== 1) return entry;
  const id = ReadCoalescing.idOf(entry.client, req.raw);
  const done = pending(session); // a write of this client waits for it, as for a cached read
  const joined: CallOwner = {
    client: entry.client,
    onCallDone: (reply) => {
      done();
      entry.fill(reply);
    },
  };
  if (coalescing.join(id, joined)) return null;
  done();
  return coalescing.lead(id, entryName(session.state.db, req.args[keys[0]!]!), entry);
}
