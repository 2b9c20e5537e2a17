// Where clients' requests go among a node's links (NodePool.placeFor, issue 23): every client of a
// lane (client/lane-class.ts) on ONE link while it keeps up, so the node reads many requests per
// read; a second link of the lane only when the first is backed up; a client with requests
// outstanding keeps its link (order); a deep pipeline on the bulk link, never ahead of a quiet
// client's request (issue 37).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStandalone, type ValkeyNode } from '../harness/valkey-processes.js';
import { startFakeValkey, type FakeValkey } from '../helpers/fake-valkey.js';
import { startTestProxy } from '../helpers/proxy.js';
import { RawConnection } from '../helpers/raw-resp.js';
import { waitFor } from '../helpers/wait.js';
import { encodeCommand } from '../harness/raw-client.js';
import type { RespoolProxy } from '../../src/server.js';

async function respoolLinks(node: ValkeyNode): Promise<number> {
  const c = await RawConnection.connect(node.port);
  try {
    return (await c.call('CLIENT', 'LIST')).split('\n').filter((l) => / name=respool /.test(l)).length;
  } finally {
    c.close();
  }
}

describe('link placement', () => {
  let node: ValkeyNode;
  let proxy: RespoolProxy;
  let fake: FakeValkey | undefined;
  let deaf: RespoolProxy | undefined;

  beforeAll(async () => {
    node = await startStandalone();
    proxy = await startTestProxy([node], { mode: 'standalone', connectionsPerNode: 2 } as never);
  });
  afterAll(async () => {
    await deaf?.close();
    await fake?.close();
    await proxy?.close();
    await node?.stop();
  });

  it('200 clients, pipelined and not, on one link per lane; each client\'s replies in its order', async () => {
    const conns = await Promise.all(Array.from({ length: 200 }, () => RawConnection.connect(proxy.address.port)));
    await Promise.all(conns.map(async (c, i) => {
      // Half pipeline writes then reads of their own key (the reads see the writes), half send one at a time.
      if (i % 2 === 0) {
        const cmds: string[][] = [];
        for (let k = 0; k < 20; k++) cmds.push(['SET', `place:${i}`, String(k)], ['GET', `place:${i}`]);
        c.write(Buffer.concat(cmds.map((x) => encodeCommand(x))));
        for (let k = 0; k < 20; k++) {
          expect(await c.read()).toBe('+OK\r\n');
          expect(await c.read()).toBe(`$${String(k).length}\r\n${k}\r\n`);
        }
      } else {
        for (let k = 0; k < 20; k++) {
          expect(await c.call('SET', `place:${i}`, String(k))).toBe('+OK\r\n');
          expect(await c.call('GET', `place:${i}`)).toBe(`$${String(k).length}\r\n${k}\r\n`);
        }
      }
    }));
    expect(await respoolLinks(node)).toBe(2); // the interactive link and the bulk link
    for (const c of conns) c.close();
  });

  it('with no bulk links (admission.bulkConnectionsPerNode 0) every client shares one link', async () => {
    const before = await respoolLinks(node);
    const one = await startTestProxy([node], { mode: 'standalone', connectionsPerNode: 2, admission: { bulkConnectionsPerNode: 0 } } as never);
    const conns = await Promise.all(Array.from({ length: 50 }, () => RawConnection.connect(one.address.port)));
    await Promise.all(conns.map(async (c, i) => {
      c.write(Buffer.concat(Array.from({ length: 20 }, (_, k) => encodeCommand(['SET', `one:${i}`, String(k)]))));
      for (let k = 0; k < 20; k++) expect(await c.read()).toBe('+OK\r\n');
      expect(await c.call('GET', `one:${i}`)).toBe('$2\r\n19\r\n');
    }));
    expect((await respoolLinks(node)) - before).toBe(1);
    for (const c of conns) c.close();
    await one.close();
  });

  it('a deep pipeline goes to the bulk link: a quiet client is answered while the node does not read it', async () => {
    const fakeNode = await startFakeValkey('answer');
    const lanes = await startTestProxy([{ host: '127.0.0.1', port: fakeNode.port }], { mode: 'standalone', timeouts: { commandMs: 20_000 } } as never);
    try {
      const quiet = await RawConnection.connect(lanes.address.port);
      expect(await quiet.call('GET', 'warm')).toBe('$4\r\nwarm\r\n');
      expect(fakeNode.connections()).toBe(1);
      // A loader's 32 MiB pipeline goes to a link of its own (the bulk lane), where the node stops reading.
      const loader = await RawConnection.connect(lanes.address.port);
      expect(await loader.call('GET', 'hello')).toBe('$5\r\nhello\r\n'); // its replies are small: its window opens
      fakeNode.mode = 'deaf'; // a connection that gets a data command now stalls for good (and stops reading)
      const big = 'x'.repeat(1024 * 1024);
      loader.write(Buffer.concat(Array.from({ length: 32 }, (_, i) => encodeCommand(['SET', `big:${i}`, big]))));
      await waitFor(() => fakeNode.connections() === 2, 'the bulk link dialed', 5000);
      await waitFor(() => bulkUnsent(lanes, fakeNode.port) > 256 * 1024, 'the bulk link backed up', 10_000);
      fakeNode.mode = 'answer'; // for connections that did not stall: the quiet client's
      // The quiet client's link was never behind the loader's: answered at once, no new link.
      expect(await quiet.call('GET', 'still')).toBe('$5\r\nstill\r\n');
      expect(fakeNode.connections()).toBe(2);
      quiet.close();
      loader.close();
    } finally {
      await lanes.close();
      await fakeNode.close();
    }
  }, 30_000);

  it('a second link opens when the first is backed up (a node that stopped reading), and serves the next client', async () => {
    fake = await startFakeValkey('answer');
    // One lane: the big writer and the next client share the interactive links (bulk links: the test above).
    deaf = await startTestProxy([{ host: '127.0.0.1', port: fake.port }], { mode: 'standalone', connectionsPerNode: 2, admission: { bulkConnectionsPerNode: 0 }, timeouts: { commandMs: 20_000 } } as never);
    const first = await RawConnection.connect(deaf.address.port);
    expect(await first.call('GET', 'warm')).toBe('$4\r\nwarm\r\n');
    expect(fake.connections()).toBe(1);
    fake.mode = 'deaf';
    // 16 MiB of requests into a link whose node no longer reads: the kernel's buffers fill, the rest waits in respool.
    const big = 'x'.repeat(1024 * 1024);
    first.write(Buffer.concat(Array.from({ length: 16 }, (_, i) => encodeCommand(['SET', `big:${i}`, big]))));
    await waitFor(() => deaf!.pools.get('127.0.0.1', fake!.port, 2).openLinks >= 1 && unsent(deaf!, fake!.port) > 256 * 1024, 'the first link backed up', 10_000);
    fake.mode = 'answer';
    const second = await RawConnection.connect(deaf.address.port);
    second.send('GET', 'other');
    await waitFor(() => fake!.connections() === 2, 'a second link dialed', 5000);
    expect(await second.read()).toBe('$5\r\nother\r\n');
    first.close();
    second.close();
  }, 30_000);
});

/** Bytes the kernel has not taken on the pool's (first) bulk link: after connectionsPerNode (2) interactive places. */
function bulkUnsent(proxy: RespoolProxy, port: number): number {
  const pool = proxy.pools.get('127.0.0.1', port, 2) as unknown as { links: Array<{ unsentBytes: number } | null> };
  return pool.links[2]?.unsentBytes ?? 0;
}

function unsent(proxy: RespoolProxy, port: number): number {
  const pool = proxy.pools.get('127.0.0.1', port, 2) as unknown as { links: Array<{ unsentBytes: number } | null> };
  return pool.links[0]?.unsentBytes ?? 0;
}
