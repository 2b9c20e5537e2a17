import type { Logger } from 'pino';
import calculateSlot from 'cluster-key-slot';
import { CommandFlag } from '../commands/command-flags.js';
import type { CommandSpec } from '../commands/command-table.js';
import type { TopologyRefresher } from '../cluster/topology-refresher.js';
import type { HotKeysConfig } from '../config/types.js';
import type { Metrics } from '../metrics/metrics.js';
import { encodeError } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import { UpstreamCall, type CallOwner } from '../routing/upstream-call.js';
import type { KeyedRouteHook } from '../routing/hooks.js';
import type { Router } from '../routing/router.js';
import type { UpstreamPools } from '../upstream/upstream-pools.js';
import { needsNodeCheck } from '../acl/command-check.js';
import { HotKeyDetector, displayKey, type WindowReport } from './detector.js';
import { SplitRuleTable } from './split-rule-table.js';
import { checkRule, type SplitKey, type SplitCopy, type SplitRule, type SplitRuleInput, type SplitRuleKind } from './split-key.js';
import { SplitIO } from './split-io.js';
import { CopyFills, type FillHost, type FleetFillDeps } from './copy-fill.js';
import { FleetHotKeys } from './fleet-hot-keys.js';
import { FleetRules } from './fleet-rules.js';
import { CopyPlacement, REPLACE_DELAY_MS, type PlacementHost } from './copy-placement.js';
import { DetectionWindows, type WindowsHost } from './detection-windows.js';
import { SplitKeySet } from './split-key-set.js';
import { hotKeysReport } from './hot-key-report.js';

export interface HotKeysDeps {
  config: HotKeysConfig;
  router: Router;
  refresher: TopologyRefresher;
  pools: UpstreamPools;
  log: Logger;
  metrics?: Metrics;
  /**
   * A fleet's shared state (cluster.fleetState): split rules live there (RESPOOL SPLIT, the admin
   * API, auto-splits and the config's rules all change it), copies are named alike on every
   * member, fills hold every member's writes, and writes wait for a lease on the state.
   */
  fleet?: FleetFillDeps | null;
}


export type { SplitRuleInput } from './split-key.js';

/**
 * Hot keys: detection (sampled Space-Saving top-k per window) and split copies (reads spread
 * over N copies on distinct primaries, writes fanned out to all of them; copies read only for
 * hotKeys.maxCopyAge after a fill from the original, copy-fill.ts). In a fleet the rules are the
 * fleet's (fleet-rules.ts), the windows merged over its members (fleet-hot-keys.ts), and writes
 * wait for this member's lease on the fleet's state.
 *
 * The router calls `route()` for every keyed request in cluster mode, but only while
 * `router.keyedHook` is set (routing/hooks.ts): this object sets it when detection is on, any
 * split rule exists or the fleet's state is in use, and clears it otherwise, so an idle feature
 * costs the hot path one null check. This file is the hook and the rules' changes;
 * split-rule-table.ts holds the rules, split-key-set.ts the split keys they make, split-io.ts
 * reads and writes them, copy-placement.ts places and repairs copies, copy-fill.ts fills them
 * with writes held, detection-windows.ts closes the detection windows and makes the automatic
 * splits, hot-key-report.ts is /hotkeys.
 */
export class HotKeys implements KeyedRouteHook, FillHost, PlacementHost, WindowsHost {
  readonly detector: HotKeyDetector | null;
  /** Fills of split copies with writes held (copy-fill.ts). */
  readonly fills: CopyFills;
  private readonly fleet: FleetFillDeps | null;
  /** A fleet's detection windows, merged over its members (fleet-hot-keys.ts). */
  private readonly fleetHotKeys: FleetHotKeys | null;
  /** A fleet's split rules, kept in its shared state (fleet-rules.ts). */
  private readonly fleetRules: FleetRules | null;
  /** The split rules (split-rule-table.ts). */
  private readonly table = new SplitRuleTable();
  /** The split keys the rules made (split-key-set.ts). */
  private readonly keys: SplitKeySet;
  /** Reads and writes of split keys (split-io.ts). */
  private readonly io: SplitIO;
  /** Where copies live and their repair (copy-placement.ts); the detection windows (detection-windows.ts). */
  private readonly placement: CopyPlacement;
  private readonly windows: DetectionWindows;
  readonly stats = { reads: 0, fallbacks: 0, writes: 0, partialFailures: 0, repairs: 0, repairFailures: 0, refused: 0 };

  constructor(private readonly deps: HotKeysDeps) {
    const { detection } = deps.config;
    this.detector = detection.enabled ? new HotKeyDetector(detection) : null;
    this.fleet = deps.fleet ?? null;
    this.keys = new SplitKeySet(this, deps, this.fleet !== null);
    this.fills = new CopyFills(this, this.fleet, deps.log, deps.metrics);
    this.fleetHotKeys = this.fleet !== null && this.detector !== null ? new FleetHotKeys(this.fleet.state, detection.windowMs, detection.topK) : null;
    this.fleetRules = this.fleet === null ? null : new FleetRules(this, this.fleet.state, deps.refresher, deps.log);
    this.placement = new CopyPlacement(this, deps);
    this.io = new SplitIO(deps, this.stats, this.fills, this.fleet, (split, copy) => this.repairCopy(split, copy));
    this.windows = new DetectionWindows(this, this.detector, this.fleetHotKeys, deps);
    if (this.fleet === null) for (const rule of deps.config.split) this.addRule(rule);
    this.updateHook();
  }

  start(): void {
    this.windows.start();
    this.deps.refresher.onChange(() => this.placement.scheduleReplace());
    if (this.deps.refresher.current !== null) this.placement.scheduleReplace();
    this.fleetRules?.start();
  }

  stop(): void {
    this.windows.stop();
    this.placement.stop();
    this.fleetRules?.stop();
    this.fills.stop();
  }

  /** True when split rules are the fleet's (cluster.fleetState). */
  get inFleet(): boolean {
    return this.fleet !== null;
  }

  /** A fleet: the config's split rules (hotKeys.split) are added to the fleet's state once it is read. */
  seedFleet(): void {
    for (const rule of this.deps.config.split) {
      void this.split(rule).catch((err: Error) => this.deps.log.warn({ rule, err: err.message }, 'fleet: a split rule of the config was not added'));
    }
  }

  // ---- hot path ---------------------------------------------------------------------------------

  /**
   * A keyed request in cluster mode (all keys in `slot`). Returns null to let the router forward
   * it unchanged, or the request/error reply that replaces it.
   */
  route(owner: CallOwner, raw: Buffer, args: Buffer[], spec: CommandSpec, keys: number[], slot: number, command: string, isScript: boolean): Buffer | true | null {
    const detector = this.detector;
    if (detector !== null && detector.shouldSample()) {
      const key = args[keys[0]!]!.toString('latin1');
      detector.record(key, slot);
      this.sampled?.(owner, key, slot, command); // big keys: this request's reply size (observe/big-keys.ts)
    }
    const fleet = this.fleet;
    if (fleet !== null && ((spec.flags & CommandFlag.WRITE) !== 0 || isScript)) {
      // A member past its lease may not know a split the fleet made meanwhile: its write could
      // miss the copies (fleet-state.ts). It was not sent, so trying again is safe.
      const now = Date.now();
      if (!fleet.state.writable(now)) return this.unconfirmed(command, now);
    }
    if (this.table.size === 0) return null;
    let split: SplitKey | null = null;
    let at = -1;
    for (let i = 0; i < keys.length; i++) {
      split = this.match(args[keys[i]!]!, slot);
      if (split !== null) {
        at = keys[i]!;
        break;
      }
    }
    if (split === null) return null;
    // A fill holds the key's reads and writes until the copies equal the original (copy-fill.ts).
    if (split.holds.size > 0) return this.park(owner, raw, args, spec, keys, slot, command, isScript, split);
    const flags = spec.flags;
    if (isScript) return this.refuse(command, split, 'scripts cannot be applied to split copies');
    // SORT … BY / GET read keys the request does not name: run on a copy as respool, they would
    // escape the node's check of a restricted user (acl/command-check.ts needsNodeCheck).
    if (needsNodeCheck(spec, args)) return this.refuse(command, split, 'its BY or GET patterns read other keys');
    if (keys.length === 1) {
      if (flags & CommandFlag.READONLY) return this.io.read(owner, raw, args, at, split, command);
      if (flags & CommandFlag.WRITE) {
        if (spec.tips.includes('nondeterministic_output')) {
          return this.refuse(command, split, 'its result is random, so the copies would differ');
        }
        return this.io.write(owner, raw, args, at, split, command);
      }
    } else if (flags & CommandFlag.READONLY) {
      return null; // a multi-key read: the original is always current
    }
    return this.refuse(command, split, 'it involves other keys or is neither a plain read nor a plain write');
  }

  passPart(args: readonly Buffer[], keys: readonly number[], order: Int32Array, from: number, to: number, slot: number, spec: CommandSpec): boolean {
    const fleet = this.fleet;
    if (fleet !== null && (spec.flags & CommandFlag.WRITE) !== 0 && !fleet.state.writable(Date.now())) return false;
    if (this.table.size !== 0) {
      for (let i = from; i < to; i++) if (this.match(args[keys[order[i]!]!]!, slot) !== null) return false;
    }
    const detector = this.detector;
    if (detector !== null && detector.shouldSample()) detector.record(args[keys[order[from]!]!]!.toString('latin1'), slot);
    return true;
  }

  refuseInTransaction(args: Buffer[], keys: number[], slot: number, command: string, why = 'a transaction runs on one node, so its copies would not be written'): string | null {
    const fleet = this.fleet;
    if (fleet !== null) {
      const now = Date.now();
      if (!fleet.state.writable(now)) return ProxyError.fleetStateUnconfirmed(Math.round(fleet.state.confirmedAgeMs(now)));
    }
    if (this.table.size === 0) return null;
    for (const k of keys) {
      const split = this.match(args[k]!, slot);
      if (split !== null) {
        this.stats.refused++;
        this.deps.metrics?.raw.split_refused_total.inc();
        return ProxyError.splitKeyUnsupported(command.replace('|', ' ').toUpperCase(), displayKey(split.id), why);
      }
    }
    return null;
  }

  private match(key: Buffer, slot: number): SplitKey | null {
    if (this.table.hasExactIn(slot)) {
      const id = key.toString('latin1');
      const hit = this.keys.get(id);
      if (hit !== undefined) return hit;
      const rule = this.table.exactRule(id);
      if (rule !== undefined) return this.keys.make(rule, key, id);
    }
    const rule = this.table.prefixOrPattern(key);
    if (rule === undefined) return null;
    const id = key.toString('latin1');
    return this.keys.get(id) ?? this.keys.make(rule, key, id);
  }

  /** A request on a held split key: copied and run again once the holds are over (in arrival order). */
  private park(owner: CallOwner, raw: Buffer, args: Buffer[], spec: CommandSpec, keys: number[], slot: number, command: string, isScript: boolean, split: SplitKey): Buffer | true {
    const rawCopy = Buffer.from(raw);
    const argsCopy = args.map((a) => Buffer.from(a));
    const rerun = () => {
      const routed = this.route(owner, rawCopy, argsCopy, spec, keys, slot, command, isScript);
      if (routed === true) return;
      if (routed !== null) return owner.onCallDone(routed, 0);
      const call = new UpstreamCall(owner, this.deps.router, rawCopy, command, slot);
      if ((spec.flags & CommandFlag.READONLY) !== 0) call.safeToRepeat = true;
      this.deps.router.send({ to: 'call', call: call });
    };
    if (!this.fills.park(split, rerun)) return encodeError(ProxyError.splitKeyBusy(displayKey(split.id)));
    return true;
  }

  releaseParked(split: SplitKey): void {
    const parked = split.parked;
    split.parked = [];
    for (const send of parked) send();
  }

  private unconfirmed(command: string, now: number): Buffer {
    this.deps.metrics?.commandErrorCounter(command, 'proxy').inc();
    return encodeError(ProxyError.fleetStateUnconfirmed(Math.round(this.fleet!.state.confirmedAgeMs(now))));
  }

  private refuse(command: string, split: SplitKey, why: string): Buffer {
    this.stats.refused++;
    this.deps.metrics?.raw.split_refused_total.inc();
    this.deps.metrics?.commandErrorCounter(command, 'proxy').inc();
    return encodeError(ProxyError.splitKeyUnsupported(command.replace('|', ' ').toUpperCase(), displayKey(split.id), why));
  }

  // ---- rules ------------------------------------------------------------------------------------

  /**
   * Adds a rule (or updates the copies of an existing one) to this instance's table. Throws Error
   * with a user-facing message. In a fleet the rule is added to the fleet's state instead (in the
   * background: split() is the form that waits for the outcome).
   */
  addRule(input: SplitRuleInput, auto = false): SplitRule {
    const { kind, text, copies } = checkRule(input);
    if (this.fleet !== null) {
      void this.split(input, auto).catch((err: Error) => this.deps.log.warn({ [kind]: text, err: err.message }, 'fleet: split rule not added'));
      return { kind, text, bytes: Buffer.from(text, 'utf8'), copies, auto, reading: false };
    }
    return this.addLocalRule(kind, text, copies, auto);
  }

  /** Adds (or updates) a rule in this instance's table (fleet-rules.ts applies the fleet's this way). */
  addLocalRule(kind: SplitRuleKind, text: string, copies: number | null, auto: boolean): SplitRule {
    const existing = this.findRule(kind, text);
    if (existing !== undefined) {
      existing.copies = copies;
      for (const split of this.keys.values()) if (split.rule === existing) void this.place(split);
      return existing;
    }
    const rule = this.table.add(kind, text, copies, auto);
    this.updateHook();
    if (kind === 'key' && this.deps.refresher.current !== null) this.keys.make(rule, rule.bytes, rule.bytes.toString('latin1'));
    return rule;
  }

  /**
   * Removes the rule with this key/prefix/pattern text (any kind when `kind` is omitted).
   * Deletes every copy of the keys it covered; the original keys stay. False when no such rule.
   * In a fleet: from the fleet's state, in two steps (unsplit).
   */
  async removeRule(text: string, kind?: SplitRuleKind): Promise<boolean> {
    return this.unsplit(text, kind);
  }

  /** Removes a rule from this instance's table, deleting the copies this instance made. */
  async removeLocalRule(text: string, kind?: SplitRuleKind): Promise<boolean> {
    const kinds: SplitRuleKind[] = kind ? [kind] : ['key', 'prefix', 'pattern'];
    let rule: SplitRule | undefined;
    for (const k of kinds) rule ??= this.findRule(k, text);
    if (rule === undefined) return false;
    this.table.remove(rule);
    this.updateHook();
    const deletions: Array<Promise<unknown>> = [];
    for (const split of this.keys.removeRule(rule)) {
      split.generation++; // a placement in progress must not install anything
      this.releaseParked(split); // they run against the original now
      for (const copy of [...split.active, ...split.pending]) {
        if (copy !== split.original) deletions.push(this.call(copy.slot, ['UNLINK', copy.name]).catch(() => {}));
      }
    }
    await Promise.all(deletions);
    return true;
  }

  /**
   * Adds a split rule and resolves once it is in force: here, at once; in a fleet, once every
   * member has it and a key's copies were filled once (fleet-rules.ts). `added`: false when the
   * rule was there already.
   */
  async split(input: SplitRuleInput, auto = false): Promise<{ rule: SplitRule; added: boolean }> {
    if (this.fleetRules !== null) return this.fleetRules.split(input, auto);
    const { kind, text, copies } = checkRule(input);
    const had = this.findRule(kind, text) !== undefined;
    return { rule: this.addLocalRule(kind, text, copies, auto), added: !had };
  }

  /** Removes a rule: here at once; in a fleet in two steps (fleet-rules.ts). False when there is no such rule. */
  async unsplit(text: string, kind?: SplitRuleKind): Promise<boolean> {
    return this.fleetRules !== null ? this.fleetRules.unsplit(text, kind) : this.removeLocalRule(text, kind);
  }

  rules(): SplitRule[] {
    return this.table.all();
  }

  splitKeys(): SplitKey[] {
    return [...this.keys.values()];
  }

  /** The concrete split key for `key`, if it is split and has been seen. */
  splitKey(key: string | Buffer): SplitKey | undefined {
    return this.keys.get(Buffer.isBuffer(key) ? key.toString('latin1') : Buffer.from(key, 'utf8').toString('latin1'));
  }

  findRule(kind: SplitRuleKind, text: string): SplitRule | undefined {
    return this.table.find(kind, text);
  }

  private updateHook(): void {
    // A fleet keeps the hook for the lease check on writes.
    const active = this.detector !== null || this.table.size > 0 || this.fleet !== null;
    this.deps.router.keyedHook = active ? this : null;
  }

  // ---- fills (copy-fill.ts) ---------------------------------------------------------------------

  splitFor(id: string): SplitKey | null {
    const known = this.keys.get(id);
    if (known !== undefined) return known;
    const key = Buffer.from(id, 'latin1');
    return this.match(key, calculateSlot(key));
  }

  barrier(split: SplitKey): Promise<void> {
    const node = this.deps.refresher.current?.primaryForSlot(split.original.slot);
    return node === undefined ? Promise.resolve() : this.deps.pools.barrier(node.address);
  }

  maxCopyAge(): number {
    return this.deps.config.maxCopyAge;
  }

  /** Exact rules whose key has no split key yet get one (a topology is known now). */
  materializeExact(): void {
    for (const rule of this.table.exactRules()) {
      const id = rule.bytes.toString('latin1');
      if (!this.keys.has(id)) this.keys.make(rule, rule.bytes, id);
    }
  }

  // ---- copies: placement and repair (copy-placement.ts) ------------------------------------------

  /** Places (or re-places) a split key's copies on the current topology and populates new ones. */
  place(split: SplitKey): Promise<void> {
    return this.placement.place(split);
  }

  /** Makes `copy` equal to the original (DUMP / RESTORE); false when it could not. */
  repairCopy(split: SplitKey, copy: SplitCopy): Promise<boolean> {
    return this.placement.repairCopy(split, copy);
  }

  /** Control-plane command on the primary serving `slot`; the decoded reply (errors throw). */
  call(slot: number, args: Array<string | Buffer | number>): Promise<unknown> {
    return this.placement.call(slot, args);
  }

  // ---- detection windows (detection-windows.ts) ---------------------------------------------------

  /** Closes the detection window now (the timer does it every windowMs). */
  closeWindow(): WindowReport | null {
    return this.windows.closeWindow();
  }

  /** A fleet: the last window merged over its members (with this instance's own rates); null alone. */
  fleetWindow(): WindowReport | null {
    return this.windows.fleetWindow();
  }

  /** Told of each sampled request (server.ts: measures its reply for big keys). */
  sampled: ((owner: CallOwner, key: string, slot: number, command: string) => void) | null = null;

  /** Told of each automatic split (workers pass it to the other workers: src/workers/peer-commands.ts). */
  onAutoSplit: ((key: string, copies: number | null) => void) | null = null;
  /** Told each detection window this instance closes (backend.ts: the near cache's hot keys). */
  onWindow: ((report: WindowReport) => void) | null = null;

  // ---- reports ----------------------------------------------------------------------------------

  lastWindow(): WindowReport | null {
    return this.windows.lastWindow();
  }

  currentWindow(): WindowReport {
    return this.windows.currentWindow();
  }

  /** The /hotkeys JSON (hot-key-report.ts). */
  report(): unknown {
    return hotKeysReport({
      config: this.deps.config,
      detector: this.detector,
      topology: this.deps.refresher.current,
      fleetWindow: this.fleetHotKeys !== null ? this.fleetWindow() : undefined,
      rules: this.rules(),
      keys: this.splitKeys(),
      stats: this.stats,
    });
  }

  /** Resolves once no placement or repair is running (tests, admin). */
  async settled(timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    await sleep(REPLACE_DELAY_MS + 10);
    while (Date.now() < deadline) {
      const busy = this.placement.busy || [...this.keys.values()].some((s) => s.pending.length > 0 || s.repairing.size > 0);
      if (!busy) return;
      await sleep(20);
    }
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
