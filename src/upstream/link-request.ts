/**
 * A request waiting for one reply from a connection to a node, and what it is told: the reply
 * frame, or a failure with whether its bytes were written and why (node-connection.ts holds
 * these in its FIFO; link.ts re-exports them for the router).
 */

/**
 * Why a request failed without a reply, when it is more than "the connection went away":
 *  - 'timeout': it was written on a connection whose oldest request waited past its bound;
 *  - 'shed': respool refused it because a bound was reached (queue full, node down past the
 *    queueing window); it was not written, and must not be retried either.
 */
export type LinkFailureCause = 'timeout' | 'shed';

/** The connection a reply came on, as a LinkRequest sees it. Only what reply handling reads. */
export interface ReplySource {
  /** "host:port" of the upstream node. */
  readonly address: string;
}

/** Something waiting for one reply frame from a connection (routing/upstream-call.ts UpstreamCall, a lease's requests, control-plane calls). */
export interface LinkRequest {
  /** Set by the connection when the request is queued to be written (util/read-clock.ts: clockNow). */
  sentAt: number;
  /** The reply frame (a view into the connection's read buffer: copy it to keep it past the call). */
  onReply(frame: Buffer, link: ReplySource): void;
  /**
   * The connection failed before a reply came. `written` tells whether the request's bytes were
   * handed to the socket: if so the server may have run it, so it must not be re-sent blindly.
   * `cause` says when it was a timeout or a refusal (see LinkFailureCause); the router decides
   * by it, never by the error's text (which may quote an earlier failure).
   */
  onLinkFailure(error: string, written: boolean, cause?: LinkFailureCause): void;
  /**
   * Answered by this many push frames instead of one reply — RESP3 (un)subscribe confirmations,
   * one per name (pubsub/subscriber-connection.ts); the role says which push answers it
   * (NodeConnection.answers). An error reply still answers it whole. Unset: one reply.
   */
  pushReplies?: number;
}

/** Requests written on one link right before and right after another's, in the same write (handlers/script.ts: a script's command count). */
export interface FramesAround {
  before: { data: Buffer; req: LinkRequest };
  after: { data: Buffer; req: LinkRequest };
}

/**
 * A request whose reply nobody reads (ASKING's, MULTI's or CLIENT CACHING's +OK, a SCRIPT LOAD
 * before a retry): a failure shows on the request written after it. A fresh one per write, as the
 * connection stamps each request's sentAt (a shared one would make its oldest entry look newer).
 */
export function ignoreReply(): LinkRequest {
  return { sentAt: 0, onReply() {}, onLinkFailure() {} };
}
