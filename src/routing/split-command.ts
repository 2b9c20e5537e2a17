import type { CommandSpec, CommandTable } from '../commands/command-table.js';
import type { Link, LinkFailureCause, LinkRequest } from '../upstream/link.js';
import { arrayHeaderSize, bulkSize, encodeCommand, writeArrayHeader, writeBulk } from '../resp/encode.js';
import { CommandFlag } from '../commands/command-flags.js';
import { UpstreamCall, type CallClient, type CallOwner } from './upstream-call.js';
import type { Router } from './router.js';
import { Fragmented } from './fragmented.js';

/**
 * One client command split by hash slot (handlers/cross-slot/multi-key.ts: MGET, MSET, DEL, …), carried as
 * cheaply as the plain calls it replaces: no object per part on the way out or back. The parts
 * for one node are written into ONE buffer and handed to the node's link as one NodeBatch, which
 * the link's FIFO holds once per part (Link.sendMany), so each reply frame comes back to it in
 * order. A part whose reply is an error (MOVED, ASK, TRYAGAIN …) or whose link fails only then
 * becomes an UpstreamCall of its own (its bytes a view of the batch), and follows the router's
 * rules like any keyed call. A part that the read strategy or the hot-key hook must see
 * (Router.send to: 'slots') is routed alone from the start.
 *
 *   keys    : the key positions in `args`, in the client's order (key j = args[keys[j]])
 *   order   : key ordinals grouped by part: part p's keys are order[start[p] .. start[p + 1])
 *   slots   : part p's slot (parts in the order their first key comes)
 *   replies : one per part (Fragmented), null until it answered; `merge` runs once the last one did
 *   invariant: `owner` gets exactly one reply, after every part answered
 */
export abstract class SplitCommand extends Fragmented {
  readonly readOnly: boolean;

  constructor(
    owner: CallOwner,
    /** Lower-case command name, for metrics and errors. */
    command: string,
    readonly spec: CommandSpec,
    readonly table: CommandTable,
    readonly args: readonly Buffer[],
    readonly keys: readonly number[],
    /** Arguments per key: 2 for MSET (a key and its value), else 1. */
    readonly width: number,
    readonly slots: readonly number[],
    readonly order: Int32Array,
    readonly start: Int32Array,
  ) {
    super(owner, command, slots.length);
    this.readOnly = (spec.flags & CommandFlag.READONLY) !== 0;
  }

  /**
   * Part `p`'s reply. A frame from a link may be kept as it is: links frame replies out of
   * buffers that are never written again (util/shared-read-buffer.ts, a TLS 'data' chunk).
   * A part routed as a call of its own ends in onCallDone (UpstreamCall.index is the part), which copies.
   */
  partDone(p: number, reply: Buffer): void {
    this.settle(p, reply);
  }

  /** Bytes of part p as a command. */
  partSize(p: number): number {
    const { args, keys, order, width } = this;
    const from = this.start[p]!;
    const to = this.start[p + 1]!;
    let size = arrayHeaderSize(1 + (to - from) * width) + bulkSize(args[0]!.length);
    for (let i = from; i < to; i++) {
      const at = keys[order[i]!]!;
      for (let w = 0; w < width; w++) size += bulkSize(args[at + w]!.length);
    }
    return size;
  }

  /** Writes part p as a command at `off`; returns the offset after it. */
  writePart(p: number, out: Buffer, off: number): number {
    const { args, keys, order, width } = this;
    const from = this.start[p]!;
    const to = this.start[p + 1]!;
    off = writeArrayHeader(out, off, 1 + (to - from) * width);
    off = writeBulk(out, off, args[0]!);
    for (let i = from; i < to; i++) {
      const at = keys[order[i]!]!;
      for (let w = 0; w < width; w++) off = writeBulk(out, off, args[at + w]!);
    }
    return off;
  }

  /** Part p's arguments (a part routed alone: the hook or the read strategy must see it). */
  partArgs(p: number): Buffer[] {
    const { args, keys, order, width } = this;
    const out: Buffer[] = [args[0]!];
    for (let i = this.start[p]!; i < this.start[p + 1]!; i++) {
      const at = keys[order[i]!]!;
      for (let w = 0; w < width; w++) out.push(args[at + w]!);
    }
    return out;
  }

  /** Routes part p alone, to its keys (hot-key hook, read strategy, …). */
  routeAlone(router: Router, p: number): void {
    const partArgs = this.partArgs(p);
    const request = { raw: encodeCommand(partArgs), args: partArgs, spec: this.spec, command: this.command };
    const error = router.send({ to: 'keys', owner: this.partOwner(p), request, table: this.table });
    if (error !== null) this.partDone(p, error);
  }

  /** The owner of a part routed alone (the hot-key hook may make its own call, whose index is not the part's). */
  private partOwner(p: number): CallOwner {
    const parent = this;
    return {
      get client(): CallClient {
        return parent.client;
      },
      onCallDone: (reply: Buffer) => parent.onCallDone(reply, p),
    };
  }
}

/**
 * The parts of one split command for one node, written as one buffer: the link's FIFO holds this
 * object once per part, so its n-th reply frame is its n-th part's. The common reply goes
 * straight to the command; anything else makes the part an UpstreamCall then (callFor).
 */
export class NodeBatch implements LinkRequest {
  sentAt = 0;
  /** The next part (index into `parts`) to get a reply or a failure. */
  private next = 0;

  constructor(
    private readonly split: SplitCommand,
    private readonly router: Router,
    /** "host:port" of the node. */
    readonly node: string,
    /** The parts, in the order they are written. */
    readonly parts: readonly number[],
    /** Part parts[i]'s bytes are data[offsets[i], offsets[i + 1]). */
    private readonly offsets: Int32Array,
    readonly data: Buffer,
  ) {}

  onReply(frame: Buffer, link: Link): void {
    const i = this.next++;
    if (frame[0] === 0x2d /* - */) {
      this.callFor(i).onReply(frame, link); // redirects, retries, identity errors: the router's rules
      return;
    }
    this.router.observePart(this.split, this.node, this.sentAt);
    this.split.partDone(this.parts[i]!, frame);
  }

  onLinkFailure(error: string, written: boolean, cause?: LinkFailureCause): void {
    this.callFor(this.next++).onLinkFailure(error, written, cause);
  }

  /** Part parts[i] as a call of its own, as if it had been sent alone (its bytes a view of the batch). */
  callFor(i: number): UpstreamCall {
    const p = this.parts[i]!;
    const split = this.split;
    const call = new UpstreamCall(split, this.router, this.data.subarray(this.offsets[i]!, this.offsets[i + 1]!), split.command, split.slots[p]!);
    call.index = p;
    call.node = this.node;
    call.sentAt = this.sentAt;
    call.safeToRepeat = split.readOnly;
    return call;
  }
}
