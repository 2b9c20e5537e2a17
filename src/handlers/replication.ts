import { nodeCrypto } from '../util/lazy-builtins.js';
import { encodeError } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import { ReplicationFeed, isSelect, type ReplicationFeedHandler } from '../upstream/replication-feed.js';
import { clientStreamCommand } from '../keys/stream-names.js';
import type { KeyNames } from '../keys/key-names.js';
import type { ServerContext } from '../client/server-context.js';
import type { ReplyEntry } from '../client/reply-queue.js';
import type { Handler, HandlerSession } from '../client/handler-session.js';

/**
 * SYNC and PSYNC through respool: the client becomes a replica of the whole upstream.
 *
 * respool attaches to every primary as an old-style replica (upstream/replication-feed.ts) and
 * relays what they send:
 *   - one primary (a standalone server): its snapshot byte for byte, then its stream, so a
 *     valkey-server given REPLICAOF respool becomes a faithful copy;
 *   - several primaries (a cluster): an empty snapshot (their snapshots cannot be merged into one
 *     without rewriting them), sent once every primary has sent its own, so that every write made
 *     after that reaches the client; then the primaries' streams merged command by command, a
 *     MULTI … EXEC group never split, and a primary's SELECT dropped when the merged stream
 *     already selected that database (each primary selects database 0 once after attaching; a
 *     cluster has no other). A tap for change data capture, not a way to copy a cluster.
 * PSYNC is always a full resync (`+FULLRESYNC <id> 0`): respool keeps no backlog.
 *
 * A client with a namespace or colocation rules (keys/key-names.ts) gets the stream in its own
 * names, and only its own (keys/stream-names.ts: another namespace's commands are left out, a
 * MULTI … EXEC group left with nothing inside with them), and always the empty snapshot: a
 * node's snapshot holds every application's keys under their stored names.
 *
 * Costs and bounds: each attach makes every primary save a snapshot (BGSAVE), as SYNC to the node
 * would; at most dedicated.maxReplicaStreams clients at once (0 turns SYNC off). Reading pauses
 * while the client has more than 1 MiB unread (the node buffers, up to its own
 * client-output-buffer-limit replica); unread output past pubsub.maxOutputBytesPerClient
 * disconnects it. The client's later requests (a replica's REPLCONF ACK) are read and dropped,
 * as Valkey sends a replica no replies. A primary that fails or leaves ends the client's
 * connection, as a lost master link would: a replica reconnects and resyncs.
 */

/** An empty RDB (version 9, which every Valkey and Redis since 5.0 loads): header, EOF, no checksum (0 = not checked). */
const EMPTY_RDB = Buffer.concat([Buffer.from('REDIS0009', 'latin1'), Buffer.from([0xff]), Buffer.alloc(8)]);
const PAUSE_ABOVE_BYTES = 1024 * 1024;

const attached = new WeakMap<ServerContext, number>();

export const replication: Handler = (session, req) => {
  const ctx = session.ctx;
  const max = ctx.config.dedicated.maxReplicaStreams;
  if (max === 0) return session.replyNow(encodeError(ProxyError.replicaStreamsOff()));
  const primaries = ctx.router.topology()?.primaries() ?? [];
  if (primaries.length === 0) return session.replyNow(encodeError(ProxyError.topologyUnknown()));
  const psync = req.command === 'psync';
  // Earlier replies are written first (Valkey refuses SYNC with replies still pending); the bound
  // on attached clients is checked then, in start().
  session.runExclusive(() => new ReplicaStream(session, primaries, psync).start());
};

class ReplicaStream implements ReplicationFeedHandler {
  private readonly feeds: ReplicationFeed[] = [];
  /** Answered with the snapshot's header (or an error) once known; until then later requests wait. */
  private readonly entry: ReplyEntry;
  private readonly passThrough: boolean;
  /** The client's key names (null: the stored ones are its own). */
  private readonly names: KeyNames | null;
  private snapshotsEnded = 0;
  /** True once the client has its snapshot header: from then on units go straight to it. */
  private live = false;
  /** Units from primaries whose snapshot ended while others still save theirs (several primaries only). */
  private held: Buffer[][] = [];
  /** The last SELECT the merged stream carried (lower case), to drop repeats (several primaries only). */
  private lastSelect = '';
  private heldBytes = 0;
  private pausedForOutput = false;
  private ended = false;

  constructor(
    private readonly session: HandlerSession,
    private readonly primaries: ReadonlyArray<{ host: string; port: number }>,
    private readonly psync: boolean,
  ) {
    this.entry = session.reserve();
    this.names = session.state.acl.keyNames;
    this.passThrough = primaries.length === 1 && this.names === null;
  }

  start(): void {
    const ctx = this.session.ctx;
    const max = ctx.config.dedicated.maxReplicaStreams;
    if ((attached.get(ctx) ?? 0) >= max) {
      this.ended = true;
      return this.entry.fill(encodeError(ProxyError.replicaStreamsExhausted(max)));
    }
    attached.set(ctx, (attached.get(ctx) ?? 0) + 1);
    this.session.state.replicaStream = true;
    this.session.onClose(() => this.end());
    for (const node of this.primaries) {
      const options = {
        host: node.host,
        port: node.port,
        auth: ctx.config.upstreamAuth,
        connectTimeoutMs: ctx.config.timeouts.connectMs,
        tls: ctx.config.upstreamTls, // dialUpstream uses TLS only when it is enabled
      };
      this.feeds.push(new ReplicationFeed(options, this));
    }
  }

  snapshotStarted(_feed: ReplicationFeed, length: number): void {
    if (this.passThrough) this.goLive(Buffer.from(`${this.fullResyncLine()}$${length}\r\n`, 'latin1'));
  }

  snapshotBytes(_feed: ReplicationFeed, bytes: Buffer): void {
    if (this.passThrough) this.send(bytes);
  }

  snapshotEnded(_feed: ReplicationFeed): void {
    this.snapshotsEnded++;
    if (this.passThrough || this.snapshotsEnded < this.primaries.length) return;
    const header = Buffer.from(`${this.fullResyncLine()}$${EMPTY_RDB.length}\r\n`, 'latin1');
    this.goLive(Buffer.concat([header, EMPTY_RDB]));
    const held = this.held;
    this.held = [];
    this.heldBytes = 0;
    for (const unit of held) this.sendUnit(unit);
  }

  unit(_feed: ReplicationFeed, commands: Buffer[]): void {
    if (this.live) return this.sendUnit(commands);
    this.held.push(commands.map((c) => Buffer.from(c))); // held until every snapshot is saved: copies, so no read slab stays pinned
    for (const c of commands) this.heldBytes += c.length;
    const max = this.session.ctx.config.pubsub.maxOutputBytesPerClient;
    if (this.heldBytes > max) this.fail(ProxyError.outputBufferExceeded(this.heldBytes, max));
  }

  failed(feed: ReplicationFeed, reason: string, refusedByNode: boolean): void {
    if (this.ended) return;
    this.fail(refusedByNode ? reason : ProxyError.replicaStreamLost(feed.address, reason));
  }

  private fullResyncLine(): string {
    return this.psync ? `+FULLRESYNC ${nodeCrypto().randomBytes(20).toString('hex')} 0\r\n` : '';
  }

  private goLive(header: Buffer): void {
    this.live = true;
    this.entry.fill(header);
  }

  private sendUnit(commands: Buffer[]): void {
    if (this.passThrough) return this.send(commands.length === 1 ? commands[0]! : Buffer.concat(commands));
    const names = this.names;
    const table = names === null ? null : this.session.ctx.commands();
    const kept: Buffer[] = [];
    let dropped = false; // a command not the client's to see was left out
    for (const command of commands) {
      if (isSelect(command)) {
        const select = command.toString('latin1').toLowerCase();
        if (select === this.lastSelect) continue;
        this.lastSelect = select;
        kept.push(command);
        continue;
      }
      const shown = names === null ? command : clientStreamCommand(names, table!, command);
      if (shown === null) {
        dropped = true;
        continue;
      }
      kept.push(shown);
    }
    if (dropped && isGroup(kept)) return this.sendSelectsOnly(kept);
    if (kept.length > 0) this.send(kept.length === 1 ? kept[0]! : Buffer.concat(kept));
  }

  /** A MULTI … EXEC group emptied by the client's names: only its SELECTs (the stream's database) go on. */
  private sendSelectsOnly(kept: Buffer[]): void {
    const selects = kept.filter((c) => isSelect(c));
    if (selects.length > 0) this.send(Buffer.concat(selects));
  }

  private send(bytes: Buffer): void {
    if (this.ended) return;
    this.session.push(bytes);
    if (this.pausedForOutput || this.session.unreadOutputBytes() <= PAUSE_ABOVE_BYTES) return;
    this.pausedForOutput = true;
    for (const feed of this.feeds) feed.pause();
    this.session.whenOutputBelow(PAUSE_ABOVE_BYTES / 2, () => {
      this.pausedForOutput = false;
      if (!this.ended) for (const feed of this.feeds) feed.resume();
    });
  }

  /**
   * Before the client has its snapshot header: the error is SYNC's reply and the client carries
   * on as an ordinary one. After: the connection ends, as a replica's master link would.
   */
  private fail(error: string): void {
    if (this.ended) return;
    const wasLive = this.live;
    this.end();
    if (!wasLive) {
      this.session.state.replicaStream = false;
      this.entry.fill(encodeError(error));
    } else {
      this.session.ctx.log.warn({ client: this.session.address, reason: error }, 'replica_stream_ended');
      this.session.closeAfterReplies();
    }
  }

  private end(): void {
    if (this.ended) return;
    this.ended = true;
    const ctx = this.session.ctx;
    attached.set(ctx, (attached.get(ctx) ?? 1) - 1);
    for (const feed of this.feeds) feed.close();
    this.held = [];
  }
}

const MULTI = Buffer.from('*1\r\n$5\r\nmulti\r\n');
const EXEC = Buffer.from('*1\r\n$4\r\nexec\r\n');

/** Whether `commands` (SELECTs aside) are MULTI then EXEC and nothing between. */
function isGroup(commands: Buffer[]): boolean {
  const rest = commands.filter((c) => !isSelect(c));
  return rest.length === 2 && sameWord(rest[0]!, MULTI) && sameWord(rest[1]!, EXEC);
}

function sameWord(frame: Buffer, word: Buffer): boolean {
  return frame.length === word.length && frame.toString('latin1').toLowerCase() === word.toString('latin1');
}
