import type net from 'node:net';

/**
 * Sockets that read into ONE shared buffer (net.Socket's `onread` option) instead of a fresh
 * Buffer per read, skipping the Readable stream ('data' events) altogether: accepted client
 * sockets (session/shared-reads.ts) and shared upstream links (upstream/dial.ts).
 *
 * Why: with 'data' events every read costs a 64 KiB malloc that libuv shrinks, a new
 * ArrayBuffer, and Readable.push → emit — per request at pipeline 1. Measured on a bare
 * PING server under valkey-benchmark (50 clients, pipeline 1): 8.2 → 6.0 µs of user CPU per
 * request (see bench/RESULTS.md, "hot path").
 *
 *   shared  : the kernel writes every socket's bytes here, one read at a time (the event loop
 *             is single-threaded, and the callback consumes the bytes before returning).
 *   slab    : the bytes are copied (a few dozen bytes at pipeline 1) into the free tail of a
 *             32 KiB slab, and that copy is what the reader frames. A slab is never written
 *             twice, so views of it (request arguments, `raw`, reply frames) stay valid as long
 *             as they are referenced — the same lifetime rule as a 'data' chunk. Reads above
 *             8 KiB get a buffer of their own, so a slab is pinned by small views only.
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

/** net.Socket's `onread` option. */
export interface SharedReadOption {
  buffer: Buffer;
  /** Node stops reading when it returns false; these always read on (pause() stops them). */
  callback: (this: net.Socket, n: number) => boolean;
}

/** The `onread` option that hands `onChunk` (called with the socket as `this`) a lasting copy of each read. */
export function readsThroughSharedBuffer(onChunk: (this: net.Socket, chunk: Buffer) => void): SharedReadOption {
  return {
    buffer: SHARED,
    callback(this: net.Socket, n: number): boolean {
      onChunk.call(this, copyOut(SHARED, n));
      return true;
    },
  };
}
