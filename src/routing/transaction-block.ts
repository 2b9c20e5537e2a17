import { encodeCommand } from '../resp/encode.js';
import { splitAggregate } from '../resp/decode.js';
import { ProxyError } from '../errors.js';
import { ignoreReply, type LinkRequest, type ReplySource } from '../upstream/link.js';
import { isMovedOrAsk } from './redirect.js';
import type { Router } from './router.js';
import type { CallClient } from './upstream-call.js';

const MULTI = encodeCommand(['MULTI']);
const EXEC = encodeCommand(['EXEC']);

/** How one block ended. */
export type BlockOutcome =
  /**
   * EXEC's reply (copied): an array when the block ran, an error (EXECABORT …) when the node
   * refused it — then nothing of it ran. `queueError`: the first error a queued command got
   * (what Valkey names as the reason in "EXECABORT … because of: <error>").
   */
  | { kind: 'reply'; reply: Buffer; queueError: string | null; node: string }
  /** The link failed or refused the block: `written` says whether it may have run. */
  | { kind: 'failed'; error: string; written: boolean; node: string };

/** What a block's outcome means for its `size` commands (blockResult). */
export type BlockResult =
  /** It ran: one reply per command, in order (views of EXEC's copied reply). */
  | { kind: 'ran'; replies: Buffer[] }
  /** The node refused it (EXECABORT with the queue-time reason, or another error line): nothing ran. */
  | { kind: 'aborted'; error: string }
  /** The link failed (`written`: it may have run), or EXEC's reply was not an array of `size`. */
  | { kind: 'failed'; error: string; written: boolean };

/** Reads a block's outcome: the one place that knows EXEC's reply shapes (transaction-apart.ts, cross-slot/transaction-split.ts). */
export function blockResult(outcome: BlockOutcome, size: number): BlockResult {
  if (outcome.kind === 'failed') return { kind: 'failed', error: outcome.error, written: outcome.written };
  const frame = outcome.reply;
  if (frame[0] === 0x2d /* - */) {
    const line = frame.toString('utf8', 1, frame.length - 2);
    return { kind: 'aborted', error: outcome.queueError !== null && line.startsWith('EXECABORT') ? ProxyError.execAbortBecause(outcome.queueError) : line };
  }
  let parts: Buffer[] | null = null;
  try {
    parts = frame[0] === 0x2a /* * */ ? splitAggregate(frame) : null;
  } catch {
    parts = null;
  }
  return parts === null || parts.length !== size ? { kind: 'failed', error: ProxyError.unexpectedReply('EXEC'), written: true } : { kind: 'ran', replies: parts };
}

/** The LinkRequests of MULTI, the queued commands and EXEC, reporting to `done` (shared with the tracking-lane path). */
export function blockItems(
  commands: readonly Buffer[],
  address: string,
  done: (outcome: BlockOutcome, redirect: Buffer | null) => void,
): Array<{ data: Buffer; req: LinkRequest }> {
  let queueError: string | null = null;
  let redirect: Buffer | null = null;
  const noteError = (frame: Buffer): void => {
    if (queueError === null) queueError = frame.toString('utf8', 1, frame.length - 2);
    if (redirect === null && isMovedOrAsk(frame)) redirect = Buffer.from(frame);
  };
  const queued: LinkRequest = {
    sentAt: 0,
    onReply(frame) {
      if (frame[0] === 0x2d /* - */) noteError(frame);
    },
    onLinkFailure() {},
  };
  const exec: LinkRequest = {
    sentAt: 0,
    onReply(frame: Buffer, link: ReplySource) {
      if (redirect === null && isMovedOrAsk(frame)) redirect = Buffer.from(frame);
      // An error to EXEC means nothing of the block ran: a redirect seen on the way may be followed.
      done({ kind: 'reply', reply: Buffer.from(frame), queueError, node: link.address }, frame[0] === 0x2d ? redirect : null);
    },
    // Never re-sent: once written, whether it ran is unknown.
    onLinkFailure(error, written) {
      done({ kind: 'failed', error, written, node: address }, null);
    },
  };
  const items = [{ data: MULTI, req: ignoreReply() }];
  for (const data of commands) items.push({ data, req: queued });
  items.push({ data: EXEC, req: exec });
  return items;
}

/**
 * One MULTI … EXEC block for the primary owning `slot` (any primary for -1), written as one
 * write on the client's shared link to it (nothing interleaves inside one write). Used for
 * respool's own transactions (one block per slot, handlers/transaction.ts) and for the short
 * blocks of commands over several slots (handlers/cross-slot/blocking-pops.ts, handlers/cross-slot/reads.ts).
 *
 * MOVED / ASK: a block the node refused (EXEC answered an error, so nothing of it ran) after a
 * queued command or EXEC itself was redirected is written again where the redirect follower says
 * (routing/redirect-follower.ts: ASK puts ASKING first, which holds for the whole MULTI; past its
 * hop bound the client gets the node's answer). A block is never written again once EXEC's array
 * came back, or once its link failed after writing it.
 */
export class TransactionBlock {
  private hops = 0;

  constructor(
    private readonly router: Router,
    private readonly client: CallClient,
    private slot: number,
    /** The commands between MULTI and EXEC, as RESP requests. */
    private readonly commands: readonly Buffer[],
    private readonly done: (outcome: BlockOutcome) => void,
  ) {}

  send(): void {
    const node = this.router.primaryFor(this.slot);
    if (node === undefined) {
      const error = this.router.topology() === null ? ProxyError.topologyUnknown() : ProxyError.slotNotServed(this.slot);
      this.done({ kind: 'failed', error, written: false, node: '' });
      return;
    }
    this.router.send({ to: 'block', client: this.client, node, items: blockItems(this.commands, node.address, (o, r) => this.settle(o, r)) });
  }

  private settle(outcome: BlockOutcome, redirect: Buffer | null): void {
    if (redirect === null || this.client.closed) return this.done(outcome);
    const step = this.router.redirects.step(redirect, outcome.node, this.hops++, 'exec');
    if (step === null || step.kind === 'limit') return this.done(outcome);
    if (step.kind === 'moved') {
      this.slot = step.slot;
      return this.send();
    }
    const address = `${step.host}:${step.port}`;
    this.router.send({ to: 'block', client: this.client, ask: step, items: blockItems(this.commands, address, (o, r) => this.settle(o, r)) });
  }
}
