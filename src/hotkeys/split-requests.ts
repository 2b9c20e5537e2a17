import type { Link } from '../upstream/link.js';
import { UpstreamCall, type CallOwner } from '../routing/upstream-call.js';
import { Fragmented } from '../routing/fragmented.js';
import type { Router } from '../routing/router.js';
import type { SplitCopy, SplitKey } from './split-key.js';

/** What the split requests need from the hot-key manager. */
export interface SplitOwner {
  /** A read on copy `copy` found nothing: re-read the original (and repair the copy if it has a value). */
  readFallback(read: SplitRead): void;
  /** The original's reply to that re-read. */
  fallbackDone(read: SplitRead, reply: Buffer): void;
  /** A fan-out write finished: every copy replied (`original`: the original's reply). The client's reply. */
  writeDone(write: SplitWrite, original: Buffer, failed: SplitCopy[], firstError: string): Buffer;
}

/**
 * True for replies that say "nothing there" on a key: nil (RESP2/3), an empty aggregate,
 * :0 (EXISTS, HLEN, STRLEN, HEXISTS ...), :-2 (TTL/PTTL of a missing key), +none (TYPE).
 * A copy answering one of these may simply be missing, so the original is asked too.
 */
export function isEmptyReply(frame: Buffer): boolean {
  const n = frame.length;
  switch (frame[0]) {
    case 0x24: // $-1
    case 0x2a: // *-1 / *0
      return (n === 5 && frame[1] === 0x2d && frame[2] === 0x31) || (n === 4 && frame[1] === 0x30);
    case 0x5f: // _
      return n === 3;
    case 0x25: // %0
    case 0x7e: // ~0
      return n === 4 && frame[1] === 0x30;
    case 0x3a: // :0 or :-2
      return (n === 4 && frame[1] === 0x30) || (n === 5 && frame[1] === 0x2d && frame[2] === 0x32);
    case 0x2b: // +none
      return n === 7 && frame[1] === 0x6e && frame[2] === 0x6f && frame[3] === 0x6e && frame[4] === 0x65;
    default:
      return false;
  }
}

/**
 * A read of a split key, sent to one copy. On an empty reply from a copy it falls back to the
 * original: the fallback is a call whose owner is this read, and its reply finishes this read.
 */
export class SplitRead extends UpstreamCall implements CallOwner {
  constructor(
    owner: CallOwner,
    router: Router,
    raw: Buffer,
    command: string,
    readonly key: SplitKey,
    readonly copy: SplitCopy,
    /** The client's own request bytes (addressing the original). */
    readonly originalRaw: Buffer,
    private readonly splitOwner: SplitOwner,
  ) {
    super(owner, router, raw, command, copy.slot);
  }

  override onReply(frame: Buffer, link: Link): void {
    if (frame[0] === 0x2d /* - */ && this.router.handleErrorReply(this, frame, link)) return;
    this.router.observeReply(this, frame[0] === 0x2d);
    if (this.copy !== this.key.original && isEmptyReply(frame)) {
      this.splitOwner.readFallback(this);
      return;
    }
    this.finish(frame);
  }

  /** The fallback read of the original answered. */
  onCallDone(reply: Buffer): void {
    this.splitOwner.fallbackDone(this, reply);
  }
}

/**
 * A write to a split key: one child call per copy (index 0 is the original), finished once every
 * copy answered; the hot-key manager decides the client's reply (splitOwner.writeDone).
 */
export class SplitWrite extends Fragmented {
  constructor(
    owner: CallOwner,
    command: string,
    readonly key: SplitKey,
    readonly targets: readonly SplitCopy[],
    private readonly splitOwner: SplitOwner,
  ) {
    super(owner, command, targets.length);
  }

  protected merge(replies: Buffer[]): Buffer {
    const failed: SplitCopy[] = [];
    let firstError = '';
    replies.forEach((reply, i) => {
      if (reply[0] !== 0x2d) return;
      failed.push(this.targets[i]!);
      if (firstError === '') firstError = reply.toString('utf8', 1, Math.max(1, reply.length - 2));
    });
    return this.splitOwner.writeDone(this, replies[0]!, failed, firstError);
  }
}
