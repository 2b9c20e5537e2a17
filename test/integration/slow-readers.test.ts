// Slow readers of big replies (issue 35): respool, with default settings, in a 256 MiB memory
// cgroup (as a container with a memory limit runs it; limits.maxMemory 'auto' reads the limit),
// in front of one valkey-server holding 20 values of 1 MiB. N slow clients each pipeline 20 GETs of
// the big values and read at 64 KiB/s; 4 normal clients beside them SET and GET small keys,
// every reply checked. respool must stay alive, the normal clients must get every reply (no
// error, nothing answered out of its turn, no acknowledged write lost), and the slow clients that
// hold the most are disconnected, largest first, with the reason logged. On a machine where the
// test cannot make a cgroup, the ceiling is set explicitly instead.
//
// The normal clients' p99 alone and beside the slow readers is printed; the ratio is a benchmark
// target, measured in bench/slow-readers.mjs (performance targets live in bench/, not in tests).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startStandalone, type ValkeyNode } from '../harness/valkey-processes.js';
import { quantile, SlowReader, verifiedClients } from '../harness/slow-readers.js';
import { RawConnection } from '../helpers/raw-resp.js';
import { encodeCommand } from '../harness/raw-client.js';
import { RespoolProcess, stopAll } from '../helpers/respool-process.js';
import { memoryCgroup } from '../helpers/memory-cgroup.js';

const MiB = 1024 * 1024;
const VALUES = 20;
const VALUE_BYTES = MiB;
const HOLDER_BYTES = 256 * 1024; // client/memory-ceiling.ts: nobody holding less is ever dropped

describe('slow readers of big replies in a 256 MiB container (issue 35)', () => {
  let node: ValkeyNode;

  beforeAll(async () => {
    node = await startStandalone();
    const c = await RawConnection.connect(node.port);
    const value = Buffer.alloc(VALUE_BYTES, 'v');
    c.write(Buffer.concat(Array.from({ length: VALUES }, (_, i) => encodeCommand(['SET', `big:${i}`, value]))));
    for (let i = 0; i < VALUES; i++) expect(await c.read(10_000)).toBe('+OK\r\n');
    c.close();
  });

  afterAll(async () => {
    await stopAll();
    await node?.stop();
  });

  for (const slowClients of [20, 200]) {
    it(`${slowClients} slow readers: respool alive, normal clients unharmed, the largest holders disconnected with the reason logged`, async () => {
      const cgroup = memoryCgroup(`respool-test-${process.pid}-${slowClients}`, 256 * MiB);
      const port = await freePort();
      const args = ['--upstream', `127.0.0.1:${node.port}`, '--mode', 'standalone', ...(cgroup === null ? ['--max-memory', '64mb'] : [])];
      const respool = await RespoolProcess.start(port, args, {}, 20_000, cgroup?.procs ?? null);
      const readers: SlowReader[] = [];
      try {
        const alone = await verifiedClients(port, 4, 1500, `alone${slowClients}`);
        expect(alone.errors).toEqual([]);
        for (let i = 0; i < slowClients; i++) {
          readers.push(await SlowReader.start({ port, keys: Array.from({ length: VALUES }, (_, k) => `big:${k}`), bytesPerSecond: 64 * 1024 }));
        }
        const during = await verifiedClients(port, 4, 5000, `normal${slowClients}`);

        // respool is alive and serves; the kernel killed nothing in its group.
        expect(respool.alive).toBe(true);
        const ping = await RawConnection.connect(port);
        expect(await ping.call('PING')).toBe('+PONG\r\n');
        ping.close();
        if (cgroup !== null) expect(cgroup.oomKills()).toBe(0);

        // The normal clients: every reply right, none lost, nothing acknowledged and lost.
        expect(during.errors).toEqual([]);
        expect(during.ok).toBeGreaterThan(100);
        const direct = await RawConnection.connect(node.port);
        for (const [key, value] of during.acknowledged) expect(await direct.call('GET', key)).toBe(`$${value.length}\r\n${value}\r\n`);
        direct.close();
        console.log(`${slowClients} slow readers${cgroup === null ? ' (no cgroup: --max-memory 64mb)' : ''}: normal clients' p99 alone ${quantile(alone.latencies, 0.99).toFixed(2)} ms, beside them ${quantile(during.latencies, 0.99).toFixed(2)} ms, ${during.ok} round trips`);

        // Who was disconnected for memory, and why: clients holding the most, largest first in each round.
        const drops = respool.events('client_dropped').filter((e) => e['reason'] === 'max_memory' && typeof e['client'] === 'string');
        if (slowClients === 200) expect(drops.length).toBeGreaterThan(0); // 200 × 20 MiB cannot all be held
        for (const d of drops) {
          expect(d['heldBytes'] as number).toBeGreaterThanOrEqual(HOLDER_BYTES);
          expect(String(d['msg'])).toContain('limits.maxMemory');
          expect(typeof d['round']).toBe('number');
        }
        const rounds = new Map<string, number[]>();
        // Grouped by the ceiling's round (two rounds can share a millisecond of the log's time).
        for (const d of drops) rounds.set(String(d['round']), [...(rounds.get(String(d['round'])) ?? []), d['heldBytes'] as number]);
        for (const held of rounds.values()) expect(held).toEqual([...held].sort((a, b) => b - a));
        expect(new Set(drops.map((d) => d['client'])).size).toBe(drops.length); // each once
        expect(drops.length).toBeLessThanOrEqual(slowClients); // only slow readers: a normal client holds a few bytes

        // The slow readers that were kept get every byte of their replies, right; the others an end.
        const oneReply = Buffer.concat([Buffer.from(`$${VALUE_BYTES}\r\n`), Buffer.alloc(VALUE_BYTES, 'v'), Buffer.from('\r\n')]);
        const expectBytes = VALUES * oneReply.length;
        let ended = 0;
        await Promise.all(readers.map(async (r) => {
          if (await r.drain(expectBytes, 20_000)) {
            if (r.received < expectBytes) ended++;
            return;
          }
          const bytes = r.bytes();
          expect(bytes.length).toBe(expectBytes);
          for (let i = 0; i < VALUES; i++) expect(bytes.subarray(i * oneReply.length, (i + 1) * oneReply.length).equals(oneReply)).toBe(true);
        }));
        expect(ended).toBeGreaterThanOrEqual(drops.length);
      } finally {
        for (const r of readers) r.stop();
        await respool.kill();
        await cgroup?.remove();
      }
    }, 90_000);
  }
});
