import net from 'node:net';

/**
 * Client sockets read into ONE shared buffer (net.Socket's `onread` option) instead of a fresh
 * Buffer per read, and skip the Readable stream ('data' events) altogether.
 *
 * Why: with 'data' events every read costs a 64 KiB malloc that libuv shrinks, a new
 * ArrayBuffer, and Readable.push → emit — per request at pipeline 1. Measured on a bare
 * PING server under valkey-benchmark (50 clients, pipeline 1): 8.2 → 6.0 µs of user CPU per
 * request (see bench/RESULTS.md, "hot path").
 *
 *   shared  : the kernel writes every client's bytes here, one read at a time (the event loop
 *             is single-threaded, and the callback consumes the bytes before returning).
 *   slab    : the bytes are copied (a few dozen bytes at pipeline 1) into the free tail of a
 *             32 KiB slab, and that copy is what the session frames. A slab is never written
 *             twice, so views of it (request arguments, `raw`) stay valid as long as they are
 *             referenced — the same lifetime rule as a 'data' chunk. Reads above 8 KiB get a
 *             buffer of their own, so a slab is pinned by small views only.
 *
 * Node gives `onread` only to sockets it constructs itself; an accepted socket is re-wrapped:
 * a new net.Socket over the accepted one's handle (its fd), taking over the server's
 * connection count. Anything else (TLS sockets, a handle already reading) keeps 'data' events.
 */
const SHARED = Buffer.allocUnsafeSlow(64 * 1024);
const SLAB_BYTES = 32 * 1024;
const OWN_BUFFER_ABOVE = 8 * 1024;
const BYTE_LOOP_MAX = 128;

let slab = Buffer.allocUnsafeSlow(SLAB_BYTES);
let slabUsed = 0;

/** A copy of `source[0, n)` that stays valid (see `slab` above). */
export function copyOut(source: Buffer, n: number): Buffer {
  if (n > OWN_BUFFER_ABOVE) {
    const own = Buffer.allocUnsafeSlow(n);
    source.copy(own, 0, 0, n);
    return own;
  }
  if (slabUsed + n > SLAB_BYTES) {
    slab = Buffer.allocUnsafeSlow(SLAB_BYTES);
    slabUsed = 0;
  }
  const start = slabUsed;
  if (n <= BYTE_LOOP_MAX) {
    // Buffer#copy of a prefix builds a Uint8Array view first; a request at pipeline 1 is a few dozen bytes.
    for (let i = 0; i < n; i++) slab[start + i] = source[i]!;
  } else {
    source.copy(slab, start, 0, n);
  }
  slabUsed = start + n;
  return slab.subarray(start, start + n);
}

/** The internals of an accepted socket that re-wrapping moves to the new one. */
interface AcceptedSocket extends net.Socket {
  _handle: { reading?: boolean } | null;
  _server: net.Server | null;
  server: net.Server | null;
}

type ChunkListener = (this: net.Socket, chunk: Buffer) => void;

/** One onread callback per listener function, shared by every socket (`this` is the socket). */
const readCallbacks = new Map<ChunkListener, (this: net.Socket, n: number) => void>();

function readCallbackFor(onChunk: ChunkListener): (this: net.Socket, n: number) => void {
  let callback = readCallbacks.get(onChunk);
  if (callback === undefined) {
    callback = function (this: net.Socket, n: number): void {
      onChunk.call(this, copyOut(SHARED, n));
    };
    readCallbacks.set(onChunk, callback);
  }
  return callback;
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
    onread: { buffer: SHARED, callback: readCallbackFor(onChunk) },
  } as net.SocketConstructorOpts) as AcceptedSocket;
  fresh._server = server;
  fresh.server = server;
  return fresh;
}

/** A plain TCP socket accepted by a net.Server (TLS sockets wrap theirs; keep them as they are). */
function canRewrap(socket: net.Socket): boolean {
  return socket.constructor === net.Socket && (socket as AcceptedSocket)._server != null && !('encrypted' in socket);
}
