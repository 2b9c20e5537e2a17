import type { Logger } from 'pino';
import type { LaneClass } from './lane-class.js';

/** What the ceiling needs of a client session (ClientSession). */
export interface MemoryHolder {
  readonly address: string;
  readonly closed: boolean;
  readonly laneClass: LaneClass;
  /** Replies respool holds for it: unread output (batched, in libuv, in the Writable) and finished replies waiting in its queue. */
  outputBytes(): number;
  /** Reply bytes still coming to it from the links: replies owed × its average reply size (they land in its output whether it reads or not). */
  comingBytes(): number;
  /** Request bytes read from it and not handed on yet (its own buffer). */
  queryBytes(): number;
  /** Disconnect it now (counted by it; logged here). */
  dropForMemory(): void;
}

/** What a scan found, by lane class (metrics, the status page). */
export interface BufferedBytes {
  /** Output held and replies still coming, per lane class. */
  output: Record<LaneClass, number>;
  requests: Record<LaneClass, number>;
  links: number;
  total: number;
}

/** Clients holding at least this much output are watched between scans, and only they are ever disconnected. */
export const HOLDER_BYTES = 256 * 1024;
/** Past the ceiling, disconnect down to this share of it (so the next burst does not cut one client at a time). */
const TARGET = 0.9;
/** Every client is counted this often (the small ones in between are taken as the last scan found them). */
const SCAN_MS = 250;
/** Share of the cgroup's limit that `auto` lets respool's process use (its start-up footprint included). */
export const AUTO_SHARE = 0.75;
/**
 * What freed buffers may occupy before V8 collects them: Node tells V8 of every Buffer's memory,
 * and V8 collects once that external memory grew by about 64 MiB since its last collection. A
 * reply passes through two buffers on its way (the read, the frame), so the buffers respool counts
 * as live leave garbage behind them until then.
 */
export const GC_SLACK = 64 * 1024 * 1024;

/**
 * limits.maxMemory as bytes (0 = off): a size as given; 'auto' = AUTO_SHARE of the cgroup's memory
 * limit less what the process holds at start (`rss`) and GC_SLACK, at least an eighth of the
 * limit; off when there is no limit. Beside it the process's resident size is watched against
 * AUTO_SHARE of the limit itself (MemoryCeilingOptions.rssLimit).
 */
export function resolveMaxMemory(setting: number | 'auto', cgroupLimit: number | null, rss: number): number {
  if (setting !== 'auto') return setting;
  if (cgroupLimit === null) return 0;
  return Math.max(Math.floor(cgroupLimit * AUTO_SHARE - rss - GC_SLACK), Math.floor(cgroupLimit / 8));
}

export interface MemoryCeilingOptions {
  /** Bytes (0 = off: nothing is ever disconnected for memory; scans still report). */
  limit: number;
  /** Every open client. */
  holders: () => Iterable<MemoryHolder>;
  /** Bytes the shared links hold: replies arriving, requests not yet taken by the kernel, requests waiting for a link. */
  linkBytes: () => number;
  /**
   * The resident size past which clients are dropped even while the buffers counted are under
   * `limit` (what is not counted: garbage not yet collected, the heap); 0 = not watched.
   */
  rssLimit?: number;
  /** The process's resident size now (process.memoryUsage.rss). */
  rss?: () => number;
  log: Logger;
}

/**
 * The process-wide ceiling on what respool buffers (limits.maxMemory), the one owner of "who is
 * disconnected when respool holds too much": as Valkey's maxmemory-clients, the clients holding
 * the most output go first, largest first, until the total is back under TARGET of the ceiling —
 * never a shared link (they are always read: their bytes are other clients' replies), never a
 * client holding less than HOLDER_BYTES.
 *
 *   total   : Σ clients' output, replies still coming to them (comingBytes) and request bytes,
 *             + the links' bytes (linkBytes)
 *   big     : clients past HOLDER_BYTES since the last scan (grew()); their bytes are read fresh
 *             at each check, the others' taken from the last scan
 *   check   : after the turn in which a big client grew (setImmediate, once per turn), and at every
 *             scan (every SCAN_MS): past the limit, disconnect big clients by what they hold,
 *             largest first, down to TARGET of it
 *   rss     : at every scan, a resident size past rssLimit (what is not counted: garbage V8 has not
 *             collected yet) lowers the bar to seven eighths of what is counted now
 */
export class MemoryCeiling {
  private readonly big = new Set<MemoryHolder>();
  /** What the clients outside `big` held at the last scan. */
  private smallBytes = 0;
  private scheduled = false;
  private readonly timer: NodeJS.Timeout;
  /** Checks that found the ceiling passed, counted: each drop is logged with its round (largest holders first within one). */
  private rounds = 0;
  private last: BufferedBytes = emptyBuffered();

  constructor(private readonly options: MemoryCeilingOptions) {
    this.timer = setInterval(() => this.scan(), SCAN_MS);
    this.timer.unref();
  }

  get limit(): number {
    return this.options.limit;
  }

  /** The last scan's figures. */
  get buffered(): BufferedBytes {
    return this.last;
  }

  /** `holder`'s output grew (a reply it has not read, a reply held behind another): watched, and checked this turn. */
  grew(holder: MemoryHolder): void {
    if (this.options.limit <= 0) return;
    if (!this.big.has(holder)) {
      if (holder.outputBytes() + holder.comingBytes() < HOLDER_BYTES) return;
      this.big.add(holder);
    }
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(this.checkNow);
  }

  /** Counts every client and link, then checks. */
  scan(): BufferedBytes {
    const found = emptyBuffered();
    let small = 0;
    for (const h of this.options.holders()) {
      if (h.closed) continue;
      const output = h.outputBytes() + h.comingBytes();
      const requests = h.queryBytes();
      const lane = h.laneClass;
      found.output[lane] += output;
      found.requests[lane] += requests;
      if (output >= HOLDER_BYTES) {
        if (this.options.limit > 0) this.big.add(h);
      } else if (!this.big.has(h)) {
        small += output + requests;
      }
    }
    this.smallBytes = small;
    found.links = this.options.linkBytes();
    found.total = found.output.interactive + found.output.bulk + found.requests.interactive + found.requests.bulk + found.links;
    this.last = found;
    const { rssLimit = 0, rss } = this.options;
    const pressed = rssLimit > 0 && rss !== undefined && rss() > rssLimit;
    this.check(pressed ? Math.min(this.options.limit, found.total * 0.875) : this.options.limit);
    return found;
  }

  close(): void {
    clearInterval(this.timer);
  }

  private readonly checkNow = (): void => {
    this.scheduled = false;
    this.check(this.options.limit);
  };

  private check(limit: number): void {
    if (limit <= 0 || this.big.size === 0) return;
    let total = this.smallBytes + this.options.linkBytes();
    const watched: Array<{ h: MemoryHolder; held: number }> = [];
    for (const h of this.big) {
      const held = h.closed ? 0 : h.outputBytes() + h.comingBytes();
      if (held < HOLDER_BYTES / 2) {
        this.big.delete(h); // drained: back among the small ones (counted at the next scan)
        if (!h.closed) total += held + h.queryBytes();
        continue;
      }
      total += held + h.queryBytes();
      watched.push({ h, held });
    }
    if (total <= limit) return;
    this.rounds++;
    watched.sort((a, b) => b.held - a.held);
    const target = limit * TARGET;
    const dropped: Array<{ client: string; held: number }> = [];
    for (const { h, held } of watched) {
      if (total <= target) break;
      total -= held + h.queryBytes();
      this.big.delete(h);
      dropped.push({ client: h.address, held });
      h.dropForMemory();
    }
    this.report(dropped, total, limit);
  }

  private report(dropped: Array<{ client: string; held: number }>, after: number, limit: number): void {
    if (dropped.length === 0) return;
    const { log } = this.options;
    const shown = dropped.slice(0, 20);
    for (const d of shown) {
      log.warn({ event: 'client_dropped', reason: 'max_memory', round: this.rounds, client: d.client, heldBytes: d.held, limit },
        `closing client ${d.client}: it holds ${d.held} bytes of replies it has not read and respool's buffers passed limits.maxMemory (${limit} bytes); the clients holding the most go first`);
    }
    if (dropped.length > shown.length) {
      log.warn({ event: 'client_dropped', reason: 'max_memory', round: this.rounds, clients: dropped.length, bufferedAfter: after, limit },
        `closed ${dropped.length} clients holding the most unread replies (${dropped.length - shown.length} more than listed) to stay under limits.maxMemory (${limit} bytes)`);
    }
  }
}

function emptyBuffered(): BufferedBytes {
  return { output: { interactive: 0, bulk: 0 }, requests: { interactive: 0, bulk: 0 }, links: 0, total: 0 };
}
