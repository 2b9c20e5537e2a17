import type { HotKeyEntry, NodeShare, WindowReport } from './detector.js';

/**
 * Several detection windows as one: the workers of one respool (src/workers), or the members of a
 * fleet (fleet-hot-keys.ts). Rates are summed per key and per node and shares recomputed over
 * the summed rate; a report's `summary` (its wider top list) is used when it has one. The top
 * `topK` keys by summed rate are kept.
 */
export function mergeWindowReports(reports: readonly WindowReport[], topK: number): WindowReport {
  const rps = reports.reduce((a, r) => a + r.requestsPerSecond, 0);
  const keys = new Map<string, HotKeyEntry & { errorRps: number }>();
  for (const r of reports) {
    for (const k of r.summary ?? r.topKeys) {
      const have = keys.get(k.key);
      const errorRps = k.shareError * r.requestsPerSecond;
      if (have === undefined) keys.set(k.key, { ...k, errorRps });
      else {
        have.requestsPerSecond += k.requestsPerSecond;
        have.errorRps += errorRps;
      }
    }
  }
  const topKeys: HotKeyEntry[] = [...keys.values()]
    .sort((a, b) => b.requestsPerSecond - a.requestsPerSecond)
    .slice(0, topK)
    .map(({ errorRps, ...k }) => ({ ...k, share: rps > 0 ? k.requestsPerSecond / rps : 0, shareError: rps > 0 ? errorRps / rps : 0 }));
  const nodes = new Map<string, number>();
  for (const r of reports) for (const n of r.nodes) nodes.set(n.node, (nodes.get(n.node) ?? 0) + n.requestsPerSecond);
  const nodeShares: NodeShare[] = [...nodes]
    .map(([node, v]) => ({ node, requestsPerSecond: v, share: rps > 0 ? v / rps : 0 }))
    .sort((a, b) => (a.node < b.node ? -1 : 1));
  return {
    startedAt: Math.min(...reports.map((r) => r.startedAt)),
    endedAt: Math.max(...reports.map((r) => r.endedAt)),
    sampled: reports.reduce((a, r) => a + r.sampled, 0),
    estimatedRequests: reports.reduce((a, r) => a + r.estimatedRequests, 0),
    requestsPerSecond: rps,
    topKeys,
    nodes: nodeShares,
  };
}

