import { nodeCrypto } from '../util/lazy-builtins.js';
import type { MigrationSide } from './migration-side.js';
import { NodeError } from './migration-side.js';

/** A string is read and appended this many bytes at a time. */
const STRING_PART_BYTES = 1024 * 1024;
/** Members, fields, elements or entries read and written per command. */
const ELEMENTS_PER_PART = 1_000;

/**
 * Copies a key whose DUMP payload is too big for one RESTORE (migration.maxPayloadBytes, at most
 * the target's proto-max-bulk-len) piece by piece: the key deleted on the target, then rebuilt
 * from the source's value read in parts (GETRANGE → APPEND, HSCAN → HSET, SSCAN → SADD, ZSCAN →
 * ZADD, LRANGE → RPUSH, XRANGE → XADD and each consumer group's XGROUP CREATE), then its expiry.
 *
 * Not atomic on either side, and need not be: a client's write to the key during the parts asks
 * for another copy after this one (key-copier.ts), and the cutover waits for the last; the target
 * serves no client until then. A stream's pending entries and consumers are not carried (only
 * each group's last delivered ID and entries read). Returns the bytes read.
 *
 * With `into` (a name in the key's slot: partsName()), the value is built there and RENAMEd over
 * the key at the end — one command on the target, so that another process's copy of the key
 * cannot land in the middle of this one (key-copier.ts, confirmed copies).
 */
export async function copyInParts(source: MigrationSide, target: MigrationSide, db: number, key: Buffer, expireAt: number, into: Buffer | null = null): Promise<number> {
  const from = (args: Array<string | Buffer | number>) => source.callFor(key, db, args);
  const to = (args: Array<string | Buffer | number>) => target.callFor(key, db, args);
  const type = String(await from(['TYPE', key]));
  if (into !== null) {
    try {
      const bytes = await copyValue(from, to, type, key, into, expireAt);
      // Nothing built (the key went from the source during the reads): gone on the target too; the confirming read sees it gone.
      const built = type !== 'none' && Number(await to(['EXISTS', into])) === 1;
      await to(built ? ['RENAME', into, key] : ['DEL', key]);
      return bytes;
    } catch (err) {
      await to(['DEL', into]).catch(() => undefined); // nothing half-built left behind
      throw err;
    }
  }
  return copyValue(from, to, type, key, key, expireAt);
}

/**
 * A name in the same slot as `key` for a copy in parts to build (a hash tag that hashes as the key
 * does), or null when the key's name allows none: it is then built in place.
 */
export function partsName(key: Buffer, cluster: boolean): Buffer | null {
  // Random, not the pid: a fleet's members on other hosts (containers of one image) share pids, and a shared name would mix their parts.
  const suffix = Buffer.from(`:respool-migration-part:${nodeCrypto().randomBytes(8).toString('hex')}`);
  const open = key.indexOf(0x7b /* { */);
  const close = open < 0 ? -1 : key.indexOf(0x7d /* } */, open + 1);
  if (open >= 0 && close > open + 1) return Buffer.concat([key.subarray(0, close + 1), suffix]); // its own tag
  if (!cluster) return Buffer.concat([key, suffix]);
  if (key.includes(0x7d)) return null; // {key} would end at the key's own }
  return Buffer.concat([Buffer.from('{'), key, Buffer.from('}'), suffix]);
}

type Call = (args: Array<string | Buffer | number>) => Promise<unknown>;

/** Reads `key`'s value on the source in parts and builds it as `name` on the target. */
async function copyValue(from: Call, to: Call, type: string, key: Buffer, name: Buffer, expireAt: number): Promise<number> {
  let bytes = 0;
  const count = (values: unknown[]) => {
    for (const v of values) if (Buffer.isBuffer(v)) bytes += v.length;
  };
  await to(['DEL', name]);
  switch (type) {
    case 'none':
      return 0;
    case 'string':
      for (let at = 0; ; at += STRING_PART_BYTES) {
        const part = (await from(['GETRANGE', key, at, at + STRING_PART_BYTES - 1])) as Buffer;
        if (part.length === 0) break;
        await to(['APPEND', name, part]);
        bytes += part.length;
        if (part.length < STRING_PART_BYTES) break;
      }
      break;
    case 'hash':
    case 'set':
    case 'zset': {
      const scan = type === 'hash' ? 'HSCAN' : type === 'set' ? 'SSCAN' : 'ZSCAN';
      let cursor = '0';
      do {
        const reply = (await from([scan, key, cursor, 'COUNT', ELEMENTS_PER_PART])) as [Buffer, Buffer[]];
        cursor = String(reply[0]);
        const items = reply[1];
        if (items.length === 0) continue;
        count(items);
        if (type === 'hash') await to(['HSET', name, ...items]);
        else if (type === 'set') await to(['SADD', name, ...items]);
        else {
          const pairs: Buffer[] = []; // ZSCAN gives member, score; ZADD takes score, member
          for (let i = 0; i + 1 < items.length; i += 2) pairs.push(items[i + 1]!, items[i]!);
          await to(['ZADD', name, ...pairs]);
        }
      } while (cursor !== '0');
      break;
    }
    case 'list':
      for (let at = 0; ; at += ELEMENTS_PER_PART) {
        const items = (await from(['LRANGE', key, at, at + ELEMENTS_PER_PART - 1])) as Buffer[];
        if (items.length === 0) break;
        count(items);
        await to(['RPUSH', name, ...items]);
        if (items.length < ELEMENTS_PER_PART) break;
      }
      break;
    case 'stream': {
      let after = '-';
      for (;;) {
        const entries = (await from(['XRANGE', key, after, '+', 'COUNT', ELEMENTS_PER_PART])) as Array<[Buffer, Buffer[]]>;
        if (entries.length === 0) break;
        for (const [id, fields] of entries) {
          count(fields);
          await to(['XADD', name, id, ...fields]);
        }
        after = `(${String(entries[entries.length - 1]![0])}`;
        if (entries.length < ELEMENTS_PER_PART) break;
      }
      if (after !== '-') {
        // The stream's own counters (an ID past the last entry after XDEL, entries ever added): as on the source.
        const info = (await from(['XINFO', 'STREAM', key])) as Array<Buffer | number>;
        const field = (name: string) => info[info.findIndex((v, i) => i % 2 === 0 && String(v) === name) + 1];
        await to(['XSETID', name, String(field('last-generated-id')), 'ENTRIESADDED', Number(field('entries-added')), 'MAXDELETEDID', String(field('max-deleted-entry-id'))]);
      }
      const groups = (await from(['XINFO', 'GROUPS', key])) as Array<Array<Buffer | number | null>>;
      for (const group of groups) {
        const field = (name: string) => group[group.findIndex((v, i) => i % 2 === 0 && String(v) === name) + 1];
        const entriesRead = field('entries-read');
        await to(['XGROUP', 'CREATE', name, field('name') as Buffer, String(field('last-delivered-id')), 'MKSTREAM', ...(typeof entriesRead === 'number' ? ['ENTRIESREAD', entriesRead] : [])]);
      }
      break;
    }
    default:
      throw new NodeError(`a ${type} key too big for one RESTORE cannot be copied in parts`);
  }
  if (expireAt > 0) await to(['PEXPIREAT', name, expireAt]); // the source's own moment: not shifted by the copy's length
  return bytes;
}
