import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import calculateSlot from 'cluster-key-slot';
import { startCluster, type ValkeyCluster } from '../harness/valkey-processes.js';
import { encodeCommand, RawClient, type RespArg } from '../harness/raw-client.js';
import type { RespoolProxy } from '../../src/server.js';
import { startTestProxy } from '../helpers/proxy.js';

/**
 * The parts of a split multi-key command for one node travel as one batch (routing/split-command.ts)
 * and MGET's reply is the parts' values copied under one header: the exact bytes a node gives for
 * the same keys in one slot, in RESP2 and RESP3; a part's error; a node that dies with parts in flight.
 */

/** Sends `commands` on one connection and resolves with the bytes back once there are `want` (a count, or a test of them). */
function rawBytes(port: number, commands: RespArg[][], want: number | ((got: Buffer) => boolean)): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`timed out with ${JSON.stringify(Buffer.concat(chunks).toString('latin1'))}`));
    }, 10_000);
    socket.on('connect', () => socket.write(Buffer.concat(commands.map((c) => encodeCommand(c)))));
    socket.on('data', (chunk) => {
      chunks.push(chunk);
      const got = Buffer.concat(chunks);
      if (typeof want === 'number' ? got.length < want : !want(got)) return;
      clearTimeout(timer);
      socket.destroy();
      resolve(Buffer.concat(chunks));
    });
    socket.on('error', reject);
  });
}

const HELLO3_PREFIX = '%'; // HELLO 3's reply is a map

/** One key in each of `n` different slots (prefix + counter, slots checked). */
function keysInDistinctSlots(prefix: string, n: number): string[] {
  const seen = new Set<number>();
  const out: string[] = [];
  for (let i = 0; out.length < n; i++) {
    const k = `${prefix}:${i}`;
    const s = calculateSlot(k);
    if (seen.has(s)) continue;
    seen.add(s);
    out.push(k);
  }
  return out;
}

describe('split multi-key commands: one batch per node, replies copied', () => {
  let cluster: ValkeyCluster;
  let proxy: RespoolProxy;
  let port: number;

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 0 });
    const seed = cluster.nodes[0]!;
    proxy = await startTestProxy([{ host: seed.host, port: seed.port }]);
    port = proxy.address.port;
  });

  afterAll(async () => {
    await proxy?.close();
    await cluster?.stop();
  });

  it('MGET over many slots: exactly the bytes of one node answering the same keys, RESP2 and RESP3', async () => {
    const keys = keysInDistinctSlots('bytes', 12);
    const values: Array<Buffer | null> = keys.map((_, i) =>
      i % 4 === 3 ? null : i % 4 === 2 ? Buffer.alloc(0) : i % 4 === 1 ? Buffer.from(`bin\r\n$-1\r\n*2\x00${i}`, 'latin1') : Buffer.from('v'.repeat(200 + i)),
    );
    const mset: RespArg[] = ['MSET'];
    keys.forEach((k, i) => {
      if (values[i] !== null) mset.push(k, values[i]!);
    });
    const asked = [...keys, keys[0]!, keys[5]!]; // duplicates: each answered where it stands
    const askedValues = [...values, values[0]!, values[5]!];
    const bulk = (v: Buffer | null, nil: string) => (v === null ? Buffer.from(nil) : Buffer.concat([Buffer.from(`$${v.length}\r\n`), v, Buffer.from('\r\n')]));
    const expected = (nil: string) => Buffer.concat([Buffer.from(`*${asked.length}\r\n`), ...askedValues.map((v) => bulk(v, nil))]);

    const resp2 = expected('$-1\r\n');
    const got2 = await rawBytes(port, [mset, ['MGET', ...asked]], 5 + resp2.length);
    expect(got2.subarray(0, 5).toString()).toBe('+OK\r\n');
    expect(got2.subarray(5).toString('latin1')).toBe(resp2.toString('latin1'));

    // RESP3: after HELLO 3 and a PING that marks where the MGET's reply starts.
    const resp3 = expected('_\r\n');
    const mark = '$4\r\nmark\r\n';
    const all3 = await rawBytes(port, [['HELLO', '3'], ['PING', 'mark'], ['MGET', ...asked]], (b) => b.includes(mark) && b.length >= b.indexOf(mark) + mark.length + resp3.length);
    expect(all3.toString('latin1', 0, 1)).toBe(HELLO3_PREFIX);
    const after = all3.indexOf(mark) + mark.length;
    expect(all3.subarray(after).toString('latin1')).toBe(resp3.toString('latin1'));

    // DEL / EXISTS summed; MSET's OK; in a pipeline with plain commands, in order.
    const n = values.filter((v) => v !== null).length;
    const replies = await rawBytes(port, [mset, ['EXISTS', ...asked], ['DEL', ...keys], ['EXISTS', ...keys]], 5 + `:${n + 2}\r\n`.length + `:${n}\r\n`.length + 4);
    expect(replies.toString('latin1')).toBe(`+OK\r\n:${n + 2}\r\n:${n}\r\n:0\r\n`);
  });

  it("a part's error: one error naming the part, the others ran", async () => {
    const keys = keysInDistinctSlots('oom', 9);
    const victim = await cluster.primaryForSlot(calculateSlot(keys[4]!));
    await cluster.call(victim, 'CONFIG', 'SET', 'maxmemory', '1');
    try {
      const reply = (await rawBytes(port, [['MSET', ...keys.flatMap((k) => [k, 'x'])]], (b) => b.includes('\r\n'))).toString();
      expect(reply).toMatch(/^-ERR respool: MSET was split by slot into 9 parts; part \d \(slot \d+\) failed: OOM command not allowed when used memory > 'maxmemory'\.; \d of the other 8 parts succeeded and were not undone\r\n$/);
    } finally {
      await cluster.call(victim, 'CONFIG', 'SET', 'maxmemory', '0');
    }
    let onOthers = 0;
    for (const k of keys) if ((await cluster.primaryForSlot(calculateSlot(k))).port !== victim.port) onOthers++;
    const exists = (await rawBytes(port, [['EXISTS', ...keys]], (b) => b.includes('\r\n'))).toString();
    expect(exists).toBe(`:${onOthers}\r\n`);
  });

  it('a node that dies with parts in flight: an error for the written write, nothing re-sent, no hang; later commands answered', async () => {
    const keys = keysInDistinctSlots('die', 12);
    const victim = await cluster.primaryForSlot(calculateSlot(keys[0]!));
    // The victim sleeps, so the parts for it are written and in flight when it is killed. The
    // connection is open before DEBUG SLEEP is sent and the MSET waits 300 ms after it, so the node
    // is asleep when the parts arrive; the kill (~600 ms in) is well inside the 3 s sleep.
    const sleeper = await RawClient.connect(victim.port, { host: victim.host, timeoutMs: 0 });
    void sleeper.call('DEBUG', 'SLEEP', '3').catch(() => {}); // no reply: the node dies asleep
    await new Promise((r) => setTimeout(r, 300));
    const pending = rawBytes(port, [['MSET', ...keys.flatMap((k) => [k, 'y'])], ['PING']], (b) => b.toString().endsWith('+PONG\r\n'));
    await new Promise((r) => setTimeout(r, 300));
    await cluster.killNode(victim);
    sleeper.close();
    const reply = (await pending).toString();
    // The victim's parts were written: their fate is unknown, so the write is not re-sent.
    expect(reply).toMatch(/^-ERR respool: MSET was split by slot into 12 parts; part \d+ \(slot \d+\) failed: .+; \d+ of the other 11 parts succeeded and were not undone\r\n\+PONG\r\n$/);
  });
});
