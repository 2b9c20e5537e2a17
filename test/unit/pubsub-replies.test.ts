import { describe, expect, it } from 'vitest';
import {
  encodeConfirmation,
  encodeMessage,
  encodePatternMessage,
  psubscribed,
  punsubscribed,
  ssubscribed,
  subscribed,
  sunsubscribed,
  unsubscribed,
} from '../../src/pubsub/replies.js';
import { ClientSubscriptions } from '../../src/pubsub/client-subscriptions.js';
import { ReplyFramer } from '../../src/resp/reply-framer.js';

const s = (b: Buffer) => b.toString('latin1');

describe('pub/sub confirmations (Valkey 8.0 pubsub.c addReplyPubsub*)', () => {
  it('subscribe / psubscribe / ssubscribe, RESP2 and RESP3', () => {
    expect(s(subscribed(2, 'news', 1))).toBe('*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n');
    expect(s(subscribed(3, 'news', 1))).toBe('>3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n');
    expect(s(psubscribed(2, 'n*', 2))).toBe('*3\r\n$10\r\npsubscribe\r\n$2\r\nn*\r\n:2\r\n');
    expect(s(psubscribed(3, 'n*', 2))).toBe('>3\r\n$10\r\npsubscribe\r\n$2\r\nn*\r\n:2\r\n');
    expect(s(ssubscribed(2, '{a}x', 1))).toBe('*3\r\n$10\r\nssubscribe\r\n$4\r\n{a}x\r\n:1\r\n');
    expect(s(ssubscribed(3, '{a}x', 1))).toBe('>3\r\n$10\r\nssubscribe\r\n$4\r\n{a}x\r\n:1\r\n');
  });

  it('unsubscribe / punsubscribe / sunsubscribe, with a channel and with none (nil, count 0)', () => {
    expect(s(unsubscribed(2, 'news', 0))).toBe('*3\r\n$11\r\nunsubscribe\r\n$4\r\nnews\r\n:0\r\n');
    expect(s(unsubscribed(3, 'news', 3))).toBe('>3\r\n$11\r\nunsubscribe\r\n$4\r\nnews\r\n:3\r\n');
    expect(s(unsubscribed(2, null, 0))).toBe('*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n');
    expect(s(unsubscribed(3, null, 0))).toBe('>3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n');
    expect(s(punsubscribed(2, null, 0))).toBe('*3\r\n$12\r\npunsubscribe\r\n$-1\r\n:0\r\n');
    expect(s(punsubscribed(3, 'p?', 1))).toBe('>3\r\n$12\r\npunsubscribe\r\n$2\r\np?\r\n:1\r\n');
    expect(s(sunsubscribed(2, null, 0))).toBe('*3\r\n$12\r\nsunsubscribe\r\n$-1\r\n:0\r\n');
    expect(s(sunsubscribed(3, null, 0))).toBe('>3\r\n$12\r\nsunsubscribe\r\n_\r\n:0\r\n');
  });

  it('keeps binary and UTF-8 names exact, and every frame is one well-formed reply', () => {
    const binary = Buffer.from([0, 13, 10, 0xff, 0x24]);
    const frame = encodeConfirmation(2, 'subscribe', binary, 12345);
    expect(frame.equals(Buffer.concat([Buffer.from('*3\r\n$9\r\nsubscribe\r\n$5\r\n'), binary, Buffer.from('\r\n:12345\r\n')]))).toBe(true);
    expect(s(subscribed(2, 'é', 1))).toBe('*3\r\n$9\r\nsubscribe\r\n$2\r\n\xc3\xa9\r\n:1\r\n');
    for (const f of [frame, unsubscribed(3, null, 0), encodeMessage(3, 'smessage', 'c', 'p'), encodePatternMessage(2, 'p*', 'pq', '')]) {
      const framer = new ReplyFramer();
      framer.push(f);
      expect(framer.next()!.equals(f)).toBe(true);
      expect(framer.next()).toBeNull();
    }
  });

  it('encodes messages as Valkey sends them', () => {
    expect(s(encodeMessage(2, 'message', 'ch', 'hi'))).toBe('*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n');
    expect(s(encodeMessage(3, 'smessage', 'ch', 'hi'))).toBe('>3\r\n$8\r\nsmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n');
    expect(s(encodePatternMessage(2, 'c*', 'ch', 'hi'))).toBe('*4\r\n$8\r\npmessage\r\n$2\r\nc*\r\n$2\r\nch\r\n$2\r\nhi\r\n');
  });
});

describe('ClientSubscriptions', () => {
  it('counts channels + patterns for (p)(un)subscribe and shard channels apart', () => {
    const c = new ClientSubscriptions();
    expect(c.add('channel', Buffer.from('a'))).toBe(true);
    expect(c.add('channel', Buffer.from('a'))).toBe(false);
    expect(c.add('pattern', Buffer.from('a*'))).toBe(true);
    expect(c.add('shard', Buffer.from('s'))).toBe(true);
    expect([c.count(), c.shardCount(), c.total()]).toEqual([2, 1, 3]);
    expect(c.countFor('pattern')).toBe(2);
    expect(c.countFor('shard')).toBe(1);
    expect(c.remove('channel', Buffer.from('zz'))).toBe(false);
    expect(c.remove('channel', 'a')).toBe(true);
    expect(c.count()).toBe(1);
    const bin = Buffer.from([0xff, 0, 0x80]);
    c.add('channel', bin);
    expect(c.names('channel')[0]!.equals(bin)).toBe(true);
    expect(c.has('channel', bin)).toBe(true);
  });
});
