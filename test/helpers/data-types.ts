import type { Valkey } from 'iovalkey';
import { expect } from 'vitest';

/**
 * Single-key commands of every data type, run through `client` against keys under `prefix`
 * (a hash tag is not needed: each command names one key). Asserts each answer as Valkey gives it.
 */
export async function exerciseDataTypes(client: Valkey, prefix: string): Promise<void> {
  const k = (name: string) => `${prefix}:${name}`;

  // strings
  expect(await client.set(k('str'), 'hello')).toBe('OK');
  expect(await client.get(k('str'))).toBe('hello');
  expect(await client.append(k('str'), ' world')).toBe(11);
  expect(await client.strlen(k('str'))).toBe(11);
  expect(await client.getrange(k('str'), 0, 4)).toBe('hello');
  expect(await client.set(k('n'), '10')).toBe('OK');
  expect(await client.incr(k('n'))).toBe(11);
  expect(await client.incrby(k('n'), 5)).toBe(16);
  expect(await client.incrbyfloat(k('n'), '0.5')).toBe('16.5');
  expect(await client.set(k('ttl'), 'v', 'EX', 100)).toBe('OK');
  expect(await client.ttl(k('ttl'))).toBeGreaterThan(90);
  expect(await client.set(k('nx'), 'a', 'NX')).toBe('OK');
  expect(await client.set(k('nx'), 'b', 'NX')).toBeNull();
  expect(await client.getdel(k('nx'))).toBe('a');
  expect(await client.exists(k('nx'))).toBe(0);
  const big = Buffer.alloc(300_000, 7);
  expect(await client.set(k('big'), big)).toBe('OK');
  expect((await client.getBuffer(k('big')))!.equals(big)).toBe(true);

  // bitmaps and HyperLogLog (strings underneath)
  expect(await client.setbit(k('bits'), 7, 1)).toBe(0);
  expect(await client.getbit(k('bits'), 7)).toBe(1);
  expect(await client.bitcount(k('bits'))).toBe(1);
  expect(await client.pfadd(k('hll'), 'a', 'b', 'c')).toBe(1);
  expect(await client.pfcount(k('hll'))).toBe(3);

  // lists
  expect(await client.rpush(k('list'), 'a', 'b', 'c')).toBe(3);
  expect(await client.lpush(k('list'), 'z')).toBe(4);
  expect(await client.lrange(k('list'), 0, -1)).toEqual(['z', 'a', 'b', 'c']);
  expect(await client.lpop(k('list'))).toBe('z');
  expect(await client.llen(k('list'))).toBe(3);
  expect(await client.lindex(k('list'), 1)).toBe('b');

  // hashes
  expect(await client.hset(k('hash'), 'f1', 'v1', 'f2', 'v2')).toBe(2);
  expect(await client.hget(k('hash'), 'f1')).toBe('v1');
  expect(await client.hgetall(k('hash'))).toEqual({ f1: 'v1', f2: 'v2' });
  expect(await client.hincrby(k('hash'), 'count', 3)).toBe(3);
  expect(await client.hdel(k('hash'), 'f2')).toBe(1);
  expect((await client.hkeys(k('hash'))).sort()).toEqual(['count', 'f1']);

  // sets
  expect(await client.sadd(k('set'), 'x', 'y', 'z')).toBe(3);
  expect(await client.sismember(k('set'), 'y')).toBe(1);
  expect((await client.smembers(k('set'))).sort()).toEqual(['x', 'y', 'z']);
  expect(await client.scard(k('set'))).toBe(3);
  expect(await client.srem(k('set'), 'x')).toBe(1);

  // sorted sets
  expect(await client.zadd(k('zset'), 1, 'one', 2, 'two', 3, 'three')).toBe(3);
  expect(await client.zrange(k('zset'), 0, -1, 'WITHSCORES')).toEqual(['one', '1', 'two', '2', 'three', '3']);
  expect(await client.zscore(k('zset'), 'two')).toBe('2');
  expect(await client.zincrby(k('zset'), 10, 'one')).toBe('11');
  expect(await client.zrank(k('zset'), 'one')).toBe(2);
  expect(await client.zrangebyscore(k('zset'), 2, 3)).toEqual(['two', 'three']);

  // streams
  const id = await client.xadd(k('stream'), '*', 'field', 'value');
  expect(id).toMatch(/^\d+-\d+$/);
  expect(await client.xlen(k('stream'))).toBe(1);
  const entries = await client.xrange(k('stream'), '-', '+');
  expect(entries).toEqual([[id, ['field', 'value']]]);
  expect(await client.xgroup('CREATE', k('stream'), 'g', '0')).toBe('OK');
  const read = (await client.xreadgroup('GROUP', 'g', 'c', 'COUNT', 1, 'STREAMS', k('stream'), '>')) as unknown[];
  expect(read).toHaveLength(1);

  // geo
  expect(await client.geoadd(k('geo'), 13.361389, 38.115556, 'Palermo', 15.087269, 37.502669, 'Catania')).toBe(2);
  expect(Number(await client.geodist(k('geo'), 'Palermo', 'Catania', 'KM'))).toBeCloseTo(166.27, 1);

  // generic key commands
  expect(await client.type(k('zset'))).toBe('zset');
  expect(await client.expire(k('list'), 100)).toBe(1);
  expect(await client.persist(k('list'))).toBe(1);
  expect(await client.del(k('list'))).toBe(1);
  expect(await client.unlink(k('set'))).toBe(1);
  expect(await client.exists(k('hash'))).toBe(1);
  await expect(client.lpush(k('str'), 'x')).rejects.toThrow(/WRONGTYPE/);
}
