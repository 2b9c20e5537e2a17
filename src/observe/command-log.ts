/** Valkey's SLOWLOG_ENTRY_MAX_ARGC / COMMANDLOG_ENTRY_MAX_ARGC and …_MAX_STRING. */
const MAX_ARGC = 32;
const MAX_STRING = 128;

/** One logged request, as SLOWLOG / COMMANDLOG show it, plus where it went (RESPOOL SLOWLOG). */
export interface CommandLogEntry {
  readonly id: number;
  /** Unix seconds when it was logged. */
  readonly time: number;
  /** Microseconds at respool (slow), or request / reply bytes (large-request / large-reply). */
  readonly value: number;
  /** Its arguments, cut as Valkey cuts them (and redacted). */
  readonly args: readonly Buffer[];
  /** The client's address (Valkey's peer id) and name. */
  readonly client: string;
  readonly clientName: string;
  /** The node(s) it went to ('' when respool answered it), and the microseconds spent there (send → reply). */
  readonly node: string;
  readonly nodeUs: number;
}

/** Valkey's slowlogCreateEntry cut: at most 32 arguments (the last says how many more), each at most 128 bytes. */
export function cutArgs(args: readonly Buffer[]): Buffer[] {
  const argc = Math.min(args.length, MAX_ARGC);
  const out: Buffer[] = [];
  for (let j = 0; j < argc; j++) {
    if (argc !== args.length && j === argc - 1) {
      out.push(Buffer.from(`... (${args.length - argc + 1} more arguments)`));
    } else {
      const a = args[j]!;
      out.push(a.length > MAX_STRING ? Buffer.concat([a.subarray(0, MAX_STRING), Buffer.from(`... (${a.length - MAX_STRING} more bytes)`)]) : Buffer.from(a));
    }
  }
  return out;
}

/**
 * One bounded log, newest first (Valkey's slowlog list and each COMMANDLOG type): ids count up
 * from 0 and are never reused; past `maxLen` the oldest entry goes. A negative threshold or a
 * `maxLen` of 0 turns it off, and a value at or above the threshold is logged, as in Valkey.
 */
export class CommandLog {
  private entries: CommandLogEntry[] = [];
  private nextId = 0;
  /** While set (resetsBefore): a reset removes only the entries logged before this id. */
  private resetCut: number | null = null;

  /** Logs it when `value` reaches `threshold`; trims to `maxLen` either way (Valkey's slowlogPushEntryIfNeeded). */
  offer(value: number, threshold: number, maxLen: number, make: () => Omit<CommandLogEntry, 'id'>): void {
    if (threshold < 0 || maxLen === 0) return;
    if (value >= threshold) this.entries.unshift({ id: this.nextId++, ...make() });
    if (this.entries.length > maxLen) this.entries.length = maxLen;
  }

  get length(): number {
    return this.entries.length;
  }

  /** The newest `count` (all for -1). */
  newest(count: number): readonly CommandLogEntry[] {
    return count < 0 ? this.entries.slice() : this.entries.slice(0, count);
  }

  reset(): void {
    const cut = this.resetCut;
    this.entries = cut === null ? [] : this.entries.filter((e) => e.id >= cut);
  }

  /** Where the log is now: the id its next entry gets (resetsBefore). */
  mark(): number {
    return this.nextId;
  }

  /**
   * Runs `fn` with resets removing only the entries logged before `mark` — a SLOWLOG RESET inside
   * a transaction that ran at the node after later entries reached respool (handlers/transaction.ts).
   */
  resetsBefore<T>(mark: number, fn: () => T): T {
    this.resetCut = mark;
    try {
      return fn();
    } finally {
      this.resetCut = null;
    }
  }
}

/** The three logs of Valkey 8.1's COMMANDLOG; `slow` is also SLOWLOG's. */
export type CommandLogType = 'slow' | 'large-request' | 'large-reply';
