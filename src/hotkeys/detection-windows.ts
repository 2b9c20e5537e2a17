import type { Logger } from 'pino';
import type { TopologyRefresher } from '../cluster/topology-refresher.js';
import type { HotKeysConfig } from '../config/types.js';
import type { Metrics } from '../metrics/metrics.js';
import type { HotKeyDetector, WindowReport } from './detector.js';
import type { FleetHotKeys } from './fleet-hot-keys.js';
import { COPY_MARKER, MAX_AUTO_SPLIT, type SplitRule, type SplitRuleInput, type SplitRuleKind } from './split-key.js';

/** Sampled requests a key needs in a window before auto-split trusts its share. */
const AUTO_SPLIT_MIN_SAMPLES = 50;

/** What the windows need of the hot keys' rules (HotKeys implements it). */
export interface WindowsHost {
  readonly inFleet: boolean;
  rules(): SplitRule[];
  findRule(kind: SplitRuleKind, text: string): SplitRule | undefined;
  /** A local rule (auto: made by auto-split). */
  addRule(input: SplitRuleInput, auto?: boolean): unknown;
  /** A fleet's rule, through its shared state. */
  split(input: SplitRuleInput, auto?: boolean): Promise<{ added: boolean }>;
  readonly onAutoSplit: ((key: string, copies: number | null) => void) | null;
  /** Told each window this instance closed (the near cache's hot keys: nearCache.hot). */
  readonly onWindow: ((report: WindowReport) => void) | null;
}

export interface WindowsDeps {
  config: HotKeysConfig;
  refresher: TopologyRefresher;
  log: Logger;
  metrics?: Metrics;
}

/**
 * The detection windows: closed every detection.windowMs (a fleet's on the clock's boundaries,
 * every member's at once, merged over its members: fleet-hot-keys.ts), exported as metrics, and
 * the automatic splits they call for (hotKeys.autoSplit: a key past its share, once per fleet).
 */
export class DetectionWindows {
  private windowTimer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(
    private readonly host: WindowsHost,
    private readonly detector: HotKeyDetector | null,
    private readonly fleetHotKeys: FleetHotKeys | null,
    private readonly deps: WindowsDeps,
  ) {}

  start(): void {
    const detector = this.detector;
    if (detector !== null && this.fleetHotKeys !== null) {
      // A fleet's windows end on the clock's boundaries, every member's at once (fleet-hot-keys.ts).
      const first = setTimeout(() => {
        this.closeWindow();
        this.windowTimer = setInterval(() => this.closeWindow(), detector.options.windowMs);
        this.windowTimer.unref();
      }, this.fleetHotKeys.untilNextWindow());
      first.unref();
      this.windowTimer = first;
    } else if (detector !== null) {
      this.windowTimer = setInterval(() => this.closeWindow(), detector.options.windowMs);
      this.windowTimer.unref();
    }
  }

  stop(): void {
    this.stopped = true;
    if (this.windowTimer) clearInterval(this.windowTimer);
  }

  /** Closes the detection window now (the timer does it every windowMs). */
  closeWindow(): WindowReport | null {
    const detector = this.detector;
    if (detector === null) return null;
    const topology = this.deps.refresher.current;
    const report = detector.rotate(topology);
    this.exportWindow(report);
    this.host.onWindow?.(report);
    const fleet = this.fleetHotKeys;
    if (fleet === null) {
      this.autoSplit(report);
      return report;
    }
    // The fleet's members publish their windows at the same moment: decide once theirs arrived.
    const w = fleet.share(report);
    const settle = setTimeout(() => {
      const merged = fleet.merged(w);
      if (merged !== null && !this.stopped) this.autoSplit(merged);
    }, Math.min(1000, detector.options.windowMs / 4));
    settle.unref();
    return report;
  }

  /** A fleet: the last window merged over its members (with this instance's own rates); null alone. */
  fleetWindow(): WindowReport | null {
    return this.fleetHotKeys?.merged() ?? null;
  }

  private exportWindow(report: WindowReport): void {
    const raw = this.deps.metrics?.raw;
    if (raw === undefined) return;
    raw.hotkeys_node_request_share.reset();
    for (const n of report.nodes) raw.hotkeys_node_request_share.labels(n.node).set(n.share);
    raw.hotkeys_top_key_share.reset();
    raw.hotkeys_top_key_requests_per_second.reset();
    // Key names are label values only when the operator turned it on, and at most 20 ranks.
    const names = this.deps.config.detection.keyNamesInMetrics === true;
    report.topKeys.slice(0, 20).forEach((k, i) => {
      const key = !names ? '' : k.key.length > 100 ? `${k.key.slice(0, 100)}…` : k.key;
      raw.hotkeys_top_key_share.labels(String(i + 1), key).set(k.share);
      raw.hotkeys_top_key_requests_per_second.labels(String(i + 1), key).set(k.requestsPerSecond);
    });
    raw.hotkeys_requests_per_second.set(report.requestsPerSecond);
  }

  private autoSplit(report: WindowReport): void {
    const auto = this.deps.config.autoSplit;
    if (!auto.enabled || this.deps.refresher.current?.mode !== 'cluster') return;
    const autoCount = this.host.rules().filter((r) => r.auto).length;
    let room = MAX_AUTO_SPLIT - autoCount;
    for (const k of report.topKeys) {
      if (room <= 0) break;
      if (k.share < auto.share || k.share * report.sampled < AUTO_SPLIT_MIN_SAMPLES) continue;
      if (k.key.includes('\\x') || this.host.findRule('key', k.key) !== undefined) continue;
      if (Buffer.from(k.key, 'utf8').includes(COPY_MARKER)) continue;
      room--;
      if (this.host.inFleet) {
        // Once for the whole fleet: the rule goes into the shared state unless a member put it there first.
        const share = k.share;
        void this.host.split({ key: k.key, copies: auto.copies }, true).then(
          ({ added }) => { if (added) this.deps.log.info({ event: 'auto_split', key: k.key, share }, 'auto-split a hot key for the fleet'); },
          (err: Error) => this.deps.log.warn({ key: k.key, err: err.message }, 'fleet: auto-split not made'),
        );
        continue;
      }
      this.host.addRule({ key: k.key, copies: auto.copies }, true);
      this.host.onAutoSplit?.(k.key, auto.copies);
      this.deps.log.info({ event: 'auto_split', key: k.key, share: k.share }, 'auto-split a hot key');
    }
  }

  lastWindow(): WindowReport | null {
    return this.detector?.lastWindow ?? null;
  }

  currentWindow(): WindowReport {
    return this.detector!.current(this.deps.refresher.current);
  }
}
