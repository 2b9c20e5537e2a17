import type { Link } from '../upstream/link.js';
import { ProxyRequest, type ReplySink } from '../routing/proxy-request.js';
import type { Router } from '../routing/router.js';
import type { SplitCopy, SplitKey } from './split-key.js';

/** What the split requests need from the hot-key manager. */
export interface SplitOwner {
  /** A read on copy `copy` found nothing: re-read the original (and repair the copy if it has a value). */
  readFallback(read: SplitRead): void;
  /** A fan-out write finished: every child replied. */
  writeDone(write: SplitWrite): void;
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

/** A read of a split key, sent to one copy. Falls back to the original on an empty reply. */
export class SplitRead extends ProxyRequest {
  constructor(
    sink: ReplySink,
    router: Router,
    raw: Buffer,
    command: string,
    readonly key: SplitKey,
    readonly copy: SplitCopy,
    /** The client's own request bytes (addressing the original). */
    readonly originalRaw: Buffer,
    private readonly owner: SplitOwner,
  ) {
    super(sink, router, raw, command, copy.slot);
  }

  override onReply(frame: Buffer, link: Link): void {
    if (frame[0] === 0x2d /* - */ && this.router.handleErrorReply(this, frame, link)) return;
    this.router.observeReply(this, frame[0] === 0x2d);
    if (this.copy !== this.key.original && isEmptyReply(frame)) {
      this.owner.readFallback(this);
      return;
    }
    this.finish(frame);
  }
}

/** The re-read of the original after a copy came back empty. */
export class FallbackRead extends ProxyRequest {
  constructor(readonly parent: SplitRead, private readonly done: (reply: Buffer) => void) {
    super(parent.sink, parent.router, parent.originalRaw, parent.command, parent.key.original.slot);
  }
  // ProxyRequest.finish() reports to `sink`; route it to the parent instead.
  override finish(reply: Buffer): void {
    if (this.reply !== null) return;
    this.reply = reply;
    this.done(reply);
  }
}

/** One copy's part of a fan-out write. */
export class WriteChild extends ProxyRequest {
  constructor(readonly parent: SplitWrite, readonly index: number, raw: Buffer, slot: number) {
    super(parent.sink, parent.router, raw, parent.command, slot);
  }
  override finish(reply: Buffer): void {
    if (this.reply !== null) return;
    this.reply = reply;
    this.parent.childDone(this, reply);
  }
}

/**
 * A write to a split key: the client's entry in its reply queue, finished once every copy
 * answered. Never sent itself; its children (one per copy) are.
 */
export class SplitWrite extends ProxyRequest {
  /** The original's reply (copied: link buffers are not ours to keep). */
  originalReply: Buffer | null = null;
  failures = 0;
  firstError = '';
  failed: SplitCopy[] = [];
  private answered = 0;

  constructor(
    sink: ReplySink,
    router: Router,
    raw: Buffer,
    command: string,
    readonly key: SplitKey,
    readonly targets: readonly SplitCopy[],
    private readonly owner: SplitOwner,
  ) {
    super(sink, router, raw, command, key.original.slot);
  }

  childDone(child: WriteChild, reply: Buffer): void {
    const isError = reply[0] === 0x2d;
    if (child.index === 0) this.originalReply = Buffer.from(reply);
    if (isError) {
      this.failures++;
      this.failed.push(this.targets[child.index]!);
      if (this.firstError === '') this.firstError = reply.toString('utf8', 1, Math.max(1, reply.length - 2));
    }
    if (++this.answered === this.targets.length) this.owner.writeDone(this);
  }
}
