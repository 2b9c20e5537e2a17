import { describe, expect, it } from 'vitest';
import { mergeWindowReports } from '../../src/workers/hot-key-reports.js';
import type { WindowReport } from '../../src/hotkeys/detector.js';

const report = (rps: number, keys: Array<[string, number]>, nodes: Array<[string, number]>, t: [number, number]): WindowReport => ({
  startedAt: t[0], endedAt: t[1], sampled: rps, estimatedRequests: rps, requestsPerSecond: rps,
  topKeys: keys.map(([key, r]) => ({ key, slot: 1, node: 'n1', requestsPerSecond: r, share: r / rps, shareError: 0.01 })),
  nodes: nodes.map(([node, r]) => ({ node, requestsPerSecond: r, share: r / rps })),
});

describe('mergeWindowReports (workers)', () => {
  it('sums rates per key and per node and recomputes shares over the summed rate', () => {
    const a = report(100, [['hot', 60], ['a-only', 10]], [['n1', 70], ['n2', 30]], [1000, 2000]);
    const b = report(300, [['hot', 90], ['b-only', 120]], [['n1', 200], ['n2', 100]], [900, 2100]);
    const m = mergeWindowReports([a, b], 2);
    expect(m.requestsPerSecond).toBe(400);
    expect(m.topKeys.map((k) => [k.key, k.requestsPerSecond, k.share])).toEqual([['hot', 150, 0.375], ['b-only', 120, 0.3]]);
    expect(m.topKeys[0]!.shareError).toBeCloseTo((0.01 * 100 + 0.01 * 300) / 400);
    expect(m.nodes).toEqual([{ node: 'n1', requestsPerSecond: 270, share: 0.675 }, { node: 'n2', requestsPerSecond: 130, share: 0.325 }]);
    expect([m.startedAt, m.endedAt, m.sampled]).toEqual([900, 2100, 400]);
  });
});

describe('mergeHotKeyReports (the supervisor\'s /hotkeys)', () => {
  it('merges the workers\' windows, sums numeric stats, keeps the rest from the first worker', async () => {
    const { mergeHotKeyReports } = await import('../../src/workers/supervisor.js');
    const w = (rps: number, key: string, stats: number) => ({
      detection: { topK: 5 },
      lastWindow: report(rps, [[key, rps]], [['n1', rps]], [0, 1000]),
      currentWindow: null,
      split: { rules: [{ key: 'k', copies: 2 }] },
      stats: { splitReads: stats, note: 'x' },
    });
    const m = mergeHotKeyReports([w(100, 'a', 3), w(300, 'b', 4)]);
    expect(m.lastWindow!.topKeys.map((k) => k.key)).toEqual(['b', 'a']);
    expect(m.lastWindow!.requestsPerSecond).toBe(400);
    expect(m.currentWindow).toBeNull();
    expect(m.stats).toEqual({ splitReads: 7, note: 'x' });
    expect(m['split']).toEqual({ rules: [{ key: 'k', copies: 2 }] });
    expect(m['workers']).toBe(2);
  });
});
