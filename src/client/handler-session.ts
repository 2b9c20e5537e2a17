import type { CommandSpec } from '../commands/command-table.js';
import type { CommandFamily } from '../commands/proxy-handling.js';
import type { RequestFrame } from '../resp/request-framer.js';
import type { ClientState } from './client-state.js';
import type { EntryClient, ReplyEntry } from './reply-queue.js';
import type { ServerContext } from './server-context.js';
import type { ReplyNames } from '../keys/reply-names.js';
import type { Tenant } from '../tenants/tenant.js';

/** One framed client request, as the handlers see it. */
export interface CommandRequest {
  /** Views into the client's read buffer: copy what must outlive this call. */
  readonly args: Buffer[];
  /** The request's exact bytes, forwarded unchanged where possible. */
  readonly raw: Buffer;
  readonly spec: CommandSpec | undefined;
  /** Lower-case table name ("client|setname"), or the lower-cased args[0] of an unknown command. */
  readonly command: string;
}

/**
 * What respool holds for one client right now, for CLIENT LIST / INFO (Valkey's qbuf, argv-mem,
 * obl, oll, omem, events, tot-net-in, tot-net-out, measured on respool's own buffers).
 */
export interface ClientBuffers {
  /** Bytes read from the client and not yet handled (a partial request, or the rest of a pipeline). */
  readonly queryBytes: number;
  /** Argument bytes of the request being handled, held by CLIENT PAUSE, or blocked. */
  readonly argvBytes: number;
  /** Bytes of replies in the current write batch, not yet handed to the socket. */
  readonly batchedBytes: number;
  /** The largest batch of small replies written at once in about the last 5 s (Valkey's reply-buffer peak, rbp). */
  readonly peakBatchBytes: number;
  /** Finished replies waiting behind an unanswered one (request order), and their bytes. */
  readonly heldReplies: number;
  readonly heldReplyBytes: number;
  /** Bytes handed to the socket that the kernel has not taken (libuv, the Writable). */
  readonly unsentBytes: number;
  /** Whether respool reads the client's socket now (not paused by a bound, a barrier, CLIENT PAUSE). */
  readonly reading: boolean;
  /** Bytes read from the client, and bytes of replies the kernel took, since it connected. */
  readonly bytesIn: number;
  readonly bytesOut: number;
}

/** What handlers may do with the session they serve (implemented by ClientSession). */
/** What joinTenant did: see there. */
export type TenantJoin = 'joined' | 'full' | 'elsewhere';

export interface HandlerSession extends EntryClient {
  readonly state: ClientState;
  readonly ctx: ServerContext;
  readonly address: string;
  readonly localAddress: string;
  readonly createdAt: number;
  /**
   * A new entry at the tail of the reply queue, filled later (by a call, a lease, a handler).
   * `pushing`: pub/sub confirmations, which CLIENT REPLY OFF/SKIP do not silence (Valkey's
   * flag.pushing).
   */
  reserve(pushing?: boolean): ReplyEntry;
  /** Queues a reply that is already known (`pushing` as for reserve). */
  replyNow(reply: Buffer, pushing?: boolean): void;
  /** Queues a pub/sub push behind every reply owed so far (never inside one). */
  push(frame: Buffer): void;
  /** Closes after every queued reply has been written (QUIT, protocol errors). */
  closeAfterReplies(): void;
  /**
   * Makes the client one of `tenant`'s (its user changed: AUTH, HELLO AUTH, RESET), leaving the
   * tenant it was in, and sends its requests to `tenant`'s upstreams from now (ServerContext.contextOf).
   * With `mayRefuse`: 'full' when `tenant` has no room for another client (its maxClients),
   * 'elsewhere' when `tenant` has upstreams of its own and the client holds something on its
   * present ones (subscriptions, a transaction, a lease, tracking).
   */
  joinTenant(tenant: Tenant | null, mayRefuse: boolean): TenantJoin;
  /**
   * Switching lanes (a leased connection) is a barrier: `start` runs once every earlier reply has
   * been written, and no later request is handled until the replies `start` queued are written too.
   */
  runExclusive(start: () => void): void;
  /** Bytes written to this client that it has not read yet (socket, batch, queued pushes). */
  unreadOutputBytes(): number;
  /** Calls `fn` once the unread output is at most `bytes` (backpressure for a stream respool relays). */
  whenOutputBelow(bytes: number, fn: () => void): void;
  /** Runs `fn` once the current request's (next) reply is in: at once if it queues none. Each caller's `fn` runs, in the order asked. */
  afterNextReply(fn: () => void): void;
  /** Runs `fn` when the session closes (release a lease, drop subscriptions). */
  onClose(fn: () => void): void;
  /** What respool holds for this client now (CLIENT LIST / INFO). */
  buffers(): ClientBuffers;
}

export type Handler = (session: HandlerSession, req: CommandRequest) => void;

/** What dispatch (handlers/index.ts) tells the session around one request it admitted (ClientSession). */
export interface DispatchedSession extends HandlerSession {
  /**
   * `frame` was admitted as `family` and its handler runs now: the entries it pushes are timed for
   * that family (client/reply-queue.ts); `blocking`: it may wait on a lease (CLIENT LIST argv-mem).
   */
  startRequest(frame: RequestFrame, family: CommandFamily, blocking: boolean, replyNames?: ReplyNames | null): void;
  /** Its handler returned: later entries (pub/sub pushes) are not this request's. */
  endRequest(): void;
}
