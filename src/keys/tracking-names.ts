import { bulkPayload, splitAggregate } from '../resp/decode.js';
import { encodeBulk } from '../resp/encode.js';
import type { KeyNames } from './key-names.js';

/**
 * A CLIENT TRACKING invalidation (`>2 invalidate [keys]` as a lane receives it) with the client's
 * key names (key-names.ts: its namespace, the colocation rules); keys the client cannot reach
 * (another namespace's, seen by a BCAST lane) are left out, and a push left with none is null.
 * A null key list (flush, lost lane) passes unchanged.
 */
export function clientInvalidation(names: KeyNames, push: Buffer): Buffer | null {
  const parts = splitAggregate(push);
  if (parts === null || parts.length !== 2 || parts[1]![0] !== 0x2a /* * */) return push;
  const keys = splitAggregate(parts[1]!);
  if (keys === null) return push;
  const out: Buffer[] = [];
  for (const key of keys) {
    const stored = bulkPayload(key);
    const name = stored === null ? null : names.visibleName(stored);
    if (name !== null) out.push(name === stored ? key : encodeBulk(name, 2));
  }
  if (out.length === 0) return null;
  return Buffer.concat([Buffer.from(`${String.fromCharCode(push[0]!)}2\r\n`, 'latin1'), parts[0]!, Buffer.from(`*${out.length}\r\n`, 'latin1'), ...out]);
}

/** BCAST's prefixes as the nodes match them: behind the namespace (the namespace alone for every key). */
export function storedTrackingPrefixes(names: KeyNames | null, prefixes: Buffer[]): Buffer[] {
  const ns = names?.namespace ?? null;
  if (ns === null) return prefixes;
  if (prefixes.length === 0 || prefixes.some((p) => p.length === 0)) return [ns];
  return prefixes.map((p) => Buffer.concat([ns, p]));
}

/**
 * A client's CLIENT TRACKING ON line with BCAST's prefixes as the nodes match them (behind the
 * namespace; the namespace itself for BCAST without PREFIX). Arguments before the options
 * (CLIENT TRACKING ON) and every other option stay where they are, so REDIRECT's index holds.
 */
export function storedTrackingArgs(names: KeyNames, args: readonly Buffer[], bcast: boolean): Buffer[] {
  const ns = names.namespace;
  if (ns === null || !bcast) return [...args];
  const out = [...args];
  let prefixed = false;
  for (let j = 3; j + 1 < out.length; j++) {
    if (out[j]!.toString('latin1').toLowerCase() !== 'prefix') continue;
    out[j + 1] = Buffer.concat([ns, out[j + 1]!]);
    prefixed = true;
    j++;
  }
  if (!prefixed) out.push(Buffer.from('PREFIX'), ns);
  return out;
}
