import { describe, expect, it } from 'vitest';
import { NodePool } from '../../src/upstream/node-pool.js';
import { NodeHealth } from '../../src/upstream/node-health.js';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import type { RespoolConfig } from '../../src/config/types.js';
import { fakeSockets, flushWrites, resp, type FakeUpstreamSocket } from '../helpers/fake-upstream-socket.js';
import { fakeContext, fakeSession } from '../helpers/fake-session.js';

// One client must never delay another's replies (issues 35 and 37), checked without a server:
// real client sessions, dispatch, router and one real NodePool whose links write to fake node
// sockets, so the test sees exactly what reaches a link and in which order, and plays the node.
//  - fair admission: a deep pipeliner and quiet clients on ONE link — the quiet clients' requests
//    are written within one slice of the pipeliner's, however deep it pipelines;
//  - the link reader: a client that stops reading never stops the link's other replies from
//    reaching their clients, whatever the size of its replies.

const NODE = { host: '10.0.0.9', port: 6379 };

/** One NodePool (one interactive link, `bulk` bulk links) to a fake node, as the router reaches it. */
function onePool(bulk = 0) {
  const fake = fakeSockets();
  const health = new NodeHealth(`${NODE.host}:${NODE.port}`, DEFAULT_CONFIG.resilience);
  const pool = new NodePool(NODE.host, NODE.port, {
    size: 1,
    bulkSize: bulk,
    role: 'primary',
    protocol: 2,
    readonly: false,
    auth: null,
    clientName: 'respool',
    connectTimeoutMs: 1000,
    commandTimeoutMs: 60_000,
    health,
    limits: { queueWindowMs: 250, maxQueued: 1_000_000, maxQueuedBytes: 1 << 30, maxInflightPerLink: 1_000_000, maxInflightBytesPerLink: 1 << 30 },
    openSocket: fake.open,
  });
  return { pool, sockets: fake.sockets, pools: { forNode: () => pool, get: () => pool, health: () => health } };
}

/** Opens a fake link and answers its handshake (CLIENT SETNAME). */
async function open(socket: FakeUpstreamSocket): Promise<void> {
  socket.open();
  await flushWrites();
  socket.takeWritten();
  socket.reply('+OK\r\n');
}

/** The GET keys written to a link, in order (the link writes whole requests). */
function keysWritten(socket: FakeUpstreamSocket): string[] {
  const text = socket.takeWritten();
  const keys: string[] = [];
  const re = /\*2\r\n\$3\r\nGET\r\n\$\d+\r\n([^\r]*)\r\n/g;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) keys.push(m[1]!);
  return keys;
}

const bulkReply = (n: number) => `$${n}\r\n${'v'.repeat(n)}\r\n`;

describe('one client never delays another (fake node, one link)', () => {
  for (const depth of [1_000, 20_000, 200_000]) {
    it(`fair admission: a ${depth}-request pipeline and quiet clients on one link — each quiet request within one slice of the pipeliner's`, async () => {
      const { pools, sockets } = onePool();
      const { ctx } = fakeContext(pools, NODE);
      const { sliceRequests, maxInflightPerClient } = ctx.config.admission;
      // The link is open before the traffic starts (a warm proxy).
      const warm = fakeSession(ctx);
      warm.socket.send(resp('GET', 'warm'));
      await open(sockets[0]!);
      await flushWrites();
      expect(keysWritten(sockets[0]!)).toEqual(['warm']);
      sockets[0]!.reply('$1\r\nw\r\n');

      const loader = fakeSession(ctx);
      const quiet = [fakeSession(ctx), fakeSession(ctx), fakeSession(ctx)];
      loader.socket.send(Array.from({ length: depth }, (_, i) => resp('GET', `L${i}`)).join(''));
      quiet.forEach((q, i) => q.socket.send(resp('GET', `q${i}-0`)));
      await flushWrites();
      await flushWrites();
      let written = keysWritten(sockets[0]!);
      // Written so far: the loader's first slice, the quiet requests, the loader's next turn (up to its window).
      for (let i = 0; i < quiet.length; i++) expect(written.indexOf(`q${i}-0`), `q${i}-0 in ${written.length} written`).toBeLessThanOrEqual(sliceRequests + quiet.length);
      const loaderWritten = written.filter((k) => k.startsWith('L'));
      expect(loaderWritten.length).toBeLessThanOrEqual(maxInflightPerClient); // the rest waits in the loader's own buffer
      expect(loaderWritten).toEqual(Array.from({ length: loaderWritten.length }, (_, i) => `L${i}`));

      // The node answers in order; quiet clients send again now and then: each quiet request is
      // written within one slice of the loader's requests written after it was sent.
      let answered = 0;
      let next = loaderWritten.length;
      const owed: string[] = [...written];
      for (let round = 1; round <= 30; round++) {
        quiet.forEach((q, i) => q.socket.send(resp('GET', `q${i}-${round}`)));
        // answer what is in flight, as the node would (one chunk)
        sockets[0]!.reply(owed.map((k) => bulkReply(k.length)).join(''));
        answered += owed.length;
        owed.length = 0;
        await flushWrites();
        await flushWrites();
        written = keysWritten(sockets[0]!);
        owed.push(...written);
        const loaderNow = written.filter((k) => k.startsWith('L'));
        expect(loaderNow).toEqual(Array.from({ length: loaderNow.length }, (_, i) => `L${next + i}`)); // the loader's order
        next += loaderNow.length;
        expect(loaderNow.length).toBeLessThanOrEqual(maxInflightPerClient);
        for (let i = 0; i < quiet.length; i++) {
          const at = written.indexOf(`q${i}-${round}`);
          expect(at, `q${i}-${round} written`).toBeGreaterThanOrEqual(0);
          expect(at, `q${i}-${round} behind at most one slice`).toBeLessThanOrEqual(sliceRequests + quiet.length);
        }
      }
      expect(answered).toBeGreaterThan(0);
      // Every quiet client got its own replies, in order.
      await flushWrites();
      quiet.forEach((q, i) => {
        const expected = Array.from({ length: 30 }, (_, r) => bulkReply(`q${i}-${r}`.length)).join('');
        expect(q.socket.text()).toBe(expected);
      });
    });
  }

  it('a deep pipeliner is bulk: with a bulk link its requests never share the quiet clients\' link', async () => {
    const { pools, sockets } = onePool(1);
    const { ctx } = fakeContext(pools, NODE);
    const quiet = fakeSession(ctx);
    quiet.socket.send(resp('GET', 'q0'));
    await open(sockets[0]!);
    await flushWrites();
    expect(keysWritten(sockets[0]!)).toEqual(['q0']);
    sockets[0]!.reply(bulkReply(2));
    const loader = fakeSession(ctx);
    loader.socket.send(Array.from({ length: 5000 }, (_, i) => resp('GET', `L${i}`)).join(''));
    expect(sockets.length).toBe(2); // the bulk place, dialed for the loader
    await open(sockets[1]!);
    quiet.socket.send(resp('GET', 'q1'));
    await flushWrites();
    await flushWrites();
    expect(keysWritten(sockets[0]!)).toEqual(['q1']); // nothing of the loader's ahead of it
    expect(keysWritten(sockets[1]!)[0]).toBe('L0');
  });
});

describe('the link reader: a client that stops reading never stops the link for others (fake node, one link)', () => {
  const sizes = [1, 100, 16 * 1024, 64 * 1024 + 7, 1024 * 1024, 8 * 1024 * 1024];
  for (const size of sizes) {
    for (const pieces of [1, 7]) {
      it(`a ${size}-byte reply to a client that does not read, in ${pieces} piece(s), then others' replies`, async () => {
        const { pools, sockets } = onePool();
        const { ctx } = fakeContext(pools, NODE);
        const slow = fakeSession(ctx);
        const other = fakeSession(ctx);
        slow.socket.reads = false; // it never reads: whatever respool writes to it stays unread
        slow.socket.send(resp('GET', 'big'));
        await open(sockets[0]!);
        other.socket.send(resp('GET', 'small'));
        await flushWrites();
        expect(keysWritten(sockets[0]!)).toEqual(['big', 'small']);
        // The node's bytes: the big reply then the small one, cut into `pieces` chunks.
        const bytes = Buffer.from(bulkReply(size) + bulkReply(5), 'latin1');
        const step = Math.ceil(bytes.length / pieces);
        for (let at = 0; at < bytes.length; at += step) sockets[0]!.reply(bytes.subarray(at, at + step));
        await flushWrites();
        expect(other.socket.text()).toBe(bulkReply(5)); // not held behind the slow client's unread bytes
        expect(slow.session.unreadOutputBytes() + slow.socket.receivedBytes()).toBeGreaterThanOrEqual(size); // its own bytes, its own output
        // And the link keeps reading: more replies for the other client arrive while the slow one still reads nothing.
        for (let i = 0; i < 5; i++) {
          other.socket.send(resp('GET', `n${i}`));
          await flushWrites();
          expect(keysWritten(sockets[0]!)).toEqual([`n${i}`]);
          sockets[0]!.reply(bulkReply(i + 1));
          await flushWrites();
        }
        expect(other.socket.text()).toBe(bulkReply(5) + [1, 2, 3, 4, 5].map(bulkReply).join(''));
      });
    }
  }

  it('past clients.maxOutputBytesPerClient only the slow client is disconnected; the link and the others go on', async () => {
    const { pools, sockets } = onePool();
    const tune = (c: RespoolConfig) => {
      c.clients.maxOutputBytesPerClient = 1024 * 1024;
    };
    const { ctx, closed } = fakeContext(pools, NODE, tune);
    const slow = fakeSession(ctx);
    const other = fakeSession(ctx);
    slow.socket.reads = false;
    slow.socket.send(resp('GET', 'a') + resp('GET', 'b') + resp('GET', 'c'));
    await open(sockets[0]!);
    other.socket.send(resp('GET', 'small'));
    await flushWrites();
    await flushWrites();
    const keys = keysWritten(sockets[0]!);
    expect(keys.filter((k) => k !== 'small')).toEqual(['a', 'b', 'c']);
    sockets[0]!.reply(keys.map((k) => (k === 'small' ? bulkReply(5) : bulkReply(700 * 1024))).join(''));
    await flushWrites();
    expect(closed).toEqual([slow.session]); // 2.1 MiB unread past its 1 MiB: it alone goes
    expect(other.socket.text()).toBe(bulkReply(5));
    other.socket.send(resp('GET', 'after'));
    await flushWrites();
    expect(keysWritten(sockets[0]!)).toEqual(['after']);
    sockets[0]!.reply(bulkReply(3));
    await flushWrites();
    expect(other.socket.text()).toBe(bulkReply(5) + bulkReply(3));
  });
});
