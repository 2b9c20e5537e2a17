import { afterEach, describe, expect, it, vi } from 'vitest';
import { Link, type LinkOptions } from '../../src/upstream/link.js';
import { ProcessLoad } from '../../src/upstream/process-load.js';
import { ProxyError } from '../../src/errors.js';
import { fakeSockets, flushWrites, recordedRequest, resp, type FakeUpstreamSocket } from '../helpers/fake-upstream-socket.js';

// Link against a fake socket (no server): the order replies are matched in, why requests fail
// (written or not, the cause), the in-flight counts, the command timeout. In the style of
// Envoy's conn_pool_impl_test.cc: each test plays the node by hand.

function newLink(over: Partial<LinkOptions> = {}): { link: Link; socket: FakeUpstreamSocket } {
  const fake = fakeSockets();
  const link = new Link({
    host: '10.0.0.1',
    port: 6379,
    protocol: 2,
    readonly: false,
    auth: null,
    clientName: 'respool',
    connectTimeoutMs: 1000,
    commandTimeoutMs: 1000,
    openSocket: fake.open,
    ...over,
  });
  return { link, socket: fake.sockets[0]! };
}

/** Opens the fake connection and answers the handshake (RESP2: CLIENT SETNAME). */
async function ready(link: Link, socket: FakeUpstreamSocket): Promise<void> {
  socket.open();
  await flushWrites();
  expect(socket.takeWritten()).toBe(resp('CLIENT', 'SETNAME', 'respool'));
  socket.reply('+OK\r\n');
  expect(link.state).toBe('ready');
}

afterEach(() => {
  vi.useRealTimers();
});

describe('Link (fake socket, no server)', () => {
  it('holds requests until the handshake is answered, then writes them in order behind it', async () => {
    const { link, socket } = newLink();
    const log: string[] = [];
    const a = recordedRequest('a', log);
    const b = recordedRequest('b', log);
    link.send(Buffer.from(resp('GET', 'a')), a);
    link.send(Buffer.from(resp('GET', 'b')), b);
    expect(link.inflightCount).toBe(2); // waiting counts as in flight for the pool's bound
    socket.open();
    await flushWrites();
    expect(socket.takeWritten()).toBe(resp('CLIENT', 'SETNAME', 'respool')); // nothing before the handshake
    socket.reply('+OK\r\n');
    expect(socket.connectDoneCalls).toBe(1); // the connect deadline ends with the handshake
    await flushWrites();
    expect(socket.takeWritten()).toBe(resp('GET', 'a') + resp('GET', 'b'));
  });

  it('matches each reply frame to the oldest request, across split and joined chunks', async () => {
    const { link, socket } = newLink();
    await ready(link, socket);
    const log: string[] = [];
    const reqs = ['a', 'b', 'c'].map((n) => recordedRequest(n, log));
    for (const [i, r] of reqs.entries()) link.send(Buffer.from(resp('GET', `k${i}`)), r);
    socket.reply('$1\r\n1\r\n$1\r'); // one whole frame and part of the next
    socket.reply('\n2\r\n:3\r\n'); // the rest, and a third frame in the same chunk
    expect(log).toEqual(['a:$1\r\n1', 'b:$1\r\n2', 'c::3']);
    expect(link.inflightCount).toBe(0);
    expect(link.inflightBytes).toBe(0);
  });

  it('skips RESP3 pushes on a shared link: they answer no request', async () => {
    const { link, socket } = newLink();
    await ready(link, socket);
    const log: string[] = [];
    link.send(Buffer.from(resp('GET', 'k')), recordedRequest('a', log));
    socket.reply('>2\r\n$10\r\ninvalidate\r\n_\r\n$1\r\nv\r\n');
    expect(log).toEqual(['a:$1\r\nv']);
  });

  it('fails written requests as written (connection lost) and waiting ones as unsent (safe to retry)', async () => {
    const { link, socket } = newLink();
    await ready(link, socket);
    const log: string[] = [];
    const written = recordedRequest('w', log);
    link.send(Buffer.from(resp('INCR', 'n')), written);
    socket.fail('read ECONNRESET');
    expect(written.failures).toEqual([{ error: ProxyError.connectionLost('10.0.0.1:6379'), written: true, cause: undefined }]);
    expect(link.state).toBe('closed');
    expect(link.closeReason).toBe('read ECONNRESET');
    expect(socket.destroyed).toBe(true);
    // After close: refused at once, not written.
    const late = recordedRequest('late', log);
    link.send(Buffer.from(resp('GET', 'k')), late);
    expect(late.failures).toEqual([{ error: ProxyError.upstreamUnavailable('10.0.0.1:6379', 'read ECONNRESET'), written: false, cause: undefined }]);

    const second = newLink();
    const waiting = recordedRequest('waiting', log);
    second.link.send(Buffer.from(resp('GET', 'k')), waiting);
    second.socket.fail('connect ECONNREFUSED 10.0.0.1:6379');
    expect(waiting.failures).toEqual([{ error: ProxyError.upstreamUnavailable('10.0.0.1:6379', 'connect ECONNREFUSED 10.0.0.1:6379'), written: false, cause: undefined }]);
    expect(second.link.wasReady).toBe(false);
  });

  it('fails the whole link with cause "timeout" when the oldest request waits past commandTimeoutMs', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] }); // the link's check runs every commandTimeoutMs / 4, and when the oldest's bound runs out
    const { link, socket } = newLink({ commandTimeoutMs: 400 });
    await ready(link, socket);
    const log: string[] = [];
    const slow = recordedRequest('slow', log);
    const behind = recordedRequest('behind', log);
    link.send(Buffer.from(resp('BLPOP', 'q', '0')), slow);
    link.send(Buffer.from(resp('GET', 'k')), behind);
    vi.advanceTimersByTime(300);
    expect(link.state).toBe('ready'); // the oldest was written just now
    expect(slow.sentAt).toBeGreaterThan(0);
    // As if written 200 ms ago, after the last reply (the handshake's): still within the timeout
    // (the link reads the real clock, so leave it a wide margin rather than 399 ms of 400).
    const lastReply = link as unknown as { lastBytesAt: number };
    slow.sentAt = performance.now() - 200;
    lastReply.lastBytesAt = slow.sentAt - 1;
    vi.advanceTimersByTime(100);
    expect(link.state).toBe('ready');
    slow.sentAt = performance.now() - 500; // written 500 ms ago and still unanswered, nothing answered since
    lastReply.lastBytesAt = slow.sentAt - 1;
    vi.advanceTimersByTime(100);
    expect(link.state).toBe('closed');
    expect(link.timedOut).toBe(true);
    const timeout = ProxyError.timeout('10.0.0.1:6379', 400);
    // Both were written: a later frame could no longer be matched, so the link goes whole.
    expect(slow.failures).toEqual([{ error: timeout, written: true, cause: 'timeout' }]);
    expect(behind.failures).toEqual([{ error: timeout, written: true, cause: 'timeout' }]);
  });

  it('a link working through a long queue is not timed out: the oldest request waits for the node from the last reply on', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { link, socket } = newLink({ commandTimeoutMs: 400 });
    await ready(link, socket);
    const log: string[] = [];
    const reqs = Array.from({ length: 5 }, (_, i) => recordedRequest(`r${i}`, log));
    for (const [i, r] of reqs.entries()) link.send(Buffer.from(resp('GET', `big${i}`)), r);
    // All written 1 s ago (a thousand 1 MiB replies take that long to arrive); one reply just came.
    for (const r of reqs) r.sentAt = performance.now() - 1000;
    socket.reply('$1\r\na\r\n');
    vi.advanceTimersByTime(200);
    expect(link.state).toBe('ready'); // r1 waits for the node since r0's reply, not since its write
    expect(log).toEqual(['r0:$1\r\na']);
    (link as unknown as { lastBytesAt: number }).lastBytesAt = performance.now() - 500; // then nothing for 500 ms
    vi.advanceTimersByTime(200);
    expect(link.state).toBe('closed');
    expect(reqs[1]!.failures[0]!.cause).toBe('timeout');
  });

  it('a reply nobody asked for ends the link (its frames can no longer be matched)', async () => {
    const { link, socket } = newLink();
    await ready(link, socket);
    socket.reply('+OK\r\n');
    expect(link.state).toBe('closed');
    expect(link.closeReason).toBe('upstream sent a reply nobody asked for');
  });

  it('a failed handshake fails the link and tells the pool when the password was refused', async () => {
    let refused = 0;
    const { link, socket } = newLink({ auth: { username: 'app', password: 'bad' }, onAuthRefused: () => refused++ });
    const log: string[] = [];
    const req = recordedRequest('r', log);
    link.send(Buffer.from(resp('GET', 'k')), req);
    socket.open();
    socket.reply('-WRONGPASS invalid username-password pair or user is disabled.\r\n');
    expect(refused).toBe(1);
    expect(link.closeReason).toBe('handshake AUTH failed: WRONGPASS invalid username-password pair or user is disabled.');
    expect(req.failures[0]!.written).toBe(false);
  });

  it('counts in-flight requests and bytes on the link and in the process, up on write and down on reply or failure', async () => {
    const load = new ProcessLoad(100, 1 << 20);
    const { link, socket } = newLink({ load });
    await ready(link, socket);
    const log: string[] = [];
    const get = Buffer.from(resp('GET', 'k'));
    link.send(get, recordedRequest('a', log));
    link.send(get, recordedRequest('b', log));
    expect([link.inflightCount, link.inflightBytes]).toEqual([2, 2 * get.length]);
    expect([load.requests, load.bytes]).toEqual([2, 2 * get.length]);
    socket.reply('$-1\r\n');
    expect([link.inflightCount, link.inflightBytes, load.requests, load.bytes]).toEqual([1, get.length, 1, get.length]);
    socket.fail('closed');
    expect([link.inflightCount, link.inflightBytes, load.requests, load.bytes]).toEqual([0, 0, 0, 0]);
    expect(load.receivedBytes).toBe('+OK\r\n'.length + '$-1\r\n'.length);
  });
});
