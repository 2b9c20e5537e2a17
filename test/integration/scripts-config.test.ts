import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import type { Valkey } from 'iovalkey';
import calculateSlot from 'cluster-key-slot';
import { startCluster, type ValkeyCluster, type ValkeyNode } from '../harness/valkey-processes.js';
import { RawClient, ReplyError } from '../harness/raw-client.js';
import type { RespoolProxy } from '../../src/server.js';
import { clientFor, startTestProxy } from '../helpers/proxy.js';
import { waitFor } from '../helpers/wait.js';
import { CommandTable } from '../../src/commands/command-table.js';
import { fanOutTargets } from '../../src/routing/fan-out.js';

const sha1 = (s: string) => createHash('sha1').update(s).digest('hex');
const CONFIG_SET = CommandTable.builtin().lookup([Buffer.from('CONFIG'), Buffer.from('SET')])!;

describe('scripts respool has seen survive NOSCRIPT; CONFIG SET all or nothing (3 primaries + 3 replicas)', () => {
  let cluster: ValkeyCluster;
  let proxy: RespoolProxy;
  let client: Valkey;

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 1 });
    proxy = await startTestProxy([{ host: cluster.nodes[0]!.host, port: cluster.nodes[0]!.port }]);
    client = clientFor(proxy);
  });

  afterAll(async () => {
    client?.disconnect();
    await proxy?.close();
    await cluster?.stop();
  });

  /**
   * Until one of `nodes` (default: every live node) answers a direct PING with BUSY: the script
   * just started is running, past busy-reply-threshold (a fixed sleep was not always long enough).
   */
  async function untilBusy(nodes?: ValkeyNode[]): Promise<void> {
    const candidates = nodes ?? (await liveNodes());
    await waitFor(async () => {
      for (const n of candidates) {
        const r = await cluster.call(n, 'PING');
        if (r instanceof ReplyError && /^BUSY /.test(r.message)) return true;
      }
      return false;
    }, 'a node busy running the script', 5000, 20);
  }

  /** The cluster's live nodes, primaries first, as the harness sees them. */
  async function liveNodes(): Promise<ValkeyNode[]> {
    return [...(await cluster.primaries()), ...(await cluster.replicas())];
  }

  async function configOnEveryNode(name: string): Promise<string[]> {
    const live = await liveNodes();
    return Promise.all(live.map(async (n) => String(((await cluster.call(n, 'CONFIG', 'GET', name)) as unknown[])[1])));
  }

  it('EVALSHA after SCRIPT FLUSH on the key’s node (sent to it directly) runs: respool loads the script again', async () => {
    const body = "return 'flushed:' .. KEYS[1]";
    const sha = (await client.script('LOAD', body)) as string;
    expect(sha).toBe(sha1(body));
    const owner = await cluster.primaryForSlot(calculateSlot('sf:key'));
    expect(await cluster.call(owner, 'SCRIPT', 'FLUSH')).toBe('OK');
    expect(await cluster.call(owner, 'SCRIPT', 'EXISTS', sha)).toEqual([0]);
    expect(await client.evalsha(sha, 1, 'sf:key')).toBe('flushed:sf:key');
    expect(await cluster.call(owner, 'SCRIPT', 'EXISTS', sha)).toEqual([1]);
    // An EVAL body counts as seen too; the sha in upper case as well.
    const evalBody = "return 'eval:' .. ARGV[1]";
    expect(await client.eval(evalBody, 1, 'sf:key', 'x')).toBe('eval:x');
    await cluster.call(owner, 'SCRIPT', 'FLUSH');
    expect(await client.evalsha(sha1(evalBody).toUpperCase(), 1, 'sf:key', 'y')).toBe('eval:y');
    expect(await client.call('EVALSHA_RO', sha1(evalBody), 1, 'sf:key', 'z')).toBe('eval:z');
  });

  it('EVALSHA of a script respool never saw: NOSCRIPT exactly as Valkey', async () => {
    const unknown = sha1('return "never seen by respool"');
    const owner = await cluster.primaryForSlot(calculateSlot('ns:key'));
    const direct = (await cluster.call(owner, 'EVALSHA', unknown, 1, 'ns:key')) as ReplyError;
    expect(direct).toBeInstanceOf(ReplyError);
    const raw = await RawClient.connect(proxy.address.port);
    try {
      const through = (await raw.call('EVALSHA', unknown, 1, 'ns:key')) as ReplyError;
      expect(through).toBeInstanceOf(ReplyError);
      expect(through.message).toBe(direct.message);
      expect(((await raw.call('EVALSHA', 'abc', 0)) as ReplyError).message).toBe(direct.message);
    } finally {
      raw.close();
    }
  });

  it('CONFIG GET answers from one node (not a merge of every node)', async () => {
    expect(await client.config('GET', 'maxmemory-samples')).toEqual(['maxmemory-samples', '5']);
  });

  /**
   * CONFIG SET goes to the nodes `fanOutTargets` picks from respool's topology. A stop's CI once
   * saw one node keep its value: respool's view then lacked a live node. Before the CONFIG SET
   * tests, those targets must be every live node; if they are not yet, refresh the view (and say
   * so, with both lists, so a real cause shows in the log).
   */
  async function proxySeesEveryNode(): Promise<void> {
    const live = (await liveNodes()).map((n) => n.port).sort().join(' ');
    const targets = () => fanOutTargets(CONFIG_SET, proxy.refresher.current!).map((t) => t.node.port).sort().join(' ');
    if (targets() === live) return;
    console.warn(`respool's topology [${proxy.refresher.current!.allNodes().map((n) => `${n.port}:${n.role}:${n.health}`).join(' ')}] lacks a live node of [${live}]: refreshing`);
    const deadline = Date.now() + 10_000;
    while (targets() !== live) {
      if (Date.now() > deadline) throw new Error(`CONFIG SET through respool goes to [${targets()}], the live nodes are [${live}]`);
      await proxy.refresher.refreshNow('periodic');
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  it('a CONFIG SET every node accepts applies on every node', async () => {
    await proxySeesEveryNode();
    expect(await client.config('SET', 'maxmemory-samples', '6', 'lazyfree-lazy-user-del', 'yes')).toBe('OK');
    expect(new Set(await configOnEveryNode('maxmemory-samples'))).toEqual(new Set(['6']));
    expect(new Set(await configOnEveryNode('lazyfree-lazy-user-del'))).toEqual(new Set(['yes']));
    expect(await client.config('SET', 'maxmemory-samples', '5', 'lazyfree-lazy-user-del', 'no')).toBe('OK');
    expect(new Set(await configOnEveryNode('maxmemory-samples'))).toEqual(new Set(['5']));
  });

  it('a per-node setting is never half-applied: CONFIG SET port / cluster-announce-port refused before any node changes, CONFIG GET port is respool\'s', async () => {
    const before = await configOnEveryNode('cluster-announce-port');
    await expect(client.config('SET', 'maxmemory-samples', '7', 'cluster-announce-port', '7777')).rejects.toThrow(/CONFIG SET cluster-announce-port is not supported through respool/);
    await expect(client.config('SET', 'port', '7777')).rejects.toThrow(/CONFIG SET port is not supported through respool/);
    expect(await configOnEveryNode('cluster-announce-port')).toEqual(before);
    expect(new Set(await configOnEveryNode('maxmemory-samples'))).toEqual(new Set(['5']));
    expect(await client.config('GET', 'port')).toEqual(['port', String(proxy.address.port)]);
  });

  it('a CONFIG SET one node refuses is undone on the nodes that applied it, and says so', async () => {
    const refusing = (await cluster.replicas())[1]!;
    expect(await cluster.call(refusing, 'ACL', 'SETUSER', 'default', '-config|set')).toBe('OK');
    try {
      const error = await client.config('SET', 'maxmemory-samples', '9', 'lazyfree-lazy-user-del', 'yes').catch((e: Error) => e);
      expect(error).toBeInstanceOf(Error);
      expect((error as Error).message).toMatch(
        new RegExp(`^ERR respool: CONFIG SET failed on ${refusing.address.replace(/\./g, '\\.')} \\(NOPERM .*\\); restored the previous values on the other nodes$`),
      );
      expect(new Set(await configOnEveryNode('maxmemory-samples'))).toEqual(new Set(['5']));
      expect(new Set(await configOnEveryNode('lazyfree-lazy-user-del'))).toEqual(new Set(['no']));
    } finally {
      await cluster.call(refusing, 'ACL', 'SETUSER', 'default', '+config|set');
    }
  });

  it('a busy node: its BUSY error, and no node changed (CONFIG GET first finds it busy)', async () => {
    const busy: ValkeyNode = (await cluster.primaries())[2]!;
    await cluster.call(busy, 'CONFIG', 'SET', 'busy-reply-threshold', '100');
    const looping = cluster.call(busy, 'EVAL', 'local i = 0 while true do i = i + 1 end', 0);
    try {
      await untilBusy([busy]);
      const error = await client.config('SET', 'min-replicas-to-write', '2').catch((e: Error) => e);
      expect((error as Error).message).toMatch(/^BUSY /);
    } finally {
      await cluster.call(busy, 'SCRIPT', 'KILL');
      await looping;
      await cluster.call(busy, 'CONFIG', 'SET', 'busy-reply-threshold', '5000');
    }
    expect(new Set(await configOnEveryNode('min-replicas-to-write'))).toEqual(new Set(['0']));
    expect(await client.set('after-busy', '1')).toBe('OK');
  });

  it('while a script runs long through respool: PING answers BUSY, FUNCTION STATS names it, the wrong KILL says BUSY', async () => {
    const code = "#!lua name=spin\nserver.register_function('spin', function() local i = 0 while true do i = i + 1 end end)";
    expect(await client.call('FUNCTION', 'LOAD', 'REPLACE', code)).toBe('spin');
    await client.config('SET', 'busy-reply-threshold', '10');
    const runner = await RawClient.connect(proxy.address.port);
    const raw = await RawClient.connect(proxy.address.port);
    try {
      const spinning = runner.call('FCALL', 'spin', 0).catch((e: Error) => e);
      await untilBusy();
      expect(((await raw.call('PING')) as ReplyError).message).toMatch(/^BUSY Valkey is busy running a script/);
      const stats = (await raw.call('FUNCTION', 'STATS')) as unknown[];
      expect(stats[0]).toBe('running_script');
      expect((stats[1] as unknown[]).slice(0, 4)).toEqual(['name', 'spin', 'command', ['FCALL', 'spin', '0']]);
      expect(((await raw.call('SCRIPT', 'KILL')) as ReplyError).message).toMatch(/^BUSY .*FUNCTION KILL/);
      expect(await raw.call('FUNCTION', 'KILL')).toBe('OK');
      expect(((await spinning) as ReplyError).message).toMatch(/killed by user/);
      expect(await raw.call('PING')).toBe('PONG');
    } finally {
      for (const node of await cluster.primaries()) await cluster.call(node, 'FUNCTION', 'KILL').catch(() => undefined);
      runner.close();
      raw.close();
      await client.config('SET', 'busy-reply-threshold', '5000');
      await client.call('FUNCTION', 'DELETE', 'spin');
    }
  });

  it('MULTI while a script runs long: a command queued then gets BUSY and EXEC aborts; EXEC itself then aborts with BUSY', async () => {
    await client.config('SET', 'busy-reply-threshold', '10');
    const runner = await RawClient.connect(proxy.address.port);
    const raw = await RawClient.connect(proxy.address.port);
    const spin = () => runner.call('EVAL', 'while true do end', 0).catch((e: Error) => e);
    const runnerKill = () => client.script('KILL') as Promise<string>;
    try {
      expect(await raw.call('SET', 'busy:xx', '1')).toBe('OK');
      // A command queued during the script: BUSY, and the transaction is discarded.
      expect(await raw.call('MULTI')).toBe('OK');
      let spinning = spin();
      await untilBusy();
      expect(((await raw.call('INCR', 'busy:xx')) as ReplyError).message).toMatch(/^BUSY /);
      expect(await runnerKill()).toBe('OK');
      await spinning;
      expect(await raw.call('INCR', 'busy:xx')).toBe('QUEUED');
      expect(((await raw.call('EXEC')) as ReplyError).message).toBe('EXECABORT Transaction discarded because of previous errors.');
      // EXEC during the script: aborted, naming BUSY.
      expect(await raw.call('MULTI')).toBe('OK');
      expect(await raw.call('INCR', 'busy:xx')).toBe('QUEUED');
      spinning = spin();
      await untilBusy();
      expect(((await raw.call('EXEC')) as ReplyError).message).toMatch(/^EXECABORT Transaction discarded because of: BUSY /);
      expect(await raw.call('SCRIPT', 'KILL')).toBe('OK'); // out of MULTI now
      await spinning;
      expect(await raw.call('GET', 'busy:xx')).toBe('1'); // nothing ran half-way
      expect(await raw.call('PING', 'after')).toBe('after'); // out of MULTI
    } finally {
      for (const node of await cluster.primaries()) await cluster.call(node, 'SCRIPT', 'KILL').catch(() => undefined);
      runner.close();
      raw.close();
      await client.config('SET', 'busy-reply-threshold', '5000');
    }
  });

  it('EXEC after a state change since queueing (min-replicas-to-write): EXECABORT naming NOREPLICAS, as Valkey', async () => {
    const raw = await RawClient.connect(proxy.address.port);
    try {
      expect(await raw.call('SET', 'norep:xx', '1')).toBe('OK');
      expect(await raw.call('MULTI')).toBe('OK');
      expect(await raw.call('INCR', 'norep:xx')).toBe('QUEUED');
      await client.config('SET', 'min-replicas-to-write', '2');
      expect(((await raw.call('EXEC')) as ReplyError).message).toBe('EXECABORT Transaction discarded because of: NOREPLICAS Not enough good replicas to write.');
      await client.config('SET', 'min-replicas-to-write', '0');
      expect(await raw.call('GET', 'norep:xx')).toBe('1');
    } finally {
      await client.config('SET', 'min-replicas-to-write', '0');
      raw.close();
    }
  });

  it('SCRIPT FLUSH through respool forgets the scripts it had seen; SCRIPT EXISTS says what EVALSHA would do', async () => {
    const body = "return 'seen:' .. ARGV[1]";
    expect(await client.eval(body, 0, 'a')).toBe('seen:a'); // one primary has it; respool remembers it
    expect(await client.script('EXISTS', sha1(body), sha1('never'))).toEqual([1, 0]);
    expect(await client.evalsha(sha1(body), 1, 'any-node-key', 'b')).toBe('seen:b');
    expect(await client.script('FLUSH')).toBe('OK');
    expect(await client.script('EXISTS', sha1(body))).toEqual([0]);
    const error = await client.evalsha(sha1(body), 0, 'c').catch((e: Error) => e);
    expect((error as Error).message).toMatch(/^NOSCRIPT /);
  });

  it('WAIT / WAITAOF: on the client\'s own links to every primary, merged as agg_min; the write is on the replica after WAIT', async () => {
    const raw = await RawClient.connect(proxy.address.port);
    try {
      for (let i = 0; i < 20; i++) expect(await raw.call('SET', `wait:${i}`, 'v')).toBe('OK');
      expect(await raw.call('WAIT', '1', '2000')).toBe(1); // every primary has one replica
      // Every key is on a replica already (SCAN: keyless, so a replica answers it without READONLY).
      const onReplicas = new Set<string>();
      for (const replica of await cluster.replicas()) {
        const [, found] = (await cluster.call(replica, 'SCAN', '0', 'MATCH', 'wait:*', 'COUNT', '10000')) as [string, string[]];
        for (const k of found) onReplicas.add(k);
      }
      expect(onReplicas.size).toBe(20);
      const owner = await cluster.primaryForSlot(calculateSlot('wait:7'));
      const t0 = performance.now();
      expect(await raw.call('WAIT', '2', '200')).toBe(1); // no shard has two replicas: its timeout, then the count
      expect(performance.now() - t0).toBeGreaterThanOrEqual(150);
      expect(await raw.call('WAIT', '0', '0')).toBe(1);
      expect(await raw.call('WAITAOF', '0', '0', '0')).toEqual([0, 0]);
      // Errors are the node's own.
      const direct = (await cluster.call(owner, 'WAITAOF', '1', '0', '0')) as ReplyError;
      expect(((await raw.call('WAITAOF', '1', '0', '0')) as ReplyError).message).toBe(direct.message);
      expect(((await raw.call('WAIT', 'x', '0')) as ReplyError).message).toBe('ERR value is not an integer or out of range');
      expect(((await raw.call('WAIT', '1', '-1')) as ReplyError).message).toBe('ERR timeout is negative');
      // "For ever" (0) is capped at half of timeouts.commandMs: a reply, not a stuck link.
      const t1 = performance.now();
      expect(await raw.call('WAIT', '5', '0')).toBe(1);
      expect(performance.now() - t1).toBeLessThan(5000); // timeouts.commandMs (default 5000): the link was not timed out
      // Inside MULTI it does not block (as on Valkey).
      expect(await raw.call('MULTI')).toBe('OK');
      expect(await raw.call('SET', 'wait:m', '1')).toBe('QUEUED');
      expect(await raw.call('WAIT', '1', '0')).toBe('QUEUED');
      const exec = (await raw.call('EXEC')) as unknown[];
      expect(exec[0]).toBe('OK');
      expect(typeof exec[1]).toBe('number');
    } finally {
      raw.close();
    }
  }, 20_000);

  it('node administration is refused, naming the command and saying to connect to a node directly', async () => {
    const raw = await RawClient.connect(proxy.address.port);
    try {
      for (const args of [['DEBUG', 'SLEEP', '0'], ['SHUTDOWN'], ['REPLICAOF', 'NO', 'ONE'], ['SLAVEOF', 'NO', 'ONE'], ['FAILOVER'], ['REPLCONF', 'ACK', '0']]) {
        const reply = (await raw.call(...args)) as ReplyError;
        expect(reply, args.join(' ')).toBeInstanceOf(ReplyError);
        expect(reply.message).toMatch(new RegExp(`^ERR respool: ${args[0]} is not supported through respool: .*connect to a node directly$`));
      }
      await client.set('mig:key', 'v');
      const toSelf = (await raw.call('MIGRATE', '127.0.0.1', proxy.address.port, 'mig:key', 0, 1000, 'REPLACE')) as ReplyError;
      expect(toSelf).toBeInstanceOf(ReplyError);
      expect(toSelf.message).toMatch(/^ERR respool: MIGRATE to respool itself .*connect to a node directly$/);
      expect(await client.get('mig:key')).toBe('v');
    } finally {
      raw.close();
    }
  });

  it('after a failover, EVALSHA of a script run before (EVAL, so only the old primary had it) runs on the new primary', async () => {
    const body = "return 'failover:' .. KEYS[1]";
    expect(await client.eval(body, 1, 'fo:key')).toBe('failover:fo:key');
    const slot = calculateSlot('fo:key');
    const shard = (await cluster.shards()).find((s) => s.slots.some(([a, b]) => slot >= a && slot <= b))!;
    const replica = shard.replicas[0]!;
    expect(await cluster.call(replica, 'SCRIPT', 'EXISTS', sha1(body))).toEqual([0]);
    await cluster.failover(replica);
    expect((await cluster.primaryForSlot(slot)).port).toBe(replica.port);
    expect(await client.evalsha(sha1(body), 1, 'fo:key')).toBe('failover:fo:key');
    expect(await cluster.call(replica, 'SCRIPT', 'EXISTS', sha1(body))).toEqual([1]);
  });
});
