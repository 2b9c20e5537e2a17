import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Valkey } from 'iovalkey';
import { startCluster, type ValkeyCluster } from '../harness/valkey-processes.js';
import { parseInfo } from '../harness/raw-client.js';
import type { RespoolProxy } from '../../src/server.js';
import { clientFor, startTestProxy } from '../helpers/proxy.js';
import { RawConnection } from '../helpers/raw-resp.js';

/** Section headers of an INFO text, in order. */
function headers(text: string): string[] {
  return text.split('\r\n').filter((l) => l.startsWith('# ')).map((l) => l.slice(2));
}

/** The lines of one section. */
function section(text: string, header: string): string[] {
  const lines = text.split('\r\n');
  const start = lines.indexOf(`# ${header}`);
  if (start < 0) return [];
  const end = lines.indexOf('', start);
  return lines.slice(start + 1, end < 0 ? undefined : end);
}

describe('INFO answered by respool in front of a 3-primary cluster', () => {
  let cluster: ValkeyCluster;
  let proxy: RespoolProxy;
  let client: Valkey;

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 0 });
    proxy = await startTestProxy([{ host: cluster.nodes[0]!.host, port: cluster.nodes[0]!.port }]);
    client = clientFor(proxy);
    const pipeline = client.pipeline();
    for (let i = 0; i < 200; i++) pipeline.set(`info:${i}`, 'v');
    for (let i = 0; i < 30; i++) pipeline.set(`info:ttl:${i}`, 'v', 'EX', 1000 + i * 100);
    await pipeline.exec();
  });

  afterAll(async () => {
    client?.disconnect();
    await proxy?.close();
    await cluster?.stop();
  });

  it('iovalkey becomes ready on respool\'s INFO, and its own parser reads it', async () => {
    const c = new Valkey({ host: proxy.address.host, port: proxy.address.port, enableReadyCheck: true, maxRetriesPerRequest: 0 });
    try {
      await new Promise<void>((resolve, reject) => {
        c.once('ready', () => resolve());
        c.once('error', reject);
      });
      // iovalkey's ready check parses INFO into an object (lines split on CRLF and ':').
      const parsed = await new Promise<Record<string, string>>((resolve, reject) => {
        (c as unknown as { _readyCheck(cb: (err: Error | null, info: Record<string, string>) => void): void })
          ._readyCheck((err, info) => (err ? reject(err) : resolve(info)));
      });
      expect(parsed['tcp_port']).toBe(String(proxy.address.port));
      expect(parsed['process_id']).toBe(String(process.pid));
      expect(parsed['upstream_mode']).toBe('cluster');
      expect(parsed['connected_clients']).toBeDefined();
      expect(parsed['loading']).toBe('0');
    } finally {
      c.disconnect();
    }
  });

  it('INFO server: the upstream\'s versions, respool\'s process', async () => {
    const direct = parseInfo(String(await cluster.call(cluster.nodes[0]!, 'INFO', 'server')));
    const text = await client.info('server');
    expect(headers(text)).toEqual(['Server']);
    expect(text.endsWith('\r\n')).toBe(true);
    const info = parseInfo(text);
    expect(info['redis_version']).toBe(direct['redis_version']);
    expect(info['valkey_version']).toBe(direct['valkey_version']);
    expect(info['respool_version']).toMatch(/^\d+\.\d+\.\d+/);
    expect(info['tcp_port']).toBe(String(proxy.address.port));
    expect(info['process_id']).toBe(String(process.pid));
    expect(info['server_mode']).toBe('standalone');
    expect(info['upstream_mode']).toBe('cluster');
    expect(Number(info['uptime_in_seconds'])).toBeGreaterThanOrEqual(0);
    expect(info['uptime_in_days']).toBe('0');
    // Same field order as the node's, for the fields both have.
    const ours = Object.keys(info).filter((k) => k in direct);
    const theirs = Object.keys(direct).filter((k) => k in info);
    expect(ours).toEqual(theirs);
  });

  it('INFO keyspace: keys summed over the primaries equal DBSIZE through respool', async () => {
    // avg_ttl is sampled by each node's expire cycle (10 times a second): wait until it has run.
    let db0: Record<string, string> = {};
    for (let i = 0; i < 30; i++) {
      const info = parseInfo(await client.info('keyspace'));
      db0 = Object.fromEntries(info['db0']!.split(',').map((p) => p.split('=')));
      if (Number(db0['avg_ttl']) > 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(Number(db0['keys'])).toBe(await client.dbsize());
    expect(Number(db0['keys'])).toBe(230);
    expect(Number(db0['expires'])).toBe(30);
    expect(Number(db0['avg_ttl'])).toBeGreaterThan(0);
  });

  it('INFO commandstats: calls of a command run N times through respool sum to N', async () => {
    const calls = async () => {
      const line = parseInfo(await client.info('commandstats'))['cmdstat_hincrby'];
      if (line === undefined) return 0;
      const f = Object.fromEntries(line.split(',').map((p) => p.split('=')));
      if (Number(f['calls']) > 0) expect(Number(f['usec_per_call'])).toBeCloseTo(Number(f['usec']) / Number(f['calls']), 1);
      return Number(f['calls']);
    };
    const before = await calls();
    const N = 57;
    const pipeline = client.pipeline();
    for (let i = 0; i < N; i++) pipeline.hincrby(`info:h:${i}`, 'f', 1);
    await pipeline.exec();
    expect(await calls()).toBe(before + N);
    // Spread over the shards: no one primary saw them all.
    const perNode = await Promise.all((await cluster.primaries()).map(async (p) => parseInfo(String(await cluster.call(p, 'INFO', 'commandstats')))['cmdstat_hincrby']));
    expect(perNode.filter((l) => l !== undefined).length).toBe(3);
  });

  it('INFO stats: respool\'s own counters, the primaries\' keyspace hits summed', async () => {
    await client.get('info:1');
    await client.get('info:nosuchkey');
    const info = parseInfo(await client.info('stats'));
    expect(Number(info['total_connections_received'])).toBeGreaterThanOrEqual(1);
    expect(Number(info['total_commands_processed'])).toBeGreaterThan(230);
    expect(info['rejected_connections']).toBe('0');
    const hits = (await Promise.all((await cluster.primaries()).map(async (p) => Number(parseInfo(String(await cluster.call(p, 'INFO', 'stats')))['keyspace_hits']))))
      .reduce((a, b) => a + b, 0);
    expect(Number(info['keyspace_hits'])).toBeGreaterThanOrEqual(1);
    expect(Number(info['keyspace_hits'])).toBeLessThanOrEqual(hits);
    expect(Number(info['keyspace_misses'])).toBeGreaterThanOrEqual(1);
    expect(info['acl_access_denied_auth']).toBeDefined();
  });

  it('memory is summed over the primaries (as keyspace); cpu and the like come from one primary, which it names', async () => {
    await client.script('LOAD', 'return "info-test-1"');
    await client.script('LOAD', 'return "info-test-2"');
    const text = await client.info('memory', 'cpu');
    expect(headers(text)).toEqual(['Memory', 'CPU']);
    const mem = Object.fromEntries(section(text, 'Memory').map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1)]));
    const direct = await Promise.all((await cluster.primaries()).map(async (n) => parseInfo(String(await cluster.call(n, 'INFO', 'memory')))));
    const maxmemory = direct.reduce((a, d) => a + Number(d['maxmemory']), 0);
    expect(Number(mem['maxmemory'])).toBe(maxmemory);
    const used = direct.map((d) => Number(d['used_memory']));
    // used_memory moves between the reads: the sum lies between 3× the smallest and 3× the largest, give or take.
    expect(Number(mem['used_memory'])).toBeGreaterThan(Math.min(...used) * 2.5);
    expect(Number(mem['used_memory'])).toBeLessThan(Math.max(...used) * 3.5);
    expect(mem['used_memory_human']).toMatch(/^\d+\.\d\dM$/);
    expect(mem['maxmemory_policy']).toBe(direct[0]!['maxmemory_policy']);
    // SCRIPT LOAD reaches every node: one server would hold that many scripts, not three times as many.
    const scripts = Math.max(...direct.map((d) => Number(d['number_of_cached_scripts'])));
    expect(scripts).toBeGreaterThanOrEqual(2);
    expect(Number(mem['number_of_cached_scripts'])).toBe(scripts);
    expect(section(text, 'CPU')[0]).toMatch(/^respool_source:127\.0\.0\.1:\d+$/);
    expect(text).toContain('\r\n\r\n# CPU\r\n');
  });

  it('INFO respool: links, leases, topology', async () => {
    const info = parseInfo(await client.info('respool'));
    expect(info['upstream_primaries']).toBe('3');
    expect(info['slots_covered']).toBe('16384');
    expect(Number(info['topology_epoch'])).toBeGreaterThanOrEqual(1);
    expect(Number(info['shared_links'])).toBeGreaterThanOrEqual(3);
    expect(info['circuits_open']).toBe('0');
    expect(info['node0']).toMatch(/^address=127\.0\.0\.1:\d+,role=primary,links=\d+/);
  });

  it('INFO (default), all and everything: sections in Valkey\'s order; everything has every section a node shows', async () => {
    const direct = String(await cluster.call(cluster.nodes[0]!, 'INFO', 'everything'));
    const everything = await client.info('everything');
    const ours = headers(everything);
    for (const h of headers(direct)) expect(ours).toContain(h);
    expect(ours).toContain('Respool');
    expect(ours.filter((h) => h !== 'Respool')).toEqual(headers(direct));
    const def = headers(await client.info());
    expect(def).toEqual(['Server', 'Clients', 'Memory', 'Persistence', 'Stats', 'Replication', 'CPU', 'Modules', 'Errorstats', 'Cluster', 'Keyspace', 'Respool']);
    expect(headers(await client.info('DEFAULT'))).toEqual(def);
    expect(headers(await client.info('ALL'))).toEqual(ours);
    // Several sections, any case, in Valkey's order whatever order they were asked in.
    expect(headers(await client.info('Keyspace', 'SERVER', 'clients'))).toEqual(['Server', 'Clients', 'Keyspace']);
  });

  it('an unknown section: an empty reply, as Valkey gives', async () => {
    expect(await client.info('nosuchsection')).toBe('');
  });

  it('RESP3: a verbatim string; RESP2: a bulk string', async () => {
    const raw = await RawConnection.connect(proxy.address.port);
    try {
      let reply = await raw.call('INFO', 'server');
      expect(reply.startsWith('$')).toBe(true);
      expect(reply).toContain('# Server\r\n');
      await raw.call('HELLO', '3');
      reply = await raw.call('INFO', 'server', 'keyspace');
      expect(reply).toMatch(/^=\d+\r\ntxt:# Server\r\n/);
      const body = reply.slice(reply.indexOf('\r\n') + 2 + 4, -2);
      expect(Number(reply.slice(1, reply.indexOf('\r\n')))).toBe(Buffer.byteLength(body) + 4);
      expect(body).toContain('\r\n\r\n# Keyspace\r\ndb0:keys=');
      reply = await raw.call('INFO', 'clients');
      expect(reply).toMatch(/^=\d+\r\ntxt:# Clients\r\n/);
      reply = await raw.call('INFO', 'nosuchsection');
      expect(reply).toBe('=4\r\ntxt:\r\n');
    } finally {
      raw.close();
    }
  });
  it('BGSAVE saves on every primary; INFO persistence shows the save of one that is not the first; changes are summed', async () => {
    // The primary that owns the key saves for a second; the others have nothing to save and end at once.
    const primaries = await cluster.primaries();
    const key = 'persistence{t}'; // slot 15891: the last shard, never the first
    const slot = Number(await cluster.call(primaries[0]!, 'CLUSTER', 'KEYSLOT', key));
    const owner = (await cluster.shards()).find((s) => s.slots.some(([from, to]) => slot >= from && slot <= to))!.primary;
    expect(owner.port).not.toBe(primaries[0]!.port);
    const persistence = async () => parseInfo(await client.info('persistence'));
    const dirty = Number((await persistence())['rdb_changes_since_last_save']);
    await client.set(key, 'v');
    expect(Number((await persistence())['rdb_changes_since_last_save'])).toBe(dirty + 1);
    await cluster.call(owner, 'CONFIG', 'SET', 'rdb-key-save-delay', '50000'); // 50 ms per key: the few dozen keys of this test take seconds
    try {
      expect(await client.bgsave()).toBe('Background saving started');
      expect(String(await cluster.call(owner, 'INFO', 'persistence'))).toContain('rdb_bgsave_in_progress:1');
      expect((await persistence())['rdb_bgsave_in_progress']).toBe('1');
    } finally {
      await cluster.call(owner, 'CONFIG', 'SET', 'rdb-key-save-delay', '0');
    }
    const deadline = Date.now() + 30_000;
    while ((await persistence())['rdb_bgsave_in_progress'] !== '0' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect((await persistence())['rdb_bgsave_in_progress']).toBe('0');
  });
});
