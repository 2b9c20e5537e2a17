/**
 * XREAD / XREADGROUP arguments as Valkey 8.0.1 reads them (t_stream.c xreadCommand), for the
 * streams-over-several-slots path: the same checks in the same order, with Valkey's texts, so a
 * bad command gets one server's error before anything is read (XREADGROUP's reads deliver
 * entries, which must not happen on one slot when another slot's key would refuse the command).
 * What needs the data (a key's type, a group's existence) is asked of the nodes; the rest is here.
 */

export interface StreamReadArgs {
  readonly group: boolean;
  readonly groupName: Buffer | null;
  readonly consumer: Buffer | null;
  /** Index in args of the first stream key; `count` keys, then `count` IDs. */
  readonly streamsAt: number;
  readonly count: number;
  /** Index in args of BLOCK's value, -1 without BLOCK. */
  readonly blockAt: number;
  /** BLOCK's milliseconds (0 = for ever); -1 without BLOCK. */
  readonly blockMs: number;
}

const LLONG_MAX = 2n ** 63n - 1n;
const ULLONG_MAX = 2n ** 64n - 1n;

/** Valkey's string2ll: strict decimal, no sign but '-', no leading zeros, within int64. */
export function string2ll(b: Buffer): bigint | null {
  const s = b.toString('latin1');
  if (s.length === 0 || s.length >= 21) return null; // LONG_STR_SIZE
  if (s === '0') return 0n;
  if (!/^-?[1-9][0-9]*$/.test(s)) return null;
  const v = BigInt(s);
  return v > LLONG_MAX || v < -LLONG_MAX - 1n ? null : v;
}

/** Valkey's string2ull: string2ll (non-negative), else strtoull's rules (spaces, a sign, digits, no overflow). */
function string2ull(s: string): boolean {
  const ll = string2ll(Buffer.from(s, 'latin1'));
  if (ll !== null) return ll >= 0n;
  const m = /^[ \t\n\v\f\r]*([+-]?)([0-9]+)$/.exec(s);
  return m !== null && BigInt(m[2]!) <= ULLONG_MAX;
}

/** Valkey's streamParseStrictIDOrReply (validity only): <ms>[-<seq>], not "-" or "+". */
export function validStrictId(b: Buffer): boolean {
  if (b.length > 127) return false;
  const nul = b.indexOf(0);
  const s = b.toString('latin1', 0, nul < 0 ? b.length : nul); // the C string the server parses
  if (s === '-' || s === '+') return false;
  const dash = s.indexOf('-');
  if (dash < 0) return string2ull(s);
  return string2ull(s.slice(0, dash)) && string2ull(s.slice(dash + 1));
}

function is(b: Buffer, word: string): boolean {
  return b.length === word.length && b.toString('latin1').toLowerCase() === word;
}

/** The options, or Valkey's error line for them (checked before any key). */
export function parseStreamRead(args: readonly Buffer[], group: boolean): StreamReadArgs | string {
  const name = group ? 'xreadgroup' : 'xread';
  let streamsAt = 0;
  let count = 0;
  let blockAt = -1;
  let blockMs = -1;
  let groupName: Buffer | null = null;
  let consumer: Buffer | null = null;
  for (let i = 1; i < args.length; i++) {
    const moreargs = args.length - i - 1;
    const o = args[i]!;
    if (is(o, 'block') && moreargs > 0) {
      i++;
      const t = string2ll(args[i]!);
      if (t === null) return 'ERR timeout is not an integer or out of range';
      if (t < 0n) return 'ERR timeout is negative';
      if (t > 0n && t > LLONG_MAX - BigInt(Date.now())) return 'ERR timeout is out of range';
      blockAt = i;
      blockMs = Number(t);
    } else if (is(o, 'count') && moreargs > 0) {
      i++;
      if (string2ll(args[i]!) === null) return 'ERR value is not an integer or out of range';
    } else if (is(o, 'streams') && moreargs > 0) {
      streamsAt = i + 1;
      const n = args.length - streamsAt;
      if (n % 2 !== 0) {
        return `ERR Unbalanced '${name}' list of streams: for each stream key an ID or '${group ? '>' : '$'}' must be specified.`;
      }
      count = n / 2;
      break;
    } else if (is(o, 'group') && moreargs >= 2) {
      if (!group) return 'ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.';
      groupName = args[i + 1]!;
      consumer = args[i + 2]!;
      i += 2;
    } else if (is(o, 'noack')) {
      if (!group) return 'ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.';
    } else {
      return 'ERR syntax error';
    }
  }
  if (streamsAt === 0) return 'ERR syntax error';
  if (group && groupName === null) return 'ERR Missing GROUP option for XREADGROUP';
  return { group, groupName, consumer, streamsAt, count, blockAt, blockMs };
}

/** What the node said about one key (its type, and for XREADGROUP whether the group exists). */
export type KeyFacts = 'ok' | 'missing' | 'wrongtype' | 'nogroup';

/** Valkey's error for the first key (in order) that the command refuses, else null. */
export function firstKeyError(args: readonly Buffer[], parsed: StreamReadArgs, facts: readonly KeyFacts[]): string | null {
  for (let i = 0; i < parsed.count; i++) {
    const key = args[parsed.streamsAt + i]!;
    const id = args[parsed.streamsAt + parsed.count + i]!;
    const fact = facts[i]!;
    if (fact === 'wrongtype') return 'WRONGTYPE Operation against a key holding the wrong kind of value';
    if (parsed.group && (fact === 'missing' || fact === 'nogroup')) {
      return `NOGROUP No such key '${cString(key)}' or consumer group '${cString(parsed.groupName!)}' in XREADGROUP with GROUP option`;
    }
    const text = id.toString('latin1');
    if (text === '$' || text === '+') {
      if (parsed.group) {
        return `ERR The ${text} ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The ${text} ID would just return an empty result set.`;
      }
      continue;
    }
    if (text === '>') {
      if (!parsed.group) return 'ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.';
      continue;
    }
    if (!validStrictId(id)) return 'ERR Invalid stream ID specified as stream command argument';
  }
  return null;
}

/** A name as the server prints it with %s: up to its first NUL. */
function cString(b: Buffer): string {
  const nul = b.indexOf(0);
  return b.toString('utf8', 0, nul < 0 ? b.length : nul);
}
