// The client-side TLS listener (config.listenTls, config.tls), next to the plaintext one.
//
// A TLS client is admitted exactly like a plaintext one, once its handshake is done: on
// 'secureConnection' the TLSSocket (a net.Socket) is paused and handed to the same accept
// path (maxClients, draining, the AcceptGate, then a ClientSession that resumes it). tls.Server
// cannot use pauseOnConnect (the handshake itself must read), so the pause comes after the
// handshake; nothing is lost, since no 'data' listener exists before the session's.
//
// reload() reads the certificate, key and CA files again and swaps them in with
// tls.Server#setSecureContext (with minVersion, ciphers and requireClientCert as they are now in
// config.tls): new handshakes use them, established clients keep their connection. A file that
// does not parse throws and the old certificate stays.

import type net from 'node:net';
import type tls from 'node:tls';
import { nodeTls } from '../util/lazy-builtins.js';
import type { Logger } from 'pino';
import type { RespoolConfig } from '../config/types.js';
import { secureContextOptions } from '../util/tls-files.js';
import { setClientSocketOptions } from './socket-options.js';

/** A client's TLS handshake must finish within this long. */
const HANDSHAKE_TIMEOUT_MS = 10_000;

export interface TlsListener {
  /** Listens on config.listenTls; resolves with the bound address (the real port for port 0). */
  listen(): Promise<{ host: string; port: number }>;
  /** Re-reads tls.cert / tls.key / tls.ca; throws (keeping the old ones) when they do not parse. */
  reload(): void;
  /** Stops accepting; established connections are the sessions' to close. */
  close(): void;
}

export function createTlsListener(
  config: Pick<RespoolConfig, 'listenTls' | 'tls' | 'clients'>,
  accept: (socket: net.Socket) => void,
  log: Logger,
): TlsListener {
  const listenAt = config.listenTls!;
  const contextOptions = () => secureContextOptions({ ...config.tls });
  const server = nodeTls().createServer({
    ...contextOptions(),
    requestCert: config.tls.requireClientCert,
    rejectUnauthorized: config.tls.requireClientCert,
    handshakeTimeout: HANDSHAKE_TIMEOUT_MS,
  }, (socket) => {
    socket.pause(); // like pauseOnConnect: nothing is read until the session is admitted
    setClientSocketOptions(socket, config.clients.tcpKeepAliveMs); // per socket: TLS is not on the inherited path
    accept(socket);
  });
  server.on('tlsClientError', (err, socket) => {
    log.debug({ err: err.message, peer: `${socket.remoteAddress}:${socket.remotePort}` }, 'TLS client handshake failed');
  });
  server.on('error', (err) => log.error({ err: err.message }, 'TLS listener error'));

  return {
    listen: () => new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen({ port: listenAt.port, host: listenAt.host, backlog: 4096 }, () => {
        server.off('error', reject);
        resolve({ host: listenAt.host, port: (server.address() as net.AddressInfo).port });
      });
    }),
    reload: () => {
      server.setSecureContext(contextOptions());
      // tls.Server hands these to each new TLSSocket, so a reload changes them for new clients too.
      const perConnection = server as unknown as { requestCert: boolean; rejectUnauthorized: boolean };
      perConnection.requestCert = config.tls.requireClientCert;
      perConnection.rejectUnauthorized = config.tls.requireClientCert;
    },
    close: () => {
      server.close();
    },
  };
}
