import type { MigrationSide } from './migration-side.js';
import { sameValue } from './key-copier.js';
import type { RespValue } from '../resp/decode.js';

/** How far apart two expiries may be and still be the same (the copy converts PTTL to a time). */
const TTL_SLACK_MS = 1_000;

/**
 * Whether a key holds the same on both sides: its DUMP payloads equal (same server format), or
 * else the same type and the same value read whole — strings, hashes, lists, sets, sorted sets,
 * streams (entries and consumer groups) — and expiries within TTL_SLACK_MS.
 */
export async function sameOnBothSides(source: MigrationSide, target: MigrationSide, db: number, key: Buffer): Promise<boolean> {
  const ask = (side: MigrationSide, args: Array<string | Buffer | number>) => side.callFor(key, db, args);
  const [a, b] = await Promise.all([ask(source, ['PTTL', key]), ask(target, ['PTTL', key])]);
  if (!sameExpiry(a, b)) return false;
  if (a === -2) return true; // gone on both
  const [dumpA, dumpB] = await Promise.all([ask(source, ['DUMP', key]), ask(target, ['DUMP', key])]);
  if (Buffer.isBuffer(dumpA) && Buffer.isBuffer(dumpB) && dumpA.equals(dumpB)) return true;
  // Another server's format (Redis 7 → Valkey 8), or another encoding of the same value: read both whole.
  const [typeA, typeB] = await Promise.all([ask(source, ['TYPE', key]), ask(target, ['TYPE', key])]);
  if (String(typeA) !== String(typeB)) return false;
  const reads = WHOLE_READS[String(typeA)];
  if (reads === undefined) return false;
  for (const read of reads) {
    const [va, vb] = await Promise.all([ask(source, read(key)), ask(target, read(key))]);
    if (!sameValue(normalize(String(typeA), va), normalize(String(typeA), vb))) return false;
  }
  return true;
}

function sameExpiry(a: RespValue, b: RespValue): boolean {
  if (typeof a !== 'number' || typeof b !== 'number') return false;
  if (a < 0 || b < 0) return a === b;
  return Math.abs(a - b) <= TTL_SLACK_MS;
}

type Read = (key: Buffer) => Array<string | Buffer | number>;

/** Each type's whole value, in reads both servers answer alike. */
const WHOLE_READS: Readonly<Record<string, readonly Read[]>> = {
  string: [(k) => ['GET', k]],
  hash: [(k) => ['HGETALL', k]],
  list: [(k) => ['LRANGE', k, 0, -1]],
  set: [(k) => ['SMEMBERS', k]],
  zset: [(k) => ['ZRANGE', k, 0, -1, 'WITHSCORES']],
  stream: [(k) => ['XRANGE', k, '-', '+'], (k) => ['XINFO', 'GROUPS', k]],
};

/** Unordered replies (hash fields, set members) sorted, so that two encodings compare equal. */
function normalize(type: string, value: RespValue): RespValue {
  if (!Array.isArray(value)) return value;
  if (type === 'set') return [...value].sort(compareBuffers);
  // Scores as numbers: Redis 7.0 writes 0.1 as 0.10000000000000001, Valkey 8 as 0.1.
  if (type === 'zset') return value.map((v, i) => (i % 2 === 1 ? Number(String(v)) : v));
  if (type === 'hash') {
    const pairs: Array<[RespValue, RespValue]> = [];
    for (let i = 0; i + 1 < value.length; i += 2) pairs.push([value[i]!, value[i + 1]!]);
    pairs.sort((x, y) => compareBuffers(x[0], y[0]));
    return pairs.flat();
  }
  return value;
}

function compareBuffers(a: RespValue, b: RespValue): number {
  return Buffer.compare(Buffer.from(String(a), 'latin1'), Buffer.from(String(b), 'latin1'));
}
