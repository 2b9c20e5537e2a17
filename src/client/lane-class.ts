/**
 * Which lane of a node's shared links a client's next requests take (NodePool.placeFor): the
 * interactive links, or the node's bulk links (admission.bulkConnectionsPerNode).
 *
 * Why two lanes: a link is a FIFO. A reply queued on it waits for every reply before it, so one
 * client's 5,000-request pipeline or twenty 1 MiB values sit between a quiet client's GET and its
 * reply, however fairly requests were admitted. Valkey serves two connections in turn (16 KiB of
 * each per event) and respool reads both at once, so clients that move a lot of bytes per
 * request, or many requests at once, get links of their own and the rest never wait behind them.
 *
 * A client is bulk while any of these holds (read when it is placed afresh: nothing outstanding):
 *  - more than one slice of requests waits in its buffer (a deep pipeline: a loader, a warm-up);
 *  - it pipelines more than a few requests (COLD_PIPELINE_BYTES behind the one being placed) before
 *    any reply showed how big its replies are (a new connection's twenty GETs of 1 MiB values);
 *  - its replies are big (a running average of at least BIG_REPLY_BYTES);
 *  - it does not read what it was sent (its output is held back: a slow reader).
 * Otherwise it is interactive: one request, or a short pipeline of small replies, at a time.
 */
export type LaneClass = 'interactive' | 'bulk';

/** A running average of reply sizes at or above this makes a client bulk. */
export const BIG_REPLY_BYTES = 64 * 1024;
/** Before its first reply, a client with this many request bytes behind the one placed is bulk (a SET and a GET behind it are not). */
export const COLD_PIPELINE_BYTES = 256;

/**
 * A client's lane from what it shows now (positional: read for each request a client places afresh).
 *   queuedBytes: request bytes read and not yet handed on (behind the request being placed)
 *   sliceBytes: one slice (admission.sliceBytes)
 *   replies: replies written so far (0: their size is unknown); replyAverage: their running average size
 *   outputHeld: its output is held back — it does not read its replies
 */
export function laneClass(queuedBytes: number, sliceBytes: number, replies: number, replyAverage: number, outputHeld: boolean): LaneClass {
  if (outputHeld || queuedBytes >= sliceBytes || replyAverage >= BIG_REPLY_BYTES) return 'bulk';
  if (replies === 0 && queuedBytes >= COLD_PIPELINE_BYTES) return 'bulk';
  return 'interactive';
}
