import type { MessageKind } from './subscriber-connection.js';

/** Offsets of the frames in a run of one message. */
export const ONE_FRAME: readonly number[] = [0];

/** Receives a run: `frames` holds every message of it back to back, `starts` the offset of each. */
export type RunSink = (kind: MessageKind, pattern: string | null, channel: string, frames: Buffer, starts: readonly number[]) => void;

/**
 * Consecutive message pushes for the same name that one read of a subscriber connection
 * carried, handed on as ONE buffer: the fan-out then makes one write per subscriber per run
 * (a burst of 200 messages in one read: one write, not 200), and sends it at once instead of
 * leaving it to a batch flushed after the whole fan-out loop.
 *
 *   run     : frames of one (kind, pattern, channel), in arrival order. Contiguous views of one
 *             read buffer (the usual case) are joined without a copy.
 *   starts  : each frame's offset in the joined buffer (RESP2 subscribers get each '>' as '*').
 *   flush   : before the connection handles any other frame (a message for another name, a
 *             confirmation, a reply), before it closes, and once the read's frames are done. So
 *             every subscriber sees messages and confirmations in the order Valkey sent them, and
 *             nothing waits past the read that carried it.
 */
export class MessageRun {
  private kind: MessageKind | null = null;
  private pattern: string | null = null;
  private channel = '';
  private readonly frames: Buffer[] = [];

  constructor(private readonly sink: RunSink) {}

  add(kind: MessageKind, pattern: string | null, channel: string, frame: Buffer): void {
    if (this.kind !== null && (kind !== this.kind || channel !== this.channel || pattern !== this.pattern)) this.flush();
    if (this.kind === null) {
      this.kind = kind;
      this.pattern = pattern;
      this.channel = channel;
    }
    this.frames.push(frame);
  }

  flush(): void {
    const kind = this.kind;
    if (kind === null) return;
    this.kind = null;
    const frames = this.frames;
    if (frames.length === 1) {
      const frame = frames[0]!;
      frames.length = 0;
      this.sink(kind, this.pattern, this.channel, frame, ONE_FRAME);
      return;
    }
    const starts: number[] = [];
    let bytes = 0;
    let contiguous = true;
    const first = frames[0]!;
    for (const f of frames) {
      if (f.buffer !== first.buffer || f.byteOffset !== first.byteOffset + bytes) contiguous = false;
      starts.push(bytes);
      bytes += f.length;
    }
    const joined = contiguous ? Buffer.from(first.buffer, first.byteOffset, bytes) : Buffer.concat(frames, bytes);
    frames.length = 0;
    this.sink(kind, this.pattern, this.channel, joined, starts);
  }
}

/** Who a run goes to (a subscribing client: subscription-entry.ts Subscriber). */
export interface RunReceiver {
  readonly closed: boolean;
  readonly protocol: 2 | 3;
  deliver(frames: Buffer): void;
}

/**
 * One run of messages to every receiver: encoded once per protocol, not per subscriber, and
 * written to each at once (ClientSession.push), so the first subscriber does not wait for the
 * last one's copy to be queued.
 */
export function deliverRun(receivers: Iterable<RunReceiver>, frames: Buffer, starts: readonly number[]): void {
  let resp2: Buffer | null = null;
  for (const sub of receivers) {
    if (sub.closed) continue;
    if (sub.protocol === 3) {
      sub.deliver(frames);
    } else {
      if (resp2 === null) {
        resp2 = Buffer.from(frames);
        for (const at of starts) resp2[at] = 0x2a; // '>' push → '*' array: the rest of each frame is the same in RESP2
      }
      sub.deliver(resp2);
    }
  }
}
