// Cluster emulation (issue 9): cluster-aware clients ask respool for the topology and are shown
// respool (or its fleet) as the cluster, so all their traffic stays on respool. Against a real
// 3-primary cluster (no replicas, so a real node's replies have the same shape as respool's), a
// standalone server, two respool instances that are peers of each other, and a fake node that
// answers ASK forever.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import net from 'node:net';
import { promisify } from 'node:util';
import calculateSlot from 'cluster-key-slot';
import { Cluster } from 'iovalkey';
import { freePort, startCluster, startStandalone, VALKEY_CLI, type ValkeyCluster, type ValkeyNode } from '../harness/valkey-processes.js';
import { RawClient, ReplyError, type RespReply } from '../harness/raw-client.js';
import { RequestFramer } from '../../src/resp/request-framer.js';
import type { RespoolProxy } from '../../src/server.js';
import { startTestProxy } from '../helpers/proxy.js';
import { connect } from '../helpers/transcript.js';
import { waitFor } from '../helpers/wait.js';
import { nodeId } from '../../src/fleet/cluster-emulation.js';
import { divideSlots } from '../../src/fleet/slot-division.js';

const run = promisify(execFile);

/** The reply's structure: types and lengths, not values. */
function shape(r: RespReply): unknown {
  if (r instanceof ReplyError) return 'error';
  if (Array.isArray(r)) return r.map(shape);
  if (r instanceof Map) return [...r].map(([k, v]) => [String(k), shape(v)]);
  return r === null ? 'null' : typeof r;
}

async function command(port: number, proto: 2 | 3, ...args: Array<string | number>): Promise<RespReply> {
  const c = await RawClient.connect(port);
  try {
    if (proto === 3) await c.command('HELLO', 3);
    return await c.call(...args); // an error reply resolves as a ReplyError
  } finally {
    c.close();
  }
}

/** The first byte of the reply's raw frame (`=` verbatim, `$` bulk, `%` map, …). */
async function frameType(port: number, proto: 2 | 3, ...args: string[]): Promise<string> {
  const c = await connect(port, proto);
  try {
    return (await c.call(...args))[0]!;
  } finally {
    c.close();
  }
}

async function counter(proxy: RespoolProxy, command: string): Promise<number> {
  const text = await proxy.metrics.render();
  const m = new RegExp(`^respool_commands_total\\{command="${command}"\\} (\\d+)`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

/** Every connection a node sees, but the one asking: must all be respool's links (named respool*). */
async function foreignClients(cluster: ValkeyCluster): Promise<string[]> {
  const out: string[] = [];
  for (const node of cluster.nodes) {
    const list = String(await cluster.call(node, 'CLIENT', 'LIST'));
    for (const line of list.split('\n').filter((l) => l.trim() !== '')) {
      if (/ cmd=client\|list /.test(line) || / name=respool(-\w+)? /.test(line) || / flags=S /.test(line)) continue;
      out.push(`${node.port}: ${line}`);
    }
  }
  return out;
}

function clusterClient(port: number): Cluster {
  return new Cluster([{ host: '127.0.0.1', port }], { redisOptions: { maxRetriesPerRequest: 0 }, enableOfflineQueue: true });
}

describe('cluster emulation in front of a 3-primary cluster', () => {
  let cluster: ValkeyCluster;
  let proxy: RespoolProxy;
  let primary: ValkeyNode;

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 0 });
    primary = cluster.nodes[0]!;
    proxy = await startTestProxy([{ host: primary.host, port: primary.port }]);
  }, 60_000);

  afterAll(async () => {
    await proxy?.close();
    await cluster?.stop();
  });

  it('an iovalkey Cluster client runs SET/GET/MGET over 1,000 keys through respool alone', async () => {
    const client = clusterClient(proxy.address.port);
    try {
      const keys = Array.from({ length: 1000 }, (_, i) => `emul:${i}`);
      await Promise.all(keys.map((k) => client.set(k, `v-${k}`)));
      const values = await Promise.all(keys.map((k) => client.get(k)));
      expect(values).toEqual(keys.map((k) => `v-${k}`));
      // MGET over keys of many slots (respool splits it) and of one hash tag.
      expect(await client.mget(...keys.slice(0, 100))).toEqual(keys.slice(0, 100).map((k) => `v-${k}`));
      await client.mset('{t}a', '1', '{t}b', '2');
      expect(await client.mget('{t}a', '{t}b')).toEqual(['1', '2']);
      // iovalkey knows one node: respool.
      expect(client.nodes('all').map((n) => n.options.port)).toEqual([proxy.address.port]);
      // The nodes see respool's links and nothing from the client.
      expect(await foreignClients(cluster)).toEqual([]);
    } finally {
      client.disconnect();
    }
  });

  it('valkey-cli -c SET/GET through respool: never redirected elsewhere', async () => {
    for (const key of ['cli:a', 'cli:b', 'cli:c', 'cli:d', 'cli:e']) {
      const set = await run(VALKEY_CLI, ['-c', '-p', String(proxy.address.port), 'SET', key, `x-${key}`]);
      expect(set.stdout.trim()).toBe('OK');
      const get = await run(VALKEY_CLI, ['-c', '-p', String(proxy.address.port), 'GET', key]);
      expect(get.stdout.trim()).toBe(`x-${key}`);
      expect(set.stdout + set.stderr + get.stdout + get.stderr).not.toMatch(/Redirected/);
    }
    const slots = new Set(['cli:a', 'cli:b', 'cli:c', 'cli:d', 'cli:e'].map((k) => calculateSlot(k)));
    expect(slots.size).toBeGreaterThan(1);
  });

  it.each([2, 3] as const)('RESP%i: CLUSTER SLOTS / SHARDS have a real node\'s structure, with respool owning every slot', async (proto) => {
    const port = proxy.address.port;
    const slots = (await command(port, proto, 'CLUSTER', 'SLOTS')) as RespReply[];
    const real = (await command(primary.port, proto, 'CLUSTER', 'SLOTS')) as RespReply[];
    expect(slots).toHaveLength(1);
    expect(shape(slots[0]!)).toEqual(shape(real[0]!));
    const [start, end, node] = slots[0] as [number, number, RespReply[]];
    expect([start, end]).toEqual([0, 16383]);
    expect(node[0]).toBe('127.0.0.1');
    expect(node[1]).toBe(port);
    expect(node[2]).toMatch(/^[0-9a-f]{40}$/);

    const shards = (await command(port, proto, 'CLUSTER', 'SHARDS')) as RespReply[];
    const realShards = (await command(primary.port, proto, 'CLUSTER', 'SHARDS')) as RespReply[];
    expect(shards).toHaveLength(1);
    expect(shape(shards[0]!)).toEqual(shape(realShards[0]!));
    const fields = (r: RespReply) => (r instanceof Map ? r : new Map((r as RespReply[]).flatMap((v, i, a) => (i % 2 === 0 ? [[v, a[i + 1]!]] : []))));
    const shard = fields(shards[0]!);
    expect(shard.get('slots')).toEqual([0, 16383]);
    const n = fields((shard.get('nodes') as RespReply[])[0]!);
    expect(Object.fromEntries([...n].map(([k, v]) => [String(k), v]))).toEqual({
      id: node[2], port, ip: '127.0.0.1', endpoint: '127.0.0.1', role: 'master', 'replication-offset': 0, health: 'online',
    });
  });

  it.each([2, 3] as const)('RESP%i: CLUSTER NODES / INFO / MYID / MYSHARDID / KEYSLOT / LINKS as a node answers them', async (proto) => {
    const port = proxy.address.port;
    const nodes = String(await command(port, proto, 'CLUSTER', 'NODES'));
    const realLine = String(await command(primary.port, proto, 'CLUSTER', 'NODES')).split('\n').find((l) => l.includes('myself'))!;
    const lines = nodes.split('\n').filter((l) => l !== '');
    expect(lines).toHaveLength(1);
    expect(lines[0]!.split(' ')).toHaveLength(realLine.split(' ').length);
    const myid = String(await command(port, proto, 'CLUSTER', 'MYID'));
    expect(lines[0]).toBe(`${myid} 127.0.0.1:${port}@0 myself,master - 0 0 1 connected 0-16383`);
    expect(nodes.endsWith('\n')).toBe(true);
    expect(await frameType(port, proto, 'CLUSTER', 'NODES')).toBe(await frameType(primary.port, proto, 'CLUSTER', 'NODES'));

    const info = String(await command(port, proto, 'CLUSTER', 'INFO'));
    const realInfo = String(await command(primary.port, proto, 'CLUSTER', 'INFO'));
    const keysOf = (t: string) => t.split('\r\n').filter((l) => l !== '').map((l) => l.split(':')[0]);
    // The same fields in the same order; per-message-type counters appear only when not 0 (none here).
    expect(keysOf(info)).toEqual(keysOf(realInfo).filter((k) => !/^cluster_stats_messages_.+_(sent|received)$/.test(k!)));
    expect(info).toMatch(/^cluster_state:ok\r\ncluster_slots_assigned:16384\r\ncluster_slots_ok:16384\r\n/);
    expect(info).toMatch(/\r\ncluster_known_nodes:1\r\ncluster_size:1\r\n/);
    expect(await frameType(port, proto, 'CLUSTER', 'INFO')).toBe(await frameType(primary.port, proto, 'CLUSTER', 'INFO'));

    expect(myid).toMatch(/^[0-9a-f]{40}$/);
    expect(String(await command(port, proto, 'CLUSTER', 'MYID'))).toBe(myid); // stable
    expect(String(await command(port, proto, 'CLUSTER', 'MYSHARDID'))).toMatch(/^[0-9a-f]{40}$/);
    for (const key of ['a', 'user:{42}:x', '']) {
      expect(await command(port, proto, 'CLUSTER', 'KEYSLOT', key)).toBe(await command(primary.port, proto, 'CLUSTER', 'KEYSLOT', key));
    }
    expect(await command(port, proto, 'CLUSTER', 'LINKS')).toEqual([]);
    expect(await command(port, proto, 'CLUSTER', 'REPLICAS', myid)).toEqual([]);
    expect(String(await command(port, proto, 'CLUSTER', 'REPLICAS', 'nope'))).toMatch(/Unknown node nope/);
  });

  it('COUNTKEYSINSLOT / GETKEYSINSLOT are answered by the slot\'s owner; bad arguments as Valkey', async () => {
    const port = proxy.address.port;
    const keys = ['{ks}1', '{ks}2', '{ks}3'];
    const slot = calculateSlot(keys[0]!);
    const owner = await cluster.primaryForSlot(slot);
    for (const k of keys) await cluster.call(owner, 'SET', k, 'v');
    expect(await command(port, 2, 'CLUSTER', 'COUNTKEYSINSLOT', slot)).toBe(3);
    expect(((await command(port, 2, 'CLUSTER', 'GETKEYSINSLOT', slot, 10)) as string[]).sort()).toEqual(keys);
    for (const args of [['COUNTKEYSINSLOT', '16384'], ['COUNTKEYSINSLOT', 'x'], ['GETKEYSINSLOT', '1', '-1'], ['GETKEYSINSLOT', '1', 'y']]) {
      expect(String(await command(port, 2, 'CLUSTER', ...args))).toBe(String(await command(owner.port, 2, 'CLUSTER', ...args)));
    }
  });

  it('refuses cluster administration, naming the command; answers ASKING +OK', async () => {
    const port = proxy.address.port;
    for (const args of [['MEET', '127.0.0.1', '1'], ['ADDSLOTS', '1'], ['SETSLOT', '1', 'STABLE'], ['FAILOVER'], ['RESET'], ['FORGET', 'x']]) {
      const reply = await command(port, 2, 'CLUSTER', ...args);
      expect(reply).toBeInstanceOf(ReplyError);
      expect(String((reply as ReplyError).message)).toMatch(new RegExp(`^ERR respool: CLUSTER ${args[0]} is not supported through respool: .*connect to a node directly`));
    }
    expect(await command(port, 2, 'ASKING')).toBe('OK');
    // Nothing changed on the nodes.
    expect(String(await cluster.call(primary, 'CLUSTER', 'INFO'))).toMatch(/cluster_state:ok/);
  });

  it('inside MULTI: local answers at EXEC, COUNTKEYSINSLOT refused at queue time', async () => {
    const c = await RawClient.connect(proxy.address.port);
    try {
      expect(await c.command('MULTI')).toBe('OK');
      expect(await c.command('CLUSTER', 'KEYSLOT', 'a')).toBe('QUEUED');
      expect(await c.call('CLUSTER', 'COUNTKEYSINSLOT', '1')).toBeInstanceOf(ReplyError);
      expect(await c.command('DISCARD')).toBe('OK');
      expect(await c.command('MULTI')).toBe('OK');
      expect(await c.command('CLUSTER', 'KEYSLOT', 'a')).toBe('QUEUED');
      expect(await c.command('SET', 'a', '1')).toBe('QUEUED');
      expect(await c.command('EXEC')).toEqual([calculateSlot('a'), 'OK']);
    } finally {
      c.close();
    }
  });
});

describe('cluster emulation in front of a standalone server', () => {
  let server: ValkeyNode;
  let proxy: RespoolProxy;

  beforeAll(async () => {
    server = await startStandalone();
    proxy = await startTestProxy([{ host: server.host, port: server.port }]);
  });

  afterAll(async () => {
    await proxy?.close();
    await server?.stop();
  });

  it('is a one-node cluster to cluster clients', async () => {
    const port = proxy.address.port;
    const slots = (await command(port, 2, 'CLUSTER', 'SLOTS')) as RespReply[];
    expect(slots).toEqual([[0, 16383, ['127.0.0.1', port, expect.stringMatching(/^[0-9a-f]{40}$/), []]]]);
    expect(String(await command(port, 2, 'CLUSTER', 'INFO'))).toMatch(/^cluster_state:ok\r\n/);
    const client = clusterClient(port);
    try {
      await client.set('standalone:k', 'v');
      expect(await client.get('standalone:k')).toBe('v');
      expect(await client.mget('standalone:k', 'other')).toEqual(['v', null]);
    } finally {
      client.disconnect();
    }
    expect(String(await command(port, 2, 'CLUSTER', 'COUNTKEYSINSLOT', '1'))).toMatch(/standalone server/);
  });
});

describe('a fleet of two respool instances, peers of each other', () => {
  let cluster: ValkeyCluster;
  let a: RespoolProxy;
  let b: RespoolProxy;

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 0 });
    const seed = [{ host: cluster.nodes[0]!.host, port: cluster.nodes[0]!.port }];
    const [pa, pb] = [await freePort(), await freePort()];
    const at = (port: number) => ({ host: '127.0.0.1', port });
    [a, b] = await Promise.all([
      startTestProxy(seed, { listen: at(pa), cluster: { peers: [at(pb)] } as never }),
      // b's list names the whole fleet, itself included (ignored): one list can serve every instance.
      startTestProxy(seed, { listen: at(pb), cluster: { peers: [at(pa), at(pb)] } as never }),
    ]);
  }, 60_000);

  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await cluster?.stop();
  });

  it('both list both instances with the same split (rendezvous over 64-slot ranges); INFO counts the fleet', async () => {
    // They started together: each sees the other once it answered its first check.
    await waitFor(async () => {
      const nodes = String(await command(a.address.port, 2, 'CLUSTER', 'NODES')) + String(await command(b.address.port, 2, 'CLUSTER', 'NODES'));
      return !/fail/.test(nodes) && nodes.trim().split('\n').length === 4;
    }, 'both instances to see each other alive');
    const fromA = await command(a.address.port, 2, 'CLUSTER', 'SLOTS');
    const fromB = await command(b.address.port, 2, 'CLUSTER', 'SLOTS');
    expect(fromA).toEqual(fromB);
    const runs = (fromA as RespReply[][]).map((r) => [r[0], r[1], (r[2] as RespReply[])[1]] as [number, number, number]);
    // Contiguous, in order, covering every slot once; runs are whole 64-slot ranges.
    expect(runs[0]![0]).toBe(0);
    expect(runs[runs.length - 1]![1]).toBe(16383);
    for (let i = 1; i < runs.length; i++) expect(runs[i]![0]).toBe(runs[i - 1]![1] + 1);
    for (const [start, end] of runs) expect([start % 64, (end + 1) % 64]).toEqual([0, 0]);
    // The division is the pure function of the two member ids.
    const ids = [a, b].map((p) => nodeId({ host: '127.0.0.1', port: p.address.port }));
    const expected = divideSlots(ids);
    for (const p of [a, b]) {
      const own = runs.filter((r) => r[2] === p.address.port).map(([s, e]) => [s, e]);
      expect(own).toEqual(expected.get(nodeId({ host: '127.0.0.1', port: p.address.port })));
      const count = own.reduce((n, [s, e]) => n + e! - s! + 1, 0);
      expect(count).toBeGreaterThan(16384 * 0.3);
    }
    const nodesA = String(await command(a.address.port, 2, 'CLUSTER', 'NODES')).trim().split('\n');
    expect(nodesA).toHaveLength(2);
    expect(nodesA.filter((l) => l.includes('myself,master'))).toHaveLength(1);
    expect(nodesA.find((l) => l.includes('myself'))).toContain(`127.0.0.1:${a.address.port}@0`);
    expect(String(await command(b.address.port, 2, 'CLUSTER', 'INFO'))).toMatch(/cluster_known_nodes:2\r\ncluster_size:2\r\n/);
    expect(await command(a.address.port, 2, 'CLUSTER', 'SHARDS')).toEqual(await command(b.address.port, 2, 'CLUSTER', 'SHARDS'));
  });

  it('an iovalkey Cluster client spreads its commands over both, and each serves any key', async () => {
    const [beforeA, beforeB] = [await counter(a, 'set'), await counter(b, 'set')];
    const client = clusterClient(a.address.port);
    try {
      const keys = Array.from({ length: 1000 }, (_, i) => `fleet:${i}`);
      await Promise.all(keys.map((k) => client.set(k, k)));
      expect(await Promise.all(keys.map((k) => client.get(k)))).toEqual(keys);
      expect(client.nodes('all').map((n) => n.options.port).sort()).toEqual([a.address.port, b.address.port].sort());
    } finally {
      client.disconnect();
    }
    const [setsA, setsB] = [(await counter(a, 'set')) - beforeA, (await counter(b, 'set')) - beforeB];
    expect(setsA + setsB).toBe(1000);
    expect(setsA).toBeGreaterThan(300);
    expect(setsB).toBeGreaterThan(300);
    // Any instance answers any key (no MOVED between instances).
    expect(await command(b.address.port, 2, 'GET', 'fleet:1')).toBe('fleet:1');
    expect(await command(a.address.port, 2, 'GET', 'fleet:1')).toBe('fleet:1');
  });
});

describe('MOVED and ASK from the upstream never reach a client', () => {
  it('an ASK loop ends in respool\'s own error after cluster.maxRedirects', async () => {
    // A fake one-node cluster answering every GET with ASK to itself.
    const server = net.createServer((socket) => {
      const framer = new RequestFramer();
      socket.on('error', () => {});
      socket.on('data', (chunk) => {
        framer.push(chunk);
        for (let f = framer.next(); f !== null; f = framer.next()) {
          const cmd = f.args[0]!.toString().toUpperCase();
          const port = (server.address() as net.AddressInfo).port;
          if (cmd === 'GET') socket.write(`-ASK ${calculateSlot(f.args[1]!)} 127.0.0.1:${port}\r\n`);
          else if (cmd === 'CLUSTER') {
            socket.write(`*1\r\n*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:16383\r\n$5\r\nnodes\r\n*1\r\n*10\r\n$2\r\nid\r\n$5\r\nfake0\r\n$4\r\nport\r\n:${port}\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$6\r\nhealth\r\n$6\r\nonline\r\n`);
          } else if (cmd === 'INFO') {
            const text = '# Cluster\r\ncluster_enabled:1\r\n';
            socket.write(`$${text.length}\r\n${text}\r\n`);
          } else if (cmd === 'COMMAND') socket.write('-ERR not here\r\n');
          else socket.write('+OK\r\n');
        }
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as net.AddressInfo).port;
    const proxy = await startTestProxy([{ host: '127.0.0.1', port }], { mode: 'cluster', cluster: { maxRedirects: 3 } as never });
    try {
      const reply = await command(proxy.address.port, 2, 'GET', 'k');
      expect(reply).toBeInstanceOf(ReplyError);
      expect((reply as ReplyError).message).toBe('ERR respool: GET was redirected more than 3 times; giving up');
    } finally {
      await proxy.close();
      await new Promise((r) => server.close(r));
    }
  });
});
