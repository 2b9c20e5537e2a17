import type { Link, LinkFailureCause, LinkRequest } from '../upstream/link.js';
import type { FramesAround } from '../upstream/link-request.js';
import type { ClusterNode } from '../cluster/topology.js';
import type { Router } from './router.js';
import type { ReadChoice, ReadStrategy } from './read-strategy.js';
import type { UpstreamIdentity } from '../acl/upstream-identity.js';

/**
 * The client a call is made for: its protocol and database pick the links, its id is the link
 * affinity.
 */
export interface CallClient {
  /** The client's id: also its link affinity, so its commands to a node keep their order. */
  readonly id: number;
  readonly protocol: 2 | 3;
  /** The client's database (SELECT against a standalone upstream); 0 in a cluster. */
  readonly db: number;
  /** Who its commands run as on the nodes (src/acl/upstream-identity.ts); null = respool's own user. */
  readonly identity: UpstreamIdentity | null;
  /**
   * A client session's link place and its replies owed (NodePool.placeFor: one link per node
   * while it keeps up, a place kept while requests are outstanding); absent for stand-ins.
   */
  linkPlace?: number;
  readonly pending?: number;
  /** A client session's lane (client/lane-class.ts): its requests take the node's bulk links. */
  readonly bulk?: boolean;
  readonly closed: boolean;
}

/**
 * Where a call's one reply goes: a reply-queue entry (client/reply-queue.ts), a fragmented
 * request collecting its children (fragmented.ts), or a hot-key read waiting for its fallback.
 * `reply` may be a view into a link's read buffer: copy it to keep it past the call.
 */
export interface CallOwner {
  readonly client: CallClient;
  /** `index`: the call's place among its owner's calls (fragmented.ts); 0 for a lone call. */
  onCallDone(reply: Buffer, index: number): void;
  /** Optional: the call's reply came from `node` after `ms` (the slow log's node and time split). */
  upstreamTimed?(node: string, ms: number): void;
  /** Optional: tell `onSize` the size of the reply this owner gets (big keys, for sampled requests). */
  measureReply?(onSize: (bytes: number) => void): void;
}

/** Builds the call Router.send sends to a request's keys (a subclass that reads its own replies, handlers/script.ts). */
export type CallFactory = (owner: CallOwner, router: Router, raw: Buffer, command: string, slot: number) => UpstreamCall;

/**
 * One command on its way to one node: routed by slot (or pinned to a node), maybe redirected or
 * retried within budgets, finished with exactly one reply handed to its owner. It knows nothing
 * about reply order: that is the session's reply queue.
 */
export class UpstreamCall implements LinkRequest {
  sentAt = 0;
  done = false;
  redirects = 0;
  retries = 0;
  /** Address of the node the call was last sent to (for errors and metrics). */
  node = '';
  /** A read-only command: may be re-sent even when a lost link may have run it (router.ts). */
  safeToRepeat = false;
  /** Read-only command under a read strategy (read-strategy.ts); null: the slot's primary. */
  read: ReadStrategy | null = null;
  /** Where the read strategy last sent it. */
  readChoice: ReadChoice | null = null;
  /** Replicas this read already failed on (MOVED, LOADING, link failure), skipped on re-plan. */
  avoid: string[] | null = null;
  /** A call for one named node (whole-data-set fan-out): never redirected, never retried. */
  pinned: { node: ClusterNode; role: 'primary' | 'replica' } | null = null;
  /** The child's place in a fragmented request (fragmented.ts); 0 otherwise. */
  index = 0;
  /**
   * Sent as respool's own user even for a client with an upstream identity: reads and writes of
   * split hot-key copies (hotkeys/), whose copies are respool's keys and whose command respool
   * checked completely against the key the client named.
   */
  asRespool = false;

  constructor(
    readonly owner: CallOwner,
    readonly router: Router,
    /** The command's exact RESP bytes, forwarded as received (or rewritten for a part/copy). */
    readonly raw: Buffer,
    /** Lower-case command name, for metrics and errors. */
    readonly command: string,
    /** Hash slot of its keys, -1 for keyless commands. */
    public slot: number,
  ) {}

  get client(): CallClient {
    return this.owner.client;
  }

  onReply(frame: Buffer, link: Link): void {
    if (frame[0] === 0x2d /* - */) {
      if (this.router.handleErrorReply(this, frame, link)) return;
      const identity = this.asRespool ? null : this.client.identity;
      if (identity !== null) frame = this.router.identityError(this, identity, frame);
    }
    this.router.observeReply(this, frame[0] === 0x2d);
    this.finish(frame);
  }

  onLinkFailure(error: string, written: boolean, cause?: LinkFailureCause): void {
    this.router.handleLinkFailure(this, error, written, cause);
  }

  /**
   * Requests to write right before and right after this call's on its link, at each send (a
   * script's command count, handlers/script.ts); null: the call alone. `extra`: how many commands
   * the router writes between them besides the call (ASKING).
   */
  around(_extra: number): FramesAround | null {
    return null;
  }

  /** Completes the call with these reply bytes (exactly once). */
  finish(reply: Buffer): void {
    if (this.done) return;
    this.done = true;
    this.owner.onCallDone(reply, this.index);
  }
}
