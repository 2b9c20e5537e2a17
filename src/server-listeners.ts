import net from 'node:net';
import type { Logger } from 'pino';
import type { RespoolConfig } from './config/types.js';
import type { Metrics } from './metrics/metrics.js';
import type { RateLimitedLog } from './util/rate-limited-log.js';
import { acceptReadingShared } from './session/shared-reads.js';
import { AcceptGate } from './session/accept-gate.js';
import { encodeError } from './resp/encode.js';
import { ProxyError } from './errors.js';
import { createTlsListener, type TlsListener } from './session/tls-listener.js';
import { ListenerSocketOptions } from './session/socket-options.js';
import { listenUnix } from './session/unix-listener.js';

export interface ClientListenersDeps {
  config: RespoolConfig;
  log: Logger;
  metrics: Metrics;
  events: RateLimitedLog;
  /** Clients connected now (clients.maxClients counts them and the parked ones). */
  clientCount(): number;
  /** An admitted socket (paused): its session is made and it is resumed. */
  admit(socket: net.Socket): void;
}

/**
 * Where clients come in: the TCP listener (config.listen), the TLS one (listenTls: the same path
 * once its handshake is done), the Unix socket (unixSocket), and the client-side storm guards
 * (config.clients): maxClients with an error reply to the excess client; an accept-rate gate that
 * parks new sockets (paused) and admits them after the established clients' I/O of each
 * event-loop turn (session/accept-gate.ts); TCP_NODELAY and keepalive set on the listening socket
 * (accepted sockets inherit them: session/socket-options.ts); a deep accept backlog. Draining:
 * every new or parked client gets "shutting down" and is closed.
 */
export class ClientListeners {
  /** Set by close(): new clients are refused. */
  private draining = false;
  private readonly gate: AcceptGate;
  private readonly server: net.Server;
  private readonly socketOptions: ListenerSocketOptions;
  private readonly tls: TlsListener | null;
  private unix: { close(): void } | null = null;
  /** Rebuilt when a reload changed clients.maxClients (the reply names the limit). */
  private maxClientsReply: { limit: number; reply: Buffer } = { limit: -1, reply: Buffer.alloc(0) };
  private readonly shuttingDownReply = encodeError(ProxyError.shuttingDown());

  constructor(private readonly deps: ClientListenersDeps) {
    const { config, metrics, log } = deps;
    this.gate = new AcceptGate(config.clients.acceptRatePerSecond, (socket) => {
      if (this.draining) return this.refuse(socket, 'draining', this.shuttingDownReply);
      metrics.clientConnectionsAccepted.inc();
      metrics.clientConnections.inc();
      deps.admit(socket);
    });
    const accept = (socket: net.Socket) => this.accept(socket);
    this.server = net.createServer({ pauseOnConnect: true }, (socket) => {
      this.socketOptions.accepted(socket); // nothing to do once the listener passes its options on
      accept(socket);
    });
    this.socketOptions = new ListenerSocketOptions(this.server, config.clients);
    this.tls = config.listenTls === null ? null : createTlsListener(config, accept, log);
    this.server.on('error', (err) => log.error({ err: err.message }, 'listener error'));
  }

  /** Sockets accepted and waiting at the rate gate. */
  get parkedCount(): number {
    return this.gate.parkedCount;
  }

  /** Listens where the config says: the bound TCP address (port 0 when there is no TCP listener), the TLS one. */
  async listen(): Promise<{ address: { host: string; port: number }; tlsAddress: { host: string; port: number } | null }> {
    const { config } = this.deps;
    const listen = config.listen;
    if (listen !== null) {
      await new Promise<void>((resolve, reject) => {
        this.server.once('error', reject);
        // A deep accept backlog (the kernel caps it at net.core.somaxconn) absorbs connection storms
        // in the kernel instead of dropping SYNs; the AcceptGate then admits them at its rate.
        this.server.listen({ port: listen.port, host: listen.host, backlog: 4096 }, () => {
          this.server.off('error', reject);
          this.socketOptions.apply();
          acceptReadingShared(this.server); // one socket per connection, reading through the shared buffer
          resolve();
        });
      });
    }
    // A Unix domain socket (sidecars), beside or instead of TCP: session/unix-listener.ts.
    this.unix = config.unixSocket === null ? null : await listenUnix(config.unixSocket, config.unixSocketMode, (socket) => this.accept(socket));
    const bound = listen === null ? { port: 0 } : (this.server.address() as net.AddressInfo);
    const tlsAddress = this.tls === null ? null : await this.tls.listen();
    return { address: { host: listen?.host ?? '127.0.0.1', port: bound.port }, tlsAddress };
  }

  /** A reload: clients.tcpKeepAliveMs for connections accepted from now on. */
  applySocketOptions(): void {
    this.socketOptions.apply();
  }

  /** SIGHUP: the TLS listener's certificate files read again. */
  reloadTls(): void {
    this.tls?.reload();
  }

  /** Stops accepting; clients parked at the gate get "shutting down". */
  close(): void {
    this.draining = true;
    if (this.deps.config.listen !== null) this.server.close();
    this.unix?.close();
    this.socketOptions.close();
    this.tls?.close();
    for (const socket of this.gate.close()) this.refuse(socket, 'draining', this.shuttingDownReply);
  }

  private accept(socket: net.Socket): void {
    if (this.draining) return this.refuse(socket, 'draining', this.shuttingDownReply);
    if (this.deps.clientCount() + this.gate.parkedCount >= this.deps.config.clients.maxClients) return this.refuseMaxClients(socket);
    this.gate.offer(socket);
  }

  private refuseMaxClients(socket: net.Socket): void {
    const limit = this.deps.config.clients.maxClients;
    if (this.maxClientsReply.limit !== limit) this.maxClientsReply = { limit, reply: encodeError(ProxyError.maxClients(limit)) };
    this.deps.events.emit('warn', 'load_shed', 'clients|max_clients', { reason: 'max_clients', limit }, `refusing new clients: clients.maxClients (${limit}) reached`);
    this.refuse(socket, 'max_clients', this.maxClientsReply.reply);
  }

  private refuse(socket: net.Socket, reason: 'max_clients' | 'draining', reply: Buffer): void {
    this.deps.metrics.connectionRejectedCounter(reason).inc();
    socket.on('error', () => {});
    socket.end(reply);
    // A client that never reads must not keep the fd: give the reply a moment, then close.
    setTimeout(() => socket.destroy(), 1000).unref();
  }
}
