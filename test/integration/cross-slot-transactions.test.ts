/**
 * MULTI … EXEC over keys in several slots through respool in front of a 3+3 cluster (issue 19):
 * split into one MULTI … EXEC block per slot, answered exactly as one standalone valkey-server
 * answers the same commands (byte for byte, RESP2 and RESP3); WATCH over several slots refused
 * with a clear error; a primary killed under a split EXEC.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import calculateSlot from 'cluster-key-slot';
import { RawConnection } from '../helpers/raw-resp.js';
import { connect, pipelineTranscript, type Step } from '../helpers/transcript.js';
import { keysOverNodes, startOneServerSides, type OneServerSides } from '../helpers/one-server.js';
import { sleep } from '../helpers/wait.js';

const PROTOCOLS = [2, 3] as const;

/** Celery-style priority queues: the name, then \x06\x16 and the priority. */
const QUEUES = ['q', 'q\x06\x163', 'q\x06\x166', 'q\x06\x169'];

/** The job libraries' transactions of the issue's table, with their data checked after. */
const TABLE: Record<string, Step[]> = {
  'sizing priority queues: MULTI, LLEN q, LLEN q\\x06\\x163, LLEN q\\x06\\x166, LLEN q\\x06\\x169, EXEC': [
    [0, 'RPUSH', 'q', 'a', 'b'],
    [0, 'RPUSH', 'q\x06\x166', 'c'],
    [0, 'MULTI'],
    ...QUEUES.map((q): Step => [0, 'LLEN', q]),
    [0, 'EXEC'],
  ],
  'enqueueing a job: MULTI, SADD queues q, HSET job:<id> …, HSET job:<id> …, RPUSH queue:q <id>, EXEC': [
    [0, 'MULTI'],
    [0, 'SADD', 'queues', 'q'],
    [0, 'HSET', 'job:5b1c', 'status', 'queued', 'origin', 'q'],
    [0, 'HSET', 'job:5b1c', 'data', '{"args":[1,2]}', 'enqueued_at', '2026-12-01T10:00:00Z'],
    [0, 'RPUSH', 'queue:q', '5b1c'],
    [0, 'EXEC'],
    [0, 'SMEMBERS', 'queues'],
    [0, 'HGETALL', 'job:5b1c'],
    [0, 'LRANGE', 'queue:q', '0', '-1'],
  ],
  "a worker's heartbeat and counters: MULTI, INCRBY stat:processed n, INCRBY stat:processed:<date> n, EXPIRE …, UNLINK <id>:workers, EXPIRE …, EXEC": [
    [0, 'HSET', 'host:1234', 'beat', '1'],
    [0, 'SADD', 'host:1234:workers', 'w1'],
    [0, 'MULTI'],
    [0, 'INCRBY', 'stat:processed', '5'],
    [0, 'INCRBY', 'stat:processed:2026-12-01', '5'],
    [0, 'EXPIRE', 'stat:processed:2026-12-01', '157680000'],
    [0, 'UNLINK', 'host:1234:workers'],
    [0, 'EXPIRE', 'host:1234', '60'],
    [0, 'EXEC'],
    [0, 'GET', 'stat:processed'],
    [0, 'GET', 'stat:processed:2026-12-01'],
    [0, 'EXISTS', 'host:1234:workers'],
  ],
  'bookkeeping of grouped tasks: MULTI, ZADD meta.j …, ZCOUNT meta.j …, GET meta.t, GET meta.s, EXPIRE …, EXEC': [
    [0, 'SET', 'meta.t', '3'],
    [0, 'SET', 'meta.s', '1'],
    [0, 'MULTI'],
    [0, 'ZADD', 'meta.j', '1', 'task-1'],
    [0, 'ZCOUNT', 'meta.j', '-inf', '+inf'],
    [0, 'GET', 'meta.t'],
    [0, 'GET', 'meta.s'],
    [0, 'EXPIRE', 'meta.j', '86400'],
    [0, 'EXEC'],
    [0, 'ZRANGE', 'meta.j', '0', '-1', 'WITHSCORES'],
  ],
};

/** More transactions over several slots (`a` is slot 15495, `b` 3300, `c` 7365). */
const MORE: Record<string, Step[]> = {
  'keyless commands (PING, ECHO) ride with the first slot': [
    [0, 'MULTI'],
    [0, 'PING'],
    [0, 'SET', 'a', '1'],
    [0, 'ECHO', 'e'],
    [0, 'SET', 'b', '2'],
    [0, 'PING', 'hi'],
    [0, 'GET', 'a'],
    [0, 'GET', 'b'],
    [0, 'EXEC'],
  ],
  'replies of every type from three slots, in the order queued': [
    [0, 'MULTI'],
    [0, 'HSET', 'a', 'f', '1', 'g', '2'],
    [0, 'SADD', 'b', 'x', 'y'],
    [0, 'ZADD', 'c', '1.5', 'm', '2', 'n'],
    [0, 'HGETALL', 'a'],
    [0, 'SMEMBERS', 'b'],
    [0, 'ZRANGE', 'c', '0', '-1', 'WITHSCORES'],
    [0, 'ZSCORE', 'c', 'm'],
    [0, 'GET', 'nothing-here'],
    [0, 'INCRBYFLOAT', 'f', '1.5'],
    [0, 'LPOP', 'no-list', '2'],
    [0, 'EXISTS', 'a'],
    [0, 'EXEC'],
  ],
  'a runtime error stays in its element; every slot runs': [
    [0, 'MULTI'],
    [0, 'SET', 'a', 'text'],
    [0, 'INCR', 'a'],
    [0, 'SET', 'b', '1'],
    [0, 'INCR', 'b'],
    [0, 'LPUSH', 'b', 'x'],
    [0, 'INCR', 'c'],
    [0, 'EXEC'],
    [0, 'GET', 'b'],
    [0, 'GET', 'c'],
  ],
  'a queue-time error aborts every slot (EXECABORT), nothing runs': [
    [0, 'MULTI'],
    [0, 'SET', 'a', '1'],
    [0, 'NOSUCHCOMMAND', 'x'],
    [0, 'SET', 'b', '2'],
    [0, 'EXEC'],
    [0, 'GET', 'a'],
    [0, 'GET', 'b'],
  ],
  'DISCARD of a transaction over several slots': [
    [0, 'MULTI'],
    [0, 'SET', 'a', '1'],
    [0, 'SET', 'b', '2'],
    [0, 'DISCARD'],
    [0, 'GET', 'a'],
    [0, 'GET', 'b'],
  ],
  "respool's own commands inside (CLIENT SETNAME / GETNAME) keep their places": [
    [0, 'MULTI'],
    [0, 'SET', 'a', '1'],
    [0, 'CLIENT', 'SETNAME', 'worker-1'],
    [0, 'SET', 'b', '2'],
    [0, 'CLIENT', 'GETNAME'],
    [0, 'GET', 'a'],
    [0, 'EXEC'],
  ],
  'multi-key commands over several slots inside (MSET, MGET, EXISTS, DEL, UNLINK, TOUCH): one part per slot, replies merged': [
    [0, 'MULTI'],
    [0, 'MSET', 'a', '1', 'b', '2', 'c', '3', '{a}x', '4'],
    [0, 'MGET', 'c', 'a', 'nothing', 'b', '{a}x', 'a'],
    [0, 'EXISTS', 'a', 'b', 'c', 'nothing', 'a'],
    [0, 'TOUCH', 'a', 'b', 'nothing'],
    [0, 'DEL', 'a', 'b', 'nothing'],
    [0, 'UNLINK', 'c', '{a}x'],
    [0, 'MGET', 'a', 'b', 'c'],
    [0, 'EXEC'],
    [0, 'MULTI'],
    [0, 'MSET', 'a', '1', 'b', '2'],
    [0, 'EXEC'],
    [0, 'MGET', 'a', 'b'],
  ],
  'a second client sees each slot committed': [
    [0, 'MULTI'],
    [0, 'INCR', 'a'],
    [0, 'INCR', 'b'],
    [0, 'INCR', 'c'],
    [0, 'EXEC'],
    [1, 'MGET', 'a', 'b', 'c'],
  ],
};

describe('MULTI … EXEC over several slots, split by slot, as one server answers', () => {
  let sides: OneServerSides;

  beforeAll(async () => {
    sides = await startOneServerSides();
  });

  afterAll(async () => {
    await sides?.stop();
  });

  it("the table's keys really span slots and primaries", async () => {
    const owners = async (keys: string[]) => new Set(await Promise.all(keys.map(async (k) => (await sides.cluster.primaryForSlot(calculateSlot(k))).port)));
    expect((await owners(QUEUES)).size).toBeGreaterThan(1);
    expect((await owners(['queues', 'job:5b1c', 'queue:q'])).size).toBeGreaterThan(1);
    expect((await owners(['stat:processed', 'stat:processed:2026-12-01', 'host:1234:workers', 'host:1234'])).size).toBeGreaterThan(1);
    expect((await owners(['meta.j', 'meta.t', 'meta.s'])).size).toBeGreaterThan(1);
    expect((await owners(['a', 'b', 'c'])).size).toBe(3);
  });

  for (const proto of PROTOCOLS) {
    describe(`RESP${proto}: same bytes as one standalone valkey-server`, () => {
      for (const [name, steps] of Object.entries({ ...TABLE, ...MORE })) {
        it(name, async () => {
          const { expected, actual } = await sides.both(proto, steps);
          expect(actual).toEqual(expected);
        });
      }
    });
  }

  for (const proto of PROTOCOLS) {
    it(`RESP${proto}: a 50-command transaction over 20 slots inside a pipeline with plain commands around it: same bytes, same order`, async () => {
      const keys = await keysOverNodes(sides.cluster, 'tx50:', 20);
      const tx: Array<Array<string | number>> = [];
      for (let i = 0; i < 50; i++) {
        const key = keys[i % 20]!;
        const kind = i % 5;
        if (kind === 0) tx.push(['SET', key, `v${i}`]);
        else if (kind === 1) tx.push(['APPEND', key, `+${i}`]);
        else if (kind === 2) tx.push(['GET', key]);
        else if (kind === 3) tx.push(['INCR', `${key}:n`]);
        else tx.push(['STRLEN', key]);
      }
      const pipeline: Array<Array<string | number>> = [
        ['SET', keys[0]!, 'before'],
        ['INCR', 'plain:counter'],
        ['MULTI'],
        ...tx,
        ['EXEC'],
        ['GET', keys[0]!],
        ['MGET', ...keys],
        ['INCR', 'plain:counter'],
        ['GET', `${keys[3]!}:n`],
        ['PING'],
      ];
      await sides.flush();
      const expected = await pipelineTranscript(sides.standalone.port, proto, pipeline);
      await sides.flush();
      const actual = await pipelineTranscript(sides.proxy.address.port, proto, pipeline);
      expect(actual).toEqual(expected);
      expect(new Set(keys.map((k) => calculateSlot(k))).size).toBe(20);
    });
  }

  it('metrics count split transactions and their groups', async () => {
    const count = async () => {
      const split = (await sides.proxy.metrics.raw.cross_slot_transactions_total.get()).values.find((v) => v.labels.action === 'split')?.value ?? 0;
      const ok = (await sides.proxy.metrics.raw.cross_slot_transaction_groups_total.get()).values.find((v) => v.labels.outcome === 'ok')?.value ?? 0;
      return { split, ok };
    };
    const before = await count();
    const c = await RawConnection.connect(sides.proxy.address.port);
    try {
      expect(await c.call('MULTI')).toBe('+OK\r\n');
      for (const key of ['a', 'b', 'c']) expect(await c.call('SET', key, '1')).toBe('+QUEUED\r\n');
      expect(await c.call('EXEC')).toBe('*3\r\n+OK\r\n+OK\r\n+OK\r\n');
    } finally {
      c.close();
    }
    const after = await count();
    expect(after.split - before.split).toBe(1);
    expect(after.ok - before.ok).toBe(3);
  });

  describe('WATCH over several slots is refused, with why and what to do', () => {
    const WATCH_ERROR =
      "-CROSSSLOT Keys in request don't hash to the same slot (respool: WATCH over keys in several slots cannot be made safe, since one node could commit while another aborts; put the watched keys and the transaction's keys under one hash tag, e.g. {user:42}:balance and {user:42}:history, or have respool store them so with a colocation rule: docs/key-names.md)\r\n";

    for (const proto of PROTOCOLS) {
      it(`RESP${proto}: WATCH a b (two slots) → the error; nothing is watched, no lease is held`, async () => {
        await sides.flush();
        const c = await connect(sides.proxy.address.port, proto);
        try {
          expect(await c.call('WATCH', 'a', 'b')).toBe(WATCH_ERROR);
          for (const node of await sides.cluster.primaries()) {
            const watching = String(await sides.cluster.call(node, 'CLIENT', 'LIST')).split('\n').filter((l) => / watch=[1-9]/.test(l));
            expect(watching, `connections watching keys on ${node.address}`).toEqual([]);
          }
          // The client is not watching: a transaction after it runs.
          expect(await c.call('MULTI')).toBe('+OK\r\n');
          expect(await c.call('SET', 'a', '1')).toBe('+QUEUED\r\n');
          expect(await c.call('SET', 'b', '1')).toBe('+QUEUED\r\n');
          expect(await c.call('EXEC')).toBe('*2\r\n+OK\r\n+OK\r\n');
        } finally {
          c.close();
        }
      });
    }

    it('after WATCH of one slot: WATCH of a key on another node is refused; a command queued for another node too, and EXEC aborts', async () => {
      await sides.flush();
      const c = await RawConnection.connect(sides.proxy.address.port);
      try {
        expect(await c.call('WATCH', 'a')).toBe('+OK\r\n');
        expect(await c.call('WATCH', 'b')).toBe(WATCH_ERROR); // b lives on another primary
        expect(await c.call('MULTI')).toBe('+OK\r\n');
        expect(await c.call('SET', 'a', '1')).toBe('+QUEUED\r\n');
        expect(await c.call('SET', 'b', '1')).toBe(WATCH_ERROR);
        expect(await c.call('EXEC')).toBe('-EXECABORT Transaction discarded because of previous errors.\r\n');
        expect(await c.call('MGET', 'a', 'b')).toBe('*2\r\n$-1\r\n$-1\r\n');
        // The lane is over: a new transaction over several slots is split again.
        expect(await c.call('MULTI')).toBe('+OK\r\n');
        expect(await c.call('SET', 'a', '1')).toBe('+QUEUED\r\n');
        expect(await c.call('SET', 'b', '1')).toBe('+QUEUED\r\n');
        expect(await c.call('EXEC')).toBe('*2\r\n+OK\r\n+OK\r\n');
      } finally {
        c.close();
      }
    });

    it('after WATCH: reading a key of another node outside MULTI takes the usual path; the watched transaction still runs', async () => {
      await sides.flush();
      const setup = await RawConnection.connect(sides.proxy.address.port);
      expect(await setup.call('SET', 'b', 'other-node')).toBe('+OK\r\n');
      const c = await RawConnection.connect(sides.proxy.address.port);
      try {
        expect(await c.call('WATCH', 'a')).toBe('+OK\r\n');
        expect(await c.call('GET', 'b')).toBe('$10\r\nother-node\r\n');
        expect(await c.call('MGET', 'a', 'b', 'c')).toBe('*3\r\n$-1\r\n$10\r\nother-node\r\n$-1\r\n');
        expect(await c.call('MULTI')).toBe('+OK\r\n');
        expect(await c.call('SET', 'a', 'mine')).toBe('+QUEUED\r\n');
        expect(await c.call('EXEC')).toBe('*1\r\n+OK\r\n');
        // WATCH still works: a concurrent write makes EXEC answer nil.
        expect(await c.call('WATCH', 'a')).toBe('+OK\r\n');
        expect(await setup.call('SET', 'a', 'theirs')).toBe('+OK\r\n');
        expect(await c.call('MULTI')).toBe('+OK\r\n');
        expect(await c.call('SET', 'a', 'mine')).toBe('+QUEUED\r\n');
        expect(await c.call('EXEC')).toBe('*-1\r\n');
        expect(await c.call('GET', 'a')).toBe('$6\r\ntheirs\r\n');
      } finally {
        c.close();
        setup.close();
      }
    });
  });

  it('each slot\'s block follows ASK during a live migration and MOVED after it; nothing runs twice', async () => {
    await sides.flush();
    const { cluster, proxy } = sides;
    const moving = '{mig}:k';
    const other = '{stay}:k';
    const slot = calculateSlot(moving);
    const source = await cluster.primaryForSlot(slot);
    const target = (await cluster.primaries()).find((p) => p.port !== source.port)!;
    const id = async (n: typeof source) => String(await cluster.call(n, 'CLUSTER', 'MYID'));
    const c = await RawConnection.connect(proxy.address.port);
    const tx = async (n: number) => {
      expect(await c.call('MULTI')).toBe('+OK\r\n');
      expect(await c.call('INCR', moving)).toBe('+QUEUED\r\n');
      expect(await c.call('INCR', other)).toBe('+QUEUED\r\n');
      expect(await c.call('EXEC')).toBe(`*2\r\n:${n}\r\n:${n}\r\n`);
    };
    try {
      await tx(1);
      await cluster.call(target, 'CLUSTER', 'SETSLOT', slot, 'IMPORTING', await id(source));
      await cluster.call(source, 'CLUSTER', 'SETSLOT', slot, 'MIGRATING', await id(target));
      await cluster.call(source, 'MIGRATE', target.host, target.port, '', 0, 5000, 'KEYS', moving);
      await tx(2); // the source answers ASK for the moved key: the block runs on the target
      for (const node of await cluster.primaries()) await cluster.call(node, 'CLUSTER', 'SETSLOT', slot, 'NODE', await id(target));
      await tx(3); // respool still sends the block to the source, which answers MOVED
      expect(await cluster.call(target, 'GET', moving)).toBe('3');
      const redirects = (await proxy.metrics.raw.redirects_total.get()).values;
      expect(redirects.find((v) => v.labels.type === 'ask')?.value ?? 0).toBeGreaterThan(0);
      expect(redirects.find((v) => v.labels.type === 'moved')?.value ?? 0).toBeGreaterThan(0);
    } finally {
      c.close();
    }
  });

  // Last: kills a primary (its replica takes over).
  it('a primary killed during a split EXEC: its group gets errors naming it, the other groups their replies; nothing re-sent, no hang', async () => {
    await sides.flush();
    const [onVictim, second, third] = await keysOverNodes(sides.cluster, 'kill:', 3);
    const victim = await sides.cluster.primaryForSlot(calculateSlot(onVictim!));
    const busy =
      "local t=redis.call('TIME') local s=t[1]*1000000+t[2] " +
      "while true do local n=redis.call('TIME') if n[1]*1000000+n[2]-s > tonumber(ARGV[1])*1000 then break end end return 1";
    const setup = await RawConnection.connect(sides.proxy.address.port);
    expect(await setup.call('SET', onVictim!, '0')).toBe('+OK\r\n');
    setup.close();
    await sleep(300); // replicated to the replica that takes over
    const c = await RawConnection.connect(sides.proxy.address.port);
    try {
      expect(await c.call('MULTI')).toBe('+OK\r\n');
      expect(await c.call('INCR', second!)).toBe('+QUEUED\r\n');
      expect(await c.call('INCR', onVictim!)).toBe('+QUEUED\r\n');
      expect(await c.call('EVAL', busy, '1', onVictim!, '3000')).toBe('+QUEUED\r\n');
      expect(await c.call('INCR', third!)).toBe('+QUEUED\r\n');
      c.send('EXEC');
      await sleep(500);
      const started = Date.now();
      await sides.cluster.killNode(victim);
      const reply = await c.read(10_000);
      expect(Date.now() - started).toBeLessThan(10_000);
      const slot = calculateSlot(onVictim!);
      const groupError = `-ERR respool: the transaction was split by slot; its block for slot ${slot} on ${victim.address} may or may not have run (respool: connection to upstream ${victim.address} was lost; the command may or may not have run); the blocks for other slots were not undone\r\n`;
      expect(reply).toBe(`*4\r\n:1\r\n${groupError}${groupError}:1\r\n`);
      // The connection still serves the client.
      expect(await c.call('GET', second!)).toBe('$1\r\n1\r\n');
    } finally {
      c.close();
    }
    await sides.cluster.waitForStable({ timeoutMs: 30_000 });
    await sleep(1000);
    const read = async (key: string) => Number((await sides.cluster.call(await sides.cluster.primaryForSlot(calculateSlot(key)), 'GET', key)) ?? 0);
    expect(await read(onVictim!)).toBeLessThanOrEqual(1);
    expect(await read(second!)).toBe(1);
    expect(await read(third!)).toBe(1);
    const lost = (await sides.proxy.metrics.raw.cross_slot_transaction_groups_total.get()).values.find((v) => v.labels.outcome === 'connection_lost')?.value ?? 0;
    expect(lost).toBe(1);
  });
});
