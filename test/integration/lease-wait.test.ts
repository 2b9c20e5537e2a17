/**
 * Blocking commands above the lease cap (issue 36): with every lease of the node taken
 * (dedicated.maxPerNode), a blocking command waits for one in the queue as long as it would block
 * — no error Valkey would not give — then gets Valkey's timeout reply; CLIENT UNBLOCK ends the
 * wait as Valkey would; a client that goes while waiting leaks nothing. Leases are the path of
 * XREAD / XREADGROUP … BLOCK, and of the pops with dedicated.parkPops: false (this file's proxy);
 * thousands of workers in BLPOP with default settings: parked-pops.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStandalone, type ValkeyNode } from '../harness/valkey-processes.js';
import type { RespoolConfig } from '../../src/config/types.js';
import type { RespoolProxy } from '../../src/server.js';
import { startTestProxy } from '../helpers/proxy.js';
import { RawConnection } from '../helpers/raw-resp.js';
import { waitFor } from '../helpers/wait.js';

describe('blocking commands wait for a lease at the cap', () => {
  let server: ValkeyNode;
  let proxy: RespoolProxy;
  const conns: RawConnection[] = [];

  beforeAll(async () => {
    server = await startStandalone();
    proxy = await startTestProxy([{ host: server.host, port: server.port }], { dedicated: { maxPerNode: 2, acquireTimeoutMs: 200, parkPops: false } } as Partial<RespoolConfig>); // leases: streams' path, or parking off
  }, 30_000);

  afterAll(async () => {
    for (const c of conns) c.close();
    await proxy?.close();
    await server?.stop();
  });

  const connect = async (protocol: 2 | 3 = 2) => {
    const c = await RawConnection.connect(proxy.address.port);
    conns.push(c);
    if (protocol === 3) await c.call('HELLO', '3');
    return c;
  };
  /** One pending reply of `c` (the request written now, read later). */
  const pending = (c: RawConnection, ...args: string[]) => c.call(...args);

  it('five BLPOP 0 on two leases: none refused; each gets its own element as leases free', async () => {
    const clients = await Promise.all([0, 1, 2, 3, 4].map(() => connect()));
    const replies = clients.map((c, i) => pending(c, 'BLPOP', `lw:${i}`, '0'));
    await new Promise((r) => setTimeout(r, 700)); // past acquireTimeoutMs, more than once
    const pusher = await connect();
    for (let i = 0; i < 5; i++) {
      expect(await pusher.call('RPUSH', `lw:${i}`, `v${i}`)).toBe(':1\r\n');
    }
    const got = await Promise.all(replies);
    expect(got).toEqual([0, 1, 2, 3, 4].map((i) => `*2\r\n$4\r\nlw:${i}\r\n$2\r\nv${i}\r\n`));
    expect(await server.call('LLEN', 'lw:0')).toBe(0);
  }, 30_000);

  it("a queued blocking command with a timeout gets Valkey's timeout reply at its time (RESP2 and RESP3: null array, BLMOVE's too)", async () => {
    const holders = await Promise.all([0, 1].map(() => connect()));
    const held = holders.map((c, i) => pending(c, 'BLPOP', `hold:${i}`, '0'));
    await new Promise((r) => setTimeout(r, 100));
    const c2 = await connect(2);
    const c3 = await connect(3);
    const t0 = Date.now();
    const [r2, r3, move] = await Promise.all([pending(c2, 'BLPOP', 'none:a', '0.5'), pending(c3, 'BZPOPMIN', 'none:b', '0.5'), pending(await connect(2), 'BLMOVE', 'none:c', 'x', 'LEFT', 'LEFT', '0.5')]);
    const ms = Date.now() - t0;
    expect([r2, r3, move]).toEqual(['*-1\r\n', '_\r\n', '*-1\r\n']); // BLMOVE's timeout: a null array, as Valkey's blocked.c answers it
    expect(ms).toBeGreaterThanOrEqual(450);
    const pusher = await connect();
    await pusher.call('RPUSH', 'hold:0', 'a');
    await pusher.call('RPUSH', 'hold:1', 'b');
    await Promise.all(held);
  }, 30_000);

  it('CLIENT UNBLOCK of a client waiting for a lease: :1, and it gets nil (TIMEOUT) or -UNBLOCKED (ERROR); one that goes leaks nothing', async () => {
    const holders = await Promise.all([0, 1].map(() => connect()));
    const held = holders.map((c, i) => pending(c, 'BLPOP', `hold2:${i}`, '0'));
    await new Promise((r) => setTimeout(r, 100));
    const a = await connect();
    const b = await connect();
    const idOf = async (c: RawConnection) => (await c.call('CLIENT', 'ID')).slice(1, -2);
    const [ida, idb] = [await idOf(a), await idOf(b)];
    const ra = pending(a, 'BLPOP', 'q:a', '0');
    const rb = pending(b, 'BRPOP', 'q:b', '0');
    await new Promise((r) => setTimeout(r, 300));
    const admin = await connect();
    expect(await admin.call('CLIENT', 'UNBLOCK', ida)).toBe(':1\r\n');
    expect(await admin.call('CLIENT', 'UNBLOCK', idb, 'ERROR')).toBe(':1\r\n');
    expect(await ra).toBe('*-1\r\n');
    expect(await rb).toBe('-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n');
    // one that goes while waiting
    const gone = await connect();
    void pending(gone, 'BLPOP', 'q:gone', '0').catch(() => {});
    await new Promise((r) => setTimeout(r, 300));
    gone.close();
    const pusher = await connect();
    await pusher.call('RPUSH', 'hold2:0', 'a');
    await pusher.call('RPUSH', 'hold2:1', 'b');
    await Promise.all(held);
    // the leases come back: a new blocking command gets one at once, and q:gone's push is not taken by the gone client
    await pusher.call('RPUSH', 'q:gone', 'kept');
    await waitFor(async () => (await server.call('LLEN', 'q:gone')) === 1, 'the pushed element still in its list', 2000);
    const c = await connect();
    expect(await c.call('BLPOP', 'q:gone', '1')).toBe('*2\r\n$6\r\nq:gone\r\n$4\r\nkept\r\n');
  }, 30_000);
});
