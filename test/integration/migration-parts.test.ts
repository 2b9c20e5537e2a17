/**
 * A key too big for one RESTORE (migration.maxPayloadBytes, here its least: 1 KiB) is copied in
 * parts (src/migration/copy-in-parts.ts): a string, a hash, a set, a sorted set, a list and a
 * stream with a consumer group arrive whole on the target, with their expiries; while the copy
 * of a big key is in parts, writes to it through respool end up on the target too.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { startStandalone, type ValkeyNode } from '../harness/valkey-processes.js';
import type { RespoolProxy } from '../../src/server.js';
import { clientFor, startTestProxy } from '../helpers/proxy.js';
import { waitFor } from '../helpers/wait.js';
import { Valkey } from 'iovalkey';

const sha = (b: unknown) => createHash('sha256').update(b as Buffer | string).digest('hex');

describe('migration: keys copied in parts', () => {
  let source: ValkeyNode;
  let target: ValkeyNode;
  let proxy: RespoolProxy;
  let client: Valkey;

  beforeAll(async () => {
    [source, target] = await Promise.all([startStandalone(), startStandalone()]);
  }, 60_000);

  afterAll(async () => {
    client?.disconnect();
    await proxy?.close();
    await Promise.all([source?.stop(), target?.stop()]);
  });

  it('every type arrives whole, with its expiry; the stream keeps its entries, its IDs and its group', async () => {
    const big = Buffer.alloc(3 * 1024 * 1024 + 17);
    for (let i = 0; i < big.length; i++) big[i] = (i * 7919) % 251; // not compressible into one small DUMP
    await source.call('SET', 'big:string', big);
    const fields: string[] = [];
    for (let i = 0; i < 3_000; i++) fields.push(`f${i}`, `v${i}`);
    await source.call('HSET', 'big:hash', ...fields);
    await source.call('PEXPIRE', 'big:hash', 600_000);
    await source.call('SADD', 'big:set', ...Array.from({ length: 3_000 }, (_, i) => `m${i}`));
    await source.call('ZADD', 'big:zset', ...Array.from({ length: 3_000 }, (_, i) => [String(i / 4), `m${i}`]).flat());
    await source.call('RPUSH', 'big:list', ...Array.from({ length: 2_500 }, (_, i) => `e${i}`));
    for (let i = 0; i < 1_500; i++) await source.call('XADD', 'big:stream', `1-${i + 1}`, 'n', String(i));
    await source.call('XDEL', 'big:stream', '1-1500'); // the stream's last ID is past its last entry
    await source.call('XGROUP', 'CREATE', 'big:stream', 'readers', '1-700', 'ENTRIESREAD', '700');

    proxy = await startTestProxy([{ host: '127.0.0.1', port: source.port }], { migration: { maxPayloadBytes: 1024, verifySample: 100 } });
    client = clientFor(proxy);
    expect(await client.call('RESPOOL', 'MIGRATE', 'START', target.address)).toBe('OK');
    // A write to the big string while it may be in parts: the target ends with it too.
    await client.append('big:string', 'tail');
    await waitFor(async () => String(await statusOf(client, 'state')) === 'synced', 'synced', 30_000, 50);

    const onTarget = async (...args: Array<string | number>) => target.call(...args);
    const onSource = async (...args: Array<string | number>) => source.call(...args);
    const [fromTarget, fromSource] = [new Valkey({ port: target.port }), new Valkey({ port: source.port })];
    try {
      const copied = await fromTarget.getBuffer('big:string');
      expect(copied?.length).toBe(big.length + 4);
      expect(sha(copied)).toBe(sha(await fromSource.getBuffer('big:string')));
      expect(sha(copied)).toBe(sha(Buffer.concat([big, Buffer.from('tail')])));
    } finally {
      fromTarget.disconnect();
      fromSource.disconnect();
    }
    expect(await onTarget('HLEN', 'big:hash')).toBe(3_000);
    expect(await onTarget('HGET', 'big:hash', 'f2999')).toBe('v2999');
    expect(Math.abs(Number(await onTarget('PTTL', 'big:hash')) - Number(await onSource('PTTL', 'big:hash')))).toBeLessThan(1_000);
    expect(await onTarget('SCARD', 'big:set')).toBe(3_000);
    expect(await onTarget('ZSCORE', 'big:zset', 'm2999')).toBe('749.75');
    expect(await onTarget('LRANGE', 'big:list', 2_498, -1)).toEqual(['e2498', 'e2499']);
    expect(await onTarget('XLEN', 'big:stream')).toBe(1_499);
    const info = (await onTarget('XINFO', 'STREAM', 'big:stream')) as unknown[];
    expect(String(info[info.findIndex((v) => String(v) === 'last-generated-id') + 1])).toBe('1-1500');
    const groups = (await onTarget('XINFO', 'GROUPS', 'big:stream')) as unknown[][];
    expect(groups.map((g) => String(g[1]))).toEqual(['readers']);
    expect(String(groups[0]![groups[0]!.findIndex((v) => String(v) === 'last-delivered-id') + 1])).toBe('1-700');
    expect(Number(await statusOf(client, 'bytes'))).toBeGreaterThan(big.length);
  }, 90_000);
});

async function statusOf(client: Valkey, field: string): Promise<unknown> {
  const flat = (await client.call('RESPOOL', 'MIGRATE', 'STATUS')) as unknown[];
  return flat[flat.findIndex((v) => String(v) === field) + 1];
}
