import type { FleetState } from '../fleet/fleet-state.js';
import type { WindowReport } from './detector.js';
import { mergeWindowReports } from './merge-reports.js';

/**
 * Hot keys judged on the whole fleet's traffic. Each member sees only its own clients, so a key
 * hot across the fleet looks 1/N as hot to each, and a key one member's clients hammer looks hot
 * there alone. In a fleet the detection windows are aligned on the clock (window w covers
 * [w·windowMs, (w+1)·windowMs)); at the end of each window every member publishes its report —
 * its top keys (SUMMARY_FACTOR × topK of them) and its per-node rates — on the fleet bus, and
 * every member merges the reports of one window (merge-reports.ts): rates summed per key and per
 * node, shares over the fleet's rate. RESPOOL HOTKEYS / NODES, /hotkeys and autoSplit use the
 * merged window, which still carries each key's and node's local rate. A member whose report did
 * not arrive is missing from that window only (`members` counts those that did).
 */
const WINDOWS_KEPT = 3;

export class FleetHotKeys {
  /** window index → member id → its report. */
  private readonly windows = new Map<number, Map<string, WindowReport>>();

  constructor(
    private readonly state: FleetState,
    private readonly windowMs: number,
    private readonly topK: number,
  ) {
    state.on('report', (m) => {
      const report = m['r'] as WindowReport | undefined;
      if (typeof m['w'] === 'number' && typeof m['m'] === 'string' && report !== undefined && Array.isArray(report.topKeys)) {
        this.keep(m['w'], m['m'], report);
      }
    });
  }

  /** The window a report that ended at `endedAt` belongs to. */
  windowOf(endedAt: number): number {
    return Math.round(endedAt / this.windowMs) - 1;
  }

  /** Milliseconds until the next window boundary. */
  untilNextWindow(now = Date.now()): number {
    return this.windowMs - (now % this.windowMs);
  }

  /** This member's closed window: kept, and published to the others. */
  share(report: WindowReport): number {
    const w = this.windowOf(report.endedAt);
    this.keep(w, this.state.memberId, report);
    void this.state.publish({ t: 'report', m: this.state.memberId, w, r: report }).catch(() => undefined);
    return w;
  }

  /** Window `w` (default: the last this member closed) merged over the members that reported it, with this member's own rates. */
  merged(w?: number): WindowReport | null {
    const window = w ?? this.lastOwnWindow();
    if (window === null) return null;
    const reports = this.windows.get(window);
    if (reports === undefined || reports.size === 0) return null;
    const merged = mergeWindowReports([...reports.values()], this.topK);
    const own = reports.get(this.state.memberId);
    const localKeys = new Map((own?.summary ?? own?.topKeys ?? []).map((k) => [k.key, k.requestsPerSecond]));
    const localNodes = new Map((own?.nodes ?? []).map((n) => [n.node, n.requestsPerSecond]));
    return {
      ...merged,
      members: reports.size,
      topKeys: merged.topKeys.map((k) => ({ ...k, localRequestsPerSecond: localKeys.get(k.key) ?? 0 })),
      nodes: merged.nodes.map((n) => ({ ...n, localRequestsPerSecond: localNodes.get(n.node) ?? 0 })),
    };
  }

  private lastOwnWindow(): number | null {
    let last: number | null = null;
    for (const [w, reports] of this.windows) if (reports.has(this.state.memberId) && (last === null || w > last)) last = w;
    return last;
  }

  private keep(w: number, member: string, report: WindowReport): void {
    let reports = this.windows.get(w);
    if (reports === undefined) {
      reports = new Map();
      this.windows.set(w, reports);
      const oldest = [...this.windows.keys()].sort((a, b) => a - b);
      while (oldest.length > WINDOWS_KEPT) this.windows.delete(oldest.shift()!);
    }
    reports.set(member, report);
  }
}
