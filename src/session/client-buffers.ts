import type { RequestFrame } from '../resp/request-framer.js';
import type { ClientBuffers } from '../client/handler-session.js';
import type { ClientOutput } from './client-output.js';

/** The bytes of a request's arguments (Valkey's argv_len_sum). */
export function argvBytesOf(frame: RequestFrame): number {
  let n = 0;
  for (const a of frame.args) n += a.length;
  return n;
}

/**
 * A client's buffers as CLIENT LIST shows them (qbuf, argv-mem, obl/oll/omem, tot-net-in/out):
 * its request bytes not handed on, the arguments of the request it is in, its finished replies
 * still queued, and its output (batched this turn, written and not taken by the kernel).
 */
export function clientBuffers(queryBytes: number, argvBytes: number, held: { count: number; bytes: number }, output: ClientOutput, reading: boolean, bytesIn: number): ClientBuffers {
  const writer = output.writer;
  const unsent = writer.unsentBytes;
  const batched = writer.batchedBytes;
  return {
    queryBytes,
    argvBytes,
    batchedBytes: batched,
    peakBatchBytes: writer.peakBatch(performance.now()),
    heldReplies: held.count,
    heldReplyBytes: held.bytes,
    unsentBytes: unsent - batched,
    reading,
    bytesIn,
    bytesOut: output.bytesOut - unsent,
  };
}
