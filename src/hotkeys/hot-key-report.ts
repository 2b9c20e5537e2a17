import type { Topology } from '../cluster/topology.js';
import type { HotKeysConfig } from '../config/types.js';
import { displayKey, type HotKeyDetector, type WindowReport } from './detector.js';
import type { SplitKey, SplitRule } from './split-key.js';

/** What the /hotkeys report is made of (hot-keys.ts gathers it). */
export interface HotKeysView {
  config: HotKeysConfig;
  detector: HotKeyDetector | null;
  topology: Topology | null;
  /** A fleet's last window over every member; undefined alone. */
  fleetWindow: WindowReport | null | undefined;
  rules: SplitRule[];
  keys: SplitKey[];
  stats: object;
}

/** The /hotkeys JSON: detection and its windows, the split rules and keys with their copies, the counters. */
export function hotKeysReport(view: HotKeysView): unknown {
  const det = view.detector;
  return {
    detection: { ...view.config.detection, enabled: det !== null },
    lastWindow: det?.lastWindow ?? null,
    currentWindow: det ? det.current(view.topology) : null,
    // A fleet: the last window over every member that reported it (localRequestsPerSecond: this one's).
    ...(view.fleetWindow !== undefined ? { fleetWindow: view.fleetWindow } : {}),
    split: {
      readChoice: view.config.readChoice,
      autoSplit: view.config.autoSplit,
      rules: view.rules.map((r) => ({ [r.kind]: r.text, copies: r.copies, auto: r.auto })),
      keys: view.keys.map((s) => describeSplit(s, view.topology)),
    },
    stats: view.stats,
  };
}

/** One split key as /hotkeys shows it: its rule, its copies and where they are, the ones still being placed. */
function describeSplit(split: SplitKey, topology: Topology | null): unknown {
  const rule = split.rule;
  return {
    key: displayKey(split.id),
    rule: { [rule.kind]: rule.text },
    copies: split.active.map((c) => ({
      name: displayKey(c.id),
      slot: c.slot,
      node: topology?.primaryForSlot(c.slot)?.address ?? c.node,
      original: c === split.original,
    })),
    pending: split.pending.map((c) => displayKey(c.id)),
  };
}
