import { nodeCrypto, onFirstUse } from '../../util/lazy-builtins.js';
import calculateSlot from 'cluster-key-slot';
import { encodeCommand, encodeError } from '../../resp/encode.js';
import { bulkPayload, splitAggregate } from '../../resp/decode.js';
import { ProxyError } from '../../errors.js';
import { formatSize } from '../../config/values.js';
import { TransactionBlock, type BlockOutcome } from '../../routing/transaction-block.js';
import { asRespoolClient, internalCall } from '../../routing/internal-call.js';
import type { ReplyEntry } from '../../client/reply-queue.js';
import type { CommandRequest, HandlerSession } from '../../client/handler-session.js';

/** Reads over several slots whose reply depends on every key together: run on copies. */
export const COPY_READS: ReadonlySet<string> = new Set(['sunion', 'sinter', 'sdiff', 'sintercard', 'zunion', 'zinter', 'zdiff', 'zintercard', 'pfcount', 'lcs']);

/** …STORE forms (and BITOP, PFMERGE): run on copies into a copy of the destination, which is then written. The destination's position in args. */
export const COPY_STORES: ReadonlyMap<string, number> = new Map([
  ['sunionstore', 1], ['sinterstore', 1], ['sdiffstore', 1], ['zunionstore', 1], ['zinterstore', 1], ['zdiffstore', 1],
  ['zrangestore', 1], ['geosearchstore', 1], ['pfmerge', 1], ['bitop', 2],
]);

/** Stores whose destination is an input too (PFMERGE merges into what the destination holds). */
const READS_DESTINATION: ReadonlySet<string> = new Set(['pfmerge']);

/** Makes the copies' names unique to this process, so respool processes sharing a cluster never meet. */
const processTag = onFirstUse(() => nodeCrypto().randomBytes(6).toString('hex'));
let nextCopy = 0;

/** A hash tag whose slot the primary at `address` owns, per primary (checked again at each use). */
const tagsByNode = new Map<string, string>();

/**
 * Commands over keys in several slots whose reply needs every key at once — SUNION, SINTER,
 * SDIFF, SINTERCARD, ZUNION, ZINTER, ZDIFF, ZINTERCARD (WEIGHTS, AGGREGATE, WITHSCORES …),
 * PFCOUNT of several keys, LCS — and the …STORE forms (SUNIONSTORE, SINTERSTORE, SDIFFSTORE,
 * ZUNIONSTORE, ZINTERSTORE, ZDIFFSTORE, ZRANGESTORE, GEOSEARCHSTORE, PFMERGE, BITOP): Valkey
 * computes them, on copies.
 *
 *  1. DUMP of every input key, each on its own slot's primary, sent at once (in the client's order
 *     on each node, so the copy sees the client's earlier writes). Their payloads together may
 *     not exceed limits.maxCrossSlotCopyBytes: past it the client gets an error saying so.
 *  2. On the primary of the first key: one MULTI … EXEC of RESTORE of each copy under a hash tag
 *     of respool's own that this node owns (`{respool-copy-N}:<process>:<n>:<i>`), the client's
 *     command with its keys replaced by the copies' names, and DEL of every copy. Nothing is left
 *     behind, nobody else sees the copies, and the reply is Valkey's own, byte for byte.
 *  3. A …STORE form ran into a copy of its destination, DUMPed in the same block: the destination
 *     is then written on its own primary (RESTORE … REPLACE, or DEL when the result is empty, as
 *     Valkey deletes an empty destination), and the client gets the command's reply. Its later
 *     commands wait for that write. Not atomic: the inputs are read before the destination is
 *     written, and a write another client makes to the destination meanwhile is overwritten.
 *
 * `entry`: the client's reply entry (reserved by the keyed handler).
 */
export function copyAndRun(session: HandlerSession, req: CommandRequest, entry: ReplyEntry): boolean {
  const { spec, command } = req;
  if (spec === undefined || !(COPY_READS.has(command) || COPY_STORES.has(command))) return false;
  const ctx = session.ctx;
  const args = req.args.map((a) => Buffer.from(a));
  const keyPositions = ctx.commands().keyIndexes(spec, args);
  if (keyPositions.length < 2) return false;
  const destination = COPY_STORES.get(command);
  if (destination !== undefined && !keyPositions.includes(destination)) return false;
  ctx.metrics?.crossSlotCommands.read.inc();
  const run = new CopyRun(session, command, args, keyPositions, destination ?? -1);
  void run.start().then(
    (reply) => entry.fill(reply),
    (err: Error) => entry.fill(encodeError(ProxyError.respool(err.message))),
  );
  if (destination !== undefined) session.runExclusive(() => {}); // later commands wait for the destination's write
  return true;
}

class CopyRun {
  /** Distinct key names, in first-seen order, and each key position's index among them. */
  private readonly names: Buffer[] = [];
  private readonly nameOf = new Map<number, number>();

  constructor(
    private readonly session: HandlerSession,
    private readonly command: string,
    private readonly args: Buffer[],
    private readonly keyPositions: readonly number[],
    /** The destination's position in args, -1 for a read. */
    private readonly destination: number,
  ) {
    const seen = new Map<string, number>();
    for (const p of keyPositions) {
      const text = args[p]!.toString('latin1');
      let i = seen.get(text);
      if (i === undefined) {
        i = this.names.length;
        seen.set(text, i);
        this.names.push(args[p]!);
      }
      this.nameOf.set(p, i);
    }
  }

  async start(): Promise<Buffer> {
    const ctx = this.session.ctx;
    const node = ctx.router.primaryFor(calculateSlot(this.args[this.keyPositions[0]!]!));
    if (node === undefined) return encodeError(ProxyError.topologyUnknown());
    const tag = tagOn(this.session, node.address);
    if (tag === null) return encodeError(ProxyError.topologyUnknown());
    const copy = `{${tag}}:${processTag()}:${nextCopy++}:`;
    const copyName = (i: number) => `${copy}${i}`;
    // 1. DUMP of every input (the destination of a …STORE only when it is read too).
    const destName = this.destination >= 0 ? this.nameOf.get(this.destination)! : -1;
    const inputs = this.names.map((_, i) => i).filter((i) => i !== destName || READS_DESTINATION.has(this.command) || this.keyPositions.filter((p) => this.nameOf.get(p) === i).length > 1);
    const payloads = await this.dumpAll(inputs);
    if (!Array.isArray(payloads)) return payloads;
    // 2. One block on this node: RESTORE the copies, the command over them, (DUMP of the result), DEL.
    const block: Buffer[] = [];
    const restored: number[] = [];
    inputs.forEach((i, j) => {
      const payload = payloads[j];
      if (payload === null) return; // a missing key stays missing
      block.push(encodeCommand(['RESTORE', copyName(i), '0', payload!]));
      restored.push(i);
    });
    const rewritten = this.args.map((a, p) => (this.nameOf.has(p) ? Buffer.from(copyName(this.nameOf.get(p)!)) : a));
    block.push(encodeCommand(rewritten));
    if (destName >= 0) block.push(encodeCommand(['DUMP', copyName(destName)]));
    block.push(encodeCommand(['DEL', ...this.names.map((_, i) => copyName(i))]));
    const outcome = await new Promise<BlockOutcome>((resolve) => new TransactionBlock(ctx.router, asRespoolClient(this.session), calculateSlot(`{${tag}}`), block, resolve).send());
    const parts = this.execParts(outcome, block.length);
    if (!Array.isArray(parts)) return parts;
    for (let j = 0; j < restored.length; j++) {
      if (parts[j]![0] === 0x2d) return encodeError(ProxyError.copyFailed(this.command, errorText(parts[j]!)));
    }
    const reply = Buffer.from(parts[restored.length]!);
    if (destName < 0 || reply[0] === 0x2d) return reply;
    // 3. The destination becomes what the copy of it became.
    const result = parts[restored.length + 1]!;
    return this.writeDestination(result, reply);
  }

  /** DUMP payloads of the inputs (null for a missing key), or the client's error. */
  private async dumpAll(inputs: number[]): Promise<Array<Buffer | null> | Buffer> {
    const ctx = this.session.ctx;
    const limit = ctx.config.limits.maxCrossSlotCopyBytes;
    let total = 0;
    let tooLarge = false;
    let failure: Buffer | null = null;
    const payloads = await Promise.all(
      inputs.map(async (i) => {
        const name = this.names[i]!;
        const reply = await internalCall(ctx.router, this.session, ['DUMP', name], calculateSlot(name), true);
        if (reply[0] === 0x2d) {
          failure ??= reply;
          return null;
        }
        const payload = copiedPayload(reply);
        if (payload === null) return null;
        total += payload.length;
        if (total > limit) tooLarge = true;
        return tooLarge ? null : payload; // past the limit nothing more is kept
      }),
    );
    if (failure !== null) return encodeError(ProxyError.copyFailed(this.command, errorText(failure)));
    if (tooLarge) return encodeError(ProxyError.crossSlotCopyTooLarge(this.command, total, formatSize(limit)));
    return payloads;
  }

  /** EXEC's array from the copy block, or the client's error. */
  private execParts(outcome: BlockOutcome, count: number): Buffer[] | Buffer {
    if (outcome.kind === 'failed') return encodeError(outcome.error);
    if (outcome.reply[0] === 0x2d) {
      return encodeError(ProxyError.copyFailed(this.command, outcome.queueError ?? errorText(outcome.reply)));
    }
    let parts: Buffer[] | null = null;
    try {
      parts = splitAggregate(outcome.reply);
    } catch {
      parts = null;
    }
    if (parts === null || parts.length !== count) return encodeError(ProxyError.unexpectedReply('EXEC'));
    return parts;
  }

  private async writeDestination(result: Buffer, reply: Buffer): Promise<Buffer> {
    const ctx = this.session.ctx;
    const name = this.args[this.destination]!;
    const payload = copiedPayload(result);
    if (payload !== null && payload.length > ctx.config.limits.maxCrossSlotCopyBytes) {
      return encodeError(ProxyError.crossSlotCopyTooLarge(this.command, payload.length, formatSize(ctx.config.limits.maxCrossSlotCopyBytes)));
    }
    const write = payload === null ? ['DEL', name] : ['RESTORE', name, '0', payload, 'REPLACE'];
    const done = await internalCall(ctx.router, this.session, write, calculateSlot(name));
    return done[0] === 0x2d ? encodeError(ProxyError.destinationFailed(this.command, errorText(done))) : reply;
  }
}

/** A hash tag whose slot `address` owns now: `respool-copy-N`, N searched from 0 (a few tries: one per primary on average). */
function tagOn(session: HandlerSession, address: string): string | null {
  const router = session.ctx.router;
  const cached = tagsByNode.get(address);
  if (cached !== undefined && router.primaryFor(calculateSlot(cached))?.address === address) return cached;
  for (let n = 0; n < 100_000; n++) {
    const tag = `respool-copy-${n}`;
    if (router.primaryFor(calculateSlot(tag))?.address === address) {
      tagsByNode.set(address, tag);
      return tag;
    }
  }
  return null;
}

/** A bulk reply's bytes, copied (they are kept across later calls); null for nil ($-1, _). */
function copiedPayload(reply: Buffer): Buffer | null {
  const payload = bulkPayload(reply);
  return payload === null ? null : Buffer.from(payload);
}

function errorText(reply: Buffer): string {
  return reply.toString('utf8', 1, reply.length - 2);
}
