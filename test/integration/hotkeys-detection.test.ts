import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Valkey } from 'iovalkey';
import { startCluster, type ValkeyCluster } from '../harness/valkey-processes.js';
import type { RespoolProxy } from '../../src/server.js';
import { DEFAULT_HOT_KEYS } from '../../src/config/hot-keys-config.js';
import type { WindowReport } from '../../src/hotkeys/detector.js';
import { clientFor, startTestProxy } from '../helpers/proxy.js';

// Long enough that the load (under a third of it) ends far from the window's end even when its
// last pipeline runs late, and that the checks after it read that window before the next closes.
const WINDOW_MS = 2500;

describe('hot-key detection on a 3-primary cluster', () => {
  let cluster: ValkeyCluster;
  let proxy: RespoolProxy;
  let client: Valkey;

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 0 });
    proxy = await startTestProxy([{ host: cluster.nodes[0]!.host, port: cluster.nodes[0]!.port }], {
      admin: { host: '127.0.0.1', port: 0 },
      hotKeys: {
        ...structuredClone(DEFAULT_HOT_KEYS),
        detection: { enabled: true, sampleRate: 0.05, windowMs: WINDOW_MS, topK: 5, keyNamesInMetrics: true }, // key names as label values: opt-in
        autoSplit: { enabled: true, share: 0.5, copies: 3 },
      },
    } as never);
    client = clientFor(proxy);
  }, 60_000);

  afterAll(async () => {
    client?.disconnect();
    await proxy?.close();
    await cluster?.stop();
  });

  /** Resolves with the report of the next window that closes. */
  async function nextWindow(): Promise<WindowReport> {
    const before = proxy.hotKeys.lastWindow();
    for (;;) {
      const now = proxy.hotKeys.lastWindow();
      if (now !== null && now !== before) return now;
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  it('ranks the hot key first within one window, with its rate, share and node; auto-splits it', async () => {
    await client.set('the-hot-key', 'v');
    await nextWindow(); // start counting at a window boundary
    const started = Date.now();
    let sent = 0;
    // ~90% of the reads on one key, the rest uniform over 500 keys, for the first 30% of one window.
    while (Date.now() - started < WINDOW_MS * 0.3) {
      const pipe = client.pipeline();
      for (let i = 0; i < 1000; i++) pipe.get(i % 10 === 0 ? `cold:${(sent + i) % 500}` : 'the-hot-key');
      await pipe.exec();
      sent += 1000;
    }
    const report = await nextWindow();
    // The very window of the load (the next one would end a whole WINDOW_MS later; +500: a late timer).
    expect(report.endedAt - started).toBeLessThanOrEqual(WINDOW_MS + 500);
    expect(report.topKeys[0]!.key).toBe('the-hot-key');
    expect(report.topKeys[0]!.share).toBeGreaterThan(0.8);
    expect(report.topKeys[0]!.share).toBeLessThan(0.97);
    const seconds = (report.endedAt - report.startedAt) / 1000;
    // The estimated rate is within 25% of what was sent (sampling at 5%).
    expect(report.topKeys[0]!.requestsPerSecond * seconds).toBeGreaterThan(sent * 0.9 * 0.75);
    expect(report.topKeys[0]!.requestsPerSecond * seconds).toBeLessThan(sent * 0.9 * 1.25);
    const owner = await cluster.primaryForSlot(report.topKeys[0]!.slot);
    expect(report.topKeys[0]!.node).toBe(`${owner.host}:${owner.port}`);
    const ownerShare = report.nodes.find((n) => n.node === `${owner.host}:${owner.port}`)!.share;
    expect(ownerShare).toBeGreaterThan(0.85);
    expect(report.nodes).toHaveLength(3);
    expect(report.nodes.reduce((a, n) => a + n.share, 0)).toBeCloseTo(1, 5);

    // The same through the RESPOOL command, the admin JSON and /metrics.
    const top = (await client.call('RESPOOL', 'HOTKEYS', 'COUNT', '1')) as string[][];
    expect(top).toHaveLength(1);
    expect(top[0]!.slice(0, 2)).toEqual(['key', 'the-hot-key']);
    const nodes = (await client.call('RESPOOL', 'NODES')) as string[][];
    expect(nodes).toHaveLength(3);
    const admin = `http://127.0.0.1:${proxy.adminAddress!.port}`;
    const json = (await (await fetch(`${admin}/hotkeys`)).json()) as { lastWindow: WindowReport };
    expect(json.lastWindow.topKeys[0]!.key).toBe('the-hot-key');
    const metrics = await (await fetch(`${admin}/metrics`)).text();
    expect(metrics).toMatch(/respool_hotkeys_top_key_share\{rank="1",key="the-hot-key"\} 0\.\d+/);
    expect(metrics).toMatch(new RegExp(`respool_hotkeys_node_request_share\\{node="${owner.host}:${owner.port}"\\} 0\\.\\d+`));

    // autoSplit (share 0.5) split it at the end of that window.
    expect(proxy.hotKeys.splitKey('the-hot-key')).toBeDefined();
    await proxy.hotKeys.settled();
    expect(proxy.hotKeys.splitKey('the-hot-key')!.active).toHaveLength(3);
    expect(new Set(proxy.hotKeys.splitKey('the-hot-key')!.active.map((c) => c.node)).size).toBe(3);
    for (let i = 0; i < 6; i++) expect(await client.get('the-hot-key')).toBe('v');
  });

  it('refuses RESPOOL HOTKEYS options it does not know', async () => {
    await expect(client.call('RESPOOL', 'HOTKEYS', 'BOGUS')).rejects.toThrow(/syntax/);
    const help = (await client.call('RESPOOL', 'HELP')) as string[];
    expect(help.join('\n')).toMatch(/RESPOOL SPLIT ADD/);
  });
});
