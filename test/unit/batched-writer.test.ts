import net from 'node:net';
import { once } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { BatchedWriter } from '../../src/util/batched-writer.js';
import { directHandle } from '../../src/util/direct-write.js';

// BatchedWriter over real loopback sockets: batches go straight to the TCP handle when nothing is
// queued before them (util/direct-write.ts), through socket.write otherwise; order, counts and
// "sent" notifications must hold across both paths, including writes libuv had to queue.

const open: net.Socket[] = [];
const servers: net.Server[] = [];
afterEach(() => {
  for (const s of open.splice(0)) s.destroy();
  for (const s of servers.splice(0)) s.close();
});

/** A connected pair: `local` is written by the writer, `peer` starts paused (not reading). */
async function pair(): Promise<{ local: net.Socket; peer: net.Socket }> {
  const srv = net.createServer({ pauseOnConnect: true });
  servers.push(srv);
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  const accepted = once(srv, 'connection') as Promise<[net.Socket]>;
  const local = net.connect((srv.address() as net.AddressInfo).port, '127.0.0.1');
  open.push(local);
  await once(local, 'connect');
  const [peer] = await accepted;
  open.push(peer);
  return { local, peer };
}

/** Counts the calls the writer makes to socket.write (the path it takes when it cannot write directly). */
function countStreamWrites(socket: net.Socket): { calls: number } {
  const counter = { calls: 0 };
  const original = socket.write.bind(socket) as (data: Buffer) => boolean;
  socket.write = ((data: Buffer) => {
    counter.calls++;
    return original(data);
  }) as typeof socket.write;
  return counter;
}

/** Reads everything the peer receives until it has `n` bytes. */
async function readBytes(peer: net.Socket, n: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let got = 0;
  peer.on('data', (c: Buffer) => {
    chunks.push(c);
    got += c.length;
  });
  peer.resume();
  while (got < n) await new Promise((r) => setTimeout(r, 5));
  return Buffer.concat(chunks).subarray(0, n);
}

const settle = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('BatchedWriter', () => {
  it('writes small batches straight to the TCP handle: in order, counted, nothing left unsent', async () => {
    const { local, peer } = await pair();
    expect(directHandle(local)).not.toBeNull(); // a plain connected TCP socket qualifies
    const writer = new BatchedWriter(local, 'microtask');
    const streamWrites = countStreamWrites(local);
    const sent: Buffer[] = [];
    for (let i = 0; i < 100; i++) {
      const piece = Buffer.from(`+reply ${i}\r\n`);
      sent.push(piece);
      writer.write(piece);
      if (i % 10 === 9) await settle(); // several batches
    }
    await settle();
    const expected = Buffer.concat(sent);
    expect(writer.unsentBytes).toBe(0);
    expect(streamWrites.calls).toBe(0); // every batch went straight to the handle
    expect(local.writableLength).toBe(0);
    expect(local.bytesWritten).toBe(expected.length); // the handle counts direct writes too (CLIENT LIST tot-net-out)
    expect((await readBytes(peer, expected.length)).equals(expected)).toBe(true);
  });

  it('writeNow sends at once when nothing is batched, and keeps order behind a batch', async () => {
    const { local, peer } = await pair();
    const writer = new BatchedWriter(local, 'microtask');
    writer.writeNow(Buffer.from('+first\r\n'));
    expect(writer.unsentBytes).toBe(0); // already with the kernel: no turn waited for
    expect(writer.batches).toBe(1);
    writer.write(Buffer.from('+reply\r\n')); // batched for the microtask
    writer.writeNow(Buffer.from('+push\r\n')); // must not overtake the batched reply
    expect(writer.batchedBytes).toBe('+reply\r\n+push\r\n'.length);
    await settle();
    expect(writer.unsentBytes).toBe(0);
    const expected = '+first\r\n+reply\r\n+push\r\n';
    expect((await readBytes(peer, expected.length)).toString()).toBe(expected);
  });

  it('writeNow behind a write libuv queued goes through the Writable, in order', async () => {
    const { local, peer } = await pair();
    const writer = new BatchedWriter(local, 'microtask');
    const big = Buffer.alloc(8 * 1024 * 1024, 0x61); // more than the kernel takes from a paused peer
    writer.writeNow(big);
    expect(writer.unsentBytes).toBeGreaterThan(0);
    const tail = Buffer.from('+after\r\n');
    writer.writeNow(tail);
    const got = await readBytes(peer, big.length + tail.length);
    expect(got.subarray(big.length).toString()).toBe('+after\r\n');
    expect(got.subarray(0, big.length).equals(big)).toBe(true);
  });

  it('counts a write libuv had to queue, keeps later writes behind it, and reports when all is sent', async () => {
    const { local, peer } = await pair();
    const writer = new BatchedWriter(local, 'microtask');
    const streamWrites = countStreamWrites(local);
    // Far more than loopback's socket buffers hold while the peer is not reading.
    const big = Buffer.alloc(16 * 1024 * 1024, 0x61);
    for (let at = 0; at < big.length; at += 8 * 1024) big.write(String(at % 1e7).padStart(8, '0'), at, 'latin1');
    writer.write(big.subarray(0, 8 * 1024)); // a small batch first, written directly
    await settle();
    writer.write(big.subarray(8 * 1024, 8 * 1024 * 1024)); // one large buffer: written directly, partly queued by libuv
    await settle();
    const queued = writer.unsentBytes;
    expect(queued).toBeGreaterThan(0); // the kernel could not take it all
    expect(streamWrites.calls).toBe(0);
    writer.write(big.subarray(8 * 1024 * 1024)); // while libuv holds the rest: through the Writable, behind it
    await settle();
    expect(writer.unsentBytes).toBeGreaterThan(queued);
    expect(streamWrites.calls).toBe(1);
    let sentCalled = false;
    writer.whenSent(() => {
      sentCalled = true;
    });
    await settle();
    expect(sentCalled).toBe(false);
    const received = await readBytes(peer, big.length);
    expect(received.equals(big)).toBe(true);
    for (let i = 0; i < 200 && !sentCalled; i++) await new Promise((r) => setTimeout(r, 5));
    expect(sentCalled).toBe(true);
    expect(writer.unsentBytes).toBe(0);
    expect(local.bytesWritten).toBe(big.length);
  });

  it('whenSent with nothing pending runs on the next turn, not at once', async () => {
    const { local } = await pair();
    const writer = new BatchedWriter(local, 'microtask');
    let called = 0;
    writer.whenSent(() => called++);
    expect(called).toBe(0);
    await settle();
    await settle();
    expect(called).toBe(1);
  });

  it('a socket destroyed while libuv holds a direct write: no error escapes, waiters are dropped', async () => {
    const { local } = await pair();
    const writer = new BatchedWriter(local, 'microtask');
    writer.write(Buffer.alloc(32 * 1024 * 1024, 0x62));
    await settle();
    expect(writer.unsentBytes).toBeGreaterThan(0);
    let called = false;
    writer.whenSent(() => {
      called = true;
    });
    local.destroy();
    await once(local, 'close');
    await new Promise((r) => setTimeout(r, 20));
    expect(called).toBe(false);
    writer.write(Buffer.from('+late\r\n')); // a write after the end is dropped quietly
    await settle();
  });

  it('uses socket.write for sockets that are not plain TCP handles, or have bytes queued in the Writable', async () => {
    const { local, peer } = await pair();
    local.cork();
    expect(directHandle(local)).toBeNull(); // corked
    local.uncork();
    local.write(Buffer.alloc(8 * 1024 * 1024)); // the Writable now holds bytes (peer not reading)
    expect(local.writableLength).toBeGreaterThan(0);
    expect(directHandle(local)).toBeNull();
    const writer = new BatchedWriter(local, 'microtask');
    writer.write(Buffer.from('+after\r\n'));
    await settle();
    expect(writer.unsentBytes).toBeGreaterThan(0);
    const got = await readBytes(peer, 8 * 1024 * 1024 + 8);
    expect(got.subarray(-8).toString()).toBe('+after\r\n');
  });
});
