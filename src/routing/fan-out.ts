import type { CommandSpec } from '../commands/command-table.js';
import { requestPolicy } from '../commands/proxy-handling.js';
import type { ClusterNode, Topology } from '../cluster/topology.js';
import { Fragmented } from './fragmented.js';
import type { CallOwner } from './upstream-call.js';
import type { Router } from './router.js';
import { decodeReply, RespError, splitAggregate } from '../resp/decode.js';
import { ProxyError } from '../errors.js';
import { encodeArray, encodeBulk, encodeCommand, encodeError, encodeInteger } from '../resp/encode.js';

/**
 * Commands that speak for the whole data set (DBSIZE, KEYS, FLUSHALL, SCAN, SCRIPT LOAD, …) in
 * cluster mode: sent to every primary (request_policy:all_shards) or every node (all_nodes),
 * and the replies merged by the command's response_policy tip from COMMAND INFO:
 *
 *   agg_sum / agg_min / agg_max      integers combined          (DBSIZE, SLOWLOG LEN, WAIT…)
 *   agg_logical_and / _or            arrays combined element-wise (SCRIPT EXISTS)
 *   all_succeeded                    the first reply if none failed (FLUSHALL, SCRIPT LOAD)
 *   one_succeeded                    the first success, else the first error (SCRIPT KILL)
 *   none                             arrays concatenated         (KEYS, SLOWLOG GET)
 *   RANDOMKEY                        a random non-nil answer
 *   SCAN                             one shard after another; see ScanCursor below
 *
 * An error from any node (for the policies that need all) is passed on as the node's own error
 * reply. Nothing here is retried: these are one round per node, and a write such as FLUSHALL
 * must not run twice.
 */
export class FanOut extends Fragmented {
  constructor(
    target: CallOwner,
    command: string,
    private readonly policy: string | undefined,
    count: number,
  ) {
    super(target, command, count);
  }

  protected merge(replies: Buffer[]): Buffer {
    return mergeReplies(this.command, this.policy, replies); // a throw becomes this client's error (Fragmented)
  }
}

function isError(frame: Buffer): boolean {
  return frame[0] === 0x2d /* - */ || frame[0] === 0x21 /* ! blob error */;
}

function isNull(frame: Buffer): boolean {
  return frame[0] === 0x5f /* _ */ || (frame.length >= 3 && frame[1] === 0x2d && frame[2] === 0x31 /* $-1 / *-1 */);
}

export function mergeReplies(command: string, policy: string | undefined, replies: Buffer[]): Buffer {
  const firstError = replies.find(isError);
  if (command === 'randomkey') {
    const found = replies.filter((r) => !isError(r) && !isNull(r));
    if (found.length > 0) return found[Math.floor(Math.random() * found.length)]!;
    return firstError ?? replies[0]!;
  }
  if (policy === 'one_succeeded') return replies.find((r) => !isError(r)) ?? firstError!;
  if (firstError) return firstError;
  if (command === 'pubsub|shardnumsub') return sumPerChannel(replies);
  switch (policy) {
    case 'all_succeeded':
      return replies[0]!;
    case 'agg_sum':
    case 'agg_min':
    case 'agg_max': {
      if (replies[0]![0] === 0x2a /* * */) return aggregateArrays(policy, replies); // WAITAOF
      const values = replies.map((r) => toNumber(decodeReply(r)));
      const result = policy === 'agg_sum' ? values.reduce((a, b) => a + b, 0)
        : policy === 'agg_min' ? Math.min(...values) : Math.max(...values);
      return encodeInteger(result);
    }
    case 'agg_logical_and':
    case 'agg_logical_or': {
      const truth = replies.map((r) => (decodeReply(r) as unknown[]).map((v) => toNumber(v) !== 0));
      const and = policy === 'agg_logical_and';
      const combined = truth[0]!.map((_, i) => (and ? truth.every((t) => t[i]) : truth.some((t) => t[i])));
      return encodeArray(combined.map((v) => encodeInteger(v ? 1 : 0)));
    }
    default: {
      // No response policy: the nodes' arrays, concatenated (KEYS, SLOWLOG GET, …).
      const items: Buffer[] = [];
      for (const r of replies) {
        const children = splitAggregate(r);
        if (children === null) continue;
        for (const c of children) items.push(c);
      }
      return encodeArray(items);
    }
  }
}

/**
 * PUBSUB SHARDNUMSUB as one server counts: each shard answers every channel asked (its own
 * subscribers, 0 where the channel is another shard's), in the order asked; the counts are summed.
 */
function sumPerChannel(replies: Buffer[]): Buffer {
  const rows = replies.map((r) => splitAggregate(r) ?? []);
  const first = rows[0]!;
  const out = first.map((item, i) => {
    if (i % 2 === 0) return item;
    return encodeInteger(rows.reduce((sum, row) => sum + toNumber(decodeReply(row[i] ?? Buffer.from(':0\r\n'))), 0));
  });
  const type = replies[0]![0] === 0x25 /* % (RESP3) */ ? '%' : '*';
  return Buffer.concat([Buffer.from(`${type}${type === '%' ? out.length / 2 : out.length}\r\n`), ...out]);
}

/** agg_min / agg_max / agg_sum over arrays of integers, element by element (WAITAOF's [local, replicas]). */
function aggregateArrays(policy: 'agg_sum' | 'agg_min' | 'agg_max', replies: Buffer[]): Buffer {
  const rows = replies.map((r) => (decodeReply(r) as unknown[]).map(toNumber));
  const combine = (a: number, b: number) => (policy === 'agg_sum' ? a + b : policy === 'agg_min' ? Math.min(a, b) : Math.max(a, b));
  return encodeArray(rows[0]!.map((_, i) => encodeInteger(rows.map((row) => row[i]!).reduce(combine))));
}

function toNumber(value: unknown): number {
  if (typeof value === 'number') return value;
  if (typeof value === 'string' || Buffer.isBuffer(value)) return Number(value.toString());
  if (value instanceof RespError) throw new Error(value.message);
  throw new Error('expected an integer reply');
}

/** Which nodes a fan-out command visits: primaries, or every node for all_nodes commands. */
export function fanOutTargets(spec: CommandSpec, topology: Topology): Array<{ node: ClusterNode; role: 'primary' | 'replica' }> {
  const shards = orderedShards(topology);
  const primaries = shards.map((s) => ({ node: s.primary, role: 'primary' as const }));
  if (requestPolicy(spec) !== 'all_nodes') return primaries;
  const replicas = shards.flatMap((s) =>
    s.replicas.filter((r) => r.health !== 'failed' && r.health !== 'fail').map((node) => ({ node, role: 'replica' as const })));
  return [...primaries, ...replicas];
}

/** Shards in slot order, so a SCAN cursor means the same shard across calls. */
function orderedShards(topology: Topology) {
  return [...topology.shards].sort((a, b) => (a.slots[0]?.[0] ?? 0) - (b.slots[0]?.[0] ?? 0));
}

/** (2^64 - 1) × 16384 shards + 16383 has 25 digits. */
const MAX_CURSOR_DIGITS = 32;

/** Digits of a cursor's text past its leading zeros (Valkey's strtoull accepts any number of them). */
function significantLength(text: Buffer): number {
  let i = 0;
  while (i < text.length - 1 && text[i] === 0x30 /* 0 */) i++;
  return text.length - i;
}

/**
 * SCAN across a cluster, one shard after another. respool's cursor packs the node's cursor and
 * the shard's index: cursor = nodeCursor × shards + shardIndex (decimal, as SCAN cursors are),
 * so "0" starts and ends the scan as clients expect. A resharding between calls can make a scan
 * miss or repeat keys (as SCAN itself may); a cursor from a different shard count is refused.
 */
export class ClusterScan extends Fragmented {
  private constructor(
    target: CallOwner,
    private readonly shard: number,
    private readonly shardCount: number,
  ) {
    super(target, 'scan', 1);
  }

  /** Sends the scan's one call; returns an error reply instead when the cursor cannot be read. */
  static start(target: CallOwner, topology: Topology, router: Router, args: Buffer[]): Buffer | null {
    const shards = orderedShards(topology);
    let cursor: bigint;
    try {
      // A node cursor is at most 2^64 - 1 (20 digits; Valkey answers "invalid cursor" past it), so
      // respool's is at most 25 digits. Longer text is refused before BigInt, whose parsing of a
      // client's megabytes of digits would hold the event loop for every client (issue 10).
      if (significantLength(args[1]!) > MAX_CURSOR_DIGITS) throw new Error('too long');
      cursor = BigInt(args[1]!.toString());
      if (cursor < 0n) throw new Error('negative');
    } catch {
      return encodeError(ProxyError.invalidCursor());
    }
    const count = BigInt(shards.length);
    const shard = Number(cursor % count);
    const nodeCursor = cursor / count;
    const command = encodeCommand(['SCAN', nodeCursor.toString(), ...args.slice(2)]);
    router.send({ to: 'node', owner: new ClusterScan(target, shard, shards.length), raw: command, command: 'scan', node: shards[shard]!.primary, role: 'primary' });
    return null;
  }

  protected merge([frame]: Buffer[]): Buffer {
    if (isError(frame!)) return frame!;
    const parts = splitAggregate(frame!);
    if (parts === null || parts.length !== 2) return encodeError(ProxyError.unexpectedReply('SCAN'));
    const next = BigInt(String(decodeReply(parts[0]!)));
    const count = BigInt(this.shardCount);
    let cursor: bigint;
    if (next !== 0n) cursor = next * count + BigInt(this.shard);
    else if (this.shard + 1 < this.shardCount) cursor = BigInt(this.shard + 1);
    else cursor = 0n;
    return encodeArray([encodeBulk(cursor.toString(), this.client.protocol), parts[1]!]);
  }
}
