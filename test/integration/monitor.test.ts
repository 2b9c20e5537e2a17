import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type ValkeyCluster } from '../harness/valkey-processes.js';
import { RawClient } from '../harness/raw-client.js';
import type { RespoolProxy } from '../../src/server.js';
import { startTestProxy } from '../helpers/proxy.js';
import { sleep, waitFor } from '../helpers/wait.js';

describe('MONITOR through respool in front of a 3+3 cluster', () => {
  let cluster: ValkeyCluster;
  let proxy: RespoolProxy;

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 1 });
    const seed = cluster.nodes[0]!;
    proxy = await startTestProxy([{ host: seed.host, port: seed.port }]);
  });

  afterAll(async () => {
    await proxy?.close();
    await cluster?.stop();
  });

  it('shows each command once, as the client sent it, with the client\'s address; nothing respool sends on its own; no lease', async () => {
    const monitor = await RawClient.connect(proxy.address.port);
    expect(await monitor.call('MONITOR')).toBe('OK');
    const writer = await RawClient.connect(proxy.address.port);
    const addr = `${writer.socket.localAddress}:${writer.socket.localPort}`;
    // keys on each of the three primaries (their replicas apply the same writes)
    const keys = ['mon:a', 'mon:b', 'mon:c', 'mon:d', 'mon:e', 'mon:f'];
    for (const k of keys) await writer.call('set', k, 'v');
    await writer.call('INFO', 'server', 'memory'); // respool asks every primary for its INFO: not a client command there
    await writer.call('multi');
    await writer.call('Set', 'mon:a', 'w');
    await writer.call('exec');
    await writer.call('GET', 'mon:a');
    await waitFor(() => monitor.unsolicited.some((l) => String(l).includes('"GET"')), 'the GET line');
    await sleep(100);
    const lines = monitor.unsolicited.map(String);
    for (const line of lines) expect(line).toMatch(/^\d+\.\d{6} \[0 [^\]]+\] "/);
    const shown = lines.map((l) => l.slice(l.indexOf(']') + 2));
    expect(shown).toEqual([
      ...keys.map((k) => `"set" "${k}" "v"`),
      '"INFO" "server" "memory"',
      '"multi"',
      '"Set" "mon:a" "w"',
      '"exec"',
      '"GET" "mon:a"',
    ]);
    for (const line of lines) expect(line).toContain(`[0 ${addr}]`);
    expect(await leased(proxy)).toBe(0); // no connection of its own to any node
    monitor.close();
    writer.close();
    await waitFor(() => proxy.clientCount() === 0, 'both clients to be gone');
    const after = await RawClient.connect(proxy.address.port);
    expect(await after.call('SET', 'mon:z', '1')).toBe('OK'); // nobody monitors: nothing is fed
    after.close();
  });
});

/** Leased connections in use, from respool's own metrics. */
async function leased(proxy: RespoolProxy): Promise<number> {
  const text = await proxy.metrics.render();
  let total = 0;
  for (const m of text.matchAll(/^respool_leased_connections\{[^}]*state="in_use"[^}]*\} (\d+)/gm)) total += Number(m[1]);
  return total;
}
