import calculateSlot from 'cluster-key-slot';
import { encodeArray, encodeCommand, encodeError, encodeInteger, encodeSimple } from '../resp/encode.js';
import { splitAggregate } from '../resp/decode.js';
import { ProxyError } from '../errors.js';
import { Fragmented } from '../routing/fragmented.js';
import type { CallClient, CallOwner } from '../routing/upstream-call.js';
import { keyed } from './keyed.js';
import type { Handler } from './types.js';

/**
 * Multi-key commands whose keys can be split without changing their meaning: MGET, MSET, DEL,
 * UNLINK, EXISTS, TOUCH. In cluster mode, keys in several slots are split **by hash slot**
 * (Valkey refuses keys of two slots even when one node owns both): one part per slot, sent
 * together (parts for one node leave in one write on the client's link), each part routed like
 * any keyed call — MOVED/ASK followed on its own, read strategies and the hot-key hook applied
 * per part — and the replies merged: MGET in the original key order, DEL/UNLINK/EXISTS/TOUCH
 * summed, MSET OK when every part was. When a part fails, the client gets one error that names
 * the part and says the others ran; nothing that may have run is re-sent.
 * All keys in one slot (or a standalone upstream): the keyed path, at no extra cost.
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
  const entry = session.reserve();
  const parts = [...bySlot.entries()];
  const request = new MultiKeyRequest(entry, req.command, keys, parts.map(([slot, positions]) => ({ slot, positions })));
  const name = req.args[0]!;
  parts.forEach(([, positions], index) => {
    const partArgs: Buffer[] = [name];
    for (const p of positions) for (let w = 0; w < width; w++) partArgs.push(req.args[p + w]!);
    const error = ctx.router.routeKeyed(request.part(index), encodeCommand(partArgs), partArgs, spec, ctx.commands(), req.command);
    if (error !== null) request.onCallDone(error, index);
  });
};

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
    switch (this.command) {
      case 'mget': {
        const byPosition = new Map<number, Buffer>();
        replies.forEach((reply, i) => {
          const values = splitAggregate(reply);
          const positions = this.parts[i]!.positions;
          if (values === null || values.length !== positions.length) return;
          positions.forEach((p, j) => byPosition.set(p, values[j]!));
        });
        if (byPosition.size !== this.keys.length) return encodeError(ProxyError.unexpectedReply('MGET'));
        return encodeArray(this.keys.map((p) => byPosition.get(p)!));
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
}

const OK = encodeSimple('OK');
