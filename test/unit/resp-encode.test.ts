import { describe, expect, it } from 'vitest';
import * as C from '../../src/resp/constant-replies.js';
import { decodeReply } from '../../src/resp/decode.js';
import { encodeArray, encodeBulk, encodeCommand, encodeError, encodeInteger, encodeMap, encodeSimple } from '../../src/resp/encode.js';
import { RequestFramer } from '../../src/resp/request-framer.js';

/** The obvious (slow) encoding, as the reference. */
function reference(args: ReadonlyArray<string | Buffer | number>): Buffer {
  const parts: Buffer[] = [Buffer.from(`*${args.length}\r\n`)];
  for (const a of args) {
    const data = Buffer.isBuffer(a) ? a : Buffer.from(String(a), 'utf8');
    parts.push(Buffer.from(`$${data.length}\r\n`), data, Buffer.from('\r\n'));
  }
  return Buffer.concat(parts);
}

describe('encodeCommand', () => {
  const cases: Array<ReadonlyArray<string | Buffer | number>> = [
    [],
    ['PING'],
    ['GET', 'key'],
    ['SET', 'k', ''],
    ['SET', 'ключ', 'значение'],
    ['SET', 'emoji', '😀 and é and 中文'],
    ['SET', 'lone', 'a\ud800b', '\udc00', '\ud83d'],
    ['SET', Buffer.from([0, 13, 10, 255]), 'x'.repeat(64), 'y'.repeat(65), 'é'.repeat(40)],
    ['EXPIRE', 'k', 10],
    ['INCRBY', 'k', -5, 0, 1.5, 12345678901],
    ['MSET', ...Array.from({ length: 20 }, (_, i) => `key:${i}`)],
    [Buffer.alloc(100_000, 0x61)],
    ['x'.repeat(12345)],
  ];
  for (const args of cases) {
    it(`encodes ${JSON.stringify(args.map((a) => (Buffer.isBuffer(a) ? `<${a.length} bytes>` : typeof a === 'string' && a.length > 30 ? `<${a.length} chars>` : a)))}`, () => {
      const out = encodeCommand(args);
      expect(out.equals(reference(args))).toBe(true);
      if (args.length > 0) {
        const framer = new RequestFramer();
        framer.push(out);
        const frame = framer.next()!;
        expect(frame.raw.equals(out)).toBe(true);
        expect(frame.args.map((a) => a.toString('latin1'))).toEqual(args.map((a) => (Buffer.isBuffer(a) ? a : Buffer.from(String(a))).toString('latin1')));
      }
    });
  }

  it('matches the reference on random unicode strings', () => {
    let seed = 1;
    const rand = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
    for (let round = 0; round < 2000; round++) {
      const args: string[] = [];
      for (let i = Math.floor(rand() * 5); i >= 0; i--) {
        let s = '';
        for (let j = Math.floor(rand() * 80); j > 0; j--) {
          const r = rand();
          s += String.fromCharCode(r < 0.6 ? 0x20 + Math.floor(rand() * 95) : r < 0.8 ? Math.floor(rand() * 0x800) : Math.floor(rand() * 0x10000));
        }
        args.push(s);
      }
      expect(encodeCommand(args).equals(reference(args))).toBe(true);
    }
  });
});

describe('reply encoders', () => {
  it('encodeError and encodeSimple keep the reply on one line', () => {
    expect(encodeError('ERR unknown command').toString()).toBe('-ERR unknown command\r\n');
    expect(encodeError('ERR bad\r\nthing\n').toString()).toBe('-ERR bad  thing \r\n');
    expect(encodeSimple('OK').toString()).toBe('+OK\r\n');
    expect(encodeSimple('a\rb').toString()).toBe('+a b\r\n');
    expect(encodeSimple('ünïcode').equals(Buffer.from('+ünïcode\r\n'))).toBe(true);
    expect(encodeSimple('')).toEqual(Buffer.from('+\r\n'));
  });

  it('encodeBulk', () => {
    expect(encodeBulk('hello', 2).toString()).toBe('$5\r\nhello\r\n');
    expect(encodeBulk('é', 3).equals(Buffer.from('$2\r\né\r\n'))).toBe(true);
    expect(encodeBulk(Buffer.from([0, 13, 10]), 2).equals(Buffer.from([0x24, 0x33, 13, 10, 0, 13, 10, 13, 10]))).toBe(true);
    expect(encodeBulk('', 2).toString()).toBe('$0\r\n\r\n');
    expect(encodeBulk(null, 2).toString()).toBe('$-1\r\n');
    expect(encodeBulk(null, 3).toString()).toBe('_\r\n');
  });

  it('encodeInteger', () => {
    expect(encodeInteger(0).toString()).toBe(':0\r\n');
    expect(encodeInteger(-12).toString()).toBe(':-12\r\n');
    expect(encodeInteger(2 ** 53 - 1).toString()).toBe(':9007199254740991\r\n');
    expect(encodeInteger(1e21).toString()).toBe(':1000000000000000000000\r\n');
    expect(encodeInteger(-9223372036854775808n).toString()).toBe(':-9223372036854775808\r\n');
    expect(() => encodeInteger(1.5)).toThrow(RangeError);
    expect(() => encodeInteger(NaN)).toThrow(RangeError);
  });

  it('encodeArray and encodeMap', () => {
    expect(encodeArray([]).toString()).toBe('*0\r\n');
    const arr = encodeArray([encodeBulk('a', 2), encodeInteger(1), C.NULL_BULK]);
    expect(arr.toString()).toBe('*3\r\n$1\r\na\r\n:1\r\n$-1\r\n');
    expect(decodeReply(arr)).toEqual([Buffer.from('a'), 1, null]);
    const entries: Array<[Buffer, Buffer]> = [
      [encodeBulk('k1', 3), encodeInteger(1)],
      [encodeBulk('k2', 3), encodeArray([encodeSimple('x')])],
    ];
    const m3 = encodeMap(entries, 3);
    expect(m3.toString()).toBe('%2\r\n$2\r\nk1\r\n:1\r\n$2\r\nk2\r\n*1\r\n+x\r\n');
    expect(decodeReply(m3)).toEqual(new Map<unknown, unknown>([['k1', 1], ['k2', ['x']]]));
    const m2 = encodeMap(entries, 2);
    expect(m2.toString()).toBe('*4\r\n$2\r\nk1\r\n:1\r\n$2\r\nk2\r\n*1\r\n+x\r\n');
    expect(encodeMap([], 3).toString()).toBe('%0\r\n');
    expect(encodeMap([], 2).toString()).toBe('*0\r\n');
    const many = Array.from({ length: 1000 }, (_, i) => encodeInteger(i));
    expect(decodeReply(encodeArray(many))).toEqual(Array.from({ length: 1000 }, (_, i) => i));
  });
});

describe('constant replies', () => {
  it('hold the expected bytes', () => {
    expect(C.OK.toString()).toBe('+OK\r\n');
    expect(C.PONG.toString()).toBe('+PONG\r\n');
    expect(C.QUEUED.toString()).toBe('+QUEUED\r\n');
    expect(C.RESET.toString()).toBe('+RESET\r\n');
    expect(C.NULL_BULK.toString()).toBe('$-1\r\n');
    expect(C.NULL_BULK_RESP2.toString()).toBe('$-1\r\n');
    expect(C.NULL_ARRAY.toString()).toBe('*-1\r\n');
    expect(C.NULL_RESP3.toString()).toBe('_\r\n');
    expect(C.EMPTY_ARRAY.toString()).toBe('*0\r\n');
    expect(C.EMPTY_BULK.toString()).toBe('$0\r\n\r\n');
    expect(C.EMPTY_MAP_RESP3.toString()).toBe('%0\r\n');
    expect(C.EMPTY_SET_RESP3.toString()).toBe('~0\r\n');
    expect(C.ZERO.toString()).toBe(':0\r\n');
    expect(C.ONE.toString()).toBe(':1\r\n');
    expect(C.nullBulk(2)).toBe(C.NULL_BULK_RESP2);
    expect(C.nullBulk(3)).toBe(C.NULL_RESP3);
    expect(C.nullArray(2)).toBe(C.NULL_ARRAY_RESP2);
    expect(C.nullArray(3)).toBe(C.NULL_RESP3);
  });
});
