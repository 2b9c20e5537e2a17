import { describe, expect, it } from 'vitest';
import { ReplyEntry, ReplyQueue, type EntryClient, type ReplyObserver } from '../../src/client/reply-queue.js';
import type { HistogramSeries } from '../../src/metrics/fast-histogram.js';
import { RequestFrame } from '../../src/resp/request-framer.js';
import { DEV_CHECKS } from '../../src/util/dev-checks.js';

// The reply queue alone (no session, no server): replies leave strictly in request order,
// whatever order they are filled in; silent entries keep their place; timing and the observer
// see each timed entry once, as it is written. The session's use of it: client-session.test.ts.

/** The session's part: an entry reports here, and the queue drains from its head. */
class Sink implements EntryClient {
  readonly id = 7;
  readonly protocol = 2 as const;
  readonly db = 0;
  readonly identity = null;
  closed = false;
  readonly written: string[] = [];
  readonly queue = new ReplyQueue();

  onEntryDone(entry: ReplyEntry): void {
    if (this.queue.isHead(entry)) this.queue.drainHead(this);
    else if (entry.reply !== null) this.queue.keep(entry);
  }

  writeReply(reply: Buffer): void {
    this.written.push(reply.toString('latin1'));
  }

  reserve(): ReplyEntry {
    const e = new ReplyEntry(this);
    this.queue.push(e);
    return e;
  }
}

const bytes = (s: string) => Buffer.from(s, 'latin1');

describe('ReplyQueue (no server)', () => {
  it('writes replies in request order whatever order they are filled in', () => {
    const s = new Sink();
    const [a, b, c, d] = [s.reserve(), s.reserve(), s.reserve(), s.reserve()];
    c!.fill(bytes(':3\r\n'));
    b!.fill(bytes(':2\r\n'));
    expect(s.written).toEqual([]); // the head is not answered: nothing may be written
    expect(s.queue.heldReplies()).toEqual({ count: 2, bytes: 8 });
    a!.fill(bytes(':1\r\n'));
    expect(s.written).toEqual([':1\r\n', ':2\r\n', ':3\r\n']);
    d!.fill(bytes(':4\r\n'));
    expect(s.written).toEqual([':1\r\n', ':2\r\n', ':3\r\n', ':4\r\n']);
    expect(s.queue.length).toBe(0);
  });

  it('keeps a finished entry\'s bytes when it waits behind an unfinished one (link buffers are reused)', () => {
    const s = new Sink();
    const [a, b] = [s.reserve(), s.reserve()];
    const linkBuffer = bytes('$1\r\nx\r\n');
    b!.fill(linkBuffer.subarray(0));
    linkBuffer.fill(0x3f); // the link reads its next chunk into the same memory
    a!.fill(bytes('+OK\r\n'));
    expect(s.written).toEqual(['+OK\r\n', '$1\r\nx\r\n']);
  });

  it('fills an entry once: a second reply (a late failure after the reply) is ignored', () => {
    const s = new Sink();
    const a = s.reserve();
    a.fill(bytes('+first\r\n'));
    a.fill(bytes('-ERR second\r\n'));
    expect(s.written).toEqual(['+first\r\n']);
  });

  it('silent entries (CLIENT REPLY OFF / SKIP) keep their place and are not written', () => {
    const s = new Sink();
    const [a, b, c] = [s.reserve(), s.reserve(), s.reserve()];
    b!.silent = true;
    c!.fill(bytes(':3\r\n'));
    b!.fill(bytes(':2\r\n'));
    expect(s.written).toEqual([]);
    a!.fill(bytes(':1\r\n'));
    expect(s.written).toEqual([':1\r\n', ':3\r\n']);
  });

  it('times the entries pushed while a request is dispatched, once each, as their replies are written', () => {
    const s = new Sink();
    const observed: number[] = [];
    const seen: Array<{ family: string | null; ms: number }> = [];
    const series: HistogramSeries = { observe: (v: number) => observed.push(v) } as HistogramSeries;
    const observer: ReplyObserver = { requestDone: (entry, ms) => seen.push({ family: entry.family, ms }) };
    s.queue.observer = observer;
    s.queue.stamp = performance.now() - 5;
    s.queue.series = series;
    s.queue.request = RequestFrame.of([bytes('GET'), bytes('k')], bytes('*2\r\n$3\r\nGET\r\n$1\r\nk\r\n'));
    s.queue.family = 'keyed';
    const timed = s.reserve();
    s.queue.series = null; // the request's handler returned: a push that follows is not timed
    const push = s.reserve();
    push.fill(bytes('>3\r\n'));
    expect(observed).toEqual([]);
    timed.fill(bytes('$1\r\nv\r\n'));
    expect(observed.length).toBe(1);
    expect(observed[0]!).toBeGreaterThanOrEqual(0.005);
    expect(seen).toEqual([{ family: 'keyed', ms: observed[0]! * 1000 }]);
  });

  it('development builds refuse an entry queued twice (its reply would be written twice)', () => {
    expect(DEV_CHECKS).toBe(true); // vitest runs src/ as a development build
    const s = new Sink();
    const a = s.reserve();
    expect(() => s.queue.push(a)).toThrow(/respool invariant broken: an entry is queued once/);
  });
});
