// ACL LOG, as Valkey keeps it (acl.c addACLLogEntry): the newest entry first; a denial like one of
// the 10 newest (same reason, context, object and user, within 60 s) bumps that entry's count
// and moves it to the front instead of adding one; at most `maxLen` entries (acllog-max-len).
// respool logs its own denials and the ones the nodes report for a user's identity (a script
// refused by Valkey: src/upstream/identity-mirror.ts imports them).

import { encodeArray, encodeBulk, encodeDouble, encodeInteger, encodeMap } from '../resp/encode.js';

export type AclLogReason = 'command' | 'key' | 'channel' | 'auth';
export type AclLogContext = 'toplevel' | 'multi' | 'lua' | 'module';

export interface AclLogEntry {
  count: number;
  reason: AclLogReason;
  context: AclLogContext;
  /** The command's full name, the key, the channel, or (auth) the command as the client sent it. */
  object: string;
  username: string;
  /** ms since the epoch of the last occurrence. */
  updatedAt: number;
  /** The CLIENT LIST line of the client of the last occurrence. */
  clientInfo: string;
  entryId: number;
  createdAt: number;
}

const GROUPING_MS = 60_000;
const SCAN = 10;

export class AclLog {
  /** Newest first. */
  private entries: AclLogEntry[] = [];
  private nextId = 0;

  constructor(
    /** acl.logMaxLen, read at each add (a reload may change it). */
    private readonly maxLen: () => number,
    /** Every denial, also the grouped ones (respool_acl_denials_total{user,reason}). */
    private readonly onDenial?: (username: string, reason: AclLogReason) => void,
  ) {}

  get length(): number {
    return this.entries.length;
  }

  add(reason: AclLogReason, context: AclLogContext, object: string, username: string, clientInfo: string, now = Date.now()): void {
    this.onDenial?.(username, reason);
    const max = this.maxLen();
    if (max === 0) {
      this.entries = [];
      return;
    }
    const scan = Math.min(SCAN, this.entries.length);
    for (let i = 0; i < scan; i++) {
      const e = this.entries[i]!;
      if (e.reason === reason && e.context === context && Math.abs(e.updatedAt - now) <= GROUPING_MS && e.object === object && e.username === username) {
        e.count++;
        e.updatedAt = now;
        e.clientInfo = clientInfo;
        this.entries.splice(i, 1);
        this.entries.unshift(e);
        return;
      }
    }
    this.entries.unshift({ count: 1, reason, context, object, username, updatedAt: now, clientInfo, entryId: this.nextId++, createdAt: now });
    if (this.entries.length > max) this.entries.length = max;
  }

  reset(): void {
    this.entries = [];
  }

  /** ACL LOG [count]'s reply: up to `count` entries (10 by default), 10 fields each, in Valkey's order. */
  reply(count: number, proto: 2 | 3, now = Date.now()): Buffer {
    const n = Math.max(0, Math.min(count, this.entries.length));
    const s = (v: string) => encodeBulk(v, proto);
    return encodeArray(this.entries.slice(0, n).map((e) => encodeMap([
      [s('count'), encodeInteger(e.count)],
      [s('reason'), s(e.reason)],
      [s('context'), s(e.context)],
      [s('object'), s(e.object)],
      [s('username'), s(e.username)],
      [s('age-seconds'), encodeDouble((now - e.updatedAt) / 1000, proto)],
      [s('client-info'), s(e.clientInfo)],
      [s('entry-id'), encodeInteger(e.entryId)],
      [s('timestamp-created'), encodeInteger(e.createdAt)],
      [s('timestamp-last-updated'), encodeInteger(e.updatedAt)],
    ], proto)));
  }
}
