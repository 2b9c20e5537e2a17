import calculateSlot from 'cluster-key-slot';
import { arrayHeaderSize, encodeArray, encodeError, encodeInteger, encodeSimple, writeArrayHeader } from '../../resp/encode.js';
import { splitAggregate } from '../../resp/decode.js';
import { ProxyError } from '../../errors.js';
import { SplitCommand } from '../../routing/split-command.js';
import { keyed } from '../keyed.js';
import { cachedMget } from '../near-cache.js';
import type { Handler } from '../../client/handler-session.js';

/**
 * Multi-key commands whose keys can be split without changing their meaning: MGET, MSET, DEL,
 * UNLINK, EXISTS, TOUCH. In cluster mode, keys in several slots are split **by hash slot**
 * (Valkey refuses keys of two slots even when one node owns both): one part per slot, the parts
 * for one node written as one buffer on the client's link (routing/split-command.ts: no call
 * object per part unless a part needs one — MOVED/ASK followed on its own, a read strategy or
 * the hot-key hook that must see it) — and the replies merged: MGET's values copied in the
 * original key order under one header, DEL/UNLINK/EXISTS/TOUCH summed, MSET OK when every part was. When a part fails, the client gets one error that names
 * the part and says the others ran; nothing that may have run is re-sent.
 * All keys in one slot (or a standalone upstream): the keyed path, at no extra cost. Keys over
 * more than PARTS_PER_TURN slots: the parts leave that many per event-loop turn (below).
 */
export const multiKey: Handler = (session, req) => {
  if (req.command === 'mget' && cachedMget(session, req)) return; // every key in the near cache (handlers/near-cache.ts)
  const ctx = session.ctx;
  const spec = req.spec!;
  const keys = ctx.isCluster() ? ctx.commands().keyIndexes(spec, req.args) : [];
  const n = keys.length;
  if (n < 2) return keyed(session, req);
  const keySlots = new Array<number>(n);
  const slot0 = (keySlots[0] = calculateSlot(req.args[keys[0]!]!));
  let same = true;
  for (let j = 1; j < n; j++) if ((keySlots[j] = calculateSlot(req.args[keys[j]!]!)) !== slot0) same = false;
  if (same) return keyed(session, req);

  // Parts by slot, in the order their first key comes; key ordinals grouped by part.
  const slots: number[] = [];
  const counts: number[] = [];
  const partOfKey = new Int32Array(n);
  for (let j = 0; j < n; j++) {
    const slot = keySlots[j]!;
    let p = PART_OF_SLOT[slot]!;
    if (p < 0) {
      p = PART_OF_SLOT[slot] = slots.length;
      slots.push(slot);
      counts.push(0);
    }
    partOfKey[j] = p;
    counts[p]!++;
  }
  for (const slot of slots) PART_OF_SLOT[slot] = -1;
  const parts = slots.length;
  const start = new Int32Array(parts + 1);
  for (let p = 0; p < parts; p++) start[p + 1] = start[p]! + counts[p]!;
  const order = new Int32Array(n);
  const fill = start.slice(0, parts);
  for (let j = 0; j < n; j++) order[fill[partOfKey[j]!]!++] = j;

  const width = req.command === 'mset' ? 2 : 1; // MSET: a key and its value
  const router = ctx.router;
  const table = ctx.commands();
  if (parts <= PARTS_PER_TURN) {
    const split = new MultiKeyRequest(session.reserve(), req.command, spec, table, req.args, keys, width, slots, order, start);
    router.send({ to: 'slots', split, from: 0, until: parts });
    return;
  }
  // Keys over more slots than one turn takes: the parts leave PARTS_PER_TURN per loop turn, so
  // other clients are served in between; this client's later requests wait for the reply (its
  // commands to a node must not overtake parts not yet sent).
  const args = req.args.map((a) => Buffer.from(a)); // the read buffer is reused between turns
  session.runExclusive(() => {
    const split = new MultiKeyRequest(session.reserve(), req.command, spec, table, args, keys, width, slots, order, start);
    let next = 0;
    const step = (): void => {
      const end = Math.min(parts, next + PARTS_PER_TURN);
      router.send({ to: 'slots', split, from: next, until: end });
      next = end;
      if (next < parts) setImmediate(step);
    };
    step();
  });
};

/** Parts (slots) one turn of the event loop sends; a command with more is spread over turns. */
const PARTS_PER_TURN = 1000;

/** Scratch while grouping one command's keys: slot → its part, -1 for none (reset after each use). */
const PART_OF_SLOT = new Int32Array(16384).fill(-1);

/** One split command: N parts (one per slot), one merged reply. */
class MultiKeyRequest extends SplitCommand {
  protected merge(replies: Buffer[]): Buffer {
    let failed = -1;
    let errors = 0;
    for (let p = 0; p < replies.length; p++) {
      const r = replies[p]!;
      if (r[0] === 0x2d /* - */ || r[0] === 0x21 /* ! */) {
        if (failed < 0) failed = p;
        errors++;
      }
    }
    if (failed >= 0) {
      const reply = replies[failed]!;
      const text = reply.toString('utf8', 1, reply.length - 2);
      return encodeError(ProxyError.partFailed(this.command, failed + 1, replies.length, this.slots[failed]!, text, replies.length - errors));
    }
    switch (this.command) {
      case 'mget':
        return mergeMget(replies, this.order, this.start, this.keys.length);
      case 'mset':
        return OK;
      default:
        return encodeInteger(sumIntegers(replies));
    }
  }
}

/**
 * MGET's reply from its parts' arrays: the values copied as they came, in the client's key
 * order, under one header (nothing decoded or encoded again). A part whose reply is not an
 * array of its keys' values: the unexpected-reply error.
 */
function mergeMget(replies: Buffer[], order: Int32Array, start: Int32Array, keyCount: number): Buffer {
  const from = new Int32Array(keyCount);
  const to = new Int32Array(keyCount);
  const partOf = new Int32Array(keyCount);
  let size = arrayHeaderSize(keyCount);
  for (let p = 0; p < replies.length; p++) {
    const reply = replies[p]!;
    const first = start[p]!;
    const count = start[p + 1]! - first;
    let pos = arrayStart(reply, count);
    if (pos < 0) return encodeError(ProxyError.unexpectedReply('MGET'));
    for (let i = 0; i < count; i++) {
      const end = valueEnd(reply, pos);
      if (end < 0) return encodeError(ProxyError.unexpectedReply('MGET'));
      const j = order[first + i]!;
      from[j] = pos;
      to[j] = end;
      partOf[j] = p;
      size += end - pos;
      pos = end;
    }
    if (pos !== reply.length) return encodeError(ProxyError.unexpectedReply('MGET'));
  }
  const out = Buffer.allocUnsafe(size);
  let at = writeArrayHeader(out, 0, keyCount);
  for (let j = 0; j < keyCount; j++) at += replies[partOf[j]!]!.copy(out, at, from[j]!, to[j]!);
  return out;
}

/** Where the elements of `*count\r\n…` start; -1 when the reply is not an array of `count`. */
function arrayStart(reply: Buffer, count: number): number {
  if (reply[0] !== 0x2a /* * */) return -1;
  let n = 0;
  let pos = 1;
  for (let c = reply[pos]!; c >= 0x30 && c <= 0x39; c = reply[++pos]!) n = n * 10 + c - 0x30;
  if (pos === 1 || n !== count || reply[pos] !== 0x0d || reply[pos + 1] !== 0x0a) return -1;
  return pos + 2;
}

/** The end of the value at `pos` — a bulk string, RESP2's nil ($-1) or RESP3's (_) — or -1 for anything else. */
function valueEnd(reply: Buffer, pos: number): number {
  const type = reply[pos];
  if (type === 0x5f /* _ */) return reply[pos + 1] === 0x0d && reply[pos + 2] === 0x0a ? pos + 3 : -1;
  if (type !== 0x24 /* $ */) return -1;
  let p = pos + 1;
  if (reply[p] === 0x2d /* - */) return reply[p + 1] === 0x31 && reply[p + 2] === 0x0d && reply[p + 3] === 0x0a ? p + 4 : -1;
  let len = 0;
  const digits = p;
  for (let c = reply[p]!; c >= 0x30 && c <= 0x39; c = reply[++p]!) len = len * 10 + c - 0x30;
  if (p === digits || reply[p] !== 0x0d || reply[p + 1] !== 0x0a) return -1;
  const end = p + 2 + len + 2;
  if (end > reply.length || reply[end - 2] !== 0x0d || reply[end - 1] !== 0x0a) return -1;
  return end;
}

/** DEL / UNLINK / EXISTS / TOUCH: how many keys, summed over the parts' integer replies. */
function sumIntegers(replies: Buffer[]): number {
  let sum = 0;
  for (const reply of replies) sum += Number(reply.toString('latin1', 1, reply.length - 2));
  return sum;
}

/**
 * The client's reply from the per-slot parts' replies (none of them an error): MGET in the
 * original key order, MSET OK, DEL / UNLINK / EXISTS / TOUCH the sum. Also used for a multi-key
 * command split inside a transaction over several slots (transaction-split.ts).
 */
export function mergeMultiKeyReplies(command: string, keys: readonly number[], parts: ReadonlyArray<{ positions: readonly number[] }>, replies: readonly Buffer[]): Buffer {
  switch (command) {
    case 'mget': {
      const byPosition = new Map<number, Buffer>();
      replies.forEach((reply, i) => {
        const values = splitAggregate(reply);
        const positions = parts[i]!.positions;
        if (values === null || values.length !== positions.length) return;
        positions.forEach((p, j) => byPosition.set(p, values[j]!));
      });
      if (byPosition.size !== keys.length) return encodeError(ProxyError.unexpectedReply('MGET'));
      return encodeArray(keys.map((p) => byPosition.get(p)!));
    }
    case 'mset':
      return OK;
    default: {
      // DEL, UNLINK, EXISTS, TOUCH: how many keys, summed over the parts.
      let sum = 0;
      for (const reply of replies) sum += Number(reply.toString('latin1', 1, reply.length - 2));
      return encodeInteger(sum);
    }
  }
}

const OK = encodeSimple('OK');
