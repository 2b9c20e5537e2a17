import { bulkPayload, splitAggregate } from '../resp/decode.js';
import { encodeBulk } from '../resp/encode.js';
import type { KeyNames } from './key-names.js';

/** Valkey's `invalidate` element (tracking.c shared.invalidate): the first of an invalidation push. */
const INVALIDATE = Buffer.from('$10\r\ninvalidate\r\n');

/**
 * The keys a CLIENT TRACKING invalidation (`>2 invalidate [keys]`, as a lane or its listener
 * receives it) names, as the node stores them (views of `push`); null for a null key list
 * ("every key", after a flush: `_`, or `$-1` in RESP2 form); undefined for a push that is no
 * invalidation with a key list (another push, another shape). Elements that are no bulk string
 * are left out.
 */
export function invalidatedKeys(push: Buffer): Buffer[] | null | undefined {
  const parts = splitAggregate(push);
  if (parts === null || parts.length !== 2 || !parts[0]!.equals(INVALIDATE)) return undefined;
  const list = parts[1]!;
  if (list[0] !== 0x2a /* * */) return list[0] === 0x5f /* _ */ || list[1] === 0x2d /* $-1 */ ? null : undefined;
  const keys = splitAggregate(list);
  if (keys === null) return null; // *-1
  const out: Buffer[] = [];
  for (const key of keys) {
    const name = bulkPayload(key);
    if (name !== null) out.push(name);
  }
  return out;
}

/**
 * A CLIENT TRACKING invalidation (`>2 invalidate [keys]` as a lane receives it) with the client's
 * key names (key-names.ts: its namespace, the colocation rules); keys the client cannot reach
 * (another namespace's, seen by a BCAST lane) are left out, and a push left with none is null.
 * A null key list (flush, lost lane), or a push that is no invalidation, passes unchanged.
 */
export function clientInvalidation(names: KeyNames, push: Buffer): Buffer | null {
  const keys = invalidatedKeys(push);
  if (keys === null || keys === undefined) return push;
  const out: Buffer[] = [];
  for (const stored of keys) {
    const name = names.visibleName(stored);
    if (name !== null) out.push(encodeBulk(name, 2));
  }
  if (out.length === 0) return null;
  return Buffer.concat([Buffer.from(`${String.fromCharCode(push[0]!)}2\r\n`, 'latin1'), INVALIDATE, Buffer.from(`*${out.length}\r\n`, 'latin1'), ...out]);
}

/**
 * BCAST's prefixes as the nodes match them: each client prefix in every stored form a name
 * starting with it can take (behind the namespace, and behind each colocation rule's tag); for
 * every key (no prefix, or ""), the namespace alone — or [] with no namespace: every key.
 * A stored name `{T}p…` that no rule of T takes is a client name of its own that does not start
 * with `p`; its invalidations reach the client too (more than Valkey sends, never fewer).
 */
export function storedTrackingPrefixes(names: KeyNames | null, prefixes: Buffer[]): Buffer[] {
  if (names === null) return prefixes;
  const ns = names.namespace;
  if (prefixes.length === 0 || prefixes.some((p) => p.length === 0)) return ns === null ? [] : [ns];
  return prefixes.flatMap((p) => names.storedPrefixes(p));
}

/** A CLIENT TRACKING line: its arguments, and where REDIRECT's id is among them (-1: none). */
export interface TrackingArgs {
  readonly args: readonly Buffer[];
  readonly redirectAt: number;
}

/**
 * A client's CLIENT TRACKING ON … BCAST line with its prefixes as the nodes match them
 * (storedTrackingPrefixes): every other argument in its order, the PREFIX pairs last (one client
 * prefix may have several stored forms), and `redirectAt` where REDIRECT's id is now.
 */
export function storedTrackingLine(names: KeyNames, line: TrackingArgs): TrackingArgs {
  const { args } = line;
  const out: Buffer[] = [];
  const prefixes: Buffer[] = [];
  let redirectAt = -1;
  for (let j = 0; j < args.length; j++) {
    if (j >= 3 && j + 1 < args.length && args[j]!.toString('latin1').toLowerCase() === 'prefix') {
      prefixes.push(args[++j]!);
      continue;
    }
    if (j === line.redirectAt) redirectAt = out.length;
    out.push(args[j]!);
  }
  for (const p of storedTrackingPrefixes(names, prefixes)) out.push(Buffer.from('PREFIX'), p);
  return { args: out, redirectAt };
}

/**
 * A node's error for a tracking line whose prefixes were rewritten (Valkey's "Prefix 'X' overlaps
 * with …"), naming the client's prefixes instead of their stored forms.
 */
export function clientTrackingError(names: KeyNames, prefixes: Buffer[], error: string): string {
  if (!error.includes("'")) return error;
  let text = error;
  for (const p of prefixes) {
    for (const form of storedTrackingPrefixes(names, [p])) text = text.split(`'${form.toString('latin1')}'`).join(`'${p.toString('latin1')}'`);
  }
  return text;
}

const PREFIXES_FIELD = Buffer.from('$8\r\nprefixes\r\n');

/**
 * CLIENT TRACKINGINFO's reply with BCAST's prefixes as the client gave them: its last field,
 * `prefixes`, in Valkey's order (its prefix table's, bytewise), "" for BCAST without PREFIX.
 */
export function clientTrackingInfo(reply: Buffer, bcast: boolean, prefixes: Buffer[]): Buffer {
  const at = reply[0] === 0x2d ? -1 : reply.lastIndexOf(PREFIXES_FIELD);
  if (at < 0) return reply;
  const shown = !bcast ? [] : prefixes.length === 0 ? [Buffer.alloc(0)] : [...prefixes].sort(Buffer.compare);
  return Buffer.concat([reply.subarray(0, at + PREFIXES_FIELD.length), Buffer.from(`*${shown.length}\r\n`, 'latin1'), ...shown.map((p) => encodeBulk(p, 2))]);
}
