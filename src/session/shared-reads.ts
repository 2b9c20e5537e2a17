import net from 'node:net';
import { readsThroughSharedBuffer, type SharedReadOption } from '../util/shared-read-buffer.js';

// Accepted plain-TCP client sockets read through the shared buffer (util/shared-read-buffer.ts).
// Node gives `onread` only to sockets it constructs itself; an accepted socket is re-wrapped:
// a new net.Socket over the accepted one's handle (its fd), taking over the server's
// connection count. Anything else (TLS sockets, a handle already reading) keeps 'data' events.

/** The internals of an accepted socket that re-wrapping moves to the new one. */
interface AcceptedSocket extends net.Socket {
  _handle: { reading?: boolean } | null;
  _server: net.Server | null;
  server: net.Server | null;
}

type ChunkListener = (this: net.Socket, chunk: Buffer) => void;

/** One onread option per listener function, shared by every socket (`this` is the socket). */
const readOptions = new Map<ChunkListener, SharedReadOption>();

function readOptionFor(onChunk: ChunkListener): SharedReadOption {
  let option = readOptions.get(onChunk);
  if (option === undefined) {
    option = readsThroughSharedBuffer(onChunk);
    readOptions.set(onChunk, option);
  }
  return option;
}

/**
 * Returns the socket to use for an accepted, still paused client connection, delivering its
 * bytes to `onChunk` (called with the returned socket as `this`): a re-wrapped socket reading
 * through the shared buffer when possible, else `socket` itself with a 'data' listener.
 */
export function readClientSocket(socket: net.Socket, onChunk: ChunkListener): net.Socket {
  const accepted = socket as AcceptedSocket;
  const handle = accepted._handle;
  if (!canRewrap(socket) || handle === null || handle.reading === true) {
    socket.on('data', onChunk);
    return socket;
  }
  const server = accepted._server;
  accepted._handle = null; // the old object no longer owns the fd
  accepted._server = null; // nor counts as the server's connection
  const fresh = new net.Socket({
    handle: handle as never,
    readable: true,
    writable: true,
    pauseOnCreate: true,
    onread: readOptionFor(onChunk),
  } as net.SocketConstructorOpts) as AcceptedSocket;
  fresh._server = server;
  fresh.server = server;
  return fresh;
}

/** A plain TCP socket accepted by a net.Server (TLS sockets wrap theirs; keep them as they are). */
function canRewrap(socket: net.Socket): boolean {
  return socket.constructor === net.Socket && (socket as AcceptedSocket)._server != null && !('encrypted' in socket);
}
