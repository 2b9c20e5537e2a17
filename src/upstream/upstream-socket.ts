import type net from 'node:net';
import { dialUpstream } from './dial.js';
import type { UpstreamTlsConfig } from '../config/tls-config.js';

export interface UpstreamSocketOptions {
  host: string;
  port: number;
  /** config.upstreamTls: TLS to the node when enabled (upstream/dial.ts). */
  tls?: UpstreamTlsConfig | null;
  /** From the dial until connectDone(): past it the connection fails ("connect timeout after … ms"). */
  connectTimeoutMs: number;
  /**
   * Runs once the socket is open and before the owner's handshake: a user's mirrored identity
   * made sure on the node (upstream/identity-mirror.ts). A rejection fails the connection with
   * its message; the connect deadline covers it.
   */
  prepare?: () => Promise<void>;
}

export interface UpstreamSocketHooks {
  /** The connection may carry RESP ('connect'; 'secureConnect' over TLS): start the handshake. */
  open(): void;
  /** Bytes read (a lasting copy: util/shared-read-buffer.ts over plain TCP, a 'data' chunk over TLS). */
  data(chunk: Buffer): void;
  /** The socket errored or closed, or the connect deadline passed. May come more than once: the owner ignores repeats. */
  fail(reason: string): void;
}

/** What an owner (a Link, a lease, a feed) uses of its socket: UpstreamSocket, or a test's fake. */
export interface UpstreamConnectionSocket {
  readonly socket: net.Socket;
  connectDone(): void;
  destroy(): void;
}

/**
 * Opens the socket of a long-lived connection and reports to `hooks`: UpstreamSocket, unless the
 * owner was given another (the unit tests drive a Link or a NodePool through a fake socket).
 */
export type OpenUpstreamSocket = (options: UpstreamSocketOptions, hooks: UpstreamSocketHooks) => UpstreamConnectionSocket;

export const openUpstreamSocket: OpenUpstreamSocket = (options, hooks) => new UpstreamSocket(options, hooks);

/**
 * The socket set-up every long-lived connection to a node shares — shared links (link.ts), leased
 * connections (leased-connection.ts), replication feeds (replication-feed.ts): the dial, TCP
 * keepalive (a lease may sit in BLPOP … 0 for hours; keepalive finds a peer that vanished
 * meanwhile), a connect deadline that covers the owner's handshake, and the socket's ends.
 */
export class UpstreamSocket implements UpstreamConnectionSocket {
  readonly socket: net.Socket;
  private connectTimer: NodeJS.Timeout | null;
  private destroyed = false;

  constructor(options: UpstreamSocketOptions, hooks: UpstreamSocketHooks) {
    const { socket, openEvent } = dialUpstream(options.host, options.port, options.tls, (chunk) => hooks.data(chunk));
    this.socket = socket;
    socket.setKeepAlive(true, 10_000);
    this.connectTimer = setTimeout(() => hooks.fail(`connect timeout after ${options.connectTimeoutMs} ms`), options.connectTimeoutMs);
    const prepare = options.prepare;
    if (prepare === undefined) socket.once(openEvent, () => hooks.open());
    else {
      socket.once(openEvent, () => {
        prepare().then(
          () => {
            if (!this.destroyed) hooks.open();
          },
          (err: Error) => hooks.fail(err.message),
        );
      });
    }
    socket.on('error', (err: Error) => hooks.fail(err.message));
    socket.on('close', () => hooks.fail('connection closed by upstream'));
  }

  /** The connection is usable (handshake done): the connect deadline no longer applies. */
  connectDone(): void {
    if (this.connectTimer !== null) clearTimeout(this.connectTimer);
    this.connectTimer = null;
  }

  /** Ends the socket and the deadline. Idempotent. */
  destroy(): void {
    this.destroyed = true;
    this.connectDone();
    this.socket.destroy();
  }
}
