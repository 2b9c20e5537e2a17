/**
 * One node's replication stream, read by respool as an old-style (SYNC) replica: what a client's
 * SYNC / PSYNC through respool is built from (handlers/replication.ts).
 *
 * SYNC, not PSYNC: the node then sends a disk-based snapshot (`$<len>\r\n` and <len> raw bytes,
 * no CRLF after them) however repl-diskless-sync is set — diskless needs the EOF capability,
 * which respool never announces — and never times out a replica of that kind for not sending
 * REPLCONF ACK (replication.c: CLIENT_PRE_PSYNC replicas are skipped), so respool has nothing to
 * answer upstream.
 *
 *   handshake : [AUTH], CLIENT SETNAME respool-replica — the connection core's
 *               (node-connection.ts: this is one of its roles). SYNC is written only once they
 *               are answered: a node refuses SYNC while it still has replies to send ("SYNC and
 *               PSYNC are invalid with pending output").
 *   preamble  : newlines (the node's keep-alives while its BGSAVE runs), then `$<len>` or -ERR;
 *               not RESP frames: read raw (the core's rawReader) until the snapshot's end
 *   snapshot  : <len> bytes handed to snapshotBytes, in order
 *   stream    : RESP commands, framed whole by the core (frames answering no request: onStream). A MULTI … EXEC group is held until its EXEC and
 *               handed over as one unit, so a merge of several nodes' streams never puts another
 *               node's command inside a transaction. Anything else is one unit by itself.
 *
 * Every write a node makes after it accepted SYNC is in its stream: it is queued behind the
 * snapshot. So once the snapshot's header arrived, later writes through respool reach the feed.
 */
import type { UpstreamTlsConfig } from '../config/tls-config.js';
import type { UpstreamAuth } from './handshake.js';
import { ProxyError } from '../errors.js';
import { NodeConnection } from './node-connection.js';
import type { OpenUpstreamSocket } from './upstream-socket.js';

export const REPLICA_CLIENT_NAME = 'respool-replica';

export interface ReplicationFeedOptions {
  host: string;
  port: number;
  auth: UpstreamAuth;
  connectTimeoutMs: number;
  tls?: UpstreamTlsConfig | null;
  /** How the socket is opened (upstream-socket.ts); the unit tests give a fake. */
  openSocket?: OpenUpstreamSocket;
}

export interface ReplicationFeedHandler {
  /** The node accepted SYNC: its snapshot is `length` bytes long (it may be 0-length only in theory). */
  snapshotStarted(feed: ReplicationFeed, length: number): void;
  /** The next piece of the snapshot (a view of a lasting read buffer: upstream-socket.ts). */
  snapshotBytes(feed: ReplicationFeed, bytes: Buffer): void;
  /** The whole snapshot has been read; what follows is the command stream. */
  snapshotEnded(feed: ReplicationFeed): void;
  /**
   * One command, or one whole MULTI … EXEC group: its commands' frames in order. Views of lasting
   * read buffers (upstream-socket.ts reads into slabs that are never rewritten): safe to keep, but
   * a kept view pins its slab, so a handler that holds units for long copies them.
   */
  unit(feed: ReplicationFeed, commands: Buffer[]): void;
  /** Refused (the node's error line, without '-' and CRLF) or lost. Called once; the feed is closed. */
  failed(feed: ReplicationFeed, reason: string, refusedByNode: boolean): void;
}

const PREAMBLE = 1;
const SNAPSHOT = 2;
const STREAM = 3;

const SYNC = Buffer.from('*1\r\n$4\r\nSYNC\r\n');
const MULTI = Buffer.from('*1\r\n$5\r\nmulti\r\n');
const EXEC = Buffer.from('*1\r\n$4\r\nexec\r\n');

export class ReplicationFeed extends NodeConnection {
  private phase = PREAMBLE;
  /** Bytes of the current preamble line that arrived in earlier chunks. */
  private line = '';
  private snapshotLeft = 0;
  /** A MULTI … group still waiting for its EXEC, or null. */
  private group: Buffer[] | null = null;
  /** The node refused SYNC (its error line): told to the handler as the node's own answer. */
  private refusal: string | null = null;
  /** Closed by its owner (close()): the handler is not told. */
  private ended = false;

  constructor(options: ReplicationFeedOptions, private readonly handler: ReplicationFeedHandler) {
    // The connect deadline covers the handshake, not the snapshot: a node's BGSAVE takes what it takes.
    super({ host: options.host, port: options.port, protocol: 2, auth: options.auth, clientName: REPLICA_CLIENT_NAME, connectTimeoutMs: options.connectTimeoutMs, tls: options.tls, openSocket: options.openSocket });
    this.onStream = (frame) => this.onCommand(frame);
  }

  /** Its owner ends it (the client went, or the stream is no longer wanted): the handler is not told. */
  override close(reason = 'closed by respool'): void {
    if (this.state !== 'closed') this.ended = true;
    super.close(reason);
  }

  /** The stream cannot go on (a refusal, bytes that are no stream): the handler is told. */
  private failWith(reason: string): void {
    super.close(reason);
  }

  /** Backpressure from the client: stop reading (the node buffers, up to its replica output limit). */
  pause(): void {
    this.socket.pause();
  }

  resume(): void {
    this.socket.resume();
  }

  protected override onReady(): void {
    this.rawReader = (chunk) => this.onRaw(chunk);
    this.writeToStream(SYNC);
  }

  /** Refused (SYNC, or a handshake step: the core's closeCause) or lost: the handler is told, unless its owner closed it. */
  protected override onClosed(reason: string): void {
    if (this.ended) return;
    const refused = this.refusal ?? (this.closeCause === 'handshake-refused' ? this.handshakeRefusal : null);
    this.handler.failed(this, refused ?? reason, refused !== null);
  }

  /** The preamble and the snapshot, as they come; what follows the snapshot goes to the core's framing. */
  private onRaw(chunk: Buffer): void {
    let pos = 0;
    while (pos < chunk.length && this.state !== 'closed') {
      if (this.phase === PREAMBLE) {
        pos = this.readLine(chunk, pos);
        continue;
      }
      if (this.phase === SNAPSHOT) {
        const take = Math.min(this.snapshotLeft, chunk.length - pos);
        this.snapshotLeft -= take;
        this.handler.snapshotBytes(this, chunk.subarray(pos, pos + take));
        pos += take;
        if (this.snapshotLeft === 0) this.endSnapshot();
        continue;
      }
      return this.readFrames(pos === 0 ? chunk : chunk.subarray(pos));
    }
  }

  /** Reads up to the end of one line (or of the chunk); returns the next position. */
  private readLine(chunk: Buffer, pos: number): number {
    if (this.line === '') {
      while (pos < chunk.length && chunk[pos] === 0x0a) pos++; // keep-alive newlines
      if (pos === chunk.length) return pos;
    }
    const nl = chunk.indexOf(0x0a, pos);
    if (nl < 0) {
      this.line += chunk.toString('latin1', pos);
      if (this.line.length > 4096) this.failWith(ProxyError.replicationStreamInvalid(this.address, 'a line longer than 4096 bytes'));
      return chunk.length;
    }
    const text = (this.line + chunk.toString('latin1', pos, nl)).replace(/\r$/, '');
    this.line = '';
    this.onLine(text);
    return nl + 1;
  }

  private onLine(text: string): void {
    if (text.startsWith('-')) {
      this.refusal = text.slice(1);
      return this.failWith(this.refusal);
    }
    const length = text.startsWith('$') ? Number(text.slice(1)) : NaN;
    if (!Number.isSafeInteger(length) || length < 0) {
      return this.failWith(ProxyError.replicationStreamInvalid(this.address, `expected a snapshot length, got ${JSON.stringify(text.slice(0, 64))}`));
    }
    this.phase = SNAPSHOT;
    this.snapshotLeft = length;
    this.handler.snapshotStarted(this, length);
    if (length === 0) this.endSnapshot();
  }

  private endSnapshot(): void {
    this.phase = STREAM;
    this.rawReader = null;
    this.handler.snapshotEnded(this);
  }

  private onCommand(frame: Buffer): void {
    if (this.group !== null) {
      this.group.push(frame);
      if (isCommand(frame, EXEC)) {
        const unit = this.group;
        this.group = null;
        this.handler.unit(this, unit);
      }
      return;
    }
    if (isCommand(frame, MULTI)) {
      this.group = [frame];
      return;
    }
    this.handler.unit(this, [frame]);
  }
}

const SELECT_PREFIX = Buffer.from('*2\r\n$6\r\nselect\r\n');

/** Whether `frame` is a SELECT command (as a node's replication stream writes it). */
export function isSelect(frame: Buffer): boolean {
  return frame.length > SELECT_PREFIX.length && startsWithIgnoringCase(frame, SELECT_PREFIX);
}

/** Whether `frame` is the one-word command `word` (an encoded `*1\r\n$n\r\nname\r\n`), ignoring case. */
function isCommand(frame: Buffer, word: Buffer): boolean {
  return frame.length === word.length && startsWithIgnoringCase(frame, word);
}

/** ASCII case-insensitive prefix test (`| 0x20` folds letters; the digits and `*$\r\n` of the prefix are unchanged by it). */
function startsWithIgnoringCase(frame: Buffer, prefix: Buffer): boolean {
  for (let i = 0; i < prefix.length; i++) if ((frame[i]! | 0x20) !== (prefix[i]! | 0x20)) return false;
  return true;
}
