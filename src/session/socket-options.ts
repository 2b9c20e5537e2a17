import type net from 'node:net';

/**
 * TCP_NODELAY and TCP keepalive (clients.tcpKeepAliveMs) for client sockets.
 *
 *   per socket : socket.setNoDelay + socket.setKeepAlive — five setsockopt calls per connection
 *               (TCP_NODELAY; SO_KEEPALIVE, TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT in libuv),
 *               ~15-30 µs of a connection's ~120 µs on the 2-core bench machine.
 *   inherited  : on Linux a socket returned by accept() is a copy of the listening socket,
 *               options included, so setting them once on the listener gives every accepted
 *               client the same options with no syscall of its own. Used for the plaintext
 *               listener when its handle is a real TCP socket (not a cluster round-robin
 *               worker's stand-in, not another platform).
 *   invariant  : every admitted client socket has TCP_NODELAY, and keepalive as configured
 *               when it was accepted — sockets the kernel queued before the listener got the
 *               options (start-up: accepted in the first event-loop turn after listen) and
 *               sockets from listeners that cannot pass them on get them per socket.
 */
export function setClientSocketOptions(socket: net.Socket, keepAliveMs: number): void {
  socket.setNoDelay(true);
  if (keepAliveMs > 0) socket.setKeepAlive(true, keepAliveMs);
}

/** The listening TCP handle's setters (libuv error code, 0 = done). */
interface TcpListenHandle {
  setNoDelay(enable: boolean): number;
  setKeepAlive(enable: boolean, delaySeconds: number): number;
}

export class ListenerSocketOptions {
  /** Accepted sockets have the options from the listener (no per-socket calls). */
  private inheriting = false;
  private firstTurn: NodeJS.Immediate | null = null;

  constructor(
    private readonly server: net.Server,
    /** Read at each apply(): a reload changes keepalive for connections accepted after it. */
    private readonly clients: { readonly tcpKeepAliveMs: number },
    private readonly platform: NodeJS.Platform = process.platform,
  ) {}

  /** Once listening (in the listen callback), and again after a reload. */
  apply(): void {
    const handle = (this.server as unknown as { _handle?: Partial<TcpListenHandle> | null })._handle;
    if (this.platform !== 'linux' || typeof handle?.setNoDelay !== 'function' || typeof handle.setKeepAlive !== 'function') {
      this.inheriting = false;
      return;
    }
    const ms = this.clients.tcpKeepAliveMs;
    // Node's socket.setKeepAlive(enable, ms) passes whole seconds the same way.
    const ok = handle.setNoDelay(true) === 0 && handle.setKeepAlive(ms > 0, Math.floor(ms / 1000)) === 0;
    if (!ok) {
      this.inheriting = false;
      return;
    }
    // Connections whose handshake completed before this call were copied from the listener without
    // the options; the first poll phase accepts every one queued (libuv accepts until EAGAIN).
    if (!this.inheriting && this.firstTurn === null) {
      this.firstTurn = setImmediate(() => {
        this.firstTurn = null;
        this.inheriting = true;
      });
    }
  }

  /** The listener accepted `socket`: options per socket unless it inherited them. */
  accepted(socket: net.Socket): void {
    if (!this.inheriting) setClientSocketOptions(socket, this.clients.tcpKeepAliveMs);
  }

  get inherited(): boolean {
    return this.inheriting;
  }

  close(): void {
    if (this.firstTurn !== null) clearImmediate(this.firstTurn);
    this.firstTurn = null;
  }
}
