/**
 * Blocking pops over keys in several slots through respool in front of a 3+3 cluster (issue 19):
 * BLPOP, BRPOP, BLMPOP, BZPOPMIN, BZPOPMAX, BZMPOP, BLMOVE / BRPOPLPUSH, XREAD / XREADGROUP …
 * BLOCK, with Valkey's semantics, compared byte for byte (RESP2 and RESP3) with one standalone
 * valkey-server running the same commands; woken by pushes; two pushes at the same instant,
 * 1,000 times: nothing lost, nothing delivered twice.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import calculateSlot from 'cluster-key-slot';
import { parseInfo } from '../harness/raw-client.js';
import { RawConnection } from '../helpers/raw-resp.js';
import { connect, type Step } from '../helpers/transcript.js';
import { keysOverNodes, startOneServerSides, type OneServerSides } from '../helpers/one-server.js';
import { sleep, waitFor } from '../helpers/wait.js';

const PROTOCOLS = [2, 3] as const;
type Args = Array<string | number>;

/** Commands whose answers do not depend on waiting (data present, wrong types, bad arguments). */
const AT_ONCE: Record<string, Step[]> = {
  'BRPOP q q\\x06\\x163 1: data in the second queue only': [
    [0, 'RPUSH', 'q\x06\x163', 'job-1', 'job-2'],
    [0, 'BRPOP', 'q', 'q\x06\x163', '1'],
    [0, 'LRANGE', 'q\x06\x163', '0', '-1'],
  ],
  'BRPOP q q\\x06\\x163 1: data in both, the first key wins': [
    [0, 'RPUSH', 'q', 'high'],
    [0, 'RPUSH', 'q\x06\x163', 'low'],
    [0, 'BRPOP', 'q', 'q\x06\x163', '1'],
    [0, 'BRPOP', 'q', 'q\x06\x163', '1'],
    [0, 'LLEN', 'q'],
    [0, 'LLEN', 'q\x06\x163'],
  ],
  'BLPOP over five slots: the first non-empty key in order, keys of one slot in between': [
    [0, 'RPUSH', 'c', 'c1'],
    [0, 'RPUSH', 'e', 'e1', 'e2'],
    [0, 'BLPOP', 'a', 'b', '{a}x', 'c', 'd', 'e', '0'],
    [0, 'BLPOP', 'a', 'b', '{a}x', 'c', 'd', 'e', '0'],
    [0, 'BLPOP', 'e', 'a', '0'],
    [0, 'LRANGE', 'e', '0', '-1'],
  ],
  'BLPOP: a key of the wrong type before a non-empty key is WRONGTYPE; after it, the value': [
    [0, 'SET', 'b', 'string'],
    [0, 'RPUSH', 'c', 'v'],
    [0, 'BLPOP', 'a', 'b', 'c', '0'],
    [0, 'BLPOP', 'a', 'c', 'b', '0'],
  ],
  'BLPOP / BRPOP: bad timeouts, as Valkey refuses them': [
    [0, 'BLPOP', 'a', 'b', 'soon'],
    [0, 'BRPOP', 'a', 'b', '-1'],
    [0, 'BLPOP', 'a', 'b', 'inf'],
  ],
  'BLMPOP over three slots, LEFT and RIGHT, COUNT': [
    [0, 'RPUSH', 'c', 'c1', 'c2', 'c3'],
    [0, 'RPUSH', 'b', 'b1'],
    [0, 'BLMPOP', '0', '3', 'a', 'c', 'b', 'RIGHT', 'COUNT', '2'],
    [0, 'BLMPOP', '0', '3', 'a', 'c', 'b', 'LEFT'],
    [0, 'BLMPOP', '0', '3', 'a', 'c', 'b', 'LEFT', 'COUNT', '5'],
    [0, 'BLMPOP', '0', '2', 'a', 'b', 'LEFT', 'COUNT', '0'],
    [0, 'BLMPOP', '0', '2', 'a', 'b', 'MIDDLE'],
  ],
  'BZPOPMIN / BZPOPMAX / BZMPOP over three slots, scores kept exactly': [
    [0, 'ZADD', 'b', '1.5', 'm1', '2.25', 'm2', '1e100', 'big'],
    [0, 'ZADD', 'c', '-inf', 'low', '0.1', 'tenth'],
    [0, 'BZPOPMIN', 'a', 'b', 'c', '0'],
    [0, 'BZPOPMAX', 'a', 'c', 'b', '0'],
    [0, 'BZMPOP', '0', '3', 'a', 'b', 'c', 'MAX', 'COUNT', '2'],
    [0, 'BZMPOP', '0', '2', 'a', 'c', 'MIN'],
    [0, 'ZRANGE', 'c', '0', '-1', 'WITHSCORES'],
  ],
  'XREAD BLOCK with entries present answers at once, merged in the order given; XREADGROUP BLOCK too': [
    [0, 'XADD', 'a', '1-1', 'f', 'a1'],
    [0, 'XADD', 'c', '1-3', 'f', 'c1'],
    [0, 'XREAD', 'BLOCK', '0', 'STREAMS', 'c', 'b', 'a', '0', '0', '0'],
    [0, 'XGROUP', 'CREATE', 'a', 'g', '0'],
    [0, 'XGROUP', 'CREATE', 'b', 'g', '0', 'MKSTREAM'],
    [0, 'XGROUP', 'CREATE', 'c', 'g', '0'],
    [0, 'XREADGROUP', 'GROUP', 'g', 'bob', 'COUNT', '5', 'BLOCK', '0', 'STREAMS', 'a', 'b', 'c', '>', '>', '>'],
    [0, 'XREADGROUP', 'GROUP', 'g', 'bob', 'BLOCK', '100', 'STREAMS', 'a', 'b', 'c', '0', '0', '0'],
    [0, 'XREADGROUP', 'GROUP', 'g', 'bob', 'BLOCK', '0', 'STREAMS', 'a', 'nostream', '>', '>'],
    [0, 'XREAD', 'BLOCK', '-5', 'STREAMS', 'a', 'b', '0', '0'],
    [0, 'XREAD', 'BLOCK', '10', 'STREAMS', 'a', 'b', '$', '$'],
    [0, 'XREADGROUP', 'GROUP', 'g', 'bob', 'BLOCK', '50', 'STREAMS', 'a', 'b', 'c', '>', '>', '>'],
  ],
  'BLMOVE / BRPOPLPUSH between two slots: at once, WRONGTYPE destination, timeout': [
    [0, 'RPUSH', 'a', '1', '2', '3'],
    [0, 'BLMOVE', 'a', 'b', 'LEFT', 'RIGHT', '0'],
    [0, 'BRPOPLPUSH', 'a', 'b', '0'],
    [0, 'LRANGE', 'b', '0', '-1'],
    [0, 'SET', 'str', 'x'],
    [0, 'BLMOVE', 'a', 'str', 'RIGHT', 'LEFT', '0'],
    [0, 'LRANGE', 'a', '0', '-1'],
    [0, 'BLMOVE', 'a', 'b', 'SIDEWAYS', 'LEFT', '0'],
    [0, 'BLMOVE', 'a', 'b', 'LEFT', 'LEFT', 'soon'],
    [0, 'BLMOVE', 'nothing', 'b', 'LEFT', 'LEFT', '0.1'],
    [0, 'BRPOPLPUSH', 'nothing', 'b', '0.1'],
  ],
  'timeouts: nil after the timeout when every key stays empty': [
    [0, 'BLPOP', 'a', 'b', 'c', '0.2'],
    [0, 'BZPOPMAX', 'a', 'b', '0.1'],
    [0, 'BLMPOP', '0.1', '2', 'a', 'b', 'LEFT'],
  ],
};

/** Waits until the side's servers hold `n` blocked clients. */
type BlockedWait = (n: number) => Promise<void>;

/** conn 0 sends `block` and waits; once blocked upstream, conn 1 sends `pushes` in turn; then `after`. Every reply's bytes, in order. */
async function wokenBy(port: number, proto: 2 | 3, blockedOn: BlockedWait, groups: number, setup: Args[], block: Args, pushes: Args[], after: Args[]): Promise<string[]> {
  const [waiter, pusher] = await Promise.all([connect(port, proto), connect(port, proto)]);
  try {
    const out: string[] = [];
    for (const s of setup) out.push(`${s.join(' ')} -> ${JSON.stringify(await pusher.call(...s))}`);
    waiter.send(...block);
    await blockedOn(groups);
    for (const p of pushes) out.push(`${p.join(' ')} -> ${JSON.stringify(await pusher.call(...p))}`);
    out.push(`${block.join(' ')} -> ${JSON.stringify(await waiter.read(5000))}`);
    for (const a of after) out.push(`${a.join(' ')} -> ${JSON.stringify(await waiter.call(...a))}`);
    return out;
  } finally {
    waiter.close();
    pusher.close();
  }
}

describe('blocking pops over several slots, as one server answers', () => {
  let sides: OneServerSides;
  /** Blocked clients of the standalone server / of the cluster's primaries (respool's leases). */
  let standaloneBlocked: BlockedWait;
  let clusterBlocked: BlockedWait;

  beforeAll(async () => {
    sides = await startOneServerSides();
    const blocked = async (ports: number[]) => {
      let n = 0;
      for (const port of ports) n += Number(parseInfo(await sides.cluster.call(port, 'INFO', 'clients'))['blocked_clients'] ?? 0);
      return n;
    };
    standaloneBlocked = (n) => waitFor(async () => Number(parseInfo(await sides.standalone.call('INFO', 'clients'))['blocked_clients']) >= n, 'the standalone client to block');
    clusterBlocked = async (n) => {
      const ports = (await sides.cluster.primaries()).map((p) => p.port);
      await waitFor(async () => (await blocked(ports)) >= n, `${n} leases to block on the primaries`);
    };
  });

  afterAll(async () => {
    await sides?.stop();
  });

  it('the keys really span slots and primaries', async () => {
    const owners = async (keys: string[]) => new Set(await Promise.all(keys.map(async (k) => (await sides.cluster.primaryForSlot(calculateSlot(k))).port)));
    expect((await owners(['q', 'q\x06\x163'])).size).toBe(2);
    expect((await owners(['a', 'b', 'c'])).size).toBe(3);
    expect(calculateSlot('{a}x')).toBe(calculateSlot('a'));
  });

  for (const proto of PROTOCOLS) {
    describe(`RESP${proto}: same bytes as one standalone valkey-server`, () => {
      for (const [name, steps] of Object.entries(AT_ONCE)) {
        it(name, async () => {
          const { expected, actual } = await sides.both(proto, steps);
          expect(actual).toEqual(expected);
        });
      }

      const woken: Array<{ name: string; groups: number; setup: Args[]; block: Args; pushes: Args[]; after: Args[] }> = [
        { name: 'BRPOP q q\\x06\\x163 0 woken by a push to the second queue', groups: 2, setup: [], block: ['BRPOP', 'q', 'q\x06\x163', '0'], pushes: [['LPUSH', 'q\x06\x163', 'job']], after: [['LLEN', 'q\x06\x163']] },
        { name: 'BLMPOP over three slots woken by a push of three', groups: 3, setup: [], block: ['BLMPOP', '0', '3', 'a', 'b', 'c', 'LEFT', 'COUNT', '2'], pushes: [['RPUSH', 'c', 'x', 'y', 'z']], after: [['LRANGE', 'c', '0', '-1']] },
        { name: 'BZPOPMIN over three slots woken by ZADD', groups: 3, setup: [], block: ['BZPOPMIN', 'a', 'b', 'c', '0'], pushes: [['ZADD', 'b', '2.5', 'm', '3', 'n']], after: [['ZRANGE', 'b', '0', '-1', 'WITHSCORES']] },
        { name: 'BZMPOP over two slots woken by ZADD', groups: 2, setup: [], block: ['BZMPOP', '0', '2', 'a', 'c', 'MAX', 'COUNT', '5'], pushes: [['ZADD', 'a', '1', 'x', '2', 'y']], after: [['EXISTS', 'a']] },
        {
          name: 'XREADGROUP … BLOCK over streams in 3 slots, woken by XADD to one of them',
          groups: 3,
          setup: ['a', 'b', 'c'].map((k): Args => ['XGROUP', 'CREATE', k, 'g', '$', 'MKSTREAM']),
          block: ['XREADGROUP', 'GROUP', 'g', 'alice', 'BLOCK', '0', 'STREAMS', 'a', 'b', 'c', '>', '>', '>'],
          pushes: [['XADD', 'b', '5-1', 'job', 'resize']],
          after: [['XPENDING', 'b', 'g'], ['XREADGROUP', 'GROUP', 'g', 'alice', 'STREAMS', 'a', 'b', 'c', '0', '0', '0']],
        },
        {
          name: 'XREAD BLOCK 0 STREAMS a b c $ $ $ woken by XADD: only entries added after it',
          groups: 3,
          setup: [['XADD', 'a', '1-1', 'old', '1'], ['XADD', 'c', '1-1', 'old', '1']],
          block: ['XREAD', 'BLOCK', '0', 'STREAMS', 'a', 'b', 'c', '$', '$', '$'],
          pushes: [['XADD', 'c', '2-1', 'new', '2']],
          after: [['XLEN', 'c']],
        },
        { name: 'BLMOVE between two slots woken by a push', groups: 1, setup: [], block: ['BLMOVE', 'a', 'b', 'RIGHT', 'LEFT', '0'], pushes: [['RPUSH', 'a', 'x', 'y']], after: [['LRANGE', 'a', '0', '-1'], ['LRANGE', 'b', '0', '-1']] },
        { name: 'BRPOPLPUSH between two slots woken by a push', groups: 1, setup: [], block: ['BRPOPLPUSH', 'a', 'b', '0'], pushes: [['LPUSH', 'a', 'x']], after: [['LRANGE', 'b', '0', '-1']] },
      ];
      for (const w of woken) {
        it(w.name, async () => {
          await sides.flush();
          const expected = await wokenBy(sides.standalone.port, proto, standaloneBlocked, 1, w.setup, w.block, w.pushes, w.after);
          await sides.flush();
          const actual = await wokenBy(sides.proxy.address.port, proto, clusterBlocked, w.groups, w.setup, w.block, w.pushes, w.after);
          expect(actual).toEqual(expected);
        });
      }

      it('BLPOP over 5 lists in 5 slots, woken by a push to each of them in turn', async () => {
        const lists = await keysOverNodes(sides.cluster, 'wake:', 5);
        const run = async (port: number, blockedOn: BlockedWait, groups: number) => {
          const out: string[] = [];
          for (let i = 0; i < lists.length; i++) {
            out.push(...(await wokenBy(port, proto, blockedOn, groups, [], ['BLPOP', ...lists, '0'], [['RPUSH', lists[i]!, `v${i}`]], [['EXISTS', ...lists]])));
          }
          return out;
        };
        await sides.flush();
        const expected = await run(sides.standalone.port, standaloneBlocked, 1);
        await sides.flush();
        const actual = await run(sides.proxy.address.port, clusterBlocked, 5);
        expect(actual).toEqual(expected);
        expect(new Set(lists.map((k) => calculateSlot(k))).size).toBe(5);
      });
    });
  }

  it('XREADGROUP … BLOCK over 3 slots, entries added to two streams at the same instant, 200 times: every entry delivered once', async () => {
    await sides.flush();
    const streams = await keysOverNodes(sides.cluster, 'events:', 3);
    const port = sides.proxy.address.port;
    const [consumer, producerA, producerB] = await Promise.all([RawConnection.connect(port), RawConnection.connect(port), RawConnection.connect(port)]);
    const delivered: string[] = [];
    const added: string[] = [];
    try {
      for (const s of streams) expect(await consumer.call('XGROUP', 'CREATE', s, 'g', '$', 'MKSTREAM')).toBe('+OK\r\n');
      for (let trial = 0; trial < 200; trial++) {
        consumer.send('XREADGROUP', 'GROUP', 'g', 'c1', 'BLOCK', '0', 'STREAMS', ...streams, '>', '>', '>');
        await waitFor(async () => parseInfo(await producerA.call('INFO', 'clients'))['blocked_clients'] === '1', 'the consumer to block', 5000, 1);
        if (trial % 2 === 0) await clusterBlocked(3);
        const i = trial % 3;
        const j = (i + 1) % 3;
        producerA.send('XADD', streams[i]!, `${trial + 1}-1`, 'n', `${trial}a`);
        producerB.send('XADD', streams[j]!, `${trial + 1}-2`, 'n', `${trial}b`);
        added.push(`${streams[i]}/${trial + 1}-1`, `${streams[j]}/${trial + 1}-2`);
        await producerA.read();
        await producerB.read();
        const collect = (reply: string) => {
          // *N of [stream, [[id, fields]…]]: every "name" then ids, in order
          let current = '';
          for (const m of reply.matchAll(/\$\d+\r\n([^\r]*)\r\n/g)) {
            const text = m[1]!;
            if (streams.includes(text)) current = text;
            else if (/^\d+-\d+$/.test(text)) delivered.push(`${current}/${text}`);
          }
        };
        collect(await consumer.read(5000));
        // What a slot delivered after the first answer is in this reply or still new: read it now.
        collect(await consumer.call('XREADGROUP', 'GROUP', 'g', 'c1', 'STREAMS', ...streams, '>', '>', '>'));
      }
      let pending = 0;
      for (const s of streams) pending += Number(/^\*4\r\n:(\d+)/.exec(await consumer.call('XPENDING', s, 'g'))![1]);
      expect(pending).toBe(400); // every entry delivered to the consumer group once
    } finally {
      consumer.close();
      producerA.close();
      producerB.close();
    }
    expect(delivered.sort()).toEqual(added.sort());
  });

  it('a client that goes away while blocked over several slots leaves nothing blocked, and a later push is not taken', async () => {
    await sides.flush();
    const c = await RawConnection.connect(sides.proxy.address.port);
    c.send('BLPOP', 'a', 'b', 'c', '0');
    await clusterBlocked(3);
    c.close();
    const ports = (await sides.cluster.primaries()).map((p) => p.port);
    await waitFor(async () => {
      let n = 0;
      for (const port of ports) n += Number(parseInfo(await sides.cluster.call(port, 'INFO', 'clients'))['blocked_clients']);
      return n === 0;
    }, 'the leases to be unblocked');
    const other = await RawConnection.connect(sides.proxy.address.port);
    try {
      expect(await other.call('RPUSH', 'b', 'kept')).toBe(':1\r\n');
      await sleep(50);
      expect(await other.call('LRANGE', 'b', '0', '-1')).toBe('*1\r\n$4\r\nkept\r\n');
    } finally {
      other.close();
    }
  });

  for (const how of ['TIMEOUT', 'ERROR']) {
    it(`CLIENT UNBLOCK … ${how} of a client blocked over several slots answers as one server`, async () => {
      const run = async (port: number, blockedOn: BlockedWait, groups: number) => {
        const [blocked, other] = await Promise.all([RawConnection.connect(port), RawConnection.connect(port)]);
        try {
          const id = /^:(\d+)/.exec(await blocked.call('CLIENT', 'ID'))![1]!;
          blocked.send('BZPOPMIN', 'a', 'b', 'c', '0');
          await blockedOn(groups);
          return [await other.call('CLIENT', 'UNBLOCK', id, how), await blocked.read(), await blocked.call('PING')];
        } finally {
          blocked.close();
          other.close();
        }
      };
      await sides.flush();
      const expected = await run(sides.standalone.port, standaloneBlocked, 1);
      const actual = await run(sides.proxy.address.port, clusterBlocked, 3);
      expect(actual).toEqual(expected);
    });
  }

  it('1,000 trials of two pushes at the same instant to two of 5 lists: delivered + left = pushed, none delivered twice', async () => {
    await sides.flush();
    const lists = await keysOverNodes(sides.cluster, 'race:', 5);
    const port = sides.proxy.address.port;
    const [consumer, producerA, producerB] = await Promise.all([RawConnection.connect(port), RawConnection.connect(port), RawConnection.connect(port)]);
    const putBacks = async () => (await sides.proxy.metrics.raw.cross_slot_put_backs_total.get()).values.find((v) => v.labels.outcome === 'ok')?.value ?? 0;
    const before = await putBacks();
    const delivered: string[] = [];
    const left: string[] = [];
    const pushed: string[] = [];
    try {
      for (let trial = 0; trial < 1000; trial++) {
        const i = trial % 5;
        const j = (i + 1 + (trial % 4)) % 5;
        consumer.send('BLPOP', ...lists, '0');
        // Odd trials: blocked in respool, its leases perhaps still on their way (the pushes race
        // their pops); even trials: every lease blocked on its node (the pushes wake two at once).
        await waitFor(async () => parseInfo(await producerA.call('INFO', 'clients'))['blocked_clients'] === '1', 'the consumer to block', 5000, 1);
        if (trial % 2 === 0) await clusterBlocked(5);
        const a = `t${trial}-a`;
        const b = `t${trial}-b`;
        pushed.push(a, b);
        producerA.send('RPUSH', lists[i]!, a);
        producerB.send('RPUSH', lists[j]!, b);
        expect(await producerA.read()).toBe(':1\r\n');
        expect(await producerB.read()).toMatch(/^:[12]\r\n$/);
        const reply = await consumer.read(5000);
        const m = /^\*2\r\n\$\d+\r\n(.*)\r\n\$\d+\r\n(.*)\r\n$/.exec(reply);
        expect(m, reply).not.toBeNull();
        delivered.push(m![2]!);
        // On the consumer's own connection: behind every put-back of that pop.
        for (const list of lists) {
          const rest = await consumer.call('LPOP', list, '10');
          if (rest.startsWith('*')) left.push(...[...rest.matchAll(/\$\d+\r\n([^\r]*)\r\n/g)].map((x) => x[1]!));
        }
      }
    } finally {
      consumer.close();
      producerA.close();
      producerB.close();
    }
    expect(delivered).toHaveLength(1000);
    expect(new Set(delivered).size).toBe(1000); // none delivered twice
    expect([...delivered, ...left].sort()).toEqual([...pushed].sort()); // none lost, none twice
    const putBackCount = (await putBacks()) - before;
    console.log(`1,000 simultaneous-push trials: ${putBackCount} values put back by losing slots`);
    expect(putBackCount).toBeGreaterThan(0); // the race really happened
  });
});
