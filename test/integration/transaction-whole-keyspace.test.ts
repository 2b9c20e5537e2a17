/**
 * Whole-keyspace commands inside MULTI … EXEC through respool in front of a 3+3 cluster
 * (issue 28): FLUSHALL, FLUSHDB, DBSIZE, KEYS, RANDOMKEY queued in a transaction speak for every
 * shard, in their place among the transaction's commands — byte for byte what one standalone
 * valkey-server answers (RESP2 and RESP3, pipelined with plain commands around). Before, the
 * block ran on one primary: FLUSHALL emptied a third of the data and DBSIZE counted a third.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import calculateSlot from 'cluster-key-slot';
import { pipelineTranscript } from '../helpers/transcript.js';
import { startOneServerSides, type OneServerSides } from '../helpers/one-server.js';

const PROTOCOLS = [2, 3] as const;

describe('whole-keyspace commands inside MULTI … EXEC, as one server answers them', () => {
  let sides: OneServerSides;

  beforeAll(async () => {
    sides = await startOneServerSides();
  });

  afterAll(async () => {
    await sides?.stop();
  });

  const keysOnEveryPrimary = ['a', 'b', 'c'];

  it('the keys are on three primaries', async () => {
    const owners = await Promise.all(keysOnEveryPrimary.map(async (k) => (await sides.cluster.primaryForSlot(calculateSlot(k))).port));
    expect(new Set(owners).size).toBe(3);
  });

  for (const proto of PROTOCOLS) {
    it(`RESP${proto}: DBSIZE, KEYS, FLUSHALL, FLUSHDB, RANDOMKEY in a transaction, between keyed commands, pipelined: same bytes`, async () => {
      const pipeline: Array<Array<string | number>> = [
        ['SET', 'a', '1'],
        ['SET', 'b', '2'],
        ['SET', 'c', '3'],
        ['MULTI'],
        ['SET', '{t}x', '1'],
        ['DBSIZE'],
        ['KEYS', 'b'],
        ['FLUSHALL'],
        ['DBSIZE'],
        ['INCR', '{t}x'],
        ['RANDOMKEY'],
        ['DBSIZE'],
        ['EXEC'],
        ['DBSIZE'],
        ['GET', 'a'],
        ['GET', '{t}x'],
        ['SET', 'b', '4'],
        ['MULTI'],
        ['DBSIZE'],
        ['FLUSHDB'],
        ['EXEC'],
        ['DBSIZE'],
        ['MULTI'],
        ['DBSIZE'],
        ['EXEC'],
      ];
      await sides.flush();
      const expected = await pipelineTranscript(sides.standalone.port, proto, pipeline);
      await sides.flush();
      const actual = await pipelineTranscript(sides.proxy.address.port, proto, pipeline);
      expect(actual).toEqual(expected);
    });
  }

  it('FLUSHALL inside MULTI empties every primary', async () => {
    await sides.flush();
    const pipeline: Array<Array<string | number>> = [
      ...keysOnEveryPrimary.map((k) => ['SET', k, 'v']),
      ['MULTI'],
      ['FLUSHALL'],
      ['EXEC'],
    ];
    const out = await pipelineTranscript(sides.proxy.address.port, 2, pipeline);
    expect(out.at(-1)).toContain('*1\\r\\n+OK\\r\\n');
    const sizes = await Promise.all((await sides.cluster.primaries()).map(async (p) => Number(await sides.cluster.call(p, 'DBSIZE'))));
    expect(sizes).toEqual([0, 0, 0]);
  });
});
