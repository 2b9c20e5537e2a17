/**
 * Blocking commands through respool (issue 8, "Done when": blocking commands) — BLPOP, BRPOP,
 * BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN, BZPOPMAX, BZMPOP, XREAD BLOCK, XREADGROUP BLOCK — in front
 * of a standalone valkey-server and a 3-primary + 3-replica cluster, in RESP2 and RESP3.
 *
 * respool runs with timeouts.commandMs = 300 ms: a blocking command must never be cut by the
 * shared links' command timeout. Replies are compared byte for byte with a direct Valkey 8.0.1
 * (a standalone server, or a one-node cluster owning every slot in cluster mode).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import calculateSlot from 'cluster-key-slot';
import { startCluster, startStandalone, type ValkeyCluster, type ValkeyNode } from '../harness/valkey-processes.js';
import { encodeCommand, parseInfo, type RespReply } from '../harness/raw-client.js';
import type { RespoolConfig } from '../../src/config/types.js';
import type { RespoolProxy } from '../../src/server.js';
import { startTestProxy } from '../helpers/proxy.js';
import { RawConnection } from '../helpers/raw-resp.js';
import { connect } from '../helpers/transcript.js';
import { sleep, waitFor } from '../helpers/wait.js';

const PROTOCOLS = [2, 3] as const;
type Proto = (typeof PROTOCOLS)[number];
const NIL_ARRAY: Record<Proto, string> = { 2: '*-1\r\n', 3: '_\r\n' };
const COMMAND_MS = 300;

/** True when no reply arrives within `ms` (the connection is still waiting). */
async function silentFor(c: RawConnection, ms: number): Promise<boolean> {
  try {
    const r = await c.read(ms);
    throw new Error(`expected no reply yet, got ${JSON.stringify(r)}`);
  } catch (e) {
    if ((e as Error).message === 'timed out waiting for a reply') return true;
    throw e;
  }
}

function blockedClients(info: RespReply): number {
  return Number(parseInfo(info)['blocked_clients']);
}

function leaseLines(list: RespReply): string[] {
  return String(list)
    .split('\n')
    .filter((l) => l.includes(' name=respool-lease '));
}

type Args = Array<string | number>;

/** One blocking command: how to prepare it, block on it (timeout in its own unit), feed it, and see the effect. */
interface BlockingCase {
  name: string;
  setup: Args[];
  block: (t: string, tMs: string) => Args;
  push: Args[];
  after: Args[];
}

/** Keys share one hash tag, so the same cases run in cluster mode. */
function cases(tag: string, prefix = ''): BlockingCase[] {
  const k = (s: string) => `{${tag}}:${prefix}${s}`;
  return [
    { name: 'BLPOP', setup: [], block: (t) => ['BLPOP', k('l1'), k('l2'), t], push: [['RPUSH', k('l2'), 'a', 'b']], after: [['LRANGE', k('l2'), 0, -1]] },
    { name: 'BRPOP', setup: [], block: (t) => ['BRPOP', k('l1'), t], push: [['RPUSH', k('l1'), 'a', 'b']], after: [['LRANGE', k('l1'), 0, -1]] },
    {
      name: 'BLMOVE',
      setup: [],
      block: (t) => ['BLMOVE', k('src'), k('dst'), 'LEFT', 'RIGHT', t],
      push: [['RPUSH', k('src'), 'x', 'y']],
      after: [['LRANGE', k('src'), 0, -1], ['LRANGE', k('dst'), 0, -1]],
    },
    {
      name: 'BRPOPLPUSH',
      setup: [],
      block: (t) => ['BRPOPLPUSH', k('src'), k('dst'), t],
      push: [['RPUSH', k('src'), 'x', 'y']],
      after: [['LRANGE', k('src'), 0, -1], ['LRANGE', k('dst'), 0, -1]],
    },
    {
      name: 'BLMPOP',
      setup: [],
      block: (t) => ['BLMPOP', t, 2, k('l1'), k('l2'), 'RIGHT', 'COUNT', 2],
      push: [['RPUSH', k('l2'), 'a', 'b', 'c']],
      after: [['LRANGE', k('l2'), 0, -1]],
    },
    { name: 'BZPOPMIN', setup: [], block: (t) => ['BZPOPMIN', k('z1'), k('z2'), t], push: [['ZADD', k('z2'), '2.5', 'm2', '1', 'm1']], after: [['ZRANGE', k('z2'), 0, -1, 'WITHSCORES']] },
    { name: 'BZPOPMAX', setup: [], block: (t) => ['BZPOPMAX', k('z1'), t], push: [['ZADD', k('z1'), '2.5', 'm2', '1', 'm1']], after: [['ZRANGE', k('z1'), 0, -1, 'WITHSCORES']] },
    {
      name: 'BZMPOP',
      setup: [],
      block: (t) => ['BZMPOP', t, 1, k('z1'), 'MIN', 'COUNT', 2],
      push: [['ZADD', k('z1'), '3', 'c', '1', 'a', '2', 'b']],
      after: [['ZRANGE', k('z1'), 0, -1, 'WITHSCORES']],
    },
    {
      name: 'XREAD BLOCK',
      setup: [['XADD', k('s'), '1-1', 'old', 'entry']],
      block: (_t, tMs) => ['XREAD', 'COUNT', 10, 'BLOCK', tMs, 'STREAMS', k('s'), '$'],
      push: [['XADD', k('s'), '2-1', 'f', 'v']],
      after: [['XLEN', k('s')]],
    },
    {
      name: 'XREADGROUP BLOCK',
      setup: [['XGROUP', 'CREATE', k('s'), 'g', '$', 'MKSTREAM']],
      block: (_t, tMs) => ['XREADGROUP', 'GROUP', 'g', 'c1', 'COUNT', 10, 'BLOCK', tMs, 'STREAMS', k('s'), '>'],
      push: [['XADD', k('s'), '5-1', 'f', 'v']],
      after: [['XPENDING', k('s'), 'g']],
    },
  ];
}

/** timeout argument in the command's own unit, for `seconds` */
const secs = (s: number) => [String(s), String(Math.round(s * 1000))] as const;

/**
 * The blocking command on connection A, the push on connection B after `pushAfterMs` (or, given
 * `blocked` — INFO clients' blocked_clients of the server the command runs on — once it counts
 * the command as blocked: XREAD … $ sees only entries added after it blocked), then the effect;
 * one line per reply with its exact bytes.
 */
async function pushedTranscript(port: number, proto: Proto, c: BlockingCase, timeoutSecs: number, pushAfterMs: number, blocked?: () => Promise<number>): Promise<string[]> {
  const a = await connect(port, proto);
  const b = await connect(port, proto);
  const out: string[] = [];
  try {
    for (const s of c.setup) out.push(`setup ${s.join(' ')} -> ${JSON.stringify(await b.call(...s))}`);
    const [t, tMs] = secs(timeoutSecs);
    const cmd = c.block(t, tMs);
    a.send(...cmd);
    if (blocked !== undefined) await waitFor(async () => (await blocked()) >= 1, `${cmd[0]} to block`, 5000, 10);
    await sleep(pushAfterMs);
    for (const p of c.push) out.push(`push ${p.join(' ')} -> ${JSON.stringify(await b.call(...p))}`);
    out.push(`${cmd.join(' ')} -> ${await a.read(timeoutSecs === 0 ? 5000 : timeoutSecs * 1000 + 3000).then(JSON.stringify, (e: Error) => `<${e.message}>`)}`);
    for (const q of c.after) out.push(`after ${q.join(' ')} -> ${JSON.stringify(await b.call(...q))}`);
  } finally {
    a.close();
    b.close();
  }
  return out;
}

/** The blocking command with nothing to pop: its reply at its own timeout, and how long it took. */
async function timeoutTranscript(port: number, proto: Proto, c: BlockingCase, timeoutSecs: number): Promise<{ lines: string[]; ms: number }> {
  const a = await connect(port, proto);
  const lines: string[] = [];
  let ms = 0;
  try {
    for (const s of c.setup) lines.push(`setup ${s.join(' ')} -> ${JSON.stringify(await a.call(...s))}`);
    const [t, tMs] = secs(timeoutSecs);
    const cmd = c.block(t, tMs);
    const started = Date.now();
    a.send(...cmd);
    lines.push(`${cmd.join(' ')} -> ${await a.read(timeoutSecs * 1000 + 4000).then(JSON.stringify, (e: Error) => `<${e.message}>`)}`);
    ms = Date.now() - started;
  } finally {
    a.close();
  }
  return { lines, ms };
}

interface Sides {
  direct(): number;
  /** blocked_clients of the direct server. */
  directBlocked(): Promise<number>;
  proxy(): number;
  flush(): Promise<void>;
  /** The upstream node(s) behind respool, for INFO / CLIENT LIST. */
  upstreams(): Promise<Array<{ port: number; call: (...args: Args) => Promise<RespReply> }>>;
  /** The upstream node owning `key`'s slot. */
  ownerOf(key: string): Promise<{ port: number; call: (...args: Args) => Promise<RespReply> }>;
  /** Clients blocked behind respool: parked at respool (parking/parked-pops.ts) or on a leased connection. */
  blocked(): Promise<number>;
}

async function totalBlocked(sides: Sides): Promise<number> {
  let n = 0;
  for (const u of await sides.upstreams()) n += blockedClients(await u.call('INFO', 'clients'));
  return n;
}

async function allLeases(sides: Sides): Promise<string[]> {
  const out: string[] = [];
  for (const u of await sides.upstreams()) out.push(...leaseLines(await u.call('CLIENT', 'LIST')));
  return out;
}

function blockingSuite(sides: Sides, tag: string): void {
  for (const proto of PROTOCOLS) {
    describe(`RESP${proto}`, () => {
      for (const c of cases(tag)) {
        it(`${c.name}: nil at its timeout, same bytes as Valkey (${NIL_ARRAY[proto].trim()})`, async () => {
          await sides.flush();
          const expected = await timeoutTranscript(sides.direct(), proto, c, 0.2);
          await sides.flush();
          const actual = await timeoutTranscript(sides.proxy(), proto, c, 0.2);
          expect(actual.lines).toEqual(expected.lines);
          expect(actual.lines.at(-1)!.endsWith(`-> ${JSON.stringify(NIL_ARRAY[proto])}`), actual.lines.at(-1)).toBe(true);
          expect(actual.ms).toBeGreaterThanOrEqual(150);
        });

        it(`${c.name}: the value pushed by another client, same bytes as Valkey`, async () => {
          await sides.flush();
          const expected = await pushedTranscript(sides.direct(), proto, c, 5, 0, () => sides.directBlocked());
          await sides.flush();
          const actual = await pushedTranscript(sides.proxy(), proto, c, 5, 0, () => sides.blocked());
          expect(actual).toEqual(expected);
        });
      }

      it('timeout 0 = forever: every blocking command, blocked 1.2 s (> commandMs 300), still gets the pushed value, same bytes as Valkey', async () => {
        // all ten at once, each on keys of its own (same hash tag)
        const run = (port: number) => Promise.all(cases(tag).map((_, i) => pushedTranscript(port, proto, cases(tag, `f${i}:`)[i]!, 0, 1200)));
        await sides.flush();
        const expected = await run(sides.direct());
        await sides.flush();
        const actual = await run(sides.proxy());
        expect(actual).toEqual(expected);
        await waitFor(async () => (await sides.blocked()) === 0, 'blocked_clients back to 0');
      });

      it('a 1 s timeout (> commandMs 300) ends in nil after ~1 s, not in a respool timeout error', async () => {
        await sides.flush();
        const k = (s: string) => `{${tag}}:${s}`;
        const a = await connect(sides.proxy(), proto);
        const b = await connect(sides.proxy(), proto);
        try {
          const started = Date.now();
          a.send('BLPOP', k('none'), '1');
          b.send('XREAD', 'BLOCK', '1000', 'STREAMS', k('nostream'), '$');
          expect(await a.read(5000)).toBe(NIL_ARRAY[proto]);
          expect(await b.read(5000)).toBe(NIL_ARRAY[proto]);
          expect(Date.now() - started).toBeGreaterThanOrEqual(900);
        } finally {
          a.close();
          b.close();
        }
      });

      it("a blocked client's later pipelined commands wait behind it, in order; other clients are not delayed", async () => {
        await sides.flush();
        const k = (s: string) => `{${tag}}:${s}`;
        const a = await connect(sides.proxy(), proto);
        const other = await connect(sides.proxy(), proto);
        try {
          a.write(
            Buffer.concat([
              encodeCommand(['SET', k('before'), '1']),
              encodeCommand(['BLPOP', k('q'), '5']),
              encodeCommand(['PING', 'after-1']),
              encodeCommand(['SET', k('after'), '2']),
              encodeCommand(['GET', k('after')]),
            ]),
          );
          expect(await a.read(2000)).toBe('+OK\r\n');
          await sleep(200);
          // others are served at once while A is blocked; A's SET has not run yet
          for (let i = 0; i < 5; i++) {
            const t0 = Date.now();
            expect(await other.call('PING')).toBe('+PONG\r\n');
            expect(await other.call('GET', k('after'))).toBe(proto === 3 ? '_\r\n' : '$-1\r\n');
            expect(await other.call('GET', k('before'))).toBe('$1\r\n1\r\n');
            // not behind A's 5 s block; the bound only leaves a loaded machine room
            expect(Date.now() - t0).toBeLessThan(1000);
          }
          expect(await silentFor(a, 300)).toBe(true);
          expect(await other.call('RPUSH', k('q'), 'v')).toBe(':1\r\n');
          const qName = k('q');
          expect(await a.read(3000)).toBe(`*2\r\n$${qName.length}\r\n${qName}\r\n$1\r\nv\r\n`);
          expect(await a.read(2000)).toBe('$7\r\nafter-1\r\n');
          expect(await a.read(2000)).toBe('+OK\r\n');
          expect(await a.read(2000)).toBe('$1\r\n2\r\n');
        } finally {
          a.close();
          other.close();
        }
      });
    });
  }

  for (const name of ['BLPOP', 'BLMOVE', 'BZPOPMIN', 'XREADGROUP BLOCK']) {
    it(`${name}: a client killed while blocked leaks nothing, and a later push is not lost into the dead lease`, async () => {
      await sides.flush();
      const c = cases(tag).find((x) => x.name === name)!;
      const k = (s: string) => `{${tag}}:${s}`;
      const feeder = await connect(sides.proxy(), 2);
      try {
        for (const s of c.setup) await feeder.call(...s);
        const leasesBefore = (await allLeases(sides)).length;
        const a = await connect(sides.proxy(), 2);
        a.send(...c.block('0', '0'));
        await waitFor(async () => (await sides.blocked()) === 1, 'the command to block upstream');
        a.close();
        await waitFor(async () => (await sides.blocked()) === 0, 'upstream blocked_clients back to 0', 5000);
        await sleep(200);
        for (const p of c.push) await feeder.call(...p);
        await sleep(300);
        // the pushed data is all still there (nobody consumed it)
        if (name === 'BLPOP') expect(await feeder.call('LRANGE', k('l2'), 0, -1)).toBe('*2\r\n$1\r\na\r\n$1\r\nb\r\n');
        if (name === 'BLMOVE') {
          expect(await feeder.call('LRANGE', k('src'), 0, -1)).toBe('*2\r\n$1\r\nx\r\n$1\r\ny\r\n');
          expect(await feeder.call('LLEN', k('dst'))).toBe(':0\r\n');
        }
        if (name === 'BZPOPMIN') expect(await feeder.call('ZCARD', k('z2'))).toBe(':2\r\n');
        if (name === 'XREADGROUP BLOCK') expect(await feeder.call('XPENDING', k('s'), 'g')).toBe('*4\r\n:0\r\n$-1\r\n$-1\r\n*-1\r\n');
        // no lease left blocked or leaked: the next blocking command reuses (or replaces) it
        const b = await connect(sides.proxy(), 2);
        b.send('BLPOP', k('again'), '0');
        await waitFor(async () => (await sides.blocked()) === 1, 'the second command to block');
        const during = await allLeases(sides);
        expect(during.length, during.join('\n')).toBeLessThanOrEqual(Math.max(leasesBefore, 1));
        expect(await feeder.call('RPUSH', k('again'), 'z')).toBe(':1\r\n');
        expect(await b.read(2000)).toContain('z');
        b.close();
      } finally {
        feeder.close();
      }
    });
  }
}

/* ------------------------------------------------------------------------------------------------
 * Standalone
 * --------------------------------------------------------------------------------------------- */

describe('blocking commands through respool in front of a standalone valkey-server', () => {
  let reference: ValkeyNode;
  let upstream: ValkeyNode;
  /** By dedicated.parkPops: pops parked at respool (the default), or each on a leased connection. */
  const proxies = new Map<boolean, RespoolProxy>();

  beforeAll(async () => {
    [reference, upstream] = await Promise.all([startStandalone(), startStandalone()]);
    for (const parkPops of [true, false]) {
      proxies.set(parkPops, await startTestProxy([{ host: upstream.host, port: upstream.port }], {
        connectionsPerNode: 2,
        timeouts: { commandMs: COMMAND_MS },
        dedicated: { parkPops },
      } as Partial<RespoolConfig>));
    }
  });

  afterAll(async () => {
    for (const proxy of proxies.values()) await proxy.close();
    await Promise.all([reference?.stop(), upstream?.stop()]);
  });

  const up = () => ({ port: upstream.port, call: (...args: Args) => upstream.call(...args) });
  for (const parkPops of [true, false]) {
    describe(parkPops ? 'pops parked at respool' : 'pops on leased connections (parkPops: false)', () => {
      const sides: Sides = {
        direct: () => reference.port,
        directBlocked: async () => blockedClients(await reference.call('INFO', 'clients')),
        proxy: () => proxies.get(parkPops)!.address.port,
        flush: async () => {
          await reference.call('FLUSHALL');
          await upstream.call('FLUSHALL');
        },
        upstreams: async () => [up()],
        ownerOf: async () => up(),
        blocked: async () => proxies.get(parkPops)!.parking.parked + (await totalBlocked(sides)),
      };
      blockingSuite(sides, 'b');
    });
  }
});

describe('blocking commands when the standalone upstream dies', () => {
  let upstream: ValkeyNode;
  let proxy: RespoolProxy;

  beforeAll(async () => {
    upstream = await startStandalone();
    proxy = await startTestProxy([{ host: upstream.host, port: upstream.port }], { timeouts: { commandMs: COMMAND_MS }, dedicated: { parkPops: false } } as Partial<RespoolConfig>); // a lease's node dying; parked clients: parked-pops.test.ts
  });

  afterAll(async () => {
    await proxy?.close();
    await upstream?.stop();
  });

  for (const proto of PROTOCOLS) {
    it(`RESP${proto}: the server killed during BLPOP 0 → a clear error at once, no hang; respool serves again after a restart`, async () => {
      if (!upstream.alive) await upstream.restart();
      const c = await connect(proxy.address.port, proto);
      try {
        c.send('BLPOP', 'dead:list', '0');
        await waitFor(async () => blockedClients(await upstream.call('INFO', 'clients')) === 1, 'BLPOP to block');
        const started = Date.now();
        upstream.kill('SIGKILL');
        await upstream.exited();
        const reply = await c.read(5000);
        expect(reply).toMatch(new RegExp(`^-ERR respool: .*127\\.0\\.0\\.1:${upstream.port}`));
        expect(Date.now() - started).toBeLessThan(3000);
        await upstream.restart();
        await waitFor(async () => (await c.call('LPUSH', 'dead:list', 'x')) === ':1\r\n', 'respool to serve again', 10_000);
        expect(await c.call('BLPOP', 'dead:list', '1')).toBe('*2\r\n$9\r\ndead:list\r\n$1\r\nx\r\n');
      } finally {
        c.close();
      }
    });
  }
});

/* ------------------------------------------------------------------------------------------------
 * Cluster
 * --------------------------------------------------------------------------------------------- */

describe('blocking commands through respool in front of a 3-primary, 3-replica cluster', () => {
  let cluster: ValkeyCluster;
  let reference: ValkeyCluster;
  let proxy: RespoolProxy;
  const proxies = new Map<boolean, RespoolProxy>();

  beforeAll(async () => {
    [cluster, reference] = await Promise.all([
      startCluster({ primaries: 3, replicasPerPrimary: 1 }),
      startCluster({ primaries: 1, replicasPerPrimary: 0 }),
    ]);
    const seed = cluster.nodes[0]!;
    for (const parkPops of [true, false]) {
      proxies.set(parkPops, await startTestProxy([{ host: seed.host, port: seed.port }], {
        connectionsPerNode: 2,
        timeouts: { commandMs: COMMAND_MS },
        dedicated: { parkPops },
      } as Partial<RespoolConfig>));
    }
    proxy = proxies.get(false)!; // the tests below this file's common suite are about leased connections
  });

  afterAll(async () => {
    for (const p of proxies.values()) await p.close();
    await Promise.all([cluster?.stop(), reference?.stop()]);
  });

  const nodeHandle = (n: ValkeyNode) => ({ port: n.port, call: (...args: Args) => cluster.call(n, ...args) });
  const sidesOf = (parkPops: boolean): Sides => {
    const sides: Sides = {
      direct: () => reference.nodes[0]!.port,
      directBlocked: async () => blockedClients(await reference.call(reference.nodes[0]!, 'INFO', 'clients')),
      proxy: () => proxies.get(parkPops)!.address.port,
      flush: async () => {
        await reference.flushAll();
        await cluster.flushAll();
      },
      upstreams: async () => cluster.nodes.filter((n) => n.alive).map(nodeHandle),
      ownerOf: async (key) => nodeHandle(await cluster.primaryForSlot(calculateSlot(key))),
      blocked: async () => proxies.get(parkPops)!.parking.parked + (await totalBlocked(sides)),
    };
    return sides;
  };
  const sides = sidesOf(false);

  for (const parkPops of [true, false]) {
    describe(parkPops ? 'pops parked at respool' : 'pops on leased connections (parkPops: false)', () => blockingSuite(sidesOf(parkPops), 'c'));
  }

  // Keys of several slots: carried out as one server would (cross-slot-blocking.test.ts).

  it("each blocking command goes to the key's slot owner (blocked there, on a respool-lease connection)", async () => {
    await sides.flush();
    const primaries = await cluster.primaries();
    for (const owner of primaries) {
      let key = '';
      for (let i = 0; key === ''; i++) {
        if ((await cluster.primaryForSlot(calculateSlot(`own${i}`))).port === owner.port) key = `own${i}`;
      }
      for (const cmd of [
        ['BLPOP', key, '0'],
        ['BZPOPMIN', key, '0'],
        ['XREAD', 'BLOCK', '0', 'STREAMS', key, '$'],
      ]) {
        const c = await RawConnection.connect(proxy.address.port);
        try {
          c.send(...cmd);
          await waitFor(async () => blockedClients(await cluster.call(owner, 'INFO', 'clients')) === 1, `${cmd[0]} blocked on ${owner.address}`);
          for (const n of cluster.nodes.filter((x) => x.alive && x.port !== owner.port)) {
            expect(blockedClients(await cluster.call(n, 'INFO', 'clients')), `blocked on ${n.address}`).toBe(0);
          }
          const lease = leaseLines(await cluster.call(owner, 'CLIENT', 'LIST')).filter((l) => l.includes(` cmd=${cmd[0]!.toLowerCase()} `) && / flags=\S*b/.test(l));
          expect(lease, `a blocked respool-lease running ${cmd[0]} on ${owner.address}`).toHaveLength(1);
          const push = cmd[0] === 'BLPOP' ? ['RPUSH', key, 'v'] : cmd[0] === 'BZPOPMIN' ? ['ZADD', key, '1', 'v'] : ['XADD', key, '1-1', 'f', 'v'];
          const feeder = await RawConnection.connect(proxy.address.port);
          expect(await feeder.call(...push)).not.toMatch(/^-/);
          feeder.close();
          expect(await c.read(2000)).toContain('v');
          await cluster.call(owner, 'DEL', key);
        } finally {
          c.close();
        }
      }
    }
  });

  // Last: kills a primary (its replica takes over).
  it('a primary killed during a blocking pop → a clear error, no hang', async () => {
    const shard = (await cluster.shards()).find((s) => s.replicas.length > 0)!;
    const owner = shard.primary;
    let key = '';
    for (let i = 0; key === ''; i++) {
      if ((await cluster.primaryForSlot(calculateSlot(`kill${i}`))).port === owner.port) key = `kill${i}`;
    }
    const c = await RawConnection.connect(proxy.address.port);
    try {
      c.send('BLPOP', key, '0');
      await waitFor(async () => blockedClients(await cluster.call(owner, 'INFO', 'clients')) === 1, 'BLPOP to block');
      const started = Date.now();
      await cluster.killNode(owner);
      const reply = await c.read(5000);
      expect(reply).toMatch(new RegExp(`^-ERR respool: .*127\\.0\\.0\\.1:${owner.port}`));
      expect(Date.now() - started).toBeLessThan(3000);
      // after the failover, the same client can block and be served again on the new owner
      await cluster.waitForStable({ timeoutMs: 30_000 });
      await waitFor(async () => (await c.call('RPUSH', key, 'after')) === ':1\r\n', 'respool to route to the new primary', 15_000);
      expect(await c.call('BLPOP', key, '1')).toBe(`*2\r\n$${key.length}\r\n${key}\r\n$5\r\nafter\r\n`);
    } finally {
      c.close();
    }
  });
});
