// Hot keys judged on a fleet's traffic: a key that is 40% of all requests, spread evenly over three
// instances, is ranked first by every instance (with its local rate too) and auto-split once for
// the whole fleet — while a key one instance's clients hammer (60% of that instance's traffic,
// 20% of the fleet's) is ranked first nowhere but there locally, and is not split.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startCluster, type ValkeyCluster } from '../harness/valkey-processes.js';
import { RawClient, type RespReply } from '../harness/raw-client.js';
import type { RespoolProxy } from '../../src/server.js';
import { DEFAULT_HOT_KEYS } from '../../src/config/hot-keys-config.js';
import { startFleetMember } from '../helpers/proxy.js';
import { sleep, waitFor } from '../helpers/wait.js';


/** RESPOOL HOTKEYS' entries as field → value maps. */
function entries(reply: RespReply): Array<Record<string, string>> {
  return (reply as RespReply[][]).map((e) => {
    const out: Record<string, string> = {};
    for (let i = 0; i + 1 < e.length; i += 2) out[String(e[i])] = String(e[i + 1]);
    return out;
  });
}

/**
 * Waits until `p`'s last fleet window holds all three members' reports, early in a window. Windows
 * end on the clock's 1 s boundaries and the other members' reports arrive over the bus a moment
 * later: a query just after a boundary would see this member's report alone, and one just before
 * the next boundary could be answered from a window closed after the check.
 */
async function fleetWindowComplete(p: RespoolProxy): Promise<void> {
  await waitFor(() => {
    const inWindow = Date.now() % 1000;
    return inWindow >= 200 && inWindow < 600 && p.hotKeys.fleetWindow()?.members === 3;
  }, 'a fleet window over all three members', 5000, 10);
}

describe('fleet-wide hot keys over three instances', () => {
  let cluster: ValkeyCluster;
  const proxies: RespoolProxy[] = [];

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 1 });
    const ports = [await freePort(), await freePort(), await freePort()];
    const seed = [{ host: cluster.nodes[0]!.host, port: cluster.nodes[0]!.port }];
    for (const port of ports) {
      proxies.push(await startFleetMember(seed, ports, port, {
        hotKeys: {
          ...structuredClone(DEFAULT_HOT_KEYS),
          detection: { enabled: true, sampleRate: 1, windowMs: 1000, topK: 10, keyNamesInMetrics: false },
          autoSplit: { enabled: true, share: 0.35, copies: 3 },
        },
      }));
    }
    await waitFor(() => proxies.every((p) => p.fleetState!.liveMembers().length === 3), 'every member registered', 10_000);
  }, 60_000);

  afterAll(async () => {
    await Promise.all(proxies.map((p) => p.close()));
    await cluster?.stop();
  });

  it('ranks the fleet-wide hot key first on every instance and auto-splits it once', async () => {
    const clients = await Promise.all(proxies.map((p) => RawClient.connect(p.address.port)));
    let stop = false;
    let n = 0;
    // Every 20 ms: 20 GETs of fleet:k on each instance (40% of all), 30 of fleet:x on the first
    // only (20% of all, 60% of its own), 30 of distinct keys on the other two.
    const load = clients.map(async (c, i) => {
      while (!stop) {
        const batch: Array<Promise<RespReply>> = [];
        for (let j = 0; j < 20; j++) batch.push(c.call('GET', 'fleet:k'));
        for (let j = 0; j < 30; j++) batch.push(c.call('GET', i === 0 ? 'fleet:x' : `fleet:r:${n++}`));
        await Promise.all(batch);
        await sleep(20);
      }
    });
    try {
      // Two whole windows at least, then the decision after the second.
      await waitFor(() => proxies.some((p) => p.hotKeys.splitKey('fleet:k') !== undefined), 'the fleet to split fleet:k', 8000, 50);
      await sleep(2500); // more windows: nobody splits anything else, nobody splits it again
      for (const [i, c] of clients.entries()) {
        await fleetWindowComplete(proxies[i]!);
        const top = entries(await c.command('RESPOOL', 'HOTKEYS', 'COUNT', '3'));
        expect(top[0]!['key'], `instance ${i} ranks fleet:k first`).toBe('fleet:k');
        const share = Number(top[0]!['share']);
        expect(share).toBeGreaterThan(0.3);
        expect(share).toBeLessThan(0.5);
        // The local rate is this instance's third of the fleet's.
        const ratio = Number(top[0]!['local_requests_per_sec']) / Number(top[0]!['requests_per_sec']);
        expect(ratio).toBeGreaterThan(0.2);
        expect(ratio).toBeLessThan(0.45);
        expect(top[1]!['key']).toBe('fleet:x');
        expect(Number(top[1]!['local_requests_per_sec'])).toBe(i === 0 ? Number(top[1]!['requests_per_sec']) : 0);
        // Locally, the first instance's own clients make fleet:x its top key.
        if (i === 0) expect(proxies[0]!.hotKeys.lastWindow()!.topKeys[0]!.key).toBe('fleet:x');
        const nodes = entries(await c.command('RESPOOL', 'NODES'));
        expect(nodes.map((x) => x['local_requests_per_sec']).every((v) => v !== undefined)).toBe(true);
      }
      // Read while the load still runs (a window after it stopped would be empty), once complete.
      await fleetWindowComplete(proxies[1]!);
      const adminView = proxies[1]!.hotKeys.report() as { fleetWindow: { members: number; topKeys: Array<{ key: string }> } };
      expect(adminView.fleetWindow.members).toBe(3);
      expect(adminView.fleetWindow.topKeys[0]!.key).toBe('fleet:k');
    } finally {
      stop = true;
      await Promise.all(load);
      for (const c of clients) c.close();
    }
    // One automatic split in the fleet's state, made once, known everywhere; fleet:x not split.
    const rules = proxies[0]!.fleetState!.doc.rules;
    expect(rules.map((r) => [r.text, r.auto, r.copies])).toEqual([['fleet:k', true, 3]]);
    for (const p of proxies) expect(p.hotKeys.splitKey('fleet:x')).toBeUndefined();
  }, 30_000);
});
