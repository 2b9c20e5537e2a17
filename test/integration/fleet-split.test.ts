// Split keys across a fleet (cluster.fleetState): a split added through one instance is in force
// on every instance before RESPOOL SPLIT ADD answers; writes through any instance reach every
// copy, and copy fills hold every instance's writes, so a read through any instance never
// answers a value older than the last acknowledged write. A paused instance that missed the
// split neither blocks it nor writes around it; a write made directly on a node is seen by every
// reader within hotKeys.maxCopyAge.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import calculateSlot from 'cluster-key-slot';
import { freePort, startCluster, type ValkeyCluster } from '../harness/valkey-processes.js';
import { RawClient, ReplyError } from '../harness/raw-client.js';
import type { RespoolProxy } from '../../src/server.js';
import { DEFAULT_HOT_KEYS } from '../../src/config/hot-keys-config.js';
import { startFleetMember } from '../helpers/proxy.js';
import { RespoolProcess, stopAll } from '../helpers/respool-process.js';
import { sleep, waitFor } from '../helpers/wait.js';


async function splitReads(proxy: RespoolProxy, outcome: string): Promise<number> {
  const m = new RegExp(`^respool_split_reads_total\\{outcome="${outcome}"\\} (\\d+)`, 'm').exec(await proxy.metrics.render());
  return m ? Number(m[1]) : 0;
}

describe('split keys across a fleet of three in front of a 3+3 cluster', () => {
  let cluster: ValkeyCluster;
  const proxies: RespoolProxy[] = [];
  const clients: RawClient[] = [];

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 1 });
    const ports = [await freePort(), await freePort(), await freePort()];
    const seed = [{ host: cluster.nodes[0]!.host, port: cluster.nodes[0]!.port }];
    for (const port of ports) {
      proxies.push(await startFleetMember(seed, ports, port, {
        // Fills every ~0.75 s, so many run while the trials write and read.
        hotKeys: { ...structuredClone(DEFAULT_HOT_KEYS), maxCopyAge: 1000 },
      }));
    }
    for (const p of proxies) clients.push(await RawClient.connect(p.address.port));
    await waitFor(() => proxies.every((p) => p.fleetState!.liveMembers().length === 3), 'every member registered', 10_000);
  }, 60_000);

  afterAll(async () => {
    for (const c of clients) c.close();
    await Promise.all(proxies.map((p) => p.close()));
    await cluster?.stop();
  });

  it('RESPOOL SPLIT ADD through A answers once B and C have the split and its copies are filled', async () => {
    const [a, b, c] = clients as [RawClient, RawClient, RawClient];
    expect(await a.command('SET', 'fleet:hk', 'v0')).toBe('OK');
    expect(await a.command('RESPOOL', 'SPLIT', 'ADD', 'fleet:hk', '3')).toBe('OK');
    for (const p of proxies) {
      const split = p.hotKeys.splitKey('fleet:hk');
      expect(split, 'every member knows the split').toBeDefined();
      expect(split!.active.map((x) => x.name.toString())).toEqual(proxies[0]!.hotKeys.splitKey('fleet:hk')!.active.map((x) => x.name.toString()));
    }
    // One copy per primary, filled.
    const copies = proxies[0]!.hotKeys.splitKey('fleet:hk')!.active;
    const owners = await Promise.all(copies.map((x) => cluster.primaryForSlot(calculateSlot(x.name))));
    expect(new Set(owners.map((n) => n.port)).size).toBe(3);
    for (const [i, x] of copies.entries()) expect(await cluster.call(owners[i]!, 'GET', x.name)).toBe('v0');
    expect(String(await b.command('RESPOOL', 'SPLIT', 'LIST'))).toContain('fleet:hk');
    expect(await c.command('GET', 'fleet:hk')).toBe('v0');
  });

  it('10,000 write-then-read trials over every pair of instances: no read older than the last acknowledged write', async () => {
    const before = await Promise.all(proxies.map((p) => splitReads(p, 'copy')));
    const fillsBefore = proxies.map((p) => p.hotKeys.fills.stats.ok);
    const pairs: Array<[number, number]> = [[0, 1], [0, 2], [1, 0], [1, 2], [2, 0], [2, 1]];
    let stale = 0;
    const examples: string[] = [];
    for (let i = 0; i < 10_000; i++) {
      const [w, r] = pairs[i % pairs.length]!;
      const value = `t${i}`;
      expect(await clients[w]!.command('SET', 'fleet:hk', value)).toBe('OK');
      const read = await clients[r]!.command('GET', 'fleet:hk');
      if (read !== value) {
        stale++;
        if (examples.length < 5) examples.push(`trial ${i}: wrote ${value} through ${w}, read ${String(read)} through ${r}`);
      }
    }
    expect(examples).toEqual([]);
    expect(stale).toBe(0);
    // Not vacuous: the readers used the copies, and fills ran while the trials went on.
    const after = await Promise.all(proxies.map((p) => splitReads(p, 'copy')));
    const copyReads = after.reduce((n, v, i) => n + v - before[i]!, 0);
    expect(copyReads).toBeGreaterThan(5000);
    const fills = proxies.reduce((n, p, i) => n + p.hotKeys.fills.stats.ok - fillsBefore[i]!, 0);
    expect(fills).toBeGreaterThanOrEqual(2);
  }, 120_000);

  it('concurrent writers and readers on every instance: no read answers a value overwritten before it started', async () => {
    // Writers write distinct numbers. A read is stale when the write it answers had been
    // acknowledged before another write — itself acknowledged before the read was sent — began:
    // that value had been overwritten for good before the read started.
    const writers = await Promise.all(proxies.map((p) => RawClient.connect(p.address.port)));
    const readers = await Promise.all(proxies.map((p) => RawClient.connect(p.address.port)));
    const endedAt: number[] = [];
    let latestStartDone = -Infinity; // the latest start among acknowledged writes
    let seq = 0;
    let violations = 0;
    let reads = 0;
    const deadline = Date.now() + 4000;
    try {
      await Promise.all([
        ...writers.map(async (w) => {
          while (Date.now() < deadline) {
            const n = seq++;
            const start = performance.now();
            await w.command('SET', 'fleet:hk', String(n));
            endedAt[n] = performance.now();
            latestStartDone = Math.max(latestStartDone, start);
          }
        }),
        ...readers.map(async (r) => {
          while (Date.now() < deadline) {
            const superseding = latestStartDone;
            const v = Number(await r.command('GET', 'fleet:hk'));
            reads++;
            const end = endedAt[v];
            if (end !== undefined && end < superseding) violations++;
          }
        }),
      ]);
    } finally {
      for (const c of [...writers, ...readers]) c.close();
    }
    expect(reads).toBeGreaterThan(1000);
    expect(violations).toBe(0);
  }, 30_000);

  it('RESPOOL SPLIT DEL through C: no member reads the copies any more, then they are gone', async () => {
    const copies = proxies[0]!.hotKeys.splitKey('fleet:hk')!.active.slice(1).map((x) => x.name);
    expect(await clients[2]!.command('RESPOOL', 'SPLIT', 'DEL', 'fleet:hk')).toBe(1);
    // Answered once every member stopped reading the copies; the rule then goes everywhere.
    for (const p of proxies) expect(p.hotKeys.splitKey('fleet:hk')?.rule.reading ?? false).toBe(false);
    await waitFor(() => proxies.every((p) => p.hotKeys.splitKey('fleet:hk') === undefined), 'every member to drop the split', 3000);
    await waitFor(async () => {
      for (const name of copies) if ((await cluster.call(await cluster.primaryForSlot(calculateSlot(name)), 'EXISTS', name)) !== 0) return false;
      return true;
    }, 'the copies to be deleted', 5000);
    expect(await clients[1]!.command('SET', 'fleet:hk', 'after')).toBe('OK');
    expect(await clients[0]!.command('GET', 'fleet:hk')).toBe('after');
  });

  it('a change whose notice is lost still reaches every member within 1 s (each beats every 250 ms)', async () => {
    const state = proxies[0]!.fleetState!;
    const doc = structuredClone(state.doc);
    doc.rules.push({ kind: 'prefix', text: 'quiet:', copies: 3, auto: false, phase: 'active', by: 'the test', at: Date.now() });
    const node = await cluster.primaryForSlot(calculateSlot('{respool-fleet}'));
    // Written straight into the state, with no notice on the bus.
    await cluster.call(node, 'HSET', '{respool-fleet}:state', 'version', String(state.version + 1), 'doc', JSON.stringify(doc));
    const written = Date.now();
    await waitFor(() => proxies.every((p) => p.hotKeys.rules().some((r) => r.text === 'quiet:')), 'every member to apply it', 1000, 5);
    expect(Date.now() - written).toBeLessThan(1000);
    expect(await clients[1]!.command('RESPOOL', 'SPLIT', 'DEL', 'quiet:')).toBe(1);
  });

  it('the state deleted in the upstream (DEL, FLUSHALL): every member follows it within 1 s, and splits work again', async () => {
    expect(await clients[0]!.command('RESPOOL', 'SPLIT', 'ADD', 'fleet:reset', '3')).toBe('OK');
    const node = await cluster.primaryForSlot(calculateSlot('{respool-fleet}'));
    expect(await cluster.call(node, 'DEL', '{respool-fleet}:state')).toBe(1);
    await waitFor(() => proxies.every((p) => p.fleetState!.version === 0 && p.hotKeys.rules().length === 0), 'every member to follow the empty state', 1000, 5);
    expect(await clients[2]!.command('RESPOOL', 'SPLIT', 'ADD', 'fleet:reset2', '3')).toBe('OK');
    for (const p of proxies) expect(p.hotKeys.splitKey('fleet:reset2')).toBeDefined();
    expect(await clients[1]!.command('RESPOOL', 'SPLIT', 'DEL', 'fleet:reset2')).toBe(1);
  });

  it('a member that beats but does not apply the split gets it refused, naming it, and taken back', async () => {
    // A registration that stays alive (its beat changes) but never reports the new version.
    const node = await cluster.primaryForSlot(calculateSlot('{respool-fleet}'));
    let beat = 0;
    let beating = true;
    const fake = (async () => {
      while (beating) {
        await cluster.call(node, 'HSET', '{respool-fleet}:members', 'stuck', JSON.stringify({ a: '10.9.9.9:6380', v: 0, b: beat++, i: 'test' }));
        await sleep(100);
      }
    })();
    try {
      await waitFor(() => proxies[0]!.fleetState!.liveMembers().includes('stuck'), 'the stuck registration to be seen', 3000);
      const reply = await clients[0]!.call('RESPOOL', 'SPLIT', 'ADD', 'fleet:refused', '3');
      expect(reply).toBeInstanceOf(ReplyError);
      expect((reply as ReplyError).message).toMatch(/^ERR respool: RESPOOL SPLIT ADD fleet:refused: fleet member 10\.9\.9\.9:6380 did not confirm the split within 4000 ms; it was taken back$/);
      for (const p of proxies) expect(p.hotKeys.splitKey('fleet:refused')?.rule.reading ?? false).toBe(false);
    } finally {
      beating = false;
      await fake;
      await cluster.call(node, 'HDEL', '{respool-fleet}:members', 'stuck');
    }
    // Its removal, left half done while the stuck member held it up, is finished by a member.
    await waitFor(() => proxies.every((p) => !p.hotKeys.rules().some((r) => r.text === 'fleet:refused')), 'the rule to be gone', 20_000, 100);
  }, 40_000);

  it('a write made directly on a node is seen through every instance within hotKeys.maxCopyAge', async () => {
    expect(await clients[0]!.command('SET', 'fleet:direct', 'old')).toBe('OK');
    expect(await clients[0]!.command('RESPOOL', 'SPLIT', 'ADD', 'fleet:direct', '3')).toBe('OK');
    for (let i = 0; i < 30; i++) expect(await clients[i % 3]!.command('GET', 'fleet:direct')).toBe('old');
    const node = await cluster.primaryForSlot(calculateSlot('fleet:direct'));
    expect(await cluster.call(node, 'SET', 'fleet:direct', 'new')).toBe('OK'); // bypassing respool
    const writtenAt = Date.now();
    let lastOld = writtenAt;
    while (Date.now() - writtenAt < 2500) {
      for (const c of clients) {
        // Stamped before the GET is sent: a reply that comes back late does not count against the bound.
        const askedAt = Date.now();
        if ((await c.command('GET', 'fleet:direct')) === 'old') lastOld = askedAt;
      }
      await sleep(5);
    }
    // maxCopyAge (1 s here) bounds it: copies older than that are filled again before they are read.
    // Exact: a copy holding 'old' was readable until at most its fill's hold (before the SET) + 1 s.
    expect(lastOld - writtenAt).toBeLessThanOrEqual(1000);
    for (const c of clients) expect(await c.command('GET', 'fleet:direct')).toBe('new');
    expect(await clients[0]!.command('RESPOOL', 'SPLIT', 'DEL', 'fleet:direct')).toBe(1);
  }, 20_000);
});

describe('an instance that misses the split (paused) neither blocks it nor writes around it', () => {
  let cluster: ValkeyCluster;
  let a: RespoolProxy;
  let b: RespoolProxy;
  let c: RespoolProcess;

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 0 });
    const ports = [await freePort(), await freePort(), await freePort()];
    const seed = { host: cluster.nodes[0]!.host, port: cluster.nodes[0]!.port };
    [a, b] = await Promise.all([0, 1].map((i) => startFleetMember([seed], ports, ports[i]!)));
    c = await RespoolProcess.start(ports[2]!, ['--upstream', `${seed.host}:${seed.port}`, '--cluster-peer', ports.map((p) => `127.0.0.1:${p}`).join(','), '--log-level', 'info']);
    await waitFor(() => a.fleetState!.liveMembers().length === 3, 'three registered members', 10_000);
  }, 60_000);

  afterAll(async () => {
    await stopAll();
    await Promise.all([a?.close(), b?.close()]);
    await cluster?.stop();
  });

  it('the split waits until the paused member is past its lease, then holds; the member, resumed, writes every copy', async () => {
    const ra = await RawClient.connect(a.address.port);
    const rb = await RawClient.connect(b.address.port);
    const rc = await RawClient.connect(c.port); // connected before the pause
    try {
      expect(await rc.command('SET', 'paused:hk', 'v0')).toBe('OK');
      c.pause();
      const started = Date.now();
      expect(await ra.command('RESPOOL', 'SPLIT', 'ADD', 'paused:hk', '3')).toBe('OK');
      const tookMs = Date.now() - started;
      // It waited for the paused member's registration to go stale (lease 2 s + margin), no longer.
      expect(tookMs).toBeGreaterThan(2000);
      expect(tookMs).toBeLessThan(6000);
      expect(await rb.command('SET', 'paused:hk', 'v1')).toBe('OK');
      for (let i = 0; i < 6; i++) expect(await ra.command('GET', 'paused:hk')).toBe('v1');
      expect(await splitReads(a, 'copy')).toBeGreaterThan(0);

      // A write sent to the paused member, handled the moment it resumes: refused until it has
      // confirmed the state (TRYAGAIN), or sent to every copy.
      const pending = rc.call('SET', 'paused:hk', 'v2');
      await sleep(100);
      c.resume();
      let reply = await pending;
      let tries = 0;
      while (reply instanceof ReplyError) {
        expect(reply.message).toMatch(/^TRYAGAIN respool: this instance has not confirmed the fleet's shared state/);
        tries++;
        await sleep(20);
        reply = await rc.call('SET', 'paused:hk', 'v2');
      }
      expect(reply).toBe('OK');
      for (let i = 0; i < 9; i++) expect(await [ra, rb][i % 2]!.command('GET', 'paused:hk')).toBe('v2');
      console.log(`paused member: SPLIT ADD took ${tookMs} ms; its first write after resuming was refused ${tries} time(s)`);
      // And it reads copies itself once a fill included it.
      await waitFor(async () => (await rc.command('GET', 'paused:hk')) === 'v2' && c.alive, 'the resumed member to read', 5000);
    } finally {
      ra.close();
      rb.close();
      rc.close();
    }
  }, 30_000);

  it('a restarted member starts with the fleet\'s split rules: its first write reaches every copy', async () => {
    await c.restart();
    const rc = await RawClient.connect(c.port);
    const ra = await RawClient.connect(a.address.port);
    try {
      expect(String(await rc.command('RESPOOL', 'SPLIT', 'LIST'))).toContain('paused:hk');
      expect(await rc.command('SET', 'paused:hk', 'after-restart')).toBe('OK');
      // Copies come back into use once a fill included the restarted member (reads go to the
      // original meanwhile); every read is the value just written.
      const before = await splitReads(a, 'copy');
      await waitFor(async () => {
        for (let i = 0; i < 6; i++) expect(await ra.command('GET', 'paused:hk')).toBe('after-restart');
        return (await splitReads(a, 'copy')) > before;
      }, 'reads of copies again', 5000);
    } finally {
      ra.close();
      rc.close();
    }
  }, 30_000);
});
