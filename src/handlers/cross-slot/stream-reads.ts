import calculateSlot from 'cluster-key-slot';
import { encodeArray, encodeCommand, encodeError, encodeMap } from '../../resp/encode.js';
import { decodeReply, splitAggregate } from '../../resp/decode.js';
import { nullArray } from '../../resp/constant-replies.js';
import { ProxyError } from '../../errors.js';
import { internalCall } from '../../routing/internal-call.js';
import type { ReplyEntry } from '../../client/reply-queue.js';
import { BlockingCall } from '../blocking-call.js';
import { firstKeyError, parseStreamRead, type KeyFacts, type StreamReadArgs } from '../stream-read-args.js';
import type { CommandRequest, HandlerSession } from '../../client/handler-session.js';

/** One slot's streams: their indexes among the command's streams (0 … count-1), in order. */
interface SlotStreams {
  readonly slot: number;
  readonly streams: number[];
}

/**
 * XREAD and XREADGROUP (with or without BLOCK) over streams in several slots, answered as one
 * server answers several streams:
 *
 *  1. The arguments are checked as Valkey checks them (stream-read-args.ts), and each key's type
 *     (and, for XREADGROUP, its group) is asked of its node first: a command one key would refuse
 *     gets that key's error before any slot delivers anything. XREAD's `$` (and `+`) IDs are
 *     resolved now, from XINFO STREAM: new entries are those added after the command came.
 *  2. Every slot's streams are read at once, without BLOCK, on the shared links; the replies are
 *     merged into one, the streams in the order given (RESP2: an array of [key, entries]; RESP3:
 *     a map), streams without entries left out, nil when none has any.
 *  3. With BLOCK and nothing to read: every slot's streams wait at once, one leased connection
 *     each (blocking-call.ts). The first slot that answers with entries ends the wait: the others
 *     are cancelled (CLIENT UNBLOCK), and every reply that arrived, entries included, is merged
 *     into the client's one reply — nothing a slot delivered (XREADGROUP: put in the pending list)
 *     is dropped. The first slot to time out ends it with nil.
 *
 * `reserved`: the keyed handler's entry (XREAD without BLOCK); without it, a blocking command.
 */
export function streamReadCrossSlot(session: HandlerSession, req: CommandRequest, reserved?: ReplyEntry): boolean {
  const group = req.command === 'xreadgroup';
  const args = req.args.map((a) => Buffer.from(a));
  const parsed = parseStreamRead(args, group);
  const ctx = session.ctx;
  ctx.metrics?.crossSlotCommands[reserved === undefined ? 'blocking' : 'read'].inc();
  if (reserved === undefined) ctx.metrics?.commandCounter(req.command).inc();
  const run = (entry: ReplyEntry): void => {
    if (typeof parsed === 'string') return entry.fill(encodeError(parsed));
    void new StreamRead(session, args, parsed).run().then(
      (reply) => entry.fill(reply),
      (err: Error) => entry.fill(encodeError(ProxyError.respool(err.message))),
    );
  };
  if (reserved !== undefined) {
    run(reserved);
    // XREADGROUP delivers: its later commands wait, as after any command on one connection.
    if (group) session.runExclusive(() => {});
  } else {
    session.runExclusive(() => run(session.reserve()));
  }
  return true;
}

class StreamRead {
  private readonly keys: Buffer[];
  private readonly ids: Buffer[];
  private readonly groups: SlotStreams[];

  constructor(
    private readonly session: HandlerSession,
    private readonly args: Buffer[],
    private readonly parsed: StreamReadArgs,
  ) {
    const { streamsAt, count } = parsed;
    this.keys = args.slice(streamsAt, streamsAt + count);
    this.ids = args.slice(streamsAt + count);
    const bySlot = new Map<number, SlotStreams>();
    this.keys.forEach((key, i) => {
      const slot = calculateSlot(key);
      let g = bySlot.get(slot);
      if (g === undefined) bySlot.set(slot, (g = { slot, streams: [] }));
      g.streams.push(i);
    });
    this.groups = [...bySlot.values()];
  }

  async run(): Promise<Buffer> {
    const facts = await this.probe();
    if (typeof facts === 'string') return encodeError(facts);
    const error = firstKeyError(this.args, this.parsed, facts.facts);
    if (error !== null) return encodeError(error);
    const now = await Promise.all(this.groups.map((g) => this.readNow(g)));
    const failed = now.find((r) => r[0] === 0x2d);
    if (failed !== undefined) return failed;
    const merged = this.merge(now);
    if (merged !== null || this.parsed.blockMs < 0 || this.session.closed) return merged ?? nullArray(this.session.state.protocol);
    return this.block(facts.resolved);
  }

  /** Each key's type (XREAD: TYPE, or XINFO STREAM for `$`/`+`, which also gives its last ID; XREADGROUP: XPENDING of the group). */
  private async probe(): Promise<{ facts: KeyFacts[]; resolved: Array<string | null> } | string> {
    const ctx = this.session.ctx;
    const resolved: Array<string | null> = this.ids.map(() => null);
    const facts = await Promise.all(
      this.keys.map(async (key, i): Promise<KeyFacts | string> => {
        const slot = calculateSlot(key);
        const id = this.ids[i]!.toString('latin1');
        if (this.parsed.group) {
          const r = await internalCall(ctx.router, this.session, ['XPENDING', key, this.parsed.groupName!], slot, true);
          if (r[0] !== 0x2d) return 'ok';
          const text = r.toString('utf8', 1, r.length - 2);
          return text.startsWith('WRONGTYPE') ? 'wrongtype' : text.startsWith('NOGROUP') ? 'nogroup' : text;
        }
        if (id === '$' || id === '+') {
          const r = await internalCall(ctx.router, this.session, ['XINFO', 'STREAM', key], slot, true);
          if (r[0] === 0x2d) {
            const text = r.toString('utf8', 1, r.length - 2);
            if (text.startsWith('WRONGTYPE')) return 'wrongtype';
            if (text === 'ERR no such key') {
              resolved[i] = '0-0'; // as Valkey: a missing stream's `$` is 0-0
              return 'missing';
            }
            return text;
          }
          const last = lastGeneratedId(r);
          if (last === null) return ProxyError.unexpectedReply('XINFO STREAM');
          resolved[i] = id === '$' ? last : decrementId(last);
          return 'ok';
        }
        const r = await internalCall(ctx.router, this.session, ['TYPE', key], slot, true);
        const type = r.toString('latin1');
        if (type === '+stream\r\n') return 'ok';
        if (type === '+none\r\n') return 'missing';
        return r[0] === 0x2d ? r.toString('utf8', 1, r.length - 2) : 'wrongtype';
      }),
    );
    const problem = facts.find((f) => f !== 'ok' && f !== 'missing' && f !== 'wrongtype' && f !== 'nogroup');
    if (problem !== undefined) return ProxyError.respool(`could not check the streams: ${problem}`);
    return { facts: facts as KeyFacts[], resolved };
  }

  /** The command over one slot's streams; without BLOCK, or with it and the given IDs. */
  private command(g: SlotStreams, blocking: boolean, ids: ReadonlyArray<Buffer | string>): Buffer[] {
    const { streamsAt, blockAt } = this.parsed;
    const prefix = this.args.slice(0, streamsAt).filter((_, i) => blocking || (i !== blockAt && i !== blockAt - 1));
    return [...prefix, ...g.streams.map((i) => this.keys[i]!), ...g.streams.map((i) => Buffer.from(ids[i]!))] as Buffer[];
  }

  private readNow(g: SlotStreams): Promise<Buffer> {
    return internalCall(this.session.ctx.router, this.session, this.command(g, false, this.ids), g.slot, !this.parsed.group);
  }

  /** Phase three: every slot blocked at once; the replies that arrived, merged. */
  private block(resolved: ReadonlyArray<string | null>): Promise<Buffer> {
    const ids = this.ids.map((id, i) => resolved[i] ?? id);
    const state = this.session.state;
    const replies: Array<Buffer | null> = this.groups.map(() => null);
    return new Promise((resolve) => {
      let pending = this.groups.length;
      let ended = false;
      const end = (except: number): void => {
        if (ended) return;
        ended = true;
        calls.forEach((c, i) => {
          if (i !== except) void c.unblock('timeout');
        });
      };
      const name = this.args[0]!.toString('latin1').toLowerCase();
      const calls = this.groups.map(
        (g, i) =>
          new BlockingCall(this.session, encodeCommand(this.command(g, true, ids)), name, g.slot, this.parsed.blockMs === 0 ? null : this.parsed.blockMs, (reply) => {
            replies[i] = reply;
            if (reply !== null) end(i); // entries, nil (timed out), or an error: the wait is over
            if (--pending > 0) return;
            if (state.lease === lease) state.lease = null;
            state.unblock();
            const failed = replies.find((r) => r !== null && r[0] === 0x2d);
            const merged = this.merge(replies.filter((r): r is Buffer => r !== null && r[0] !== 0x2d));
            resolve(merged ?? failed ?? nullArray(state.protocol));
          }),
      );
      const lease = {
        abandon: () => calls.forEach((c) => c.abandon()),
        unblock: async (how: 'timeout' | 'error') => (await Promise.all(calls.map((c) => c.unblock(how)))).some((b) => b),
      };
      state.lease = lease;
      state.block(this.keys.map((k) => k.toString('latin1')), this.parsed.group);
      for (const call of calls) call.start();
    });
  }

  /** The slots' replies as one server's: streams in the order given, those without entries left out; null when none has any. */
  private merge(replies: readonly Buffer[]): Buffer | null {
    const entries = new Map<string, Buffer[][]>(); // key → [key frame, entries frame] pairs in reply order
    for (const reply of replies) {
      const parts = splitAggregate(reply);
      if (parts === null) continue; // nil: nothing from that slot
      const map = reply[0] === 0x25; /* % */
      for (let i = 0; i < parts.length; i += map ? 2 : 1) {
        const pair = map ? [parts[i]!, parts[i + 1]!] : splitAggregate(parts[i]!)!;
        const name = bulkText(pair[0]!);
        let list = entries.get(name);
        if (list === undefined) entries.set(name, (list = []));
        list.push(pair);
      }
    }
    const ordered: Buffer[][] = [];
    for (const key of this.keys) {
      const next = entries.get(key.toString('latin1'))?.shift();
      if (next !== undefined) ordered.push(next);
    }
    if (ordered.length === 0) return null;
    return this.session.state.protocol === 3
      ? encodeMap(ordered.map(([k, v]) => [k!, v!]), 3)
      : encodeArray(ordered.map(([k, v]) => encodeArray([k!, v!])));
  }
}

/** A bulk string frame's bytes as latin1 text (a stream key in a reply). */
function bulkText(frame: Buffer): string {
  return frame.toString('latin1', frame.indexOf(0x0a) + 1, frame.length - 2);
}

/** XINFO STREAM's last-generated-id (RESP2: a flat array; RESP3: a map). */
function lastGeneratedId(reply: Buffer): string | null {
  const value = decodeReply(reply, 16);
  if (value instanceof Map) {
    const v = value.get('last-generated-id');
    return Buffer.isBuffer(v) ? v.toString('latin1') : typeof v === 'string' ? v : null;
  }
  if (!Array.isArray(value)) return null;
  for (let i = 0; i + 1 < value.length; i += 2) {
    const k = value[i];
    if ((Buffer.isBuffer(k) ? k.toString('latin1') : k) === 'last-generated-id') {
      const v = value[i + 1];
      return Buffer.isBuffer(v) ? v.toString('latin1') : typeof v === 'string' ? v : null;
    }
  }
  return null;
}

/** The ID just before `id` (Valkey's streamDecrID): what `+` reads after. */
function decrementId(id: string): string {
  const [ms, seq] = id.split('-').map((x) => BigInt(x)) as [bigint, bigint];
  if (seq > 0n) return `${ms}-${seq - 1n}`;
  if (ms > 0n) return `${ms - 1n}-${2n ** 64n - 1n}`;
  return '0-0';
}
