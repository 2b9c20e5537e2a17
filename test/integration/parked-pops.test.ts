/**
 * Blocked clients parked at respool (issue 36; src/parking): list and sorted-set blocking pops
 * wait in respool's own queues, woken by the nodes' key changes over one watch connection per
 * node — with default settings, in front of one valkey-server and a 3+3 cluster:
 *
 *  - thousands of workers in BLPOP 0: no early error, each woken with its own element, and only a
 *    handful of upstream connections per node for all of them;
 *  - first come, first served per key; a client on several keys gets the first of its keys that
 *    has data; clients killed while their element is on its way lose nothing;
 *  - CLIENT UNBLOCK, CLIENT KILL, INFO blocked_clients, CLIENT LIST flags=b as on Valkey;
 *  - a primary failover while 1,000 are parked: none lost, none woken twice, all woken after it.
 *
 * Byte-for-byte replies of every parked command against Valkey: blocking.test.ts (both paths).
 */
import net from 'node:net';
import calculateSlot from 'cluster-key-slot';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startCluster, startStandalone, type ValkeyCluster, type ValkeyNode } from '../harness/valkey-processes.js';
import { encodeCommand } from '../harness/raw-client.js';
import type { RespoolConfig } from '../../src/config/types.js';
import type { RespoolProxy } from '../../src/server.js';
import { startTestProxy } from '../helpers/proxy.js';
import { RawConnection } from '../helpers/raw-resp.js';
import { RespoolProcess } from '../helpers/respool-process.js';
import { sleep, waitFor } from '../helpers/wait.js';

/** Many bare client sockets, each collecting what it is sent (as text). */
class Workers {
  readonly replies: string[] = [];
  readonly sockets: net.Socket[] = [];

  /** `n` clients, each sending `command(i)` once connected; paced so the listener's backlog never overflows. */
  static async start(port: number, n: number, command: (i: number) => string[]): Promise<Workers> {
    const w = new Workers();
    for (let i = 0; i < n; i++) {
      const socket = net.connect({ host: '127.0.0.1', port });
      socket.setEncoding('latin1');
      w.replies.push('');
      socket.on('data', (chunk: string) => {
        w.replies[i] += chunk;
      });
      socket.on('error', () => {});
      socket.write(encodeCommand(command(i)));
      w.sockets.push(socket);
      if (i % 500 === 499) await sleep(50);
    }
    return w;
  }

  close(): void {
    for (const s of this.sockets) s.destroy();
  }
}

const bulk = (s: string) => `$${Buffer.byteLength(s)}\r\n${s}\r\n`;
const popReply = (key: string, value: string) => `*2\r\n${bulk(key)}${bulk(value)}`;

/** Connections a node holds, by client name (respool's shared links "respool", watches "respool-watch", leases "respool-lease"). */
async function connectionsByName(call: (...args: string[]) => Promise<unknown>): Promise<Map<string, number>> {
  const list = String(await call('CLIENT', 'LIST'));
  const out = new Map<string, number>();
  for (const line of list.split('\n').filter((l) => l.includes('id='))) {
    if (line.includes('cmd=client|list')) continue; // the connection asking
    const name = /name=(\S*)/.exec(line)?.[1] ?? '';
    out.set(name, (out.get(name) ?? 0) + 1);
  }
  return out;
}

const total = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);

describe('parked pops in front of one valkey-server (default settings)', () => {
  let server: ValkeyNode;
  let proxy: RespoolProxy;
  const conns: RawConnection[] = [];

  beforeAll(async () => {
    server = await startStandalone();
    proxy = await startTestProxy([{ host: server.host, port: server.port }]);
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

  it('3,000 workers in BLPOP 0: none refused, a handful of node connections for all, each woken with its own element', async () => {
    const N = 3000;
    const before = total(await connectionsByName((...a) => server.call(...a)));
    const workers = await Workers.start(proxy.address.port, N, (i) => ['BLPOP', `w:${i}`, '0']);
    try {
      await waitFor(() => proxy.parking.parked === N, 'every worker parked', 20_000, 50);
      await sleep(1500); // past dedicated.acquireTimeoutMs (1 s): no wait for anything ends in an error
      expect(workers.replies.filter((r) => r !== '')).toEqual([]);
      const during = await connectionsByName((...a) => server.call(...a));
      expect(during.get('respool-lease') ?? 0).toBe(0);
      expect(during.get('respool-watch')).toBe(1);
      expect(total(during) - before, JSON.stringify([...during])).toBeLessThanOrEqual(2); // the watch, and at most one more shared link
      for (let i = 0; i < N; i += 500) {
        await Promise.all(Array.from({ length: Math.min(500, N - i) }, (_, k) => server.call('RPUSH', `w:${i + k}`, `e${i + k}`)));
      }
      await waitFor(() => workers.replies.every((r) => r.endsWith('\r\n') && r.startsWith('*2')), 'every worker woken', 30_000, 50);
      for (let i = 0; i < N; i++) expect(workers.replies[i]).toBe(popReply(`w:${i}`, `e${i}`));
      expect(proxy.parking.parked).toBe(0);
    } finally {
      workers.close();
    }
  }, 90_000);

  it('100 clients on one key get 100 pushed elements in their arrival order', async () => {
    const clients: RawConnection[] = [];
    for (let i = 0; i < 100; i++) {
      const c = await connect();
      c.send('BLPOP', 'order:q', '0');
      await waitFor(() => proxy.parking.parked === i + 1, `client ${i} parked`, 5000, 2);
      clients.push(c);
    }
    const pusher = await connect();
    // One element at a time, and all at once: both served first come, first served.
    for (let i = 0; i < 50; i++) await pusher.call('RPUSH', 'order:q', `v${i}`);
    await pusher.call('RPUSH', 'order:q', ...Array.from({ length: 50 }, (_, i) => `v${50 + i}`));
    for (let i = 0; i < 100; i++) expect(await clients[i]!.read(5000)).toBe(popReply('order:q', `v${i}`));
    expect(await pusher.call('LLEN', 'order:q')).toBe(':0\r\n');
  }, 60_000);

  it('a client on several keys gets the first of its keys that has data; parked, the key that gets data first', async () => {
    const pusher = await connect();
    await pusher.call('RPUSH', 'mk:2', 'two');
    await pusher.call('RPUSH', 'mk:3', 'three');
    const a = await connect();
    expect(await a.call('BLPOP', 'mk:1', 'mk:2', 'mk:3', '0')).toBe(popReply('mk:2', 'two'));
    const b = await connect(3);
    b.send('BZPOPMIN', 'mz:1', 'mz:2', 'mz:3', '0');
    await waitFor(() => proxy.parking.parked === 1, 'b parked', 5000, 2);
    await pusher.call('ZADD', 'mz:3', '7', 'm');
    expect(await b.read(5000)).toBe(`*3\r\n${bulk('mz:3')}${bulk('m')},7\r\n`);
    // BRPOP on a key another parked client also waits on: each served once, in order.
    const c = await connect();
    const d = await connect();
    c.send('BRPOP', 'mk:x', 'mk:y', '0');
    await waitFor(() => proxy.parking.parked === 1, 'c parked', 5000, 2);
    d.send('BRPOP', 'mk:y', '0');
    await waitFor(() => proxy.parking.parked === 2, 'd parked', 5000, 2);
    await pusher.call('RPUSH', 'mk:y', 'p', 'q');
    expect(await c.read(5000)).toBe(popReply('mk:y', 'q'));
    expect(await d.read(5000)).toBe(popReply('mk:y', 'p'));
  }, 30_000);

  it('a push acknowledged (plain or in MULTI … EXEC) has already served the parked client: the list is empty right after', async () => {
    const pusher = await connect();
    for (const inTransaction of [false, true, false, true, false, true, false, true, false, true]) {
      const worker = await connect();
      worker.send('BRPOP', 'ack:q', '0');
      await waitFor(() => proxy.parking.parked === 1, 'the worker parked', 5000, 2);
      if (inTransaction) {
        await pusher.call('MULTI');
        await pusher.call('LPUSH', 'ack:q', 'job');
        expect(await pusher.call('EXEC')).toBe('*1\r\n:1\r\n');
      } else {
        expect(await pusher.call('LPUSH', 'ack:q', 'job')).toBe(':1\r\n');
      }
      expect(await pusher.call('LLEN', 'ack:q')).toBe(':0\r\n'); // as on Valkey: the worker has it
      expect(await worker.read(3000)).toBe(popReply('ack:q', 'job'));
    }
  }, 30_000);

  it('a key of another type leaves its waiters waiting and serves those of its type (list pops behind a sorted set, and the reverse)', async () => {
    const pusher = await connect();
    const lists = [await connect(), await connect()];
    const zsets = [await connect(), await connect()];
    for (const [i, c] of lists.entries()) {
      c.send('BLPOP', 'ty:k', '0');
      await waitFor(() => proxy.parking.parked === i + 1, 'list waiters parked', 5000, 2);
    }
    for (const [i, c] of zsets.entries()) {
      c.send('BZPOPMIN', 'ty:k', '0');
      await waitFor(() => proxy.parking.parked === 3 + i, 'sorted-set waiters parked', 5000, 2);
    }
    expect(await pusher.call('ZADD', 'ty:k', '1', 'a', '2', 'b')).toBe(':2\r\n');
    expect(await zsets[0]!.read(3000)).toBe(`*3\r\n${bulk('ty:k')}${bulk('a')}${bulk('1')}`);
    expect(await zsets[1]!.read(3000)).toBe(`*3\r\n${bulk('ty:k')}${bulk('b')}${bulk('2')}`);
    expect(proxy.parking.parked).toBe(2); // the BLPOPs wait on: no WRONGTYPE for a blocked client
    await pusher.call('SET', 'ty:k', 'a string');
    await sleep(100);
    expect(proxy.parking.parked).toBe(2);
    await pusher.call('DEL', 'ty:k');
    expect(await pusher.call('RPUSH', 'ty:k', 'x', 'y')).toBe(':2\r\n');
    expect(await lists[0]!.read(3000)).toBe(popReply('ty:k', 'x'));
    expect(await lists[1]!.read(3000)).toBe(popReply('ty:k', 'y'));
  }, 30_000);

  it('CLIENT UNBLOCK and CLIENT KILL of a parked client; INFO blocked_clients and CLIENT LIST flags=b count it', async () => {
    const a = await connect();
    const b = await connect(3);
    const admin = await connect();
    const idOf = async (c: RawConnection) => (await c.call('CLIENT', 'ID')).slice(1, -2);
    const [ida, idb] = [await idOf(a), await idOf(b)];
    a.send('BLPOP', 'ub:a', '0');
    b.send('BLMOVE', 'ub:b', 'ub:dst', 'LEFT', 'RIGHT', '0');
    await waitFor(() => proxy.parking.parked === 2, 'both parked', 5000, 2);
    // Blocked once its first try found nothing to pop (as Valkey counts a client once its command blocked).
    await waitFor(async () => (await admin.call('INFO', 'clients')).includes('blocked_clients:2\r\n'), 'both blocked', 5000, 2);
    const list = await admin.call('CLIENT', 'LIST');
    expect(list.split('\n').find((l) => l.includes(`id=${ida} `))).toMatch(/ flags=b /);
    expect(await admin.call('CLIENT', 'UNBLOCK', ida)).toBe(':1\r\n');
    expect(await a.read(2000)).toBe('*-1\r\n');
    expect(await admin.call('CLIENT', 'UNBLOCK', idb, 'ERROR')).toBe(':1\r\n');
    expect(await b.read(2000)).toBe('-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n');
    expect(await admin.call('CLIENT', 'UNBLOCK', idb)).toBe(':0\r\n');
    // CLIENT KILL: it leaves the queue, and the next push is for the next client, not lost.
    const gone = await connect();
    const idg = await idOf(gone);
    gone.send('BLPOP', 'ub:k', '0');
    await waitFor(() => proxy.parking.parked === 1, 'gone parked', 5000, 2);
    const next = await connect();
    next.send('BLPOP', 'ub:k', '0');
    await waitFor(() => proxy.parking.parked === 2, 'next parked', 5000, 2);
    expect(await admin.call('CLIENT', 'KILL', 'ID', idg)).toBe(':1\r\n');
    await waitFor(() => proxy.parking.parked === 1, 'the killed client gone from the queue', 5000, 2);
    await admin.call('RPUSH', 'ub:k', 'kept');
    expect(await next.read(2000)).toBe(popReply('ub:k', 'kept'));
    expect(await admin.call('INFO', 'clients')).toContain('blocked_clients:0\r\n');
  }, 30_000);

  it('clients killed while their element is on its way: every pushed element is delivered or still in its list', async () => {
    const N = 400;
    const keys = 4;
    const workers = await Workers.start(proxy.address.port, N, (i) => (i % 2 === 0 ? ['BLPOP', `pb:${i % keys}`, '0'] : ['BZPOPMIN', `pz:${i % keys}`, '0']));
    await waitFor(() => proxy.parking.parked === N, 'every worker parked', 20_000, 20);
    const pusher = await connect();
    // Pushes and kills at once: half the clients go while values are popped for them.
    const pushes = Array.from({ length: N }, (_, i) =>
      i % 2 === 0 ? encodeCommand(['RPUSH', `pb:${i % keys}`, `v${i}`]) : encodeCommand(['ZADD', `pz:${i % keys}`, String(i), `m${i}`]),
    );
    pusher.write(Buffer.concat(pushes));
    for (let j = 0; j < N / 2; j++) workers.sockets[(j * 37 + 3) % N]!.destroy(); // half of them, of both kinds
    for (let i = 0; i < N; i++) await pusher.read(5000);
    await sleep(1000); // every pop and put-back settled
    const delivered: string[] = [];
    for (const r of workers.replies) {
      if (r === '') continue;
      const parts = r.split('\r\n');
      delivered.push(parts[4]!); // *2 $k key $v value  |  *3 $k key $m member $s score
    }
    const left: string[] = [];
    for (let k = 0; k < keys; k++) {
      const list = await pusher.call('LRANGE', `pb:${k}`, '0', '-1');
      left.push(...list.split('\r\n').filter((_, j) => j > 0 && j % 2 === 0 && _ !== ''));
      const zs = await pusher.call('ZRANGE', `pz:${k}`, '0', '-1');
      left.push(...zs.split('\r\n').filter((_, j) => j > 0 && j % 2 === 0 && _ !== ''));
    }
    const all = [...delivered, ...left].sort();
    const expected = Array.from({ length: N }, (_, i) => (i % 2 === 0 ? `v${i}` : `m${i}`)).sort();
    expect(all).toEqual(expected); // none lost, none twice
    workers.close();
    await waitFor(() => proxy.parking.parked === 0, 'no parked client left', 5000, 20);
  }, 60_000);

  it('chains of moves (circular and self-referential BRPOPLPUSH / BLMOVE, two clients on each key) end as on Valkey', async () => {
    const reference = await startStandalone();
    try {
      const run = async (port: number) => {
        const open = async () => RawConnection.connect(port);
        const pusher = await open();
        const clients: RawConnection[] = [];
        const out: string[] = [];
        const park = async (...cmd: string[]) => {
          const c = await open();
          c.send(...cmd);
          clients.push(c);
          await sleep(50); // in this order
        };
        await park('BRPOPLPUSH', 'ch:a', 'ch:b', '0');
        await park('BRPOPLPUSH', 'ch:a', 'ch:b', '0');
        await park('BLMOVE', 'ch:b', 'ch:a', 'RIGHT', 'LEFT', '0');
        await park('BLMOVE', 'ch:b', 'ch:a', 'RIGHT', 'LEFT', '0');
        await park('BRPOPLPUSH', 'ch:self', 'ch:self', '0');
        await park('BRPOPLPUSH', 'ch:self', 'ch:self', '0');
        out.push(await pusher.call('RPUSH', 'ch:a', 'x', 'y'));
        out.push(await pusher.call('RPUSH', 'ch:self', 's1', 's2'));
        for (const c of clients) out.push(await c.read(5000));
        out.push(await pusher.call('LRANGE', 'ch:a', '0', '-1'), await pusher.call('LRANGE', 'ch:b', '0', '-1'), await pusher.call('LRANGE', 'ch:self', '0', '-1'));
        for (const c of [...clients, pusher]) c.close();
        return out;
      };
      const expected = await run(reference.port);
      expect(await run(proxy.address.port)).toEqual(expected);
    } finally {
      await reference.stop();
    }
  }, 30_000);

  it('SWAPDB wakes a client parked on a key the swap brings into its database', async () => {
    const a = await connect();
    const admin = await connect();
    await admin.call('SELECT', '1');
    await admin.call('RPUSH', 'sw:q', 'from-db1');
    a.send('BLPOP', 'sw:q', '0');
    await waitFor(() => proxy.parking.parked === 1, 'parked', 5000, 2);
    expect(await admin.call('SWAPDB', '0', '1')).toBe('+OK\r\n');
    expect(await a.read(3000)).toBe(popReply('sw:q', 'from-db1'));
    await admin.call('SWAPDB', '0', '1');
  }, 30_000);
});

describe("parked pops under a namespace (a user's keyPrefix): names come back as the client wrote them", () => {
  let server: ValkeyNode;
  let proxy: RespoolProxy;

  beforeAll(async () => {
    server = await startStandalone();
    const users = [
      { name: 'default', password: 'adminpw' },
      { name: 'a', password: 'pa', keyPrefix: 'a:' },
    ] as unknown as RespoolConfig['users'];
    proxy = await startTestProxy([{ host: server.host, port: server.port }], { users } as Partial<RespoolConfig>);
  }, 30_000);

  afterAll(async () => {
    await proxy?.close();
    await server?.stop();
  });

  it("BLPOP, BZPOPMIN and BLMOVE parked, then woken by a push: the key in each reply is the client's, the node holds the prefixed one", async () => {
    const as = async () => {
      const c = await RawConnection.connect(proxy.address.port);
      expect(await c.call('AUTH', 'a', 'pa')).toBe('+OK\r\n');
      return c;
    };
    const [l, z, m, pusher] = [await as(), await as(), await as(), await as()];
    l.send('BLPOP', 'ns:none', 'ns:q', '0');
    z.send('BZPOPMIN', 'ns:z', '0');
    m.send('BLMOVE', 'ns:src', 'ns:dst', 'LEFT', 'RIGHT', '0');
    await waitFor(() => proxy.parking.parked === 3, 'three parked', 5000, 2);
    await pusher.call('RPUSH', 'ns:q', 'v');
    await pusher.call('ZADD', 'ns:z', '3', 'm');
    await pusher.call('RPUSH', 'ns:src', 'x');
    expect(await l.read(3000)).toBe(popReply('ns:q', 'v'));
    expect(await z.read(3000)).toBe(`*3\r\n${bulk('ns:z')}${bulk('m')}${bulk('3')}`);
    expect(await m.read(3000)).toBe(bulk('x'));
    expect(await server.call('LRANGE', 'a:ns:dst', '0', '-1')).toEqual(['x']);
    for (const c of [l, z, m, pusher]) c.close();
  }, 30_000);
});

describe('parked pops in front of a 3+3 cluster (respool as its own process; default settings but --max-clients)', () => {
  let cluster: ValkeyCluster;
  let respool: RespoolProcess;

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 1 });
    const seed = cluster.nodes[0]!;
    // Defaults, but room for 10,000 workers and the test's own connections (Valkey's maxclients, 10,000, is respool's default too).
    respool = await RespoolProcess.start(await freePort(), ['--upstream', `${seed.host}:${seed.port}`, '--max-clients', '10100']);
  }, 120_000);

  afterAll(async () => {
    await respool?.stop();
    await cluster?.stop();
  });

  const blockedAtRespool = async (c: RawConnection) => Number(/blocked_clients:(\d+)/.exec(await c.call('INFO', 'clients'))?.[1] ?? -1);

  it('10,000 clients on 10,000 keys: no early error, each woken with its own element, a handful of connections per node', async () => {
    const N = 10_000;
    const admin = await RawConnection.connect(respool.port);
    const workers = await Workers.start(respool.port, N, (i) => ['BLPOP', `c:${i}`, '0']);
    try {
      await waitFor(async () => (await blockedAtRespool(admin)) === N, 'every client blocked', 60_000, 100);
      await sleep(1500);
      expect(workers.replies.filter((r) => r !== '')).toEqual([]);
      for (const primary of await cluster.primaries()) {
        const byName = await connectionsByName((...a) => cluster.call(primary, ...a));
        expect(byName.get('respool-lease') ?? 0).toBe(0);
        expect(byName.get('respool-watch')).toBe(1);
        // shared links (connectionsPerNode, plus the topology's and bulk lanes'), the watch, replicas' links: a handful
        expect(total(byName), JSON.stringify([...byName])).toBeLessThanOrEqual(8);
      }
      const pusher = await RawConnection.connect(respool.port);
      for (let i = 0; i < N; i += 1000) {
        pusher.write(Buffer.concat(Array.from({ length: Math.min(1000, N - i) }, (_, k) => encodeCommand(['RPUSH', `c:${i + k}`, `e${i + k}`]))));
        for (let k = 0; k < Math.min(1000, N - i); k++) expect(await pusher.read(10_000)).toBe(':1\r\n');
      }
      pusher.close();
      await waitFor(() => workers.replies.every((r) => r.startsWith('*2') && r.endsWith('\r\n')), 'every client woken', 60_000, 100);
      for (let i = 0; i < N; i++) expect(workers.replies[i]).toBe(popReply(`c:${i}`, `e${i}`));
    } finally {
      workers.close();
      admin.close();
    }
  }, 180_000);

  it('a primary failover while 1,000 are parked: none lost, none woken twice, all woken after the promotion', async () => {
    const N = 1000;
    const admin = await RawConnection.connect(respool.port);
    // Keys spread over every shard; the failover hits one of them.
    const workers = await Workers.start(respool.port, N, (i) => ['BLPOP', `f:${i}`, '0']);
    try {
      await waitFor(async () => (await blockedAtRespool(admin)) === N, 'every client blocked', 30_000, 50);
      const shard = (await cluster.shards())[1]!;
      const victim = shard.primary;
      const onVictim = (i: number) => shard.slots.some(([a, b]) => calculateSlot(`f:${i}`) >= a && calculateSlot(`f:${i}`) <= b);
      const parkedOnVictim = Array.from({ length: N }, (_, i) => i).filter(onVictim).length;
      expect(parkedOnVictim).toBeGreaterThan(200);
      await cluster.killNode(victim);
      await cluster.waitForStable({ timeoutMs: 60_000 });
      const pusher = await RawConnection.connect(respool.port);
      for (let i = 0; i < N; i++) {
        // respool may not know the new owner for a moment: a refused push is sent again (unless it landed)
        for (let reply = await pusher.call('RPUSH', `f:${i}`, `e${i}`); reply !== ':1\r\n'; reply = await pusher.call('RPUSH', `f:${i}`, `e${i}`)) {
          await sleep(100);
          if ((await pusher.call('EXISTS', `f:${i}`)) === ':1\r\n' || workers.replies[i] !== '') break;
        }
      }
      pusher.close();
      await waitFor(() => workers.replies.every((r) => r.startsWith('*2') && r.endsWith('\r\n')), 'every client woken', 60_000, 100).catch((e: Error) => {
        // Which clients, on which side of the failover, with what; and what respool said meanwhile.
        const missing = workers.replies.map((r, i) => ({ i, onVictim: onVictim(i), reply: r })).filter((m) => !m.reply.startsWith('*2'));
        const said = respool.lines.filter((l) => !l.includes('"level":30') || l.includes('park_')).slice(-20);
        throw new Error(`${e.message}: ${missing.length} not woken, e.g. ${JSON.stringify(missing.slice(0, 3))}\n${said.join('\n')}`);
      });
      for (let i = 0; i < N; i++) expect(workers.replies[i]).toBe(popReply(`f:${i}`, `e${i}`));
      for (const primary of await cluster.primaries()) expect(String(await cluster.call(primary, 'DBSIZE'))).toBe('0');
    } finally {
      workers.close();
      admin.close();
    }
  }, 180_000);
});
