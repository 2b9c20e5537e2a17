import type { Logger } from 'pino';
import type { HotKeysConfig } from '../config/types.js';
import type { Metrics } from '../metrics/metrics.js';
import { encodeError } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import { UpstreamCall, type CallOwner } from '../routing/upstream-call.js';
import type { Router } from '../routing/router.js';
import { displayKey } from './detector.js';
import { pickCopy, rewriteKey, type SplitCopy, type SplitKey } from './split-key.js';
import { SplitRead, SplitWrite, isEmptyReply, type SplitOwner } from './split-requests.js';
import type { CopyFills, FleetFillDeps } from './copy-fill.js';

/** The counters /hotkeys shows (hot-keys.ts owns them). */
export interface SplitStats {
  reads: number;
  fallbacks: number;
  writes: number;
  partialFailures: number;
  repairs: number;
  repairFailures: number;
  refused: number;
}

/**
 * Reads and writes of a split key, once hot-keys.ts routed them here: a read goes to one copy
 * (the original while the copies are not readable, and a fill is asked for), a copy that answers
 * "nothing" is read again on the original and repaired; a write goes to every copy and its reply
 * is the original's, or an error naming the copies that failed (they are repaired, or — in a
 * fleet — not read until a fill).
 */
export class SplitIO implements SplitOwner {
  private readonly random: boolean;

  constructor(
    private readonly deps: { config: HotKeysConfig; router: Router; log: Logger; metrics?: Metrics },
    private readonly stats: SplitStats,
    private readonly fills: CopyFills,
    private readonly fleet: FleetFillDeps | null,
    private readonly repairCopy: (split: SplitKey, copy: SplitCopy) => Promise<boolean>,
  ) {
    this.random = deps.config.readChoice === 'random';
  }

  read(owner: CallOwner, raw: Buffer, args: Buffer[], at: number, split: SplitKey, command: string): true {
    const copy = this.readCopy(split);
    let out: Buffer;
    if (copy === split.original) out = raw;
    else if (command === 'get' && args.length === 2) out = copy.getRaw;
    else out = rewriteKey(args, at, copy.name);
    this.stats.reads++;
    const reads = this.deps.metrics?.splitReads; // a plain count: prom-client's inc per read showed in profiles
    if (reads !== undefined) {
      if (copy === split.original) reads.original++;
      else reads.copy++;
    }
    const call = new SplitRead(owner, this.deps.router, out, command, split, copy, raw, this);
    call.asRespool = true; // copies are respool's keys (UpstreamCall.asRespool)
    this.deps.router.send({ to: 'call', call: call });
    return true;
  }

  /**
   * The copy a read goes to: one of the copies while they are readable (filled less than
   * hotKeys.maxCopyAge ago, the rule not being removed, in a fleet the state confirmed), else the
   * original, and a fill is asked for (also ahead of time, in the last quarter of the age).
   */
  private readCopy(split: SplitKey): SplitCopy {
    if (split.active.length === 1) return split.original;
    const now = Date.now();
    const fleet = this.fleet;
    if (!split.rule.reading || now >= split.readableUntil || (fleet !== null && !fleet.state.confirmed(now))) {
      if (split.rule.reading) this.fills.ask(split, now);
      return split.original;
    }
    const age = this.deps.config.maxCopyAge;
    if (age > 0 && split.readableUntil - now < age / 4) this.fills.ask(split, now);
    return pickCopy(split, this.random);
  }

  readFallback(read: SplitRead): void {
    this.stats.fallbacks++;
    const reads = this.deps.metrics?.splitReads;
    if (reads !== undefined) reads.fallback++;
    const call = new UpstreamCall(read, this.deps.router, read.originalRaw, read.command, read.key.original.slot);
    call.asRespool = true;
    this.deps.router.send({ to: 'call', call: call });
  }

  fallbackDone(read: SplitRead, reply: Buffer): void {
    if (reply[0] !== 0x2d && !isEmptyReply(reply)) this.repair(read.key, [read.copy]);
    read.finish(reply);
  }

  /** Copies that may differ from the original: repaired here, or — a fleet — unread until a fill. */
  private repair(split: SplitKey, copies: SplitCopy[]): void {
    if (this.fleet !== null) {
      split.readableUntil = 0;
      this.fills.ask(split);
      return;
    }
    for (const copy of copies) if (copy !== split.original) void this.repairCopy(split, copy);
  }

  write(owner: CallOwner, raw: Buffer, args: Buffer[], at: number, split: SplitKey, command: string): true {
    const targets = split.writeTargets();
    const write = new SplitWrite(owner, command, split, targets, this);
    split.writeSeq++;
    split.inflightWrites++;
    this.stats.writes++;
    for (let i = 0; i < targets.length; i++) {
      const copy = targets[i]!;
      const out = copy === split.original ? raw : rewriteKey(args, at, copy.name);
      const child = new UpstreamCall(write, this.deps.router, out, command, copy.slot);
      child.index = i;
      child.asRespool = true;
      this.deps.router.send({ to: 'call', call: child });
    }
    return true;
  }

  writeDone(write: SplitWrite, original: Buffer, failed: SplitCopy[], firstError: string): Buffer {
    const split = write.key;
    split.inflightWrites--;
    const total = write.targets.length;
    const metrics = this.deps.metrics?.raw.split_writes_total;
    if (failed.length === 0) {
      metrics?.labels('ok').inc();
      return original;
    }
    if (failed.length === total) {
      // Every copy refused it the same way (WRONGTYPE, syntax...): the server's own answer.
      metrics?.labels('failed').inc();
      return original;
    }
    this.stats.partialFailures++;
    metrics?.labels('partial_failure').inc();
    this.deps.metrics?.commandErrorCounter(write.command, 'proxy').inc();
    const keyText = displayKey(split.id);
    this.deps.log.warn({ key: keyText, command: write.command, failed: failed.length, total, error: firstError }, 'split write failed on some copies');
    // Bring the copies back in line with the original (or the original's failure with them).
    const originalFailed = failed.includes(split.original);
    this.repair(split, originalFailed ? split.writeTargets() : failed);
    return encodeError(ProxyError.splitWritePartial(write.command.toUpperCase(), keyText, failed.length, total, firstError));
  }
}
