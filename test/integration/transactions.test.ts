/**
 * MULTI / EXEC / DISCARD / WATCH / UNWATCH through respool (issue 8, "Done when": transactions),
 * in front of a standalone valkey-server and a 3-primary + 3-replica cluster, in RESP2 and RESP3.
 *
 * The oracle is a real Valkey 8.0.1: every scripted sequence is run once directly against a
 * reference server (a standalone valkey-server for standalone; a one-node cluster owning all
 * 16384 slots for cluster mode) and once through respool, and the reply frames are compared
 * byte for byte (frames cut by the harness's own decoder, never by src/resp).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import calculateSlot from 'cluster-key-slot';
import type { Valkey } from 'iovalkey';
import { startCluster, startStandalone, type ValkeyCluster, type ValkeyNode } from '../harness/valkey-processes.js';
import { encodeCommand, type RespReply } from '../harness/raw-client.js';
import type { RespoolProxy } from '../../src/server.js';
import { clientFor, startTestProxy } from '../helpers/proxy.js';
import { RawConnection } from '../helpers/raw-resp.js';
import { connect, transcript, type Step } from '../helpers/transcript.js';
import { sleep, waitFor } from '../helpers/wait.js';

const PROTOCOLS = [2, 3] as const;
type Proto = (typeof PROTOCOLS)[number];
const NIL_ARRAY: Record<Proto, string> = { 2: '*-1\r\n', 3: '_\r\n' };

/** The upstream connections named `name` in CLIENT LIST, as lines. */
function namedLines(list: RespReply, name: string): string[] {
  return String(list)
    .split('\n')
    .filter((line) => line.includes(` name=${name} `));
}

const k = (s: string) => `{t}:${s}`;

/** An EVAL that keeps the server busy for `ms` (so an EXEC is in flight when the server dies). */
const BUSY_SCRIPT =
  "local t=redis.call('TIME') local s=t[1]*1000000+t[2] " +
  "while true do local n=redis.call('TIME') if n[1]*1000000+n[2]-s > tonumber(ARGV[1])*1000 then break end end return 1";

/** Sequences that must answer exactly as Valkey does, in both modes (keys share one hash tag). */
const COMMON_SEQUENCES: Record<string, Step[]> = {
  'MULTI/+QUEUED/EXEC with replies of every type inside the array': [
    [0, 'MULTI'],
    [0, 'SET', k('s'), 'v'],
    [0, 'GET', k('s')],
    [0, 'GET', k('missing')],
    [0, 'INCR', k('n')],
    [0, 'INCRBYFLOAT', k('f'), '1.5'],
    [0, 'HSET', k('h'), 'a', '1', 'b', '2'],
    [0, 'HGETALL', k('h')],
    [0, 'HGETALL', k('nohash')],
    [0, 'SADD', k('set'), 'x'],
    [0, 'SMEMBERS', k('set')],
    [0, 'ZADD', k('z'), '1.5', 'm'],
    [0, 'ZSCORE', k('z'), 'm'],
    [0, 'ZRANGE', k('z'), '0', '-1', 'WITHSCORES'],
    [0, 'EXISTS', k('s'), k('missing')],
    [0, 'LPOP', k('nolist')],
    [0, 'LPOP', k('nolist'), '2'],
    [0, 'RPUSH', k('l'), 'a', 'b'],
    [0, 'LRANGE', k('l'), '0', '-1'],
    [0, 'EXEC'],
    [0, 'GET', k('s')],
  ],
  'EXEC and DISCARD without MULTI; an empty MULTI/EXEC': [
    [0, 'EXEC'],
    [0, 'DISCARD'],
    [0, 'MULTI'],
    [0, 'EXEC'],
    [0, 'DISCARD'],
    [0, 'EXEC'],
  ],
  'MULTI inside MULTI: error, then EXECABORT': [
    [0, 'MULTI'],
    [0, 'MULTI'],
    [0, 'SET', k('a'), '1'],
    [0, 'EXEC'],
    [0, 'GET', k('a')],
    [0, 'EXEC'],
  ],
  'WATCH inside MULTI: error, then EXECABORT': [
    [0, 'MULTI'],
    [0, 'SET', k('a'), '1'],
    [0, 'WATCH', k('a')],
    [0, 'EXEC'],
    [0, 'GET', k('a')],
  ],
  'unknown command at queue time: EXECABORT, nothing runs': [
    [0, 'MULTI'],
    [0, 'SET', k('a'), '1'],
    [0, 'NOSUCHCOMMAND', 'x', 'y'],
    [0, 'SET', k('b'), '2'],
    [0, 'EXEC'],
    [0, 'GET', k('a')],
    [0, 'GET', k('b')],
  ],
  'wrong arity at queue time: EXECABORT, nothing runs': [
    [0, 'MULTI'],
    [0, 'SET', k('a'), '1'],
    [0, 'GET'],
    [0, 'EXEC'],
    [0, 'GET', k('a')],
  ],
  'unknown subcommand at queue time: EXECABORT': [
    [0, 'MULTI'],
    [0, 'SET', k('a'), '1'],
    [0, 'OBJECT', 'NOSUCHSUB', k('a')],
    [0, 'EXEC'],
    [0, 'GET', k('a')],
  ],
  'EXEC with an argument inside MULTI: arity error, then EXECABORT': [
    [0, 'MULTI'],
    [0, 'SET', k('a'), '1'],
    [0, 'EXEC', 'extra'],
    [0, 'EXEC'],
    [0, 'GET', k('a')],
  ],
  'a runtime error inside EXEC stays in the array; the rest runs': [
    [0, 'MULTI'],
    [0, 'SET', k('s'), 'text'],
    [0, 'INCR', k('s')],
    [0, 'LPUSH', k('s'), 'x'],
    [0, 'APPEND', k('s'), '!'],
    [0, 'GET', k('s')],
    [0, 'EXEC'],
  ],
  'PING and ECHO inside MULTI': [
    [0, 'MULTI'],
    [0, 'PING'],
    [0, 'SET', k('a'), '1'],
    [0, 'PING', 'hello'],
    [0, 'ECHO', 'hi'],
    [0, 'GET', k('a')],
    [0, 'EXEC'],
    [0, 'MULTI'],
    [0, 'PING'],
    [0, 'ECHO', 'only-local'],
    [0, 'EXEC'],
  ],
  'DISCARD drops the queued commands': [
    [0, 'MULTI'],
    [0, 'SET', k('a'), '1'],
    [0, 'DISCARD'],
    [0, 'GET', k('a')],
    [0, 'EXEC'],
  ],
  'RESET inside MULTI ends the transaction': [
    [0, 'MULTI'],
    [0, 'SET', k('a'), '1'],
    [0, 'RESET'],
    [0, 'EXEC'],
    [0, 'GET', k('a')],
  ],
  'blocking commands inside MULTI do not block': [
    [0, 'MULTI'],
    [0, 'BLPOP', k('l'), '1'],
    [0, 'RPUSH', k('l'), 'a'],
    [0, 'BLPOP', k('l'), '0'],
    [0, 'BZPOPMIN', k('z'), '1'],
    [0, 'XREAD', 'BLOCK', '100', 'STREAMS', k('st'), '$'],
    [0, 'EXEC'],
  ],
  'WATCH without a change: EXEC runs': [
    [0, 'SET', k('w'), '1'],
    [0, 'WATCH', k('w')],
    [0, 'GET', k('w')],
    [0, 'MULTI'],
    [0, 'INCR', k('w')],
    [0, 'EXEC'],
    [0, 'GET', k('w')],
  ],
  'WATCH + a write by another client: EXEC answers nil and nothing runs': [
    [0, 'SET', k('w'), '1'],
    [0, 'WATCH', k('w')],
    [1, 'SET', k('w'), '2'],
    [0, 'MULTI'],
    [0, 'INCR', k('w')],
    [0, 'SET', k('other'), 'x'],
    [0, 'EXEC'],
    [0, 'GET', k('w')],
    [0, 'GET', k('other')],
    // the failed EXEC unwatched: the next transaction runs
    [0, 'MULTI'],
    [0, 'INCR', k('w')],
    [0, 'EXEC'],
  ],
  'WATCH of two keys, the second one changed: nil': [
    [0, 'WATCH', k('a'), k('b')],
    [1, 'SET', k('b'), 'changed'],
    [0, 'MULTI'],
    [0, 'SET', k('a'), '1'],
    [0, 'EXEC'],
    [0, 'GET', k('a')],
  ],
  'WATCH + a write to an unwatched key: EXEC runs': [
    [0, 'WATCH', k('a')],
    [1, 'SET', k('c'), 'x'],
    [0, 'MULTI'],
    [0, 'INCR', k('a')],
    [0, 'EXEC'],
  ],
  'WATCH + a change made by the same client: nil': [
    [0, 'WATCH', k('a')],
    [0, 'SET', k('a'), 'mine'],
    [0, 'MULTI'],
    [0, 'SET', k('a'), 'tx'],
    [0, 'EXEC'],
    [0, 'GET', k('a')],
  ],
  'UNWATCH: a later write no longer aborts': [
    [0, 'SET', k('w'), '1'],
    [0, 'WATCH', k('w')],
    [0, 'UNWATCH'],
    [1, 'SET', k('w'), '5'],
    [0, 'MULTI'],
    [0, 'INCR', k('w')],
    [0, 'EXEC'],
    [0, 'UNWATCH'],
  ],
  'DISCARD after WATCH unwatches': [
    [0, 'SET', k('w'), '1'],
    [0, 'WATCH', k('w')],
    [0, 'MULTI'],
    [0, 'SET', k('w'), 'never'],
    [0, 'DISCARD'],
    [1, 'SET', k('w'), '9'],
    [0, 'MULTI'],
    [0, 'INCR', k('w')],
    [0, 'EXEC'],
  ],
  'EXEC without MULTI after WATCH keeps the watch': [
    [0, 'WATCH', k('w')],
    [0, 'EXEC'],
    [1, 'SET', k('w'), '3'],
    [0, 'MULTI'],
    [0, 'SET', k('w'), 'tx'],
    [0, 'EXEC'],
    [0, 'GET', k('w')],
  ],
  'RESET after WATCH unwatches': [
    [0, 'WATCH', k('w')],
    [0, 'RESET'],
    [1, 'SET', k('w'), '3'],
    [0, 'MULTI'],
    [0, 'INCR', k('w')],
    [0, 'EXEC'],
  ],
  'WATCH, then a transaction with a queue-time error: EXECABORT, watch gone': [
    [0, 'WATCH', k('w')],
    [0, 'MULTI'],
    [0, 'NOSUCHCOMMAND'],
    [0, 'EXEC'],
    [1, 'SET', k('w'), '4'],
    [0, 'MULTI'],
    [0, 'INCR', k('w')],
    [0, 'EXEC'],
  ],
};

/** Cluster-only sequences: keys of different slots (`a` is slot 15495, `b` slot 3300). */
const CLUSTER_SEQUENCES: Record<string, Step[]> = {
  'keyless commands mixed with one slot': [
    [0, 'MULTI'],
    [0, 'PING'],
    [0, 'SET', '{u}:1', 'a'],
    [0, 'ECHO', 'e'],
    [0, 'MGET', '{u}:1', '{u}:2'],
    [0, 'EXEC'],
  ],
};

/**
 * With transactions.crossSlot: refuse, respool answers as one cluster node does (a transaction
 * over several slots split into per-slot blocks, the default, is tested in cross-slot-transactions.test.ts).
 */
const REFUSE_SEQUENCES: Record<string, Step[]> = {
  'one command with keys of two slots: CROSSSLOT at queue time, then EXECABORT': [
    [0, 'MULTI'],
    [0, 'SET', k('x'), '1'],
    [0, 'MSET', 'a', '1', 'b', '2'],
    [0, 'EXEC'],
    [0, 'GET', k('x')],
    [0, 'GET', 'a'],
  ],
  'two commands in different slots: what a node owning every slot answers at EXEC': [
    [0, 'MULTI'],
    [0, 'SET', 'a', '1'],
    [0, 'SET', 'b', '2'],
    [0, 'EXEC'],
    [0, 'GET', 'a'],
    [0, 'GET', 'b'],
    [0, 'EXEC'],
  ],
  'WATCH of keys in two slots: CROSSSLOT': [
    [0, 'WATCH', 'a', 'b'],
    [0, 'MULTI'],
    [0, 'SET', k('x'), '1'],
    [0, 'EXEC'],
  ],
};

/** Both sides of a byte-for-byte comparison: how to reach them and how to wipe them. */
interface Sides {
  direct(): number;
  proxy(): number;
  flush(): Promise<void>;
}

function compareSequences(sides: Sides, sequences: Record<string, Step[]>): void {
  for (const proto of PROTOCOLS) {
    describe(`RESP${proto}: same bytes as a direct valkey-server`, () => {
      for (const [name, steps] of Object.entries(sequences)) {
        it(name, async () => {
          await sides.flush();
          const expected = await transcript(sides.direct(), proto, steps);
          await sides.flush();
          const actual = await transcript(sides.proxy(), proto, steps);
          expect(actual).toEqual(expected);
        });
      }
    });
  }
}

/** The sanity of the oracle itself, and the few bytes the brief names explicitly. */
function explicitChecks(sides: Sides): void {
  for (const proto of PROTOCOLS) {
    it(`RESP${proto}: EXEC after a concurrent write to a watched key is ${JSON.stringify(NIL_ARRAY[proto])} (direct and through respool)`, async () => {
      for (const port of [sides.direct(), sides.proxy()]) {
        await sides.flush();
        const a = await connect(port, proto);
        const b = await connect(port, proto);
        try {
          expect(await a.call('SET', k('w'), '1')).toBe('+OK\r\n');
          expect(await a.call('WATCH', k('w'))).toBe('+OK\r\n');
          expect(await b.call('SET', k('w'), '2')).toBe('+OK\r\n');
          expect(await a.call('MULTI')).toBe('+OK\r\n');
          expect(await a.call('INCR', k('w'))).toBe('+QUEUED\r\n');
          expect(await a.call('EXEC'), `EXEC on port ${port}`).toBe(NIL_ARRAY[proto]);
          expect(await a.call('GET', k('w'))).toBe('$1\r\n2\r\n');
        } finally {
          a.close();
          b.close();
        }
      }
    });

    it(`RESP${proto}: HGETALL inside EXEC is a ${proto === 3 ? 'map' : 'flat array'}; MULTI inside MULTI as Valkey 8.0.1 answers`, async () => {
      await sides.flush();
      const c = await connect(sides.proxy(), proto);
      try {
        expect(await c.call('MULTI')).toBe('+OK\r\n');
        expect(await c.call('HSET', k('h'), 'f', 'v')).toBe('+QUEUED\r\n');
        expect(await c.call('HGETALL', k('h'))).toBe('+QUEUED\r\n');
        expect(await c.call('MULTI')).toBe('-ERR Command not allowed inside a transaction\r\n');
        expect(await c.call('DISCARD')).toBe('+OK\r\n');
        expect(await c.call('MULTI')).toBe('+OK\r\n');
        expect(await c.call('HGETALL', k('h'))).toBe('+QUEUED\r\n');
        expect(await c.call('EXEC')).toBe(proto === 3 ? '*1\r\n%0\r\n' : '*1\r\n*0\r\n');
        expect(await c.call('HSET', k('h'), 'f', 'v')).toBe(':1\r\n');
        expect(await c.call('MULTI')).toBe('+OK\r\n');
        expect(await c.call('HGETALL', k('h'))).toBe('+QUEUED\r\n');
        expect(await c.call('EXEC')).toBe(proto === 3 ? '*1\r\n%1\r\n$1\r\nf\r\n$1\r\nv\r\n' : '*1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n');
      } finally {
        c.close();
      }
    });
  }

  for (const proto of PROTOCOLS) {
    it(`RESP${proto}: a pipelined WATCH … EXEC (one write, with BLPOP and plain commands on the watched lane) answers like Valkey`, async () => {
      const commands: Array<Array<string | number>> = [
        ['SET', k('w'), '1'],
        ['WATCH', k('w')],
        ['GET', k('w')],
        ['RPUSH', k('l'), 'a'],
        ['BLPOP', k('l'), '1'],
        ['MULTI'],
        ['INCR', k('w')],
        ['HGETALL', k('nohash')],
        ['EXEC'],
        ['GET', k('w')],
        ['WATCH', k('w')],
        ['UNWATCH'],
        ['PING'],
        ['WATCH', k('w'), k('x')],
        ['MULTI'],
        ['INCR', k('w')],
        ['DISCARD'],
        ['SET', k('x'), 'y'],
        ['MULTI'],
        ['INCR', k('w')],
        ['EXEC'],
        ['GET', k('w')],
      ];
      const bytes = Buffer.concat(commands.map((c) => encodeCommand(c)));
      const run = async (port: number): Promise<string[]> => {
        const c = await connect(port, proto);
        try {
          c.write(bytes);
          const out: string[] = [];
          for (const cmd of commands) out.push(`${cmd.join(' ')} -> ${await c.read(5000).then(JSON.stringify, (e: Error) => `<${e.message}>`)}`);
          return out;
        } finally {
          c.close();
        }
      };
      await sides.flush();
      const expected = await run(sides.direct());
      await sides.flush();
      const actual = await run(sides.proxy());
      expect(actual).toEqual(expected);
    });
  }

  it('a pipeline mixing SET, MULTI…EXEC, GET, BLPOP (data present) and plain commands keeps its order, byte for byte', async () => {
    const commands: Array<Array<string | number>> = [
      ['SET', k('p'), '1'],
      ['MULTI'],
      ['INCR', k('p')],
      ['GET', k('p')],
      ['EXEC'],
      ['GET', k('p')],
      ['RPUSH', k('l'), 'a', 'b', 'c'],
      ['BLPOP', k('l'), '1'],
      ['PING'],
      ['ECHO', 'between'],
      ['MULTI'],
      ['LPOP', k('l')],
      ['INCRBY', k('p'), '10'],
      ['EXEC'],
      ['BRPOP', k('l'), '1'],
      ['GET', k('p')],
      ['LLEN', k('l')],
      ['MULTI'],
      ['SET', k('p'), 'x'],
      ['DISCARD'],
      ['GET', k('p')],
    ];
    const bytes = Buffer.concat(commands.map((c) => encodeCommand(c)));
    const run = async (port: number): Promise<string[]> => {
      const c = await RawConnection.connect(port);
      try {
        c.write(bytes);
        const out: string[] = [];
        for (let i = 0; i < commands.length; i++) out.push(await c.read(5000));
        return out;
      } finally {
        c.close();
      }
    };
    await sides.flush();
    const expected = await run(sides.direct());
    await sides.flush();
    const actual = await run(sides.proxy());
    expect(actual).toEqual(expected);
    // and the order itself, spelled out
    expect(actual).toEqual([
      '+OK\r\n',
      '+OK\r\n',
      '+QUEUED\r\n',
      '+QUEUED\r\n',
      '*2\r\n:2\r\n$1\r\n2\r\n',
      '$1\r\n2\r\n',
      ':3\r\n',
      `*2\r\n$${k('l').length}\r\n${k('l')}\r\n$1\r\na\r\n`,
      '+PONG\r\n',
      '$7\r\nbetween\r\n',
      '+OK\r\n',
      '+QUEUED\r\n',
      '+QUEUED\r\n',
      '*2\r\n$1\r\nb\r\n:12\r\n',
      `*2\r\n$${k('l').length}\r\n${k('l')}\r\n$1\r\nc\r\n`,
      '$2\r\n12\r\n',
      ':0\r\n',
      '+OK\r\n',
      '+QUEUED\r\n',
      '+OK\r\n',
      '$2\r\n12\r\n',
    ]);
  });
}

/* ------------------------------------------------------------------------------------------------
 * Standalone
 * --------------------------------------------------------------------------------------------- */

describe('transactions through respool in front of a standalone valkey-server', () => {
  let reference: ValkeyNode;
  let upstream: ValkeyNode;
  let proxy: RespoolProxy;

  beforeAll(async () => {
    [reference, upstream] = await Promise.all([startStandalone(), startStandalone()]);
    proxy = await startTestProxy([{ host: upstream.host, port: upstream.port }], { connectionsPerNode: 2 });
  });

  afterAll(async () => {
    await proxy?.close();
    await Promise.all([reference?.stop(), upstream?.stop()]);
  });

  const sides: Sides = {
    direct: () => reference.port,
    proxy: () => proxy.address.port,
    flush: async () => {
      await reference.call('FLUSHALL');
      await upstream.call('FLUSHALL');
    },
  };

  compareSequences(sides, COMMON_SEQUENCES);
  explicitChecks(sides);

  for (const inMulti of [false, true]) {
    it(`a client closing mid-WATCH${inMulti ? ' (inside MULTI, commands queued)' : ''} leaves no watching leased connection behind (closed or reused)`, async () => {
      await sides.flush();
      const leasesBefore = namedLines(await upstream.call('CLIENT', 'LIST'), 'respool-lease').length;
      const a = await RawConnection.connect(proxy.address.port);
      expect(await a.call('WATCH', k('w'))).toBe('+OK\r\n');
      // the lease exists and watches the key
      const watching = namedLines(await upstream.call('CLIENT', 'LIST'), 'respool-lease').filter((l) => / watch=1 /.test(l));
      expect(watching, 'a respool-lease connection watching 1 key while the client is in WATCH').toHaveLength(1);
      if (inMulti) {
        expect(await a.call('MULTI')).toBe('+OK\r\n');
        expect(await a.call('SET', k('w'), 'never')).toBe('+QUEUED\r\n');
      }
      a.close();
      await waitFor(
        async () => namedLines(await upstream.call('CLIENT', 'LIST'), 'respool-lease').every((l) => / watch=0 /.test(l) && / multi=-1 /.test(l)),
        'the lease to be unwatched or closed after the client left',
      );
      // a's queued SET never ran; a write now would abort a stale watch left on a reused lease
      expect(await upstream.call('GET', k('w'))).toBeNull();
      expect(await upstream.call('SET', k('w'), 'other')).toBe('OK');
      // A second client's WATCH reuses (or replaces) it: never one more lease per closed client.
      const b = await RawConnection.connect(proxy.address.port);
      expect(await b.call('WATCH', k('w'))).toBe('+OK\r\n');
      const leasesDuring = namedLines(await upstream.call('CLIENT', 'LIST'), 'respool-lease').length;
      expect(leasesDuring).toBeLessThanOrEqual(Math.max(leasesBefore, 1));
      // and the reused lease carries no stale watch: the write before b's WATCH does not abort b
      expect(await b.call('MULTI')).toBe('+OK\r\n');
      expect(await b.call('SET', k('w'), 'b')).toBe('+QUEUED\r\n');
      expect(await b.call('EXEC')).toBe('*1\r\n+OK\r\n');
      b.close();
      expect(await upstream.call('GET', k('w'))).toBe('b');
    });
  }

  it('1,000 clients each running MULTI/INCR/EXEC at once: exact counter, at most connectionsPerNode links, no lease', async () => {
    await sides.flush();
    // Leases left idle by the WATCH tests may exist: none may be added, none may run these EXECs.
    const leaseCmds = (list: RespReply) =>
      namedLines(list, 'respool-lease').reduce((sum, l) => sum + Number(/ tot-cmds=(\d+)/.exec(l)?.[1] ?? 0), 0);
    const before = await upstream.call('CLIENT', 'LIST');
    const clients: Valkey[] = Array.from({ length: 1000 }, () => clientFor(proxy));
    try {
      await Promise.all(clients.map((c) => c.ping()));
      const results = await Promise.all(
        clients.map((c, i) => c.multi().incr(k('ctr')).set(k(`client:${i}`), String(i)).exec()),
      );
      for (const r of results) {
        expect(r).not.toBeNull();
        expect(r!.map(([err]) => err)).toEqual([null, null]);
      }
      const increments = results.map((r) => r![0]![1] as number).sort((x, y) => x - y);
      expect(increments).toEqual(Array.from({ length: 1000 }, (_, i) => i + 1));
      expect(await upstream.call('GET', k('ctr'))).toBe('1000');
      const list = await upstream.call('CLIENT', 'LIST');
      const links = namedLines(list, 'respool').filter((l) => / resp=2 /.test(l));
      expect(links.length, links.join('\n')).toBeLessThanOrEqual(2);
      expect(namedLines(list, 'respool-lease').length, 'transactions without WATCH open no lease').toBeLessThanOrEqual(
        namedLines(before, 'respool-lease').length,
      );
      expect(leaseCmds(list) - leaseCmds(before), 'commands run on leases meanwhile').toBeLessThan(100);
    } finally {
      clients.forEach((c) => c.disconnect());
    }
  });

  it('EXEC and WATCH with a wrong arity answer like Valkey (outside MULTI)', async () => {
    const steps: Step[] = [
      [0, 'EXEC', 'x'],
      [0, 'DISCARD', 'x'],
      [0, 'MULTI', 'x'],
      [0, 'WATCH'],
      [0, 'UNWATCH', 'x'],
      [0, 'PING'],
    ];
    for (const proto of PROTOCOLS) {
      expect(await transcript(proxy.address.port, proto, steps)).toEqual(await transcript(reference.port, proto, steps));
    }
  });
});

/* ------------------------------------------------------------------------------------------------
 * Standalone: the upstream dies during a transaction (own server, killed)
 * --------------------------------------------------------------------------------------------- */

describe('transactions when the standalone upstream dies', () => {
  let upstream: ValkeyNode;
  let proxy: RespoolProxy;

  beforeAll(async () => {
    // appendfsync always: what the server finished survives the SIGKILL, so a re-sent EXEC would show.
    upstream = await startStandalone({ args: ['--appendonly', 'yes', '--appendfsync', 'always'] });
    proxy = await startTestProxy([{ host: upstream.host, port: upstream.port }], { connectionsPerNode: 1 });
  });

  afterAll(async () => {
    await proxy?.close();
    await upstream?.stop();
  });

  async function counterAfterRestart(key: string): Promise<number> {
    if (!upstream.alive) await upstream.restart();
    // give respool time to reconnect (and to re-send, if it wrongly would)
    await sleep(2000);
    return Number((await upstream.call('GET', key)) ?? 0);
  }

  for (const proto of PROTOCOLS) {
    it(`RESP${proto}: EXEC in flight when the server is killed → a clear error, no hang, not re-sent`, async () => {
      const key = `ctr:inflight:${proto}`;
      expect(await upstream.call('SET', key, '0')).toBe('OK');
      const c = await connect(proxy.address.port, proto);
      try {
        expect(await c.call('MULTI')).toBe('+OK\r\n');
        expect(await c.call('INCR', key)).toBe('+QUEUED\r\n');
        expect(await c.call('EVAL', BUSY_SCRIPT, '1', key, '3000')).toBe('+QUEUED\r\n');
        c.send('EXEC');
        await sleep(500); // the server is inside the script now
        const started = Date.now();
        upstream.kill('SIGKILL');
        await upstream.exited();
        const reply = await c.read(8000);
        expect(reply).toMatch(/^-ERR respool: .*may or may not have run/);
        expect(Date.now() - started).toBeLessThan(8000);
      } finally {
        c.close();
      }
      expect(await counterAfterRestart(key)).toBeLessThanOrEqual(1);
    });

    it(`RESP${proto}: EXEC sent while the server is dead (commands queued before) → a clear error, no hang`, async () => {
      const key = `ctr:queued:${proto}`;
      if (!upstream.alive) await upstream.restart();
      expect(await upstream.call('SET', key, '0')).toBe('OK');
      const c = await connect(proxy.address.port, proto);
      try {
        expect(await c.call('MULTI')).toBe('+OK\r\n');
        expect(await c.call('INCR', key)).toBe('+QUEUED\r\n');
        upstream.kill('SIGKILL');
        await upstream.exited();
        c.send('EXEC');
        const started = Date.now();
        const reply = await c.read(10_000);
        expect(reply).toMatch(/^-(ERR respool: |CLUSTERDOWN )/);
        expect(Date.now() - started).toBeLessThan(10_000);
        // the connection is still usable
        expect(await c.call('PING')).toBe('+PONG\r\n');
      } finally {
        c.close();
      }
      expect(await counterAfterRestart(key)).toBeLessThanOrEqual(1);
    });
  }
});

/* ------------------------------------------------------------------------------------------------
 * Cluster
 * --------------------------------------------------------------------------------------------- */

describe('transactions through respool in front of a 3-primary, 3-replica cluster', () => {
  let cluster: ValkeyCluster;
  /** A one-node cluster owning all 16384 slots: what one Valkey cluster node answers. */
  let reference: ValkeyCluster;
  let proxy: RespoolProxy;

  beforeAll(async () => {
    [cluster, reference] = await Promise.all([
      startCluster({ primaries: 3, replicasPerPrimary: 1 }),
      startCluster({ primaries: 1, replicasPerPrimary: 0 }),
    ]);
    const seed = cluster.nodes[0]!;
    proxy = await startTestProxy([{ host: seed.host, port: seed.port }], { connectionsPerNode: 2 });
  });

  afterAll(async () => {
    await proxy?.close();
    await Promise.all([cluster?.stop(), reference?.stop()]);
  });

  const sides: Sides = {
    direct: () => reference.nodes[0]!.port,
    proxy: () => proxy.address.port,
    flush: async () => {
      await reference.flushAll();
      await cluster.flushAll();
    },
  };

  it('the keys used really span slots and nodes', async () => {
    expect(calculateSlot('a')).not.toBe(calculateSlot('b'));
    const owners = new Set([
      (await cluster.primaryForSlot(calculateSlot('a'))).port,
      (await cluster.primaryForSlot(calculateSlot('b'))).port,
    ]);
    expect(owners.size).toBe(2);
  });

  compareSequences(sides, { ...COMMON_SEQUENCES, ...CLUSTER_SEQUENCES });
  explicitChecks(sides);

  describe('transactions.crossSlot: refuse (Valkey\'s cluster behaviour)', () => {
    /** A second respool in front of the same cluster, closed before the tests that count links. */
    let refusing: RespoolProxy;
    beforeAll(async () => {
      const seed = cluster.nodes[0]!;
      refusing = await startTestProxy([{ host: seed.host, port: seed.port }], { transactions: { crossSlot: 'refuse' } });
    });
    afterAll(async () => {
      await refusing?.close();
    });
    compareSequences({ ...sides, proxy: () => refusing.address.port }, REFUSE_SEQUENCES);
    for (const proto of PROTOCOLS) {
      it(`RESP${proto}: transactions.crossSlot refuse: two commands in different slots → EXEC answers -CROSSSLOT (as a node owning both slots does), nothing runs`, async () => {
        await sides.flush();
        const c = await connect(refusing.address.port, proto);
        try {
          expect(await c.call('MULTI')).toBe('+OK\r\n');
          expect(await c.call('SET', 'a', '1')).toBe('+QUEUED\r\n');
          expect(await c.call('SET', 'b', '2')).toBe('+QUEUED\r\n');
          expect(await c.call('EXEC')).toBe("-CROSSSLOT Keys in request don't hash to the same slot\r\n");
          expect(await c.call('GET', 'a')).toBe(proto === 3 ? '_\r\n' : '$-1\r\n');
          expect(await c.call('GET', 'b')).toBe(proto === 3 ? '_\r\n' : '$-1\r\n');
        } finally {
          c.close();
        }
      });
    }
  });

  it('a transaction runs on the primary owning its slot', async () => {
    await sides.flush();
    for (const tag of ['{a}', '{b}', '{c}']) {
      const c = await RawConnection.connect(proxy.address.port);
      try {
        expect(await c.call('MULTI')).toBe('+OK\r\n');
        expect(await c.call('SET', `${tag}:k`, tag)).toBe('+QUEUED\r\n');
        expect(await c.call('EXEC')).toBe('*1\r\n+OK\r\n');
      } finally {
        c.close();
      }
      const owner = await cluster.primaryForSlot(calculateSlot(`${tag}:k`));
      expect(await cluster.call(owner, 'GET', `${tag}:k`)).toBe(tag);
    }
  });

  it('a client closing mid-WATCH (inside MULTI) leaves no watching leased connection behind (closed or reused)', async () => {
    await sides.flush();
    const leases = async (): Promise<string[]> => {
      const out: string[] = [];
      for (const n of cluster.nodes) if (n.alive) out.push(...namedLines(await cluster.call(n, 'CLIENT', 'LIST'), 'respool-lease'));
      return out;
    };
    const before = (await leases()).length;
    const a = await RawConnection.connect(proxy.address.port);
    expect(await a.call('WATCH', k('w'))).toBe('+OK\r\n');
    const owner = await cluster.primaryForSlot(calculateSlot(k('w')));
    const watching = namedLines(await cluster.call(owner, 'CLIENT', 'LIST'), 'respool-lease').filter((l) => / watch=1 /.test(l));
    expect(watching, "a respool-lease connection on the key's primary watching 1 key").toHaveLength(1);
    expect(await a.call('MULTI')).toBe('+OK\r\n');
    expect(await a.call('INCR', k('w'))).toBe('+QUEUED\r\n');
    a.close();
    await waitFor(async () => (await leases()).every((l) => / watch=0 /.test(l) && / multi=-1 /.test(l)), 'the lease to be unwatched or closed');
    expect(await cluster.call(owner, 'GET', k('w'))).toBeNull();
    expect(await cluster.call(owner, 'SET', k('w'), 'other')).toBe('OK');
    const b = await RawConnection.connect(proxy.address.port);
    expect(await b.call('WATCH', k('w'))).toBe('+OK\r\n');
    expect((await leases()).length).toBeLessThanOrEqual(Math.max(before, 1));
    expect(await b.call('MULTI')).toBe('+OK\r\n');
    expect(await b.call('SET', k('w'), 'b')).toBe('+QUEUED\r\n');
    expect(await b.call('EXEC')).toBe('*1\r\n+OK\r\n');
    b.close();
  });

  it('1,000 clients each running MULTI/INCR/EXEC at once: exact counters, at most connectionsPerNode links per node', async () => {
    await sides.flush();
    const tags = ['{a}', '{b}', '{c}']; // three different primaries
    const clients: Valkey[] = Array.from({ length: 1000 }, () => clientFor(proxy));
    try {
      await Promise.all(clients.map((c) => c.ping()));
      const results = await Promise.all(
        clients.map((c, i) => {
          const tag = tags[i % 3]!;
          return c.multi().incr(`${tag}:ctr`).set(`${tag}:client:${i}`, String(i)).exec();
        }),
      );
      for (const r of results) {
        expect(r).not.toBeNull();
        expect(r!.map(([err]) => err)).toEqual([null, null]);
      }
      const expected = [334, 333, 333];
      for (let t = 0; t < 3; t++) {
        const owner = await cluster.primaryForSlot(calculateSlot(`${tags[t]}:ctr`));
        expect(await cluster.call(owner, 'GET', `${tags[t]}:ctr`)).toBe(String(expected[t]));
      }
      for (const node of cluster.nodes) {
        const links = namedLines(await cluster.call(node, 'CLIENT', 'LIST'), 'respool').filter((l) => / resp=2 /.test(l));
        expect(links.length, `RESP2 links on ${node.address}:\n${links.join('\n')}`).toBeLessThanOrEqual(2);
      }
    } finally {
      clients.forEach((c) => c.disconnect());
    }
  });

  // Last: these kill primaries (the cluster fails over to their replicas).

  it('a primary killed while EXEC is in flight → a clear error, no hang, the counter incremented at most once', async () => {
    const key = '{kill1}:ctr';
    const primary = await cluster.primaryForSlot(calculateSlot(key));
    const setup = await RawConnection.connect(proxy.address.port);
    expect(await setup.call('SET', key, '0')).toBe('+OK\r\n');
    setup.close();
    await sleep(300); // replicated to the replica that will take over
    const c = await RawConnection.connect(proxy.address.port);
    try {
      expect(await c.call('MULTI')).toBe('+OK\r\n');
      expect(await c.call('INCR', key)).toBe('+QUEUED\r\n');
      expect(await c.call('EVAL', BUSY_SCRIPT, '1', key, '3000')).toBe('+QUEUED\r\n');
      c.send('EXEC');
      await sleep(500);
      const started = Date.now();
      await cluster.killNode(primary);
      const reply = await c.read(10_000);
      expect(reply).toMatch(/^-ERR respool: .*may or may not have run/);
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      c.close();
    }
    await cluster.waitForStable({ timeoutMs: 30_000 });
    await sleep(1000);
    const owner = await cluster.primaryForSlot(calculateSlot(key));
    expect(Number((await cluster.call(owner, 'GET', key)) ?? 0)).toBeLessThanOrEqual(1);
  });

  it('a primary killed with commands queued, before EXEC → a clear error or the new primary runs it once; never a hang', async () => {
    // a primary that still has a replica (not the one promoted by the previous test)
    const shard = (await cluster.shards()).find((sh) => sh.replicas.length > 0)!;
    const primary = shard.primary;
    let theKey = '';
    for (let i = 0; theKey === ''; i++) {
      const candidate = `{kill2-${i}}:ctr`;
      if ((await cluster.primaryForSlot(calculateSlot(candidate))).port === primary.port) theKey = candidate;
    }
    const setup = await RawConnection.connect(proxy.address.port);
    expect(await setup.call('SET', theKey, '0')).toBe('+OK\r\n');
    setup.close();
    await sleep(300);
    const c = await RawConnection.connect(proxy.address.port);
    try {
      expect(await c.call('MULTI')).toBe('+OK\r\n');
      expect(await c.call('INCR', theKey)).toBe('+QUEUED\r\n');
      await cluster.killNode(primary);
      const started = Date.now();
      const reply = await c.call('EXEC');
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(reply === '*1\r\n:1\r\n' || /^-(ERR respool: |CLUSTERDOWN |TRYAGAIN )/.test(reply), reply).toBe(true);
    } finally {
      c.close();
    }
    await cluster.waitForStable({ timeoutMs: 30_000 });
    await sleep(1000);
    const owner = await cluster.primaryForSlot(calculateSlot(theKey));
    expect(Number((await cluster.call(owner, 'GET', theKey)) ?? 0)).toBeLessThanOrEqual(1);
  });
});

