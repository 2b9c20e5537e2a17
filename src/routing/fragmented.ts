import type { CallClient, CallOwner } from './upstream-call.js';
import { encodeError } from '../resp/encode.js';
import { ProxyError } from '../errors.js';

/**
 * One client command carried out as N upstream calls (Envoy's FragmentedRequest): whole-data-set
 * fan-out (fan-out.ts), hot-key writes to every copy (hotkeys/split-requests.ts), and multi-key
 * commands over several slots (routing/split-command.ts: one part per slot). Each child has
 * `index` set and this object as its owner: an UpstreamCall sent through the router (so it
 * follows MOVED/ASK and retries like any other call), or a nested fragment (a split-key write
 * inside a part) whose own children are. When the last child answers, `merge` turns
 * the children's replies (copied, in index order) into the one reply handed to `owner` — a
 * reply-queue entry, or the parent of a nested fragment (a split-key write inside a part).
 *
 *   replies  : one slot per child, null until that child answered
 *   invariant: `owner` gets exactly one reply, after every child answered
 */
export abstract class Fragmented implements CallOwner {
  protected readonly replies: Array<Buffer | null>;
  private remaining: number;

  constructor(
    readonly owner: CallOwner,
    /** Lower-case command name, for errors. */
    readonly command: string,
    count: number,
    /** This fragment's own place among its owner's calls. */
    private readonly index = 0,
  ) {
    this.replies = new Array<Buffer | null>(count).fill(null);
    this.remaining = count;
  }

  get client(): CallClient {
    return this.owner.client;
  }

  /** Passed up: the entry keeps every node and the slowest time (the children run side by side). */
  upstreamTimed(node: string, ms: number): void {
    this.owner.upstreamTimed?.(node, ms);
  }

  onCallDone(reply: Buffer, index: number): void {
    this.settle(index, Buffer.from(reply)); // link read buffers are not ours to keep
  }

  /** Child `index`'s reply, kept as it is (the caller copied it, or owns it); the merge runs after the last. */
  protected settle(index: number, reply: Buffer): void {
    if (this.replies[index] !== null) return;
    this.replies[index] = reply;
    if (--this.remaining > 0) return;
    let merged: Buffer;
    try {
      merged = this.merge(this.replies as Buffer[]);
    } catch (err) {
      // A reply respool cannot take apart is this client's error, never the link's.
      merged = encodeError(ProxyError.cannotMerge(this.command, (err as Error).message));
    }
    this.owner.onCallDone(merged, this.index);
  }

  /** The client's reply from the children's replies, in index order. */
  protected abstract merge(replies: Buffer[]): Buffer;
}
