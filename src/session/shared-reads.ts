import { channel } from 'node:diagnostics_channel';
import net from 'node:net';
import { readsThroughSharedBuffer } from '../util/shared-read-buffer.js';

// Accepted plain client sockets read through the shared buffer (util/shared-read-buffer.ts).
// Node passes `onread` only to sockets built with it, and its listener builds its sockets
// itself, so:
//   accept straight : acceptReadingShared replaces the listening handle's onconnection with one
//                     that builds the socket with `onread` from the start: one net.Socket per
//                     connection (measured: CPU per connect + PING + close, bench/RESULTS.md).
//   re-wrap         : otherwise (a server this was not set up on) readClientSocket makes a new
//                     net.Socket over the accepted one's handle (its fd), taking over the
//                     server's connection count.
// Anything else (TLS sockets, a handle already reading) keeps 'data' events.

/** The internals of an accepted socket that re-wrapping moves to the new one. */
interface AcceptedSocket extends net.Socket {
  _handle: { reading?: boolean } | null;
  _server: net.Server | null;
  server: net.Server | null;
}

type ChunkListener = (this: net.Socket, chunk: Buffer) => void;

/** On sockets reading through the shared buffer: the chunk listener (null until readClientSocket sets it). */
const kOnChunk = Symbol('respool.onChunk');
interface SharedSocket extends AcceptedSocket {
  [kOnChunk]: ChunkListener | null;
}

/** The one onread option of every such socket, accepted straight or re-wrapped: the socket's own listener gets the bytes. */
const lateBound = readsThroughSharedBuffer(function (this: net.Socket, chunk: Buffer) {
  const onChunk = (this as SharedSocket)[kOnChunk];
  if (onChunk !== null) onChunk.call(this, chunk); // else a socket refused before it had a session: dropped
});

/** Node's accept callback on a listening handle (lib/net.js onconnection); `this` is the handle. */
type OnConnection = (this: unknown, err: number, clientHandle: unknown) => void;
interface ListeningServer extends net.Server {
  _handle: { onconnection: OnConnection } | null;
  _connections: number;
  pauseOnConnect?: boolean;
  allowHalfOpen?: boolean;
  noDelay?: boolean;
  keepAlive?: boolean;
}
const serverSocketChannel = channel('net.server.socket');

/**
 * Once `server` listens, its accepted sockets are built reading through the shared buffer (see
 * above). What Node's onconnection does and this one does not (maxConnections, the listener's
 * noDelay/keepAlive options, the net.server.socket diagnostics channel) is left to Node's: it
 * is used whenever one of them is on. The server must pause its connections (pauseOnConnect):
 * nothing is read before the session sets its listener.
 */
export function acceptReadingShared(server: net.Server): void {
  const listening = server as ListeningServer;
  const handle = listening._handle;
  if (handle === null || typeof handle.onconnection !== 'function' || listening.pauseOnConnect !== true) return;
  const nodes = handle.onconnection;
  handle.onconnection = function (this: unknown, err: number, clientHandle: unknown): void {
    if (err !== 0 || listening.maxConnections > 0 || listening.noDelay === true || listening.keepAlive === true || serverSocketChannel.hasSubscribers) {
      nodes.call(this, err, clientHandle);
      return;
    }
    const socket = sharedSocket(clientHandle, listening, null, listening.allowHalfOpen === true);
    listening._connections++;
    listening.emit('connection', socket);
  };
}

/**
 * Returns the socket to use for an accepted, still paused client connection, delivering its
 * bytes to `onChunk` (called with the returned socket as `this`): a re-wrapped socket reading
 * through the shared buffer when possible, else `socket` itself with a 'data' listener.
 */
export function readClientSocket(socket: net.Socket, onChunk: ChunkListener): net.Socket {
  const accepted = socket as AcceptedSocket;
  if (kOnChunk in accepted) {
    (accepted as SharedSocket)[kOnChunk] = onChunk; // built by acceptReadingShared: reads shared already
    return socket;
  }
  const handle = accepted._handle;
  if (!canRewrap(socket) || handle === null || handle.reading === true) {
    socket.on('data', onChunk);
    return socket;
  }
  const server = accepted._server;
  accepted._handle = null; // the old object no longer owns the fd
  accepted._server = null; // nor counts as the server's connection
  return sharedSocket(handle, server, onChunk, false);
}

/** A paused net.Socket over an accepted `handle`, reading through the shared buffer into `onChunk`, counted as `server`'s. */
function sharedSocket(handle: unknown, server: net.Server | null, onChunk: ChunkListener | null, allowHalfOpen: boolean): SharedSocket {
  const socket = new net.Socket({
    handle,
    allowHalfOpen,
    pauseOnCreate: true,
    readable: true,
    writable: true,
    onread: lateBound,
  } as net.SocketConstructorOpts) as SharedSocket;
  socket[kOnChunk] = onChunk;
  socket._server = server;
  socket.server = server;
  return socket;
}

/** A plain TCP socket accepted by a net.Server (TLS sockets wrap theirs; keep them as they are). */
function canRewrap(socket: net.Socket): boolean {
  return socket.constructor === net.Socket && (socket as AcceptedSocket)._server != null && !('encrypted' in socket);
}
