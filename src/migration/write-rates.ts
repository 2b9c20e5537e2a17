import type { MigrationSide } from './migration-side.js';

/** How often the source's command counts are read. */
const EVERY_MS = 1_000;

/**
 * The source's write rate, and how much of it respool did not send (clients connected to the
 * source directly: theirs to stop before the cutover). Every EVERY_MS the source's primaries'
 * INFO commandstats are read; the calls of write commands summed, against the client writes
 * respool saw over the same time. An estimate: a script's writes count on the node as the
 * commands it called, a split MSET as one call per node, and respool's own writes (the fleet's
 * state, hot-key copies) as unseen.
 */
export class WriteRates {
  sourceWritesPerSecond = 0;
  private timer: NodeJS.Timeout | null = null;
  private last: { at: number; calls: number; seen: number } | null = null;
  unseenWritesPerSecond = 0;

  constructor(
    private readonly source: MigrationSide,
    private readonly isWrite: (command: string) => boolean,
    /** Client writes respool has seen so far. */
    private readonly seen: () => number,
  ) {}

  start(): void {
    const tick = () => {
      void this.sample().finally(() => {
        if (this.timer === null) return;
        this.timer = setTimeout(tick, EVERY_MS);
        this.timer.unref();
      });
    };
    this.timer = setTimeout(tick, 0);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  private async sample(): Promise<void> {
    let calls = 0;
    try {
      for (const node of this.source.primaries()) calls += writeCalls(String(await this.source.call(node, 0, ['INFO', 'commandstats'])), this.isWrite);
    } catch {
      return; // the source did not answer: the last rates stay
    }
    const now = { at: Date.now(), calls, seen: this.seen() };
    const last = this.last;
    this.last = now;
    if (last === null || now.calls < last.calls) return; // first sample, or CONFIG RESETSTAT
    const seconds = Math.max(0.001, (now.at - last.at) / 1000);
    this.sourceWritesPerSecond = Math.round((now.calls - last.calls) / seconds);
    this.unseenWritesPerSecond = Math.max(0, Math.round((now.calls - last.calls - (now.seen - last.seen)) / seconds));
  }
}

/** The calls of write commands in an INFO commandstats text (cmdstat_set:calls=3,… ; subcommands as cmdstat_x|y). */
export function writeCalls(info: string, isWrite: (command: string) => boolean): number {
  let sum = 0;
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) if (isWrite(m[1]!)) sum += Number(m[2]);
  return sum;
}
