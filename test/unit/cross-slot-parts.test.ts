import { describe, expect, it } from 'vitest';
import { putBackCommand } from '../../src/parking/put-back.js';
import { firstKeyError, parseStreamRead, string2ll, validStrictId, type StreamReadArgs } from '../../src/handlers/stream-read-args.js';

const b = (s: string) => Buffer.from(s, 'latin1');
const args = (...a: string[]) => a.map(b);
const text = (cmd: Array<Buffer | string> | null) => cmd?.map((x) => x.toString());

describe('put-back commands: a popped value back where it came from', () => {
  it('BLPOP / BRPOP: the same end of the list', () => {
    expect(text(putBackCommand('blpop', b('*2\r\n$1\r\nk\r\n$1\r\nv\r\n'), true))).toEqual(['LPUSH', 'k', 'v']);
    expect(text(putBackCommand('brpop', b('*2\r\n$1\r\nk\r\n$1\r\nv\r\n'), false))).toEqual(['RPUSH', 'k', 'v']);
  });

  it('BLMPOP COUNT: the first popped ends nearest its end', () => {
    const reply = b('*2\r\n$1\r\nk\r\n*3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n');
    expect(text(putBackCommand('blmpop', reply, true))).toEqual(['LPUSH', 'k', '3', '2', '1']);
    expect(text(putBackCommand('blmpop', reply, false))).toEqual(['RPUSH', 'k', '3', '2', '1']);
  });

  it('BZPOPMIN / BZMPOP: the same score (RESP2 text, RESP3 doubles, infinities)', () => {
    expect(text(putBackCommand('bzpopmin', b('*3\r\n$1\r\nk\r\n$1\r\nm\r\n$3\r\n1.5\r\n'), true))).toEqual(['ZADD', 'k', '1.5', 'm']);
    expect(text(putBackCommand('bzpopmax', b('*3\r\n$1\r\nk\r\n$1\r\nm\r\n,0.1\r\n'), true))).toEqual(['ZADD', 'k', '0.1', 'm']);
    const zm = b('*2\r\n$1\r\nk\r\n*2\r\n*2\r\n$1\r\na\r\n,inf\r\n*2\r\n$1\r\nb\r\n,-inf\r\n');
    expect(text(putBackCommand('bzmpop', zm, true))).toEqual(['ZADD', 'k', 'inf', 'a', '-inf', 'b']);
  });

  it('nothing to put back: nil, an error', () => {
    expect(putBackCommand('blpop', b('*-1\r\n'), true)).toBeNull();
    expect(putBackCommand('blpop', b('_\r\n'), true)).toBeNull();
    expect(putBackCommand('blpop', b('-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n'), true)).toBeNull();
  });
});

describe('XREAD / XREADGROUP arguments as Valkey 8.0.1 reads them', () => {
  it("string2ll: Valkey's strict integers", () => {
    expect(string2ll(b('0'))).toBe(0n);
    expect(string2ll(b('-9223372036854775808'))).toBe(-(2n ** 63n));
    expect(string2ll(b('9223372036854775808'))).toBeNull();
    for (const bad of ['', '01', '+1', ' 1', '-', '-0', '1.0', '1e3']) expect(string2ll(b(bad)), bad).toBeNull();
  });

  it('strict stream IDs: strtoull\'s leniency where string2ll refuses, never "-" or "+" alone', () => {
    for (const ok of ['0', '1-1', '5', ' 7', '+5-05', '18446744073709551615-18446744073709551615', '1-1\0junk']) expect(validStrictId(b(ok)), ok).toBe(true);
    for (const bad of ['-', '+', 'zz', '1-', '-1', '1-x', '18446744073709551616', 'x'.repeat(128)]) expect(validStrictId(b(bad)), bad).toBe(false);
  });

  it('options, in order, with their errors', () => {
    const ok = parseStreamRead(args('XREAD', 'COUNT', '2', 'BLOCK', '100', 'STREAMS', 'a', 'b', '0', '0'), false) as StreamReadArgs;
    expect(ok).toMatchObject({ streamsAt: 6, count: 2, blockAt: 4, blockMs: 100 });
    expect(parseStreamRead(args('XREAD', 'BLOCK', 'x', 'STREAMS', 'a', '0'), false)).toBe('ERR timeout is not an integer or out of range');
    expect(parseStreamRead(args('XREAD', 'BLOCK', '-1', 'STREAMS', 'a', '0'), false)).toBe('ERR timeout is negative');
    expect(parseStreamRead(args('XREAD', 'STREAMS', 'a', 'b', '0'), false)).toBe("ERR Unbalanced 'xread' list of streams: for each stream key an ID or '$' must be specified.");
    expect(parseStreamRead(args('XREADGROUP', 'STREAMS', 'a', '>'), true)).toBe('ERR Missing GROUP option for XREADGROUP');
    expect(parseStreamRead(args('XREAD', 'NOACK', 'STREAMS', 'a', '0'), false)).toBe('ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.');
    expect(parseStreamRead(args('XREAD', 'FOO', 'STREAMS', 'a', '0'), false)).toBe('ERR syntax error');
  });

  it("keys in order: the first one's error", () => {
    const a = args('XREADGROUP', 'GROUP', 'g', 'c', 'STREAMS', 'k1', 'k2', 'k3', '>', '$', 'zz');
    const parsed = parseStreamRead(a, true) as StreamReadArgs;
    expect(firstKeyError(a, parsed, ['ok', 'ok', 'wrongtype'])).toMatch(/^ERR The \$ ID is meaningless/);
    expect(firstKeyError(a, parsed, ['ok', 'nogroup', 'ok'])).toBe("NOGROUP No such key 'k2' or consumer group 'g' in XREADGROUP with GROUP option");
    const x = args('XREAD', 'STREAMS', 'k1', 'k2', '0', 'zz');
    expect(firstKeyError(x, parseStreamRead(x, false) as StreamReadArgs, ['missing', 'ok'])).toBe('ERR Invalid stream ID specified as stream command argument');
    expect(firstKeyError(x, parseStreamRead(x, false) as StreamReadArgs, ['wrongtype', 'wrongtype'])).toBe('WRONGTYPE Operation against a key holding the wrong kind of value');
  });
});
