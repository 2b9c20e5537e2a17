import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, startStandalone, type ValkeyCluster, type ValkeyNode } from '../harness/valkey-processes.js';
import { startTestProxy } from '../helpers/proxy.js';
import { RawConnection } from '../helpers/raw-resp.js';
import { waitFor } from '../helpers/wait.js';
import type { RespoolProxy } from '../../src/server.js';
import type { RespoolConfig } from '../../src/config/types.js';

/**
 * A restricted user's scripts, functions and SORT patterns are checked by Valkey itself (issue
 * 18): respool runs every command of a user with an upstream identity as that identity, mapped
 * (an ACL user the operator made on the nodes) or mirrored (respool keeps one with the same rules
 * on every node). `direct` is one valkey-server given the same ACL line; every row runs as user
 * `app` on both, and the replies must be the same bytes, RESP2 and RESP3, in front of a standalone
 * server and of a 3+3 cluster. Keys share the hash tag {t}, so a cluster node owns all of them.
 */

const RULES = 'on >secret ~app:* +@read +@write +@scripting';
const NODE_RULES = ['on', '>node-pw', '~app:*', '+@read', '+@write', '+@scripting'];
const LIB = [
  '#!lua name=rdlib',
  "server.register_function('rd', function(keys, args) return server.call('get', args[1]) end)",
  "server.register_function{function_name='rdro', callback=function(keys, args) return server.call('get', args[1]) end, flags={'no-writes'}}",
].join('\n');
const READ_SECRET = "return redis.call('get','secret:{t}1')";
const READ_KEY = "return redis.call('get',KEYS[1])";
const sha1 = (s: string) => createHash('sha1').update(s).digest('hex');

/** What user app sends, in order: the table of issue 18, its write forms, then the same on allowed keys. */
const ROWS: string[][] = [
  ['GET', 'secret:{t}1'],
  ['EVAL', READ_SECRET, '0'],
  ['EVAL', READ_SECRET, '1', 'app:{t}x'],
  ['FUNCTION', 'LOAD', 'REPLACE', LIB],
  ['FCALL', 'rd', '0', 'secret:{t}1'],
  ['SORT', 'app:{t}l', 'BY', 'nosort', 'GET', 'secret:{t}*'],
  ['EVAL', "return redis.call('set','secret:{t}1','pwned')", '0'],
  ['EVAL', "return redis.call('del','secret:{t}1')", '0'],
  ['FCALL_RO', 'rdro', '0', 'secret:{t}1'],
  ['SCRIPT', 'LOAD', READ_SECRET],
  ['EVALSHA', sha1(READ_SECRET), '0'],
  ['SORT', 'app:{t}l', 'BY', 'secret:{t}*'],
  ['SORT', 'app:{t}l', 'STORE', 'secret:{t}1'],
  ['EVAL', "return redis.call('publish','news','x')", '0'], // a command the user may not run: the error names the user
  // allowed keys
  ['GET', 'app:{t}x'],
  ['EVAL', READ_KEY, '1', 'app:{t}x'],
  ['EVAL', "return redis.call('set',KEYS[1],'y')", '1', 'app:{t}w'],
  ['GET', 'app:{t}w'],
  ['EVAL', "return redis.call('del',KEYS[1])", '1', 'app:{t}w'],
  ['FCALL', 'rd', '1', 'app:{t}x', 'app:{t}x'],
  ['FCALL_RO', 'rdro', '1', 'app:{t}x', 'app:{t}x'],
  ['SCRIPT', 'LOAD', READ_KEY],
  ['EVALSHA', sha1(READ_KEY), '1', 'app:{t}x'],
  ['SORT', 'app:{t}l'],
  ['SORT', 'app:{t}l', 'BY', 'nosort'],
  ['SORT', 'app:{t}l', 'BY', 'app:{t}w*'],
  ['SORT', 'app:{t}l', 'STORE', 'app:{t}sorted'],
  ['LRANGE', 'app:{t}sorted', '0', '-1'],
  ['MULTI'], ['EVAL', READ_SECRET, '0'], ['GET', 'app:{t}x'], ['EXEC'],
];

/** The data every run starts from (written as the default user). */
const SETUP: string[][] = [
  ['FLUSHALL'], ['SET', 'secret:{t}1', 'topsecret'], ['SET', 'secret:{t}2', '2'], ['SET', 'app:{t}x', 'x'], ['RPUSH', 'app:{t}l', '3', '1', '2'],
];

async function transcript(port: number, proto: 2 | 3, auth: [string, string] | null, rows: string[][]): Promise<string[]> {
  const conn = await RawConnection.connect(port);
  try {
    if (proto === 3) await conn.call('HELLO', '3');
    if (auth !== null) expect(await conn.call('AUTH', ...auth)).toBe('+OK\r\n');
    const out: string[] = [];
    for (const row of rows) out.push(`${row.join(' ').slice(0, 60)} → ${await conn.call(...row)}`);
    return out;
  } finally {
    conn.close();
  }
}

/** ACL GETUSER's flags, commands, keys, channels (the parts a mirror must match), as text. */
async function describeOn(conn: RawConnection, name: string): Promise<string> {
  const reply = await conn.call('ACL', 'GETUSER', name);
  const lines = reply.split('\r\n');
  const pick = (field: string) => lines[lines.indexOf(field) + 2] ?? '';
  const flagsAt = lines.indexOf('flags');
  const n = Number(lines[flagsAt + 1]!.slice(1));
  const flags = lines.slice(flagsAt + 2, flagsAt + 2 + 2 * n).filter((l) => !l.startsWith('$')).join(',');
  return `flags=${flags} commands=${pick('commands')} keys=${pick('keys')} channels=${pick('channels')}`;
}

async function nodeCall(node: ValkeyNode, ...args: string[]): Promise<string> {
  const conn = await RawConnection.connect(node.port);
  try {
    return await conn.call(...args);
  } finally {
    conn.close();
  }
}

describe('upstream identities: Valkey checks what respool cannot (issue 18)', () => {
  let direct: ValkeyNode;
  let standalone: ValkeyNode;
  let cluster: ValkeyCluster;
  const proxies: RespoolProxy[] = [];

  const usersFor = (upstream: 'mirror' | { username: string; password: string }): RespoolConfig['users'] => [
    { name: 'default', rules: 'on nopass +@all ~* &*' },
    { name: 'app', rules: RULES, upstream },
    { name: 'plain', rules: RULES.replace('>secret', '>plain-pw'), upstream: 'none' }, // no identity
  ];
  const start = async (nodes: Array<{ host: string; port: number }>, upstream: 'mirror' | { username: string; password: string }) => {
    const proxy = await startTestProxy(nodes, { users: usersFor(upstream), cluster: { refreshPeriodMs: 1000 } } as Partial<RespoolConfig>);
    proxies.push(proxy);
    return proxy;
  };

  beforeAll(async () => {
    [direct, standalone, cluster] = await Promise.all([startStandalone(), startStandalone(), startCluster()]);
    expect(await nodeCall(direct, 'ACL', 'SETUSER', 'app', ...RULES.split(' '))).toBe('+OK\r\n');
    // The mapped identity: a user the operator made on every node.
    for (const node of [standalone, ...cluster.nodes]) expect(await nodeCall(node, 'ACL', 'SETUSER', 'app-node', ...NODE_RULES)).toBe('+OK\r\n');
  }, 120_000);

  afterAll(async () => {
    await Promise.all(proxies.map((p) => p.close()));
    await Promise.all([direct?.stop(), standalone?.stop(), cluster?.stop()]);
  });

  const cases: Array<{ name: string; upstream: () => Array<{ host: string; port: number }>; mode: 'mirror' | 'mapped' }> = [
    { name: 'standalone, mapped', upstream: () => [standalone], mode: 'mapped' },
    { name: 'standalone, mirrored', upstream: () => [standalone], mode: 'mirror' },
    { name: '3+3 cluster, mapped', upstream: () => [cluster.nodes[0]!], mode: 'mapped' },
    { name: '3+3 cluster, mirrored', upstream: () => [cluster.nodes[0]!], mode: 'mirror' },
  ];

  for (const c of cases) {
    it(`${c.name}: every row answers as Valkey with the same ACL line, RESP2 and RESP3`, async () => {
      const proxy = await start(c.upstream(), c.mode === 'mirror' ? 'mirror' : { username: 'app-node', password: 'node-pw' });
      for (const proto of [2, 3] as const) {
        await transcript(direct.port, 2, null, SETUP);
        await transcript(proxy.address.port, 2, null, SETUP);
        await transcript(direct.port, 2, null, [['SCRIPT', 'FLUSH'], ['FUNCTION', 'FLUSH']]);
        await transcript(proxy.address.port, 2, null, [['SCRIPT', 'FLUSH'], ['FUNCTION', 'FLUSH']]);
        const want = await transcript(direct.port, proto, ['app', 'secret'], ROWS);
        const got = await transcript(proxy.address.port, proto, ['app', 'secret'], ROWS);
        expect(got).toEqual(want);
        // Nothing the user may not touch changed.
        expect(await transcript(proxy.address.port, 2, null, [['GET', 'secret:{t}1']])).toEqual(['GET secret:{t}1 → $9\r\ntopsecret\r\n']);
      }
      // The node's denials of the identity's scripts are in respool's ACL LOG, under respool's name.
      await waitFor(async () => {
        const [log] = await transcript(proxy.address.port, 2, null, [['ACL', 'LOG', '100']]);
        return log!.includes('context\r\n$3\r\nlua\r\n$6\r\nobject\r\n$11\r\nsecret:{t}1\r\n$8\r\nusername\r\n$3\r\napp\r\n');
      }, 'a lua denial of app in ACL LOG', 5000);
      // The same user without an identity: scripts and SORT patterns refused, naming the setting.
      const plain = await transcript(proxy.address.port, 2, ['plain', 'plain-pw'], [['EVAL', READ_SECRET, '0'], ['FCALL', 'rd', '0', 'x'], ['SORT', 'app:{t}l', 'BY', 'nosort', 'GET', 'secret:{t}*'], ['SORT', 'app:{t}l'], ['GET', 'app:{t}x']]);
      expect(plain[0]).toMatch(/^EVAL .* → -NOPERM respool: EVAL can touch keys .* user plain has no upstream identity .*users\[\]\.upstream: mirror/);
      expect(plain[1]).toMatch(/→ -NOPERM respool: FCALL can touch keys/);
      expect(plain[2]).toMatch(/→ -NOPERM respool: SORT can touch keys/);
      expect(plain[3]).toBe('SORT app:{t}l → *3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n');
      expect(plain[4]).toBe('GET app:{t}x → $1\r\nx\r\n');
      await proxy.close();
    }, 60_000);
  }

  it('a thousand clients of one user share connectionsPerNode identity links per node; full-access clients use none', async () => {
    const proxy = await start([standalone], 'mirror');
    const conns = await Promise.all(Array.from({ length: 1000 }, () => RawConnection.connect(proxy.address.port)));
    await Promise.all(conns.map(async (c, i) => {
      expect(await c.call('AUTH', 'app', 'secret')).toBe('+OK\r\n');
      expect(await c.call('SET', `app:${i}`, 'v')).toBe('+OK\r\n');
    }));
    const list = await nodeCall(standalone, 'CLIENT', 'LIST');
    const asApp = list.split('\n').filter((l) => / user=respool\.app /.test(l));
    expect(asApp.length).toBeGreaterThan(0);
    expect(asApp.length).toBeLessThanOrEqual(2); // connectionsPerNode
    await waitFor(async () => /respool_upstream_identity_links\{user="app"\} [12]/.test(await proxy.metrics.render()), 'identity link gauge', 3000);
    for (const c of conns) c.close();
    // A full-access client: today's path (respool's own links), no identity.
    expect(await transcript(proxy.address.port, 2, null, [['SET', 'x', '1']])).toEqual(['SET x 1 → +OK\r\n']);
    await proxy.close();
  }, 60_000);

  it('mirrored users follow the cluster: a SIGHUP rule change, a failover, a node restarted empty, a node added with slots', async () => {
    const proxy = await start([cluster.nodes[0]!], 'mirror');
    const admin = await RawConnection.connect(proxy.address.port);
    const match = async (nodes: readonly ValkeyNode[]) => {
      const want = await describeOn(admin, 'app');
      for (const node of nodes) {
        const conn = await RawConnection.connect(node.port);
        try {
          await waitFor(async () => (await describeOn(conn, 'respool.app')) === want, `respool.app on ${node.address}`, 10_000);
        } finally {
          conn.close();
        }
      }
    };
    // Made on every node before the first identity connection.
    expect(await transcript(proxy.address.port, 2, ['app', 'secret'], [['SET', 'app:a', '1']])).toEqual(['SET app:a 1 → +OK\r\n']);
    await match(cluster.nodes);

    // SIGHUP: new rules for app reach every node.
    const config = JSON.parse(JSON.stringify(proxy.config)) as RespoolConfig;
    config.users = usersFor('mirror');
    config.users[1]!.rules = `${RULES} ~more:* -eval`;
    expect(proxy.reload(config).failed).toEqual([]);
    await match(cluster.nodes);
    expect(await describeOn(admin, 'app')).toMatch(/keys=~app:\* ~more:\*/);

    // A replica promoted: it already holds the user, and still matches.
    const [shard] = await cluster.shards();
    await cluster.failover(shard!.replicas[0]!);
    await match(await cluster.primaries());
    expect(await transcript(proxy.address.port, 2, ['app', 'secret'], [['SET', 'more:b', '1']])).toEqual(['SET more:b 1 → +OK\r\n']);

    // A node restarted empty (no ACL file): its users are gone until respool sees the new run.
    const victim = (await cluster.replicas())[0]!;
    await cluster.restartNode(victim);
    await cluster.waitForStable();
    await match([victim]);

    // A node added, given a slot.
    const extra = await startStandalone({ args: ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '2000'] });
    try {
      expect(await nodeCall(extra, 'CLUSTER', 'MEET', '127.0.0.1', String(cluster.nodes[0]!.port))).toBe('+OK\r\n');
      await waitFor(async () => (await nodeCall(extra, 'CLUSTER', 'INFO')).includes('cluster_known_nodes:7'), 'the new node met', 10_000);
      const id = (await nodeCall(extra, 'CLUSTER', 'MYID')).split('\r\n')[1]!;
      const slot = '16383'; // empty: no key of this test hashes there
      const owner = await cluster.primaryForSlot(16383);
      const ownerId = (await nodeCall(owner, 'CLUSTER', 'MYID')).split('\r\n')[1]!;
      const live = [...(await cluster.primaries()), ...(await cluster.replicas())];
      for (const node of [owner, extra, ...live.filter((n) => n !== owner)]) await nodeCall(node, 'CLUSTER', 'SETSLOT', slot, 'NODE', id);
      await match([extra]);
      // Give the slot back and forget the node, so the cluster is as it was.
      for (const node of [extra, owner, ...live.filter((n) => n !== owner)]) await nodeCall(node, 'CLUSTER', 'SETSLOT', slot, 'NODE', ownerId);
    } finally {
      await extra.stop();
    }
    admin.close();
    await proxy.close();
  }, 120_000);
});

