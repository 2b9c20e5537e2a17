import cluster from 'node:cluster';
import type { WindowReport } from '../hotkeys/detector.js';

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

export { mergeWindowReports } from '../hotkeys/merge-reports.js';

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
