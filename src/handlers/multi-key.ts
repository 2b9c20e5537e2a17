import calculateSlot from 'cluster-key-slot';
import { encodeArray, encodeCommand, encodeError, encodeInteger, encodeSimple } from '../resp/encode.js';
import { splitAggregate } from '../resp/decode.js';
import { ProxyError } from '../errors.js';
import { Fragmented } from '../routing/fragmented.js';
import type { CallClient, CallOwner } from '../routing/upstream-call.js';
import { keyed } from './keyed.js';
import type { Handler } from '../client/handler-session.js';
import type { ReplyEntry } from '../client/reply-queue.js';

/**
 * Multi-key commands whose keys can be split without changing their meaning: MGET, MSET, DEL,
 * UNLINK, EXISTS, TOUCH. In cluster mode, keys in several slots are split **by hash slot**
 * (Valkey refuses keys of two slots even when one node owns both): one part per slot, sent
 * together (parts for one node leave in one write on the client's link), each part routed like
 * any keyed call — MOVED/ASK followed on its own, read strategies and the hot-key hook applied
 * per part — and the replies merged: MGET in the original key order, DEL/UNLINK/EXISTS/TOUCH
 * summed, MSET OK when every part was. When a part fails, the client gets one error that names
 * the part and says the others ran; nothing that may have run is re-sent.
 * All keys in one slot (or a standalone upstream): the keyed path, at no extra cost. Keys over
 * more than PARTS_PER_TURN slots: the parts leave that many per event-loop turn (below).
 */
export const multiKey: Handler = (session, req) => {
  const ctx = session.ctx;
  const spec = req.spec!;
  const keys = ctx.isCluster() ? ctx.commands().keyIndexes(spec, req.args) : [];
  if (keys.length < 2) return keyed(session, req);
  const slot0 = calculateSlot(req.args[keys[0]!]!);
  let i = 1;
  while (i < keys.length && calculateSlot(req.args[keys[i]!]!) === slot0) i++;
  if (i === keys.length) return keyed(session, req);

  const width = req.command === 'mset' ? 2 : 1; // MSET: a key and its value
  const bySlot = new Map<number, number[]>(); // slot → key positions in args, in order
  for (const k of keys) {
    const slot = calculateSlot(req.args[k]!);
    let positions = bySlot.get(slot);
    if (positions === undefined) bySlot.set(slot, (positions = []));
    positions.push(k);
  }
  const parts = [...bySlot.entries()];
  const send = (entry: ReplyEntry, args: Buffer[]) => {
    const request = new MultiKeyRequest(entry, req.command, keys, parts.map(([slot, positions]) => ({ slot, positions })));
    const name = args[0]!;
    let next = 0;
    const step = (): void => {
      const end = Math.min(parts.length, next + PARTS_PER_TURN);
      for (; next < end; next++) {
        const partArgs: Buffer[] = [name];
        for (const p of parts[next]![1]) for (let w = 0; w < width; w++) partArgs.push(args[p + w]!);
        const error = ctx.router.routeKeyed(request.part(next), encodeCommand(partArgs), { args: partArgs }, spec, ctx.commands(), req.command);
        if (error !== null) request.onCallDone(error, next);
      }
      if (next < parts.length) setImmediate(step);
    };
    step();
  };
  if (parts.length <= PARTS_PER_TURN) return send(session.reserve(), req.args);
  // Keys over more slots than one turn takes: the parts leave PARTS_PER_TURN per loop turn, so
  // other clients are served in between; this client's later requests wait for the reply (its
  // commands to a node must not overtake parts not yet sent).
  const args = req.args.map((a) => Buffer.from(a)); // the read buffer is reused between turns
  session.runExclusive(() => send(session.reserve(), args));
};

/** Parts (slots) one turn of the event loop sends; a command with more is spread over turns. */
const PARTS_PER_TURN = 1000;

interface Part {
  slot: number;
  /** Positions in the client's args of this part's keys, in order. */
  positions: number[];
}

/** One split command: N parts (one per slot), one merged reply. */
class MultiKeyRequest extends Fragmented {
  constructor(
    owner: CallOwner,
    command: string,
    /** Every key position of the client's command, in its order. */
    private readonly keys: readonly number[],
    private readonly parts: readonly Part[],
  ) {
    super(owner, command, parts.length);
  }

  /** The owner of part `index`'s call (the hot-key hook may replace the call, so not `call.index`). */
  part(index: number): CallOwner {
    const parent = this;
    return {
      get client(): CallClient {
        return parent.client;
      },
      onCallDone: (reply: Buffer) => parent.onCallDone(reply, index),
    };
  }

  protected merge(replies: Buffer[]): Buffer {
    const failed = replies.findIndex((r) => r[0] === 0x2d /* - */ || r[0] === 0x21 /* ! */);
    if (failed >= 0) {
      const reply = replies[failed]!;
      const text = reply.toString('utf8', 1, reply.length - 2);
      const ran = replies.length - replies.filter((r) => r[0] === 0x2d || r[0] === 0x21).length;
      return encodeError(ProxyError.partFailed(this.command, failed + 1, replies.length, this.parts[failed]!.slot, text, ran));
    }
    return mergeMultiKeyReplies(this.command, this.keys, this.parts, replies);
  }
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
