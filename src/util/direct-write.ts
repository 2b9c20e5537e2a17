import type net from 'node:net';
import { getSystemErrorName } from 'node:util';

// Writes straight to a plain TCP socket's libuv handle, past Node's Writable stream.
//
// Why: at pipeline 1 every reply is one socket.write, and the Writable's bookkeeping for it
// (a WriteWrap object, the write callback, an afterWrite tick) is Node's largest per-request cost
// that respool can avoid: `npm run bench:floor` measures a bare PONG server at 5.6 µs of user
// CPU per request with socket.write and 5.0 with this path, and heap sampling put 238 B of
// respool's ~1.1 KB per request in socket.write.
//
// How: libuv first tries the write synchronously (uv_try_write). When the kernel takes every
// byte — nearly always at pipeline 1 — the request object is never bound to a native write,
// so ONE object serves every such write. When the kernel takes only part, libuv queues the rest
// and calls `oncomplete` later; that object is then kept by the write and a fresh spare is made.
//
// It uses process.binding('stream_wrap') and ('tcp_wrap') (Node's own WriteWrap, stream state and
// TCP handle class; on process.binding's allowlist in Node 20–24, DEP0111 is documentation-only).
// Where they are missing or refused (Node's permission model turns process.binding off), every
// write goes through socket.write.
// The caller (BatchedWriter) keeps order: it writes here only when neither the Writable nor an
// earlier direct write holds bytes, and counts the bytes a pending direct write holds.

interface StreamBinding {
  WriteWrap: new () => WriteRequest;
  streamBaseState: Int32Array;
  kLastWriteWasAsync: number;
}

interface WriteRequest {
  /** Called by libuv when a queued write finished (status < 0: it failed). */
  oncomplete: (this: WriteRequest, status: number) => void;
  /** Keeps the bytes alive while libuv holds a pointer into them. */
  buffer: Buffer | null;
  owner: DirectWriteOwner | null;
}

interface TcpHandle {
  writeBuffer(req: WriteRequest, data: Buffer): number;
}

/** Who is told when a write libuv queued has finished. */
export interface DirectWriteOwner {
  directWriteDone(error: Error | null): void;
}

const stream = processBinding<Partial<StreamBinding>>('stream_wrap');
const binding: StreamBinding | null =
  typeof stream?.WriteWrap === 'function' && stream.streamBaseState instanceof Int32Array && typeof stream.kLastWriteWasAsync === 'number'
    ? (stream as StreamBinding)
    : null;
const TCP = processBinding<{ TCP?: new () => unknown }>('tcp_wrap')?.TCP;
let spare: WriteRequest | null = binding === null || typeof TCP !== 'function' ? null : newRequest(binding);

/** process.binding(name), or null where Node lacks or refuses it. */
function processBinding<T>(name: string): T | null {
  try {
    return (process as unknown as { binding(name: string): T }).binding(name);
  } catch {
    return null;
  }
}

function newRequest(b: StreamBinding): WriteRequest {
  const req = new b.WriteWrap();
  req.oncomplete = onQueuedWriteDone;
  req.buffer = null;
  req.owner = null;
  return req;
}

function onQueuedWriteDone(this: WriteRequest, status: number): void {
  const owner = this.owner;
  this.owner = null;
  this.buffer = null;
  owner?.directWriteDone(status < 0 ? writeError(status) : null);
}

function writeError(status: number): Error {
  const name = getSystemErrorName(status);
  return Object.assign(new Error(`write ${name}`), { code: name, errno: status, syscall: 'write' });
}

/**
 * The socket's TCP handle when a write may go straight to it now: a plain TCP socket, connected,
 * open for writing, with nothing queued or corked in its Writable. Else null.
 */
export function directHandle(socket: net.Socket): TcpHandle | null {
  if (spare === null) return null;
  const handle = (socket as unknown as { _handle: TcpHandle | null })._handle;
  if (handle === null || !(handle instanceof TCP!)) return null;
  if (socket.connecting || socket.destroyed || socket.writableEnded) return null;
  if (socket.writableLength !== 0 || socket.writableCorked !== 0) return null;
  return handle;
}

/**
 * Writes `data` to `handle` (from directHandle). Returns 0 when the kernel took every byte,
 * 1 when libuv queued some (the owner's directWriteDone follows), or a negative errno when the
 * write failed at once (nothing was queued; the caller hands the bytes to socket.write, which
 * meets the same error and ends the socket the usual way).
 */
export function writeDirect(handle: TcpHandle, data: Buffer, owner: DirectWriteOwner): number {
  const req = spare!;
  const err = handle.writeBuffer(req, data);
  if (err !== 0) {
    spare = newRequest(binding!); // it may have been bound to a native write that then failed
    return err;
  }
  if (binding!.streamBaseState[binding!.kLastWriteWasAsync] === 0) return 0;
  req.buffer = data;
  req.owner = owner;
  spare = newRequest(binding!);
  return 1;
}
