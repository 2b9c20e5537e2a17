/**
 * Reads over keys in several slots through respool in front of a 3+3 cluster (issue 19):
 * SUNION, SINTER, SDIFF, SINTERCARD, ZUNION, ZINTER, ZDIFF, ZINTERCARD (WEIGHTS, AGGREGATE,
 * WITHSCORES), PFCOUNT of several keys, LCS, XREAD / XREADGROUP without BLOCK, the …STORE forms
 * and list moves — each answered exactly as one standalone valkey-server answers the same
 * commands (byte for byte, RESP2 and RESP3), with nothing left behind on the nodes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import calculateSlot from 'cluster-key-slot';
import type { RespoolProxy } from '../../src/server.js';
import { startTestProxy } from '../helpers/proxy.js';
import { DEFAULT_HOT_KEYS } from '../../src/config/hot-keys-config.js';
import { RawConnection } from '../helpers/raw-resp.js';
import type { Step } from '../helpers/transcript.js';
import { startOneServerSides, type OneServerSides } from '../helpers/one-server.js';

const PROTOCOLS = [2, 3] as const;

/**
 * Set commands whose element order Valkey does not define: a hashtable's order depends on the
 * server's random hash seed, so two Valkey servers holding the same set answer in different
 * orders. Their replies are compared as the same header and the same element frames, sorted.
 */
const UNORDERED = /^\[\d+\] (SUNION|SINTER|SDIFF|SMEMBERS) /;

function sortedElements(line: string): string {
  const arrow = line.indexOf(' -> ');
  const reply = JSON.parse(line.slice(arrow + 4)) as string;
  const header = /^([*~])(\d+)\r\n/.exec(reply);
  if (header === null) return line;
  const elements: string[] = [];
  let rest = reply.slice(header[0].length);
  while (rest.length > 0) {
    const m = /^\$(\d+)\r\n/.exec(rest)!;
    const end = m[0].length + Number(m[1]) + 2;
    elements.push(rest.slice(0, end));
    rest = rest.slice(end);
  }
  return `${line.slice(0, arrow)} -> ${header[0]}${elements.sort().join('')}`;
}

/** Transcript lines as compared: unordered replies with their elements sorted. */
function comparable(lines: string[]): string[] {
  return lines.map((line) => (UNORDERED.test(line) ? sortedElements(line) : line));
}

/** `a`, `b`, `c` are on three different primaries; `{a}x` shares `a`'s slot. */
const SETS: Step[] = [
  [0, 'SADD', 'a', 'x', 'y', 'z', '1', '2'],
  [0, 'SADD', 'b', 'y', 'z', 'w', '2'],
  [0, 'SADD', 'c', 'z', 'q', '2', '10'],
];
const ZSETS: Step[] = [
  [0, 'ZADD', 'a', '1', 'x', '2.5', 'y', '3', 'z'],
  [0, 'ZADD', 'b', '10', 'y', '0.5', 'z', '-1', 'w'],
  [0, 'ZADD', 'c', '1e300', 'z', '7', 'x'],
];

const SEQUENCES: Record<string, Step[]> = {
  'SUNION, SINTER, SDIFF over three slots (missing keys and repeated keys too)': [
    ...SETS,
    [0, 'SUNION', 'a', 'b', 'c'],
    [0, 'SINTER', 'a', 'b', 'c'],
    [0, 'SINTER', 'a', 'b'],
    [0, 'SDIFF', 'a', 'b', 'c'],
    [0, 'SDIFF', 'nothing', 'a'],
    [0, 'SUNION', 'a', 'nothing', 'a', 'b'],
    [0, 'SINTER', 'a', 'nothing'],
    [0, 'SDIFF', 'a', 'a'],
  ],
  'SINTERCARD with and without LIMIT; its errors': [
    ...SETS,
    [0, 'SINTERCARD', '3', 'a', 'b', 'c'],
    [0, 'SINTERCARD', '2', 'a', 'b', 'LIMIT', '1'],
    [0, 'SINTERCARD', '2', 'a', 'b', 'LIMIT', '0'],
    [0, 'SINTERCARD', '2', 'a', 'b', 'LIMIT', '-1'],
    [0, 'SINTERCARD', '2', 'a', 'b', 'NOPE', '1'],
  ],
  'a key of the wrong type: WRONGTYPE, as one server': [
    ...SETS,
    [0, 'SET', 'str', 'v'],
    [0, 'SUNION', 'a', 'str'],
    [0, 'SINTER', 'nothing', 'str'],
    [0, 'ZUNION', '2', 'a', 'str'],
    [0, 'PFCOUNT', 'a', 'str'],
  ],
  'ZUNION, ZINTER, ZDIFF with WEIGHTS, AGGREGATE, WITHSCORES': [
    ...ZSETS,
    [0, 'ZUNION', '3', 'a', 'b', 'c'],
    [0, 'ZUNION', '3', 'a', 'b', 'c', 'WITHSCORES'],
    [0, 'ZUNION', '3', 'a', 'b', 'c', 'WEIGHTS', '1', '2', '0.5', 'AGGREGATE', 'MAX', 'WITHSCORES'],
    [0, 'ZINTER', '2', 'a', 'b', 'AGGREGATE', 'MIN', 'WITHSCORES'],
    [0, 'ZINTER', '3', 'a', 'b', 'c', 'WEIGHTS', '2', '-1', '1', 'WITHSCORES'],
    [0, 'ZDIFF', '2', 'a', 'b', 'WITHSCORES'],
    [0, 'ZDIFF', '3', 'c', 'a', 'b'],
    [0, 'SADD', 'set', 'x', 'v'],
    [0, 'ZUNION', '2', 'a', 'set', 'WITHSCORES'], // a plain set counts with score 1
  ],
  'ZINTERCARD, and errors of the Z commands': [
    ...ZSETS,
    [0, 'ZINTERCARD', '2', 'a', 'b'],
    [0, 'ZINTERCARD', '3', 'a', 'b', 'c', 'LIMIT', '1'],
    [0, 'ZUNION', '2', 'a', 'b', 'WEIGHTS', '1'],
    [0, 'ZUNION', '2', 'a', 'b', 'AGGREGATE', 'AVG'],
    [0, 'ZINTER', '2', 'a', 'b', 'WEIGHTS', '1', 'x'],
  ],
  'PFCOUNT of several HyperLogLogs': [
    [0, 'PFADD', 'a', 'x', 'y', 'z'],
    [0, 'PFADD', 'b', 'y', 'z', 'w', 'v'],
    [0, 'PFADD', 'c', ...Array.from({ length: 200 }, (_, i) => `e${i}`)],
    [0, 'PFCOUNT', 'a', 'b'],
    [0, 'PFCOUNT', 'a', 'b', 'c'],
    [0, 'PFCOUNT', 'a', 'nothing'],
    [0, 'SET', 'str', 'not an hll'],
    [0, 'PFCOUNT', 'a', 'str'],
  ],
  'LCS of two strings in two slots': [
    [0, 'SET', 'a', 'ohmytext'],
    [0, 'SET', 'b', 'mynewtext'],
    [0, 'LCS', 'a', 'b'],
    [0, 'LCS', 'a', 'b', 'LEN'],
    [0, 'LCS', 'a', 'b', 'IDX', 'MINMATCHLEN', '2', 'WITHMATCHLEN'],
  ],
  'XREAD STREAMS a b 0 0 (no BLOCK), COUNT, $ and +, streams without entries left out': [
    [0, 'XADD', 'a', '1-1', 'f', 'a1'],
    [0, 'XADD', 'a', '2-1', 'f', 'a2'],
    [0, 'XADD', 'b', '1-5', 'f', 'b1', 'g', 'x'],
    [0, 'XREAD', 'STREAMS', 'a', 'b', '0', '0'],
    [0, 'XREAD', 'COUNT', '1', 'STREAMS', 'a', 'b', 'c', '0', '0', '0'],
    [0, 'XREAD', 'STREAMS', 'a', 'b', '1-1', '1-5'],
    [0, 'XREAD', 'STREAMS', 'c', 'b', '0', '0'],
    [0, 'XREAD', 'STREAMS', 'a', 'b', '$', '+'],
    [0, 'XREAD', 'STREAMS', 'a', 'a', 'b', '0', '1-1', '0'],
  ],
  "XREAD's errors, the first key's in order": [
    [0, 'XADD', 'a', '1-1', 'f', 'a1'],
    [0, 'SET', 'str', 'v'],
    [0, 'XREAD', 'STREAMS', 'a', 'str', '0', '0'],
    [0, 'XREAD', 'STREAMS', 'str', 'a', 'zz', '0'],
    [0, 'XREAD', 'STREAMS', 'a', 'b', '0', 'zz'],
    [0, 'XREAD', 'STREAMS', 'a', 'b', '0'],
    [0, 'XREAD', 'STREAMS', 'a', 'b', '>', '0'],
    [0, 'XREAD', 'COUNT', 'x', 'STREAMS', 'a', 'b', '0', '0'],
    [0, 'XREAD', 'GROUP', 'g', 'c', 'STREAMS', 'a', 'b', '0', '0'],
    [0, 'XREAD', 'STREAMS', 'a', 'b', '-', '0'],
    [0, 'XREAD', 'STREAMS', 'a', 'b', ' 7', '+5-05'],
  ],
  'XREADGROUP over streams in three slots, without BLOCK: new entries, history, errors': [
    [0, 'XADD', 'a', '1-1', 'f', 'a1'],
    [0, 'XADD', 'b', '1-2', 'f', 'b1'],
    [0, 'XADD', 'c', '1-3', 'f', 'c1'],
    [0, 'XGROUP', 'CREATE', 'a', 'g', '0'],
    [0, 'XGROUP', 'CREATE', 'b', 'g', '0'],
    [0, 'XGROUP', 'CREATE', 'c', 'g', '0'],
    [0, 'XREADGROUP', 'GROUP', 'g', 'alice', 'STREAMS', 'a', 'b', 'c', '>', '>', '>'],
    [0, 'XREADGROUP', 'GROUP', 'g', 'alice', 'STREAMS', 'a', 'b', 'c', '>', '>', '>'],
    [0, 'XREADGROUP', 'GROUP', 'g', 'alice', 'STREAMS', 'a', 'b', 'c', '0', '0', '0'],
    [0, 'XREADGROUP', 'GROUP', 'g', 'alice', 'STREAMS', 'a', 'nostream', '>', '>'],
    [0, 'XREADGROUP', 'GROUP', 'g', 'alice', 'STREAMS', 'a', 'b', '>', '$'],
    [0, 'XPENDING', 'b', 'g'],
  ],
  '…STORE forms over several slots: the destination written as one server writes it': [
    ...SETS,
    [0, 'SUNIONSTORE', 'd', 'a', 'b', 'c'],
    [0, 'SMEMBERS', 'd'],
    [0, 'SINTERSTORE', 'd', 'a', 'b'],
    [0, 'SMEMBERS', 'd'],
    [0, 'SINTERSTORE', 'd', 'a', 'nothing'],
    [0, 'EXISTS', 'd'],
    [0, 'SDIFFSTORE', 'a', 'a', 'b'],
    [0, 'SMEMBERS', 'a'],
    [0, 'SET', 'e', 'string'],
    [0, 'EXPIRE', 'e', '100'],
    [0, 'SUNIONSTORE', 'e', 'b', 'c'],
    [0, 'TTL', 'e'],
    [0, 'TYPE', 'e'],
  ],
  'ZUNIONSTORE, ZINTERSTORE, ZDIFFSTORE, ZRANGESTORE over several slots': [
    ...ZSETS,
    [0, 'ZUNIONSTORE', 'd', '3', 'a', 'b', 'c', 'WEIGHTS', '1', '2', '3', 'AGGREGATE', 'SUM'],
    [0, 'ZRANGE', 'd', '0', '-1', 'WITHSCORES'],
    [0, 'ZINTERSTORE', 'd', '2', 'a', 'b'],
    [0, 'ZRANGE', 'd', '0', '-1', 'WITHSCORES'],
    [0, 'ZDIFFSTORE', 'd', '2', 'a', 'b'],
    [0, 'ZRANGE', 'd', '0', '-1', 'WITHSCORES'],
    [0, 'ZRANGESTORE', 'd', 'b', '0', '1'],
    [0, 'ZRANGE', 'd', '0', '-1', 'WITHSCORES'],
    [0, 'ZRANGESTORE', 'd', 'b', '5', '9'],
    [0, 'EXISTS', 'd'],
    [0, 'SET', 'str', 'v'],
    [0, 'ZUNIONSTORE', 'a', '2', 'b', 'str'],
    [0, 'ZRANGE', 'a', '0', '-1'],
  ],
  'GEOSEARCHSTORE from one slot into another': [
    [0, 'GEOADD', 'a', '13.361389', '38.115556', 'Palermo', '15.087269', '37.502669', 'Catania'],
    [0, 'GEOSEARCHSTORE', 'd', 'a', 'FROMLONLAT', '15', '37', 'BYRADIUS', '200', 'km', 'ASC'],
    [0, 'ZRANGE', 'd', '0', '-1', 'WITHSCORES'],
    [0, 'GEOSEARCHSTORE', 'd', 'a', 'FROMLONLAT', '15', '37', 'BYRADIUS', '200', 'km', 'ASC', 'STOREDIST'],
    [0, 'ZRANGE', 'd', '0', '-1', 'WITHSCORES'],
  ],
  'PFMERGE and BITOP over several slots': [
    [0, 'PFADD', 'a', 'x', 'y'],
    [0, 'PFADD', 'b', 'y', 'z', 'w'],
    [0, 'PFADD', 'c', 'q'],
    [0, 'PFMERGE', 'c', 'a', 'b'],
    [0, 'PFCOUNT', 'c'],
    [0, 'PFMERGE', 'd', 'a', 'b'],
    [0, 'PFCOUNT', 'd'],
    [0, 'SET', 'a', 'abc'],
    [0, 'SET', 'b', 'ab'],
    [0, 'BITOP', 'AND', 'd', 'a', 'b'],
    [0, 'GET', 'd'],
    [0, 'BITOP', 'OR', 'd', 'a', 'b', 'nothing'],
    [0, 'GET', 'd'],
    [0, 'BITOP', 'NOT', 'd', 'a'],
    [0, 'GET', 'd'],
    [0, 'BITOP', 'AND', 'd', 'nothing', 'nothing2'],
    [0, 'EXISTS', 'd'],
  ],
  'LMOVE and RPOPLPUSH between two slots: element moved, nil from an empty source, WRONGTYPE destination keeps the source whole': [
    [0, 'RPUSH', 'a', '1', '2', '3'],
    [0, 'LMOVE', 'a', 'b', 'LEFT', 'RIGHT'],
    [0, 'LMOVE', 'a', 'b', 'RIGHT', 'LEFT'],
    [0, 'RPOPLPUSH', 'a', 'b'],
    [0, 'LRANGE', 'b', '0', '-1'],
    [0, 'LMOVE', 'a', 'b', 'LEFT', 'LEFT'],
    [0, 'SET', 'str', 'x'],
    [0, 'LMOVE', 'b', 'str', 'LEFT', 'LEFT'],
    [0, 'LRANGE', 'b', '0', '-1'],
    [0, 'LMOVE', 'str', 'b', 'LEFT', 'LEFT'],
    [0, 'LMOVE', 'b', 'c', 'UP', 'LEFT'],
    [0, 'LMOVE', 'nothing', 'str', 'LEFT', 'LEFT'],
  ],
};

describe('reads over several slots, as one server answers', () => {
  let sides: OneServerSides;

  beforeAll(async () => {
    sides = await startOneServerSides();
  });

  afterAll(async () => {
    await sides?.stop();
  });

  it('the keys really span three primaries', async () => {
    const owners = new Set(await Promise.all(['a', 'b', 'c'].map(async (k) => (await sides.cluster.primaryForSlot(calculateSlot(k))).port)));
    expect(owners.size).toBe(3);
    for (const k of ['d', 'e', 'str', 'set', 'nothing', 'nostream']) expect(calculateSlot(k)).not.toBe(calculateSlot('a'));
  });

  for (const proto of PROTOCOLS) {
    describe(`RESP${proto}: same bytes as one standalone valkey-server`, () => {
      for (const [name, steps] of Object.entries(SEQUENCES)) {
        it(name, async () => {
          const { expected, actual } = await sides.both(proto, steps);
          expect(comparable(actual)).toEqual(comparable(expected));
        });
      }
    });
  }

  it('no copy is left behind on any node', async () => {
    for (const node of await sides.cluster.primaries()) {
      const keys = String(await sides.cluster.call(node, 'KEYS', '*respool-copy*'));
      expect(keys, node.address).toBe('');
    }
    const counted = (await sides.proxy.metrics.raw.cross_slot_commands_total.get()).values.find((v) => v.labels.kind === 'read')?.value ?? 0;
    expect(counted).toBeGreaterThan(50);
  });

  it('RENAME, RENAMENX, COPY, SMOVE, MSETNX, SORT … STORE and scripts over several slots keep CROSSSLOT', async () => {
    const c = await RawConnection.connect(sides.proxy.address.port);
    try {
      for (const cmd of [
        ['RENAME', 'a', 'b'],
        ['RENAMENX', 'a', 'b'],
        ['COPY', 'a', 'b'],
        ['SMOVE', 'a', 'b', 'm'],
        ['MSETNX', 'a', '1', 'b', '2'],
        ['SORT', 'a', 'STORE', 'b'],
        ['EVAL', 'return 1', '2', 'a', 'b'],
      ]) {
        expect(await c.call(...cmd), cmd.join(' ')).toBe("-CROSSSLOT Keys in request don't hash to the same slot\r\n");
      }
    } finally {
      c.close();
    }
  });

  describe('split hot keys', () => {
    let splitting: RespoolProxy;
    beforeAll(async () => {
      const seed = sides.cluster.nodes[0]!;
      splitting = await startTestProxy([{ host: seed.host, port: seed.port }], {
        hotKeys: { ...structuredClone(DEFAULT_HOT_KEYS), split: [{ key: 'hot', copies: 3 }] },
      });
      await splitting.hotKeys.settled();
    });
    afterAll(async () => {
      await splitting?.close();
    });

    it('a store or move over several slots into a split key is refused (its copies would not be written); reads of it work', async () => {
      await sides.flush();
      const c = await RawConnection.connect(splitting.address.port);
      try {
        expect(await c.call('SADD', 'a', 'x')).toBe(':1\r\n');
        expect(await c.call('SADD', 'b', 'y')).toBe(':1\r\n');
        const why = 'respool writes it on one node as part of a command over several slots, so its copies would not be written';
        expect(await c.call('SUNIONSTORE', 'hot', 'a', 'b')).toBe(`-ERR respool: SUNIONSTORE cannot be applied to split key 'hot': ${why}\r\n`);
        expect(await c.call('LMOVE', 'a', 'hot', 'LEFT', 'LEFT')).toBe(`-ERR respool: LMOVE cannot be applied to split key 'hot': ${why}\r\n`);
        expect(await c.call('BLMOVE', 'hot', 'a', 'LEFT', 'LEFT', '0')).toBe(`-ERR respool: BLMOVE cannot be applied to split key 'hot': ${why}\r\n`);
        expect(await c.call('SADD', 'hot', 'z')).toBe(':1\r\n');
        expect(await c.call('SUNION', 'hot', 'a')).toMatch(/^\*2\r\n/);
      } finally {
        c.close();
      }
    });
  });

  describe('limits.maxCrossSlotCopyBytes', () => {
    let small: RespoolProxy;
    beforeAll(async () => {
      const seed = sides.cluster.nodes[0]!;
      small = await startTestProxy([{ host: seed.host, port: seed.port }], { limits: { maxCrossSlotCopyBytes: 1024 } });
    });
    afterAll(async () => {
      await small?.close();
    });

    it('inputs larger than the limit: a clear error naming it, nothing copied; within it: the reply', async () => {
      await sides.flush();
      const c = await RawConnection.connect(small.address.port);
      try {
        expect(await c.call('SADD', 'a', ...Array.from({ length: 400 }, (_, i) => `member-${i}`))).toBe(':400\r\n');
        expect(await c.call('SADD', 'b', 'x')).toBe(':1\r\n');
        const reply = await c.call('SUNION', 'a', 'b');
        expect(reply).toMatch(/^-ERR respool: SUNION over keys in several slots runs on copies of them on one node; they are \d+ bytes, more than limits\.maxCrossSlotCopyBytes \(1kb\): put the keys under one hash tag, or raise the limit\r\n$/);
        expect(await c.call('SADD', 'c', 'y')).toBe(':1\r\n');
        expect(await c.call('SUNION', 'b', 'c')).toMatch(/^\*2\r\n/);
      } finally {
        c.close();
      }
    });
  });
});
