// The one place respool opens a connection to an upstream node: plain TCP, or TLS when
// config.upstreamTls.enabled. Every dialer (shared links, leased connections, one-shot
// connections, pub/sub subscribers) calls dialUpstream() and starts its handshake on
// `openEvent` ('secureConnect' for TLS: nothing is written before the TLS handshake is done).
//
// A TLS failure (certificate not trusted, wrong name, handshake refused) surfaces as the socket's
// 'error', its message prefixed with "TLS handshake failed:" so that the caller's
// "upstream host:port is unavailable (…)" says what went wrong.

import net from 'node:net';
import type tls from 'node:tls';
import { nodeTls } from '../util/lazy-builtins.js';
import type { UpstreamTlsConfig } from '../config/tls-config.js';
import { secureContextFor } from '../util/tls-files.js';
import { readsThroughSharedBuffer } from '../util/shared-read-buffer.js';

export interface DialedSocket {
  socket: net.Socket;
  /** When the connection may carry RESP: 'connect' (TCP) or 'secureConnect' (TLS). */
  openEvent: 'connect' | 'secureConnect';
}

/** One SecureContext per upstreamTls settings object, read once; replaced by reloadUpstreamTls. */
const contexts = new WeakMap<UpstreamTlsConfig, tls.SecureContext>();

function contextFor(config: UpstreamTlsConfig): tls.SecureContext {
  let context = contexts.get(config);
  if (context === undefined) {
    context = secureContextFor(config);
    contexts.set(config, context);
  }
  return context;
}

/**
 * Reads the upstream certificate files again; new connections use them, open ones keep theirs.
 * Throws (and keeps the old context) when the files do not parse.
 */
export function reloadUpstreamTls(config: UpstreamTlsConfig): void {
  if (!config.enabled) return;
  contexts.set(config, secureContextFor(config));
}

/**
 * Opens a connection to host:port, over TLS when `tlsConfig` is enabled. With `onChunk`, the
 * bytes read go there: over plain TCP through the shared read buffer (util/shared-read-buffer.ts:
 * no Buffer allocated per read — the long-lived connections of upstream-socket.ts), over TLS as
 * 'data'. Without it the caller listens to 'data' itself (one-shot and subscriber connections).
 */
export function dialUpstream(
  host: string,
  port: number,
  tlsConfig: UpstreamTlsConfig | null | undefined,
  onChunk?: (chunk: Buffer) => void,
): DialedSocket {
  if (!tlsConfig?.enabled) {
    const onread = onChunk === undefined ? undefined : readsThroughSharedBuffer(onChunk);
    return { socket: net.connect({ host, port, noDelay: true, ...(onread ? { onread } : {}) }), openEvent: 'connect' };
  }
  const servername = tlsConfig.servername ?? (net.isIP(host) === 0 ? host : undefined);
  const socket = nodeTls().connect({
    host,
    port,
    secureContext: contextFor(tlsConfig),
    rejectUnauthorized: tlsConfig.rejectUnauthorized,
    ...(servername !== undefined ? { servername } : {}),
  });
  socket.setNoDelay(true);
  if (onChunk !== undefined) socket.on('data', onChunk);
  let tcpUp = false;
  let secured = false;
  socket.once('connect', () => (tcpUp = true));
  socket.once('secureConnect', () => (secured = true));
  socket.prependListener('error', (err: Error & { code?: string }) => {
    if (tcpUp && !secured && !err.message.startsWith('TLS handshake failed')) {
      const code = err.code !== undefined && !err.message.includes(err.code) ? ` (${err.code})` : '';
      err.message = `TLS handshake failed: ${err.message}${code}`;
    }
  });
  return { socket, openEvent: 'secureConnect' };
}
