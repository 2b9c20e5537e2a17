import cluster from 'node:cluster';
import type { HotKeyEntry, NodeShare, WindowReport } from '../hotkeys/detector.js';

/**
 * With `workers: N` each worker's detector sees only its own clients' requests. RESPOOL HOTKEYS /
 * NODES on any worker answer for the whole respool: the worker asks the supervisor, which asks
 * every worker for its window report (IPC, 1 s at most) and returns them; the asking worker
 * merges them (mergeWindowReports) — rates summed per key and per node, shares recomputed over
 * the summed rate.
 */
export const REPORTS_REQUEST = 'respool:hotkey-reports-req';
export const REPORTS_RESPONSE = 'respool:hotkey-reports-res';
export const REPORT_REQUEST = 'respool:hotkey-report-req';
export const REPORT_RESPONSE = 'respool:hotkey-report-res';
export const REPORT_TIMEOUT_MS = 1000;

export interface ReportsMessage {
  type: string;
  id: number;
  current: boolean;
  report?: WindowReport;
  reports?: WindowReport[];
}

/** Many workers' window reports as one (the top `topK` keys by summed rate). */
export function mergeWindowReports(reports: readonly WindowReport[], topK: number): WindowReport {
  const rps = reports.reduce((a, r) => a + r.requestsPerSecond, 0);
  const keys = new Map<string, HotKeyEntry & { errorRps: number }>();
  for (const r of reports) {
    for (const k of r.topKeys) {
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

let nextId = 0;
const pending = new Map<number, (reports: WindowReport[]) => void>();

/** In a worker: every worker's report (this one's included), via the supervisor. */
export function requestWorkerReports(current: boolean): Promise<WindowReport[]> {
  return new Promise((resolve, reject) => {
    const id = ++nextId;
    const timer = setTimeout(() => {
      pending.delete(id);
      reject(new Error('the supervisor did not answer'));
    }, REPORT_TIMEOUT_MS * 2);
    pending.set(id, (reports) => {
      clearTimeout(timer);
      resolve(reports);
    });
    process.send!({ type: REPORTS_REQUEST, id, current } satisfies ReportsMessage);
  });
}

/** In a worker: answers the supervisor's report requests, and takes the merged answers back. */
export function serveWorkerReports(report: (current: boolean) => WindowReport): void {
  process.on('message', (msg: unknown) => {
    const m = msg as ReportsMessage | null;
    if (m?.type === REPORT_REQUEST) process.send!({ type: REPORT_RESPONSE, id: m.id, current: m.current, report: report(m.current) } satisfies ReportsMessage);
    else if (m?.type === REPORTS_RESPONSE) {
      const done = pending.get(m.id);
      pending.delete(m.id);
      done?.(m.reports ?? []);
    }
  });
}

export const inWorker = (): boolean => cluster.isWorker && process.send !== undefined;
