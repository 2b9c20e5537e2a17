import type { CommandSpec } from '../commands/command-table.js';
import type { ClientState } from '../session/client-state.js';
import type { EntryClient, ReplyEntry } from '../session/reply-queue.js';
import type { ServerContext } from '../session/server-context.js';

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

/** What handlers may do with the session they serve (implemented by ClientSession). */
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
   * Switching lanes (a leased connection) is a barrier: `start` runs once every earlier reply has
   * been written, and no later request is handled until the replies `start` queued are written too.
   */
  runExclusive(start: () => void): void;
  /** Bytes written to this client that it has not read yet (socket, batch, queued pushes). */
  unreadOutputBytes(): number;
  /** Calls `fn` once the unread output is at most `bytes` (backpressure for a stream respool relays). */
  whenOutputBelow(bytes: number, fn: () => void): void;
  /** Runs `fn` when the session closes (release a lease, drop subscriptions). */
  onClose(fn: () => void): void;
}

export type Handler = (session: HandlerSession, req: CommandRequest) => void;
