import { describe, expect, it } from 'vitest';
import { MessageRun } from '../../src/pubsub/message-run.js';
import type { MessageKind } from '../../src/pubsub/subscriber-connection.js';

// MessageRun joins consecutive message pushes for one name (one read of a subscriber connection)
// into one buffer, and hands each run on in arrival order.

interface Emitted {
  kind: MessageKind;
  pattern: string | null;
  channel: string;
  bytes: string;
  starts: readonly number[];
  shared: boolean;
}

function recorder(read: Buffer): { run: MessageRun; out: Emitted[] } {
  const out: Emitted[] = [];
  const run = new MessageRun((kind, pattern, channel, frames, starts) => {
    out.push({ kind, pattern, channel, bytes: frames.toString('latin1'), starts: [...starts], shared: frames.buffer === read.buffer });
  });
  return { run, out };
}

const push = (channel: string, payload: string) => `>3\r\n$7\r\nmessage\r\n$${channel.length}\r\n${channel}\r\n$${payload.length}\r\n${payload}\r\n`;

/** One read holding `frames` back to back, and a view of each frame in it (as the framer gives them). */
function read(...frames: string[]): { buf: Buffer; views: Buffer[] } {
  const buf = Buffer.from(frames.join(''), 'latin1');
  const views: Buffer[] = [];
  let at = 0;
  for (const f of frames) {
    views.push(buf.subarray(at, at + f.length));
    at += f.length;
  }
  return { buf, views };
}

describe('MessageRun', () => {
  it('joins consecutive messages of one channel without a copy, with each frame\'s offset', () => {
    const frames = [push('a', 'one'), push('a', 'two'), push('a', 'three')];
    const { buf, views } = read(...frames);
    const { run, out } = recorder(buf);
    for (const v of views) run.add('message', null, 'a', v);
    expect(out).toHaveLength(0); // nothing before the flush
    run.flush();
    expect(out).toEqual([{
      kind: 'message', pattern: null, channel: 'a', bytes: frames.join(''),
      starts: [0, frames[0]!.length, frames[0]!.length + frames[1]!.length], shared: true,
    }]);
    run.flush();
    expect(out).toHaveLength(1); // flushed once
  });

  it('a message for another name ends the run: order across names is kept', () => {
    const frames = [push('a', '1'), push('b', '2'), push('a', '3'), push('a', '4')];
    const { buf, views } = read(...frames);
    const { run, out } = recorder(buf);
    run.add('message', null, 'a', views[0]!);
    run.add('message', null, 'b', views[1]!);
    run.add('message', null, 'a', views[2]!);
    run.add('message', null, 'a', views[3]!);
    run.flush();
    expect(out.map((e) => [e.channel, e.bytes, e.starts])).toEqual([
      ['a', frames[0], [0]],
      ['b', frames[1], [0]],
      ['a', frames[2]! + frames[3]!, [0, frames[2]!.length]],
    ]);
  });

  it('the same channel through a pattern is another name (pmessage), and smessage another kind', () => {
    const { buf, views } = read(push('a', '1'), push('a', '2'), push('a', '3'));
    const { run, out } = recorder(buf);
    run.add('message', null, 'a', views[0]!);
    run.add('pmessage', 'a*', 'a', views[1]!);
    run.add('smessage', null, 'a', views[2]!);
    run.flush();
    expect(out.map((e) => [e.kind, e.pattern])).toEqual([['message', null], ['pmessage', 'a*'], ['smessage', null]]);
  });

  it('frames that are not contiguous in one buffer are copied together', () => {
    const a = Buffer.from(push('a', 'x'), 'latin1');
    const b = Buffer.from(push('a', 'y'), 'latin1');
    const { run, out } = recorder(a);
    run.add('message', null, 'a', a);
    run.add('message', null, 'a', b);
    run.flush();
    expect(out).toHaveLength(1);
    expect(out[0]!.bytes).toBe(push('a', 'x') + push('a', 'y'));
    expect(out[0]!.starts).toEqual([0, a.length]);
  });
});
