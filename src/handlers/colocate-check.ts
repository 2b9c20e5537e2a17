import calculateSlot from 'cluster-key-slot';
import type { CommandRequest, HandlerSession } from '../client/handler-session.js';
import { ProxyError } from '../errors.js';
import { bulkPayload } from '../resp/decode.js';
import { encodeArray, encodeBulk, encodeError } from '../resp/encode.js';
import { asRespoolClient, internalCall } from '../routing/internal-call.js';
import { scanNode } from '../routing/node-scan.js';
import { escapeGlob } from '../keys/glob-overlap.js';
import { FLEET_TAG } from '../keys/reserved-tag.js';
import type { KeyColocation } from '../keys/colocation.js';
import type { CallClient } from '../routing/upstream-call.js';
import type { Router } from '../routing/router.js';

export const RESPOOL_COLOCATE_HELP = [
  'RESPOOL COLOCATE CHECK [COUNT n]      -- keys stored before a colocation rule took them: key, client_key, stored_as, node',
  'RESPOOL COLOCATE MOVE [COUNT n]       -- move those keys to the names respool now reads (DUMP/RESTORE with their TTL, then DEL)',
];

/** Keys listed (or moved) by one call when COUNT is not given. */
const DEFAULT_COUNT = 100;
/** respool's own keys: the fleet's state, and a split hot key's copies (hotkeys/placement.ts). */
const FLEET = Buffer.from(FLEET_TAG);
const SPLIT_COPY = Buffer.from('{rpcopy:');

/** A key stored under a name no client name reaches any more: a rule now puts it elsewhere. */
interface MisplacedKey {
  /** Its name on the nodes. */
  readonly stored: Buffer;
  /** What a client (of the namespace it is in) calls it. */
  readonly clientKey: Buffer;
  /** Where respool now reads and writes that client name. */
  readonly storedAs: Buffer;
  readonly node: string;
}

/**
 * RESPOOL COLOCATE CHECK and MOVE (config `colocate`, keys/colocation.ts): a key written before
 * its rule existed keeps its old name on the nodes, where no client name reaches it — a client's
 * `k` is now read as `{tag}k`, so the old value looks gone until it is moved.
 *
 *   CHECK  SCAN every primary for each rule's glob (behind each namespace, users[].keyPrefix):
 *          a stored name that matches a rule but is not in the rule's form is listed.
 *   MOVE   each listed key: DUMP and PTTL, RESTORE under the rule's name (not over an existing
 *          key: it is then listed as `target exists` and both stay), then DEL of the old name.
 *          Run it while nothing but respool writes those keys: a write to the old name between
 *          DUMP and DEL (only a client bypassing respool can make one) is lost.
 */
export function colocate(session: HandlerSession, req: CommandRequest): void {
  const op = req.args[2]?.toString('latin1').toUpperCase();
  if (op !== 'CHECK' && op !== 'MOVE') return session.replyNow(encodeError(ProxyError.unknownSubcommand(req.args[2]?.toString() ?? '', 'RESPOOL COLOCATE')));
  let count = DEFAULT_COUNT;
  if (req.args.length === 5 && req.args[3]!.toString('latin1').toUpperCase() === 'COUNT') {
    count = Number(req.args[4]!.toString('latin1'));
    if (!Number.isInteger(count) || count < 1) return session.replyNow(encodeError(ProxyError.notAnInteger()));
  } else if (req.args.length !== 3) {
    return session.replyNow(encodeError(ProxyError.syntax()));
  }
  const colocation = session.ctx.users.colocationRules();
  if (colocation === null) return session.replyNow(encodeArray([])); // no rule: nothing can be misplaced
  const namespaces = session.ctx.users.list().map((u) => u.keyNames?.namespace ?? null).filter((n): n is Buffer => n !== null);
  const entry = session.reserve();
  const client = asRespoolClient(entry.client);
  const protocol = session.state.protocol;
  const router = session.ctx.router;
  void findMisplaced(router, client, colocation, namespaces, count)
    .then(async (keys) => (op === 'CHECK' ? keys.map((k) => checkEntry(k, protocol)) : await moveAll(router, client, keys, protocol)))
    .then((entries) => entry.fill(encodeArray(entries)), (e: Error) => entry.fill(encodeError(`ERR respool: ${e.message}`)));
}

async function findMisplaced(router: Router, client: CallClient, colocation: KeyColocation, namespaces: Buffer[], count: number): Promise<MisplacedKey[]> {
  const spaces = [Buffer.alloc(0), ...namespaces].sort((a, b) => b.length - a.length); // longest first: a key is in the longest it starts with
  const patterns = new Map<string, Buffer>();
  for (const ns of spaces) {
    for (const glob of colocation.globs()) {
      const p = Buffer.concat([escapeGlob(ns), glob]);
      patterns.set(p.toString('latin1'), p);
    }
  }
  const found: MisplacedKey[] = [];
  const primaries = (router.topology()?.shards ?? []).map((s) => s.primary);
  for (const node of primaries) {
    const seen = new Set<string>(); // a key several patterns find is judged once
    for (const pattern of patterns.values()) {
      await scanNode(router, client, node, pattern, (keys) => {
        for (const stored of keys) {
          if (found.length >= count) return false;
          const id = stored.toString('latin1');
          if (seen.has(id) || stored.includes(FLEET) || stored.includes(SPLIT_COPY)) continue;
          seen.add(id);
          const ns = spaces.find((s) => stored.length > s.length && stored.compare(s, 0, s.length, 0, s.length) === 0)!;
          const clientKey = stored.subarray(ns.length);
          if (colocation.visibleName(clientKey) !== null) continue; // in its rule's form, or no rule takes it
          found.push({ stored, clientKey, storedAs: Buffer.concat([ns, colocation.storedName(clientKey)!]), node: node.address });
        }
        return found.length < count;
      });
      if (found.length >= count) return found;
    }
  }
  return found;
}

function checkEntry(k: MisplacedKey, protocol: 2 | 3): Buffer {
  const b = (v: Buffer | string) => encodeBulk(v, protocol);
  return encodeArray([b('key'), b(k.stored), b('client_key'), b(k.clientKey), b('stored_as'), b(k.storedAs), b('node'), b(k.node)]);
}

async function moveAll(router: Router, client: CallClient, keys: MisplacedKey[], protocol: 2 | 3): Promise<Buffer[]> {
  const out: Buffer[] = [];
  for (const k of keys) {
    const b = (v: Buffer | string) => encodeBulk(v, protocol);
    out.push(encodeArray([b('key'), b(k.stored), b('stored_as'), b(k.storedAs), b('result'), b(await moveOne(router, client, k))]));
  }
  return out;
}

/** One key to its rule's name: `moved`, `target exists`, `gone` (deleted meanwhile), or the node's error. */
async function moveOne(router: Router, client: CallClient, k: MisplacedKey): Promise<string> {
  const from = calculateSlot(k.stored);
  const to = calculateSlot(k.storedAs);
  const dump = await internalCall(router, client, ['DUMP', k.stored], from, true);
  if (dump[0] === 0x2d) return errorText(dump);
  const payload = bulkPayload(dump);
  if (payload === null) return 'gone';
  const pttl = await internalCall(router, client, ['PTTL', k.stored], from, true);
  const ms = Number(pttl.toString('latin1', 1).trim());
  if (ms === -2) return 'gone';
  const restore = await internalCall(router, client, ['RESTORE', k.storedAs, String(ms > 0 ? ms : 0), payload], to);
  if (restore.toString('latin1', 0, 8) === '-BUSYKEY') return 'target exists';
  if (restore[0] === 0x2d) return errorText(restore);
  const del = await internalCall(router, client, ['DEL', k.stored], from);
  return del[0] === 0x2d ? errorText(del) : 'moved';
}

function errorText(reply: Buffer): string {
  return reply.toString('utf8', 1).trim();
}
