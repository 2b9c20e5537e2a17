/**
 * The rollback window (migration.rollbackWindowMs): after the cutover every write through respool
 * is carried back to the source, and ABORT within the window switches respool back to it with
 * nothing lost; past the window ABORT is refused; a source that cannot restore the target's DUMP
 * format (Valkey 8 → Redis 7.0) gets no window, and STATUS says why.
 */
import { existsSync } from 'node:fs';
import { cutoverRecordPath } from '../../src/migration/cutover-record.js';
import { afterAll, describe, expect, it } from 'vitest';
import type { Valkey } from 'iovalkey';
import { startStandalone, type ValkeyNode } from '../harness/valkey-processes.js';
import type { RespoolProxy } from '../../src/server.js';
import { clientFor, startTestProxy } from '../helpers/proxy.js';
import { sleep, waitFor } from '../helpers/wait.js';

async function status(client: Valkey): Promise<Record<string, string>> {
  const flat = (await client.call('RESPOOL', 'MIGRATE', 'STATUS')) as unknown[];
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) out[String(flat[i])] = String(flat[i + 1]);
  return out;
}

describe('migration: the rollback window', () => {
  const nodes: ValkeyNode[] = [];
  const proxies: RespoolProxy[] = [];
  const clients: Valkey[] = [];

  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await Promise.all(proxies.map((p) => p.close()));
    await Promise.all(nodes.map((n) => n.stop()));
  });

  async function migrated(rollbackWindowMs: number, sourceServer: 'valkey' | 'redis' = 'valkey', targetServer: 'valkey' | 'redis' = 'valkey') {
    const [source, target] = await Promise.all([startStandalone({ server: sourceServer }), startStandalone({ server: targetServer })]);
    nodes.push(source, target);
    await source.call('SET', 'counter', '10');
    await source.call('RPUSH', 'queue', 'a', 'b');
    const proxy = await startTestProxy([{ host: '127.0.0.1', port: source.port }], { migration: { rollbackWindowMs } });
    proxies.push(proxy);
    const client = clientFor(proxy);
    clients.push(client);
    expect(await client.call('RESPOOL', 'MIGRATE', 'START', target.address)).toBe('OK');
    await waitFor(async () => (await status(client)).state === 'synced', 'synced', 10_000, 20);
    expect(String(await client.call('RESPOOL', 'MIGRATE', 'CUTOVER'))).toMatch(/^cut over/);
    return { source, target, client };
  }

  it('writes after the cutover reach the source too; ABORT within the window switches back with nothing lost', async () => {
    const { source, target, client } = await migrated(60_000);
    expect(await client.incr('counter')).toBe(11); // on the target now
    expect(await client.rpush('queue', 'c')).toBe(3);
    expect(await client.set('fresh', 'x', 'PX', 600_000)).toBe('OK');
    expect(await client.del('gone-after')).toBe(0);
    expect(await client.lpop('queue')).toBe('a');
    const s = await status(client);
    expect(s.state).toBe('cut-over');
    expect(Number(s.rollback_until)).toBeGreaterThan(Date.now());
    await waitFor(async () => (await source.call('GET', 'counter')) === '11' && (await source.call('LLEN', 'queue')) === 2, 'the writes carried back', 5_000, 20);
    const record = cutoverRecordPath(proxies.at(-1)!.config.migration.stateFile);
    expect(existsSync(record)).toBe(true); // a restart now would start on the target
    expect(await client.call('RESPOOL', 'MIGRATE', 'ABORT')).toBe('rolled back: the upstreams are the source again');
    expect((await status(client)).state).toBe('aborted');
    expect(existsSync(record)).toBe(false); // back on the configured upstreams: nothing to follow at a restart
    // respool serves from the source again, which holds every write made on the target.
    expect(await client.incr('counter')).toBe(12);
    expect(await source.call('GET', 'counter')).toBe('12');
    expect(await target.call('GET', 'counter')).toBe('11');
    expect(await client.lrange('queue', 0, -1)).toEqual(['b', 'c']);
    const pttl = Number(await source.call('PTTL', 'fresh'));
    expect(pttl).toBeGreaterThan(590_000);
  }, 60_000);

  it('past the window ABORT is refused and the source is no longer written', async () => {
    const { source, client } = await migrated(300);
    await sleep(500);
    expect(await client.set('late', '1')).toBe('OK');
    await expect(client.call('RESPOOL', 'MIGRATE', 'ABORT')).rejects.toThrow(/no migration to abort \(cut-over: its rollback window is over\)/);
    await sleep(100);
    expect(await source.call('EXISTS', 'late')).toBe(0);
    expect((await status(client)).reason).toBe('the rollback window ended');
  }, 60_000);

  it('a Redis 7.0 source cannot restore Valkey 8\'s DUMP format: no window, and STATUS says why', async () => {
    const { source, client } = await migrated(60_000, 'redis', 'valkey');
    const s = await status(client);
    expect(s.state).toBe('cut-over');
    expect(s.reason).toMatch(/^no rollback window: the source cannot restore the target's DUMP format/);
    expect(s.rollback_until).toBe('null');
    expect(await client.set('after', '1')).toBe('OK');
    await sleep(100);
    expect(await source.call('EXISTS', 'after')).toBe(0);
    await expect(client.call('RESPOOL', 'MIGRATE', 'ABORT')).rejects.toThrow(/no migration to abort/);
  }, 60_000);
});
