import { describe, expect, it } from 'vitest';
import { decodeReply, RespError, splitAggregate, type RespValue } from '../../src/resp/decode.js';
import { ProtocolError } from '../../src/resp/protocol-error.js';

const b = (s: string): Buffer => Buffer.from(s, 'latin1');
const decode = (s: string): RespValue => decodeReply(b(s));

describe('decodeReply', () => {
  it('decodes RESP2 types', () => {
    expect(decode('+OK\r\n')).toBe('OK');
    expect(decode('+\r\n')).toBe('');
    expect(decode('+héllo\r\n'.replace('é', '\xc3\xa9'))).toBe('héllo'); // UTF-8 text
    expect(decode('-MOVED 3999 127.0.0.1:7001\r\n')).toEqual(new RespError('MOVED 3999 127.0.0.1:7001'));
    expect(decode('-ERR x\r\n')).toBeInstanceOf(RespError);
    expect(decode(':0\r\n')).toBe(0);
    expect(decode(':-42\r\n')).toBe(-42);
    expect(decode(':9007199254740991\r\n')).toBe(9007199254740991);
    expect(decode(':-9223372036854775808\r\n')).toBe(-9223372036854775808);
    expect(decode('$5\r\nhello\r\n')).toEqual(b('hello'));
    expect(decode('$0\r\n\r\n')).toEqual(Buffer.alloc(0));
    expect(decode('$4\r\n\r\n\r\n\r\n')).toEqual(b('\r\n\r\n'));
    expect(decode('$-1\r\n')).toBeNull();
    expect(decode('*-1\r\n')).toBeNull();
    expect(decode('*0\r\n')).toEqual([]);
    expect(decode('*3\r\n:1\r\n$1\r\na\r\n*1\r\n-ERR e\r\n')).toEqual([1, b('a'), [new RespError('ERR e')]]);
  });

  it('decodes RESP3 types', () => {
    expect(decode('_\r\n')).toBeNull();
    expect(decode('#t\r\n')).toBe(true);
    expect(decode('#f\r\n')).toBe(false);
    expect(decode(',3.14\r\n')).toBe(3.14);
    expect(decode(',-1.5e-10\r\n')).toBe(-1.5e-10);
    expect(decode(',10\r\n')).toBe(10);
    expect(decode(',.5\r\n')).toBe(0.5);
    expect(decode(',1.\r\n')).toBe(1);
    expect(decode(',inf\r\n')).toBe(Infinity);
    expect(decode(',-inf\r\n')).toBe(-Infinity);
    expect(decode(',nan\r\n')).toBeNaN();
    expect(decode('(3492890328409238509324850943850943825024385\r\n')).toBe('3492890328409238509324850943850943825024385');
    expect(decode('(-1\r\n')).toBe('-1');
    expect(decode('=15\r\ntxt:Some string\r\n')).toBe('Some string');
    expect(decode('=4\r\nmkd:\r\n')).toBe('');
    expect(decode('!21\r\nSYNTAX invalid syntax\r\n')).toEqual(new RespError('SYNTAX invalid syntax'));
    expect(decode('~3\r\n+a\r\n:1\r\n_\r\n')).toEqual(['a', 1, null]);
    expect(decode('>3\r\n+message\r\n+chan\r\n$2\r\nhi\r\n')).toEqual(['message', 'chan', b('hi')]);
  });

  it('decodes maps with string keys for simple and bulk string keys', () => {
    const m = decode('%3\r\n+first\r\n:1\r\n$6\r\nsecond\r\n#t\r\n:7\r\n*1\r\n$1\r\nx\r\n') as Map<RespValue, RespValue>;
    expect(m).toBeInstanceOf(Map);
    expect([...m.keys()]).toEqual(['first', 'second', 7]);
    expect(m.get('first')).toBe(1);
    expect(m.get('second')).toBe(true);
    expect(m.get(7)).toEqual([b('x')]);
    expect(decode('%0\r\n')).toEqual(new Map());
    // HELLO 3 reply shape
    const hello = decode(
      '%3\r\n$6\r\nserver\r\n$6\r\nvalkey\r\n$5\r\nproto\r\n:3\r\n$7\r\nmodules\r\n*0\r\n',
    ) as Map<RespValue, RespValue>;
    expect(hello.get('proto')).toBe(3);
    expect(hello.get('server')).toEqual(b('valkey'));
  });

  it('decodes nested aggregates', () => {
    expect(decode('*2\r\n*2\r\n+a\r\n*1\r\n*0\r\n*-1\r\n')).toEqual([['a', [[]]], null]);
    const v = decode('*1\r\n%1\r\n+k\r\n~2\r\n_\r\n(1\r\n') as RespValue[];
    expect(v[0]).toEqual(new Map([['k', [null, '1']]]));
  });

  it('skips attributes and returns the value they annotate', () => {
    expect(decode('|1\r\n+key-popularity\r\n%2\r\n$1\r\na\r\n,0.1923\r\n$1\r\nb\r\n,0.0012\r\n*2\r\n:2039123\r\n:9543892\r\n')).toEqual([
      2039123, 9543892,
    ]);
    expect(decode('*3\r\n:1\r\n:2\r\n|1\r\n+ttl\r\n:3600\r\n:3\r\n')).toEqual([1, 2, 3]);
    expect(decode('|0\r\n|1\r\n+a\r\n+b\r\n+OK\r\n')).toBe('OK');
    expect(decode('*1\r\n|1\r\n+a\r\n|1\r\n+b\r\n+c\r\n*1\r\n:1\r\n:2\r\n')).toEqual([2]);
    // a long run of attributes must not overflow the stack
    expect(decode('|0\r\n'.repeat(200000) + ':1\r\n')).toBe(1);
  });

  it('returns bulk strings as views of the frame', () => {
    const frame = b('*2\r\n$3\r\nabc\r\n$1\r\nd\r\n');
    const [x] = decodeReply(frame) as Buffer[];
    expect(x!.buffer).toBe(frame.buffer);
    expect(x!.byteOffset).toBe(frame.byteOffset + 8);
  });

  const bad: Array<[string, string]> = [
    ['', 'Protocol error: incomplete reply'],
    ['+OK', 'Protocol error: incomplete reply'],
    ['+OK\r', 'Protocol error: incomplete reply'],
    ['+OK\rX', 'Protocol error: expected LF after CR'],
    ['$5\r\nabc\r\n', 'Protocol error: incomplete reply'],
    ['$1\r\nabc\r\n', 'Protocol error: invalid bulk length'],
    ['*2\r\n:1\r\n', 'Protocol error: incomplete reply'],
    ['*99999999\r\n', 'Protocol error: incomplete reply'],
    ['$999999999999\r\n', 'Protocol error: incomplete reply'],
    ['+OK\r\n+OK\r\n', 'Protocol error: trailing bytes after reply'],
    ['x\r\n', "Protocol error: invalid reply type byte 'x'"],
    [':abc\r\n', "Protocol error: invalid integer 'abc'"],
    [':\r\n', "Protocol error: invalid integer ''"],
    [':1234567890123456789x\r\n', "Protocol error: invalid integer '1234567890123456789x'"],
    [',abc\r\n', "Protocol error: invalid double 'abc'"],
    [',\r\n', "Protocol error: invalid double ''"],
    [',0x10\r\n', "Protocol error: invalid double '0x10'"],
    ['#x\r\n', "Protocol error: invalid boolean 'x'"],
    ['_x\r\n', 'Protocol error: invalid null'],
    ['(1.5\r\n', "Protocol error: invalid big number '1.5'"],
    ['=3\r\ntxt\r\n', 'Protocol error: invalid verbatim string'],
    ['=5\r\ntxt-x\r\n', 'Protocol error: invalid verbatim string'],
    ['$-2\r\n', 'Protocol error: invalid length'],
    ['~-1\r\n', 'Protocol error: invalid length'],
    ['%-1\r\n', 'Protocol error: invalid length'],
    ['!-1\r\n', 'Protocol error: invalid length'],
    ['$?\r\n', 'Protocol error: streamed RESP3 types are not supported'],
    ['|1\r\n+a\r\n+b\r\n', 'Protocol error: incomplete reply'],
  ];
  for (const [input, message] of bad) {
    it(`rejects ${JSON.stringify(input)}`, () => {
      expect(() => decode(input)).toThrow(new ProtocolError(message));
      expect(() => decode(input)).toThrow(ProtocolError);
    });
  }

  it('enforces the nesting bound (default 128) without overflowing the stack', () => {
    expect(() => decode('*1\r\n'.repeat(128) + ':1\r\n')).not.toThrow();
    expect(() => decode('*1\r\n'.repeat(129) + ':1\r\n')).toThrow('Protocol error: reply nesting too deep');
    expect(() => decode('*1\r\n'.repeat(1_000_000) + ':1\r\n')).toThrow('Protocol error: reply nesting too deep');
    expect(() => decodeReply(b('*1\r\n*1\r\n:1\r\n'), 1)).toThrow('Protocol error: reply nesting too deep');
    expect(decodeReply(b('*1\r\n*1\r\n:1\r\n'), 2)).toEqual([[1]]);
  });
});

describe('splitAggregate', () => {
  const split = (s: string) => splitAggregate(b(s))?.map((x) => x.toString('latin1')) ?? null;
  it('returns child frames as views', () => {
    const frame = b('*3\r\n$1\r\na\r\n$-1\r\n*2\r\n:1\r\n|1\r\n+k\r\n+v\r\n:2\r\n');
    const children = splitAggregate(frame)!;
    expect(children.map((c) => c.toString())).toEqual(['$1\r\na\r\n', '$-1\r\n', '*2\r\n:1\r\n|1\r\n+k\r\n+v\r\n:2\r\n']);
    for (const c of children) expect(c.buffer).toBe(frame.buffer);
  });

  it('handles sets, pushes, maps, nulls and leading attributes', () => {
    expect(split('*0\r\n')).toEqual([]);
    expect(split('*-1\r\n')).toBeNull();
    expect(split('_\r\n')).toBeNull();
    expect(split('~2\r\n+a\r\n+b\r\n')).toEqual(['+a\r\n', '+b\r\n']);
    expect(split('>2\r\n+a\r\n+b\r\n')).toEqual(['+a\r\n', '+b\r\n']);
    expect(split('%1\r\n+k\r\n%1\r\n+x\r\n+y\r\n')).toEqual(['+k\r\n', '%1\r\n+x\r\n+y\r\n']);
    expect(split('|1\r\n+a\r\n+b\r\n*1\r\n:1\r\n')).toEqual([':1\r\n']);
  });

  it('rejects non-aggregates and malformed frames', () => {
    expect(() => split('+OK\r\n')).toThrow('Protocol error: expected an aggregate reply');
    expect(() => split('*2\r\n:1\r\n')).toThrow(ProtocolError);
    expect(() => split('*1\r\n:1\r\n:2\r\n')).toThrow('Protocol error: trailing bytes after reply');
    expect(() => split('~-1\r\n')).toThrow(ProtocolError);
    expect(() => split('*99999999\r\n')).toThrow('Protocol error: incomplete reply');
  });

  it('splits aggregates whose children are nested thousands deep (skipped iteratively)', () => {
    const deep = '*1\r\n'.repeat(20_000) + ':7\r\n';
    const parts = splitAggregate(Buffer.from(`*2\r\n${deep}+ok\r\n`))!;
    expect(parts.map((p) => p.toString())).toEqual([deep, '+ok\r\n']);
    expect(() => decodeReply(Buffer.from(deep))).toThrow('Protocol error: reply nesting too deep');
  });
});
