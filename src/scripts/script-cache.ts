import { nodeCrypto } from '../util/lazy-builtins.js';
import { encodeArray, encodeInteger } from '../resp/encode.js';

/** Scripts respool remembers at most (least recently used out first). */
export const SCRIPT_CACHE_MAX_COUNT = 10_000;
/** Bytes of script bodies respool remembers at most. */
export const SCRIPT_CACHE_MAX_BYTES = 64 * 1024 * 1024;

/**
 * The bodies of the scripts respool has seen (EVAL / EVAL_RO bodies, SCRIPT LOAD bodies), by
 * their SHA1 (lower-case hex, as Valkey names them), so that an EVALSHA that meets NOSCRIPT on a
 * node that lost its script cache (a promoted replica, a restart, SCRIPT FLUSH on that node)
 * can load the script there and run again (handlers/script.ts). Bounded by count and by bytes;
 * the least recently used script goes first. A body larger than the byte bound is not kept.
 */
export class ScriptCache {
  /** sha → body; Map order is the LRU order (oldest first). */
  private readonly bodies = new Map<string, Buffer>();
  private totalBytes = 0;

  constructor(
    readonly maxCount: number = SCRIPT_CACHE_MAX_COUNT,
    readonly maxBytes: number = SCRIPT_CACHE_MAX_BYTES,
  ) {}

  /** Scripts remembered now. */
  get size(): number {
    return this.bodies.size;
  }

  /** Bytes of the bodies remembered now. */
  get bytes(): number {
    return this.totalBytes;
  }

  /** Remembers `body` (copied; the argument may be a view) as the most recent; returns its sha. */
  remember(body: Buffer): string {
    const sha = nodeCrypto().createHash('sha1').update(body).digest('hex');
    const known = this.bodies.get(sha);
    if (known !== undefined) {
      this.bodies.delete(sha);
      this.bodies.set(sha, known);
      return sha;
    }
    if (body.length > this.maxBytes || this.maxCount <= 0) return sha;
    this.bodies.set(sha, Buffer.from(body));
    this.totalBytes += body.length;
    while (this.bodies.size > this.maxCount || this.totalBytes > this.maxBytes) {
      const oldest = this.bodies.keys().next().value as string;
      this.totalBytes -= this.bodies.get(oldest)!.length;
      this.bodies.delete(oldest);
    }
    return sha;
  }

  /** Whether the script named `sha` (any case) is remembered. */
  has(sha: string): boolean {
    return this.bodies.has(sha.toLowerCase());
  }

  /** Forgets every script (SCRIPT FLUSH through respool: the client wants them gone everywhere). */
  clear(): void {
    this.bodies.clear();
    this.totalBytes = 0;
  }

  /** The body of the script named `sha` (any case), now the most recent; undefined if unknown. */
  body(sha: string): Buffer | undefined {
    const key = sha.toLowerCase();
    const body = this.bodies.get(key);
    if (body === undefined) return undefined;
    this.bodies.delete(key);
    this.bodies.set(key, body);
    return body;
  }
}

/**
 * Every request of the script family and of the fan-out family passes here (handlers/index.ts):
 * EVAL / EVAL_RO and SCRIPT LOAD bodies are remembered, whatever path the command then takes
 * (shared links, a WATCH or tracking lane, a transaction). SCRIPT FLUSH forgets them all: after
 * it, an EVALSHA must meet NOSCRIPT as it would on one server.
 */
export function noteScript(cache: ScriptCache, command: string, args: readonly Buffer[]): void {
  if ((command === 'eval' || command === 'eval_ro') && args.length >= 3) cache.remember(args[1]!);
  else if (command === 'script|load' && args.length === 3) cache.remember(args[2]!);
  else if (command === 'script|flush' && args.length <= 3) cache.clear();
}

/**
 * SCRIPT EXISTS as one server would answer it — "will EVALSHA of this run?": 1 where every
 * primary has the script (the nodes' replies, AND-merged) or respool remembers its body (an
 * EVAL with no keys ran on one primary only; EVALSHA anywhere loads it on demand).
 */
export function scriptExistsReply(cache: ScriptCache, shas: Buffer[], merged: Buffer): Buffer {
  if (merged[0] !== 0x2a /* * */) return merged; // an error passes as it is
  const flags = merged.toString('latin1').split('\r\n').slice(1).filter((l) => l.startsWith(':'));
  if (flags.length !== shas.length) return merged;
  return encodeArray(flags.map((f, i) => encodeInteger(f === ':1' || cache.has(shas[i]!.toString('latin1')) ? 1 : 0)));
}
