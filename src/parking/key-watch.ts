import { LeasedConnection } from '../upstream/leased-connection.js';
import type { UpstreamTlsConfig } from '../config/tls-config.js';
import { encodeCommand } from '../resp/encode.js';
import { decodeReply } from '../resp/decode.js';
import { UNBOUNDED_NESTING } from '../resp/limits.js';

/** The name watch connections give themselves upstream (CLIENT LIST shows it). */
export const WATCH_CLIENT_NAME = 'respool-watch';

const TRACKING_ON = encodeCommand(['CLIENT', 'TRACKING', 'ON']);

export interface KeyWatchOptions {
  host: string;
  port: number;
  auth: { username: string | null; password: string } | null;
  tls: UpstreamTlsConfig | null;
  connectTimeoutMs: number;
  maxBulkLength: number;
}

/**
 * One node's watch connection: RESP3 with CLIENT TRACKING ON, so that the node tells respool
 * when a key a parked client waits on changes — whoever changed it, through respool or not.
 *
 *   register: EXISTS key (after SELECT db when needed) — the node tracks the key from the moment it
 *             runs the read, and its count says whether the key held data at that moment.
 *   change:   one `invalidate` push at the key's next change; the node then forgets the key, so
 *             respool registers it again before it relies on hearing of the next one. A null
 *             invalidation (FLUSHALL / FLUSHDB, a full tracking table) means every key.
 *   order:    pushes come on this connection only, in the order the node made them; a change made
 *             after a registration's EXISTS ran is always pushed.
 *   loss:     when the connection closes, every key it watched is reported changed (`onLost`):
 *             parked clients' keys are tried again and registered wherever they live now.
 */
export class KeyWatch {
  readonly address: string;
  private readonly conn: LeasedConnection;
  /** The database the connection is in once the commands written so far have run. */
  private db = 0;
  closed = false;

  constructor(
    options: KeyWatchOptions,
    /** Keys (latin1 names) that changed, or null for all of them. */
    private readonly onChange: (keys: string[] | null) => void,
    private readonly onLost: (watch: KeyWatch) => void,
  ) {
    this.address = `${options.host}:${options.port}`;
    this.conn = new LeasedConnection({
      host: options.host,
      port: options.port,
      protocol: 3,
      auth: options.auth,
      tls: options.tls,
      connectTimeoutMs: options.connectTimeoutMs,
      clientName: WATCH_CLIENT_NAME,
      framerLimits: { maxBulkLength: options.maxBulkLength, maxNestingDepth: UNBOUNDED_NESTING },
    });
    this.conn.onPush = (frame) => this.onPush(frame);
    this.conn.once('close', () => {
      this.closed = true;
      this.onLost(this);
    });
    this.conn.send(TRACKING_ON, {
      sentAt: 0,
      onReply: (frame) => {
        // A node that cannot track (an old server, a user without CLIENT) cannot wake anyone: closed, and reported lost.
        if (frame[0] === 0x2d) this.conn.close(`CLIENT TRACKING ON refused: ${frame.toString('utf8', 1, frame.length - 2)}`);
      },
      onLinkFailure() {},
    });
  }

  /** Whether the connection ever completed its handshake. */
  get wasReady(): boolean {
    return this.conn.wasReady;
  }

  /** Why the connection closed ('' while open). */
  get closeReason(): string {
    return this.conn.closeReason;
  }

  /** Tracks `key` in `db` from now; resolves with whether it exists now, rejects when the node could not be asked. */
  register(db: number, key: Buffer): Promise<boolean> {
    if (db !== this.db) {
      this.db = db;
      this.conn.send(encodeCommand(['SELECT', db]), { sentAt: 0, onReply: () => {}, onLinkFailure() {} });
    }
    return new Promise((resolve, reject) => {
      this.conn.send(encodeCommand(['EXISTS', key]), {
        sentAt: 0,
        onReply: (frame) => {
          if (frame[0] === 0x3a /* : */) resolve(frame[1] !== 0x30 /* ':0' */);
          else reject(new Error(frame.toString('utf8', 1, frame.length - 2)));
        },
        onLinkFailure: (error) => reject(new Error(error)),
      });
    });
  }

  close(): void {
    this.conn.close('no parked client left on this node');
  }

  private onPush(frame: Buffer): void {
    let value: unknown;
    try {
      value = decodeReply(frame, UNBOUNDED_NESTING);
    } catch {
      return;
    }
    if (!Array.isArray(value) || value.length < 2 || String(value[0]) !== 'invalidate') return;
    const keys = value[1];
    if (!Array.isArray(keys)) return this.onChange(null);
    this.onChange(keys.map((k) => (Buffer.isBuffer(k) ? k.toString('latin1') : String(k))));
  }
}
