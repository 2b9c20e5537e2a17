import { describe, expect, it } from 'vitest';
import { encodeCommand } from '../../src/resp/encode.js';
import { ProtocolError } from '../../src/resp/protocol-error.js';
import { RequestFramer, splitInlineArgs, type RequestFrame } from '../../src/resp/request-framer.js';
import type { FramerLimits } from '../../src/resp/limits.js';
import { seededRandom, everySplit, randomChunks } from '../helpers/test-data.js';


const b = (s: string | Buffer): Buffer => (typeof s === 'string' ? Buffer.from(s, 'latin1') : s);

interface Result {
  frames: Array<{ args: string[]; raw: string }>;
  error?: string;
}

const show = (f: RequestFrame) => ({ args: f.args.map((a) => a.toString('latin1')), raw: f.raw.toString('latin1') });

/** Feeds chunks one at a time, draining after each push (how a socket 'data' handler uses it). */
function feed(chunks: Buffer[], limits?: Partial<FramerLimits>): Result {
  const framer = new RequestFramer(limits);
  const frames: Result['frames'] = [];
  try {
    for (const c of chunks) {
      framer.push(c);
      for (let f = framer.next(); f !== null; f = framer.next()) frames.push(show(f));
    }
  } catch (err) {
    if (!(err instanceof ProtocolError)) throw err;
    return { frames, error: err.message };
  }
  return { frames };
}

const mb = (...args: string[]) => encodeCommand(args).toString('latin1');

// [input, expected args of each request]
const corpus: Array<[string, string[][]]> = [
  ['*1\r\n$4\r\nPING\r\n', [['PING']]],
  ['*2\r\n$3\r\nGET\r\n$3\r\nfoo\r\n', [['GET', 'foo']]],
  ['*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n', [['SET', 'k', '']]],
  ['*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$6\r\na\r\nb\r\n\r\n', [['SET', 'k', 'a\r\nb\r\n']]], // CRLF inside a bulk
  ['*2\r\n$4\r\nECHO\r\n$12\r\n*1\r\n$4\r\nPING\r\n', [['ECHO', '*1\r\n$4\r\nPING']]],
  ['*1\r\n$1\r\n\x00\r\n', [['\x00']]],
  ['*1\r\n$10\r\n0123456789\r\n*1\r\n$1\r\nx\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n', [['0123456789'], ['x'], ['a', 'b']]],
  ['*0\r\n*-1\r\n*-7\r\n*1\r\n$4\r\nPING\r\n', [['PING']]], // count <= 0: skipped like Valkey
  ['PING\r\n', [['PING']]],
  ['PING\n', [['PING']]],
  ['set  k\tv \r\nget k\n', [['set', 'k', 'v'], ['get', 'k']]],
  ['\r\n\n   \r\n\t\nPING\r\n', [['PING']]], // empty inline lines skipped
  ['set k "hello world"\r\n', [['set', 'k', 'hello world']]],
  ['set k "a\\x41\\n\\"q"\r\n', [['set', 'k', 'aA\n"q']]],
  ["set k 'it\\'s' \"\"\r\n", [['set', 'k', "it's", '']]],
  ['PING\r\n*1\r\n$4\r\nPING\r\nECHO x\r\n', [['PING'], ['PING'], ['ECHO', 'x']]],
  [mb('MSET', 'a', '1', 'b', '2') + 'INFO\n' + mb('GET', 'é'), [['MSET', 'a', '1', 'b', '2'], ['INFO'], ['GET', Buffer.from('é').toString('latin1')]]],
];

describe('RequestFramer corpus', () => {
  for (const [input, expected] of corpus) {
    it(`frames ${JSON.stringify(input).slice(0, 60)}`, () => {
      const buf = b(input);
      for (const [how, chunks] of everySplit(buf)) {
        const res = feed(chunks);
        expect(res.error, how).toBeUndefined();
        expect(res.frames.map((f) => f.args), how).toEqual(expected);
        // raw is a RESP array whose framing gives the same args
        for (const f of res.frames) expect(f.raw, how).toBe(encodeCommand(f.args.map((a) => b(a))).toString('latin1'));
      }
    });
  }

  it('frames the whole corpus as one stream, split at every offset', () => {
    const all = b(corpus.map(([i]) => i).join(''));
    const expected = corpus.flatMap(([, e]) => e);
    for (const [how, chunks] of everySplit(all)) {
      expect(feed(chunks).frames.map((f) => f.args), how).toEqual(expected);
    }
  });

  it('returns frames pushed before next() is called, in any number of chunks', () => {
    const all = b(corpus.map(([i]) => i).join(''));
    const framer = new RequestFramer();
    for (let i = 0; i < all.length; i += 7) framer.push(all.subarray(i, i + 7));
    const got: string[][] = [];
    for (let f = framer.next(); f !== null; f = framer.next()) got.push(show(f).args);
    expect(got).toEqual(corpus.flatMap(([, e]) => e));
    expect(framer.bufferedBytes).toBe(0);
  });
});

describe('RequestFramer zero copy', () => {
  it('returns views of the pushed chunk when a request sits in one chunk', () => {
    const chunk = b('*2\r\n$3\r\nGET\r\n$3\r\nfoo\r\n*1\r\n$4\r\nPING\r\n');
    const framer = new RequestFramer();
    framer.push(chunk);
    const f1 = framer.next()!;
    const f2 = framer.next()!;
    expect(f1.raw.buffer).toBe(chunk.buffer);
    expect(f1.raw.byteOffset).toBe(chunk.byteOffset);
    expect(f2.raw.byteOffset).toBe(chunk.byteOffset + f1.raw.length);
    for (const a of [...f1.args, ...f2.args]) expect(a.buffer).toBe(chunk.buffer);
    expect(f1.args[1]!.byteOffset).toBe(chunk.byteOffset + 17);
  });

  it('concatenates a spanning request once; args are views into raw', () => {
    const input = b('*2\r\n$3\r\nGET\r\n$3\r\nfoo\r\n');
    const framer = new RequestFramer();
    framer.push(input.subarray(0, 5));
    expect(framer.next()).toBeNull();
    framer.push(input.subarray(5, 12));
    expect(framer.next()).toBeNull();
    framer.push(input.subarray(12));
    const f = framer.next()!;
    expect(f.raw.equals(input)).toBe(true);
    for (const a of f.args) expect(a.buffer).toBe(f.raw.buffer);
    expect(f.args[1]!.byteOffset - f.raw.byteOffset).toBe(17);
  });

  it('locates arguments without views until args is read; views match the positions', () => {
    const input = b('*3\r\n$3\r\nSET\r\n$3\r\nfoo\r\n$5\r\nhello\r\nPING x\r\n');
    for (let split = 0; split <= input.length; split++) {
      const framer = new RequestFramer();
      framer.push(input.subarray(0, split));
      framer.push(input.subarray(split));
      for (const words of [['SET', 'foo', 'hello'], ['PING', 'x']]) {
        const f = framer.next()!;
        expect(f.argCount).toBe(words.length);
        const located = words.map((_, i) => f.argBuffer(i).subarray(f.argStart(i), f.argEnd(i)).toString());
        expect(located).toEqual(words);
        expect(f.args.map(String)).toEqual(words);
        expect(f.args).toBe(f.args); // made once
        // After the views exist, positions refer to them.
        expect(words.map((_, i) => f.argBuffer(i).subarray(f.argStart(i), f.argEnd(i)).toString())).toEqual(words);
      }
    }
  });

  it('locates arguments from the headers for multi-digit counts and lengths, and empty arguments', () => {
    let seed = 7;
    const rand = (n: number): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) % n);
    for (let round = 0; round < 200; round++) {
      const words = Array.from({ length: 1 + rand(14) }, (_, i) => `${i}:`.padEnd(rand(3) === 0 ? 0 : rand(150), 'v').slice(0, 200));
      const input = Buffer.concat([b(`*${words.length}\r\n`), ...words.map((w) => b(`$${w.length}\r\n${w}\r\n`))]);
      const framer = new RequestFramer();
      framer.push(input);
      const f = framer.next()!;
      expect(f.argCount).toBe(words.length);
      expect(words.map((_, i) => f.raw.subarray(f.argStart(i), f.argEnd(i)).toString())).toEqual(words);
      expect(f.args.map(String)).toEqual(words);
    }
  });

  it('reports buffered bytes of the incomplete request', () => {
    const framer = new RequestFramer();
    expect(framer.bufferedBytes).toBe(0);
    framer.push(b('*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPI'));
    expect(framer.bufferedBytes).toBe(24);
    expect(framer.next()).not.toBeNull();
    expect(framer.bufferedBytes).toBe(10);
    expect(framer.next()).toBeNull();
    expect(framer.bufferedBytes).toBe(10);
    framer.push(b('NG\r\n'));
    expect(framer.next()).not.toBeNull();
    expect(framer.bufferedBytes).toBe(0);
  });

  it('ignores empty chunks', () => {
    const framer = new RequestFramer();
    framer.push(Buffer.alloc(0));
    expect(framer.next()).toBeNull();
    framer.push(b('PING\r\n'));
    framer.push(Buffer.alloc(0));
    expect(show(framer.next()!).args).toEqual(['PING']);
    expect(framer.next()).toBeNull();
  });
});

describe('RequestFramer errors', () => {
  const cases: Array<[string, string]> = [
    ['*x\r\n', 'Protocol error: invalid multibulk length'],
    ['*\r\n', 'Protocol error: invalid multibulk length'],
    ['*01\r\n', 'Protocol error: invalid multibulk length'],
    ['*+1\r\n', 'Protocol error: invalid multibulk length'],
    ['*-0\r\n', 'Protocol error: invalid multibulk length'],
    ['*1x\r\n', 'Protocol error: invalid multibulk length'],
    ['*1\rx', 'Protocol error: invalid multibulk length'],
    ['*1\r\n+PING\r\n', "Protocol error: expected '$', got '+'"],
    ['*2\r\n$3\r\nGET\r\n:1\r\n', "Protocol error: expected '$', got ':'"],
    ['*1\r\n$-1\r\n', 'Protocol error: invalid bulk length'],
    ['*1\r\n$x\r\n', 'Protocol error: invalid bulk length'],
    ['*1\r\n$\r\n', 'Protocol error: invalid bulk length'],
    ['*1\r\n$4\r\nPINGxx', 'Protocol error: invalid bulk length'],
    ['*1\r\n$4\r\nPING\rx', 'Protocol error: invalid bulk length'],
    ['set k "abc\r\n', 'Protocol error: unbalanced quotes in request'],
    ['set k "abc"def\r\n', 'Protocol error: unbalanced quotes in request'],
    ["set k 'abc\r\n", 'Protocol error: unbalanced quotes in request'],
  ];
  for (const [input, message] of cases) {
    it(`rejects ${JSON.stringify(input)}`, () => {
      for (const [how, chunks] of everySplit(b(input))) expect(feed(chunks).error, how).toBe(message);
    });
  }

  it('keeps frames before the error and stays failed', () => {
    const framer = new RequestFramer();
    framer.push(b('PING\r\n*1\r\n:1\r\n'));
    expect(show(framer.next()!).args).toEqual(['PING']);
    expect(() => framer.next()).toThrow(ProtocolError);
    framer.push(b('PING\r\n'));
    expect(() => framer.next()).toThrow("Protocol error: expected '$', got ':'");
  });

  it('rejects huge declared lengths at once, before their bytes arrive', () => {
    const f1 = new RequestFramer();
    f1.push(b('*99999999\r\n'));
    expect(() => f1.next()).toThrow('Protocol error: invalid multibulk length');
    const f2 = new RequestFramer();
    f2.push(b('*1\r\n$999999999999\r\n'));
    expect(() => f2.next()).toThrow('Protocol error: invalid bulk length');
    // even the digits alone are enough
    const f3 = new RequestFramer();
    f3.push(b('*1\r\n$99999999999'));
    expect(() => f3.next()).toThrow('Protocol error: invalid bulk length');
    const f4 = new RequestFramer();
    f4.push(b('*1\r\n$' + '9'.repeat(400)));
    expect(() => f4.next()).toThrow('Protocol error: invalid bulk length');
  });

  it('enforces maxArrayLength and maxBulkLength exactly', () => {
    const limits = { maxArrayLength: 3, maxBulkLength: 5 };
    expect(feed([b(mb('a', 'b', 'c'))], limits).frames).toHaveLength(1);
    expect(feed([b(mb('a', 'b', 'c', 'd'))], limits).error).toBe('Protocol error: invalid multibulk length');
    expect(feed([b(mb('abcde'))], limits).frames).toHaveLength(1);
    expect(feed([b(mb('abcdef'))], limits).error).toBe('Protocol error: invalid bulk length');
  });

  it('enforces maxInlineLength on complete and incomplete lines, independent of chunking', () => {
    const limits = { maxInlineLength: 10 };
    const ok = b('0123456789\r\n');
    const okLf = b('0123456789\n');
    const tooLong = b('0123456789A\r\n');
    for (const [how, chunks] of everySplit(ok)) expect(feed(chunks, limits), how).toEqual({ frames: [{ args: ['0123456789'], raw: mb('0123456789') }] });
    for (const [how, chunks] of everySplit(okLf)) expect(feed(chunks, limits).frames, how).toHaveLength(1);
    for (const [how, chunks] of everySplit(tooLong)) expect(feed(chunks, limits).error, how).toBe('Protocol error: too big inline request');
    // an incomplete line past the limit fails without waiting for its end
    expect(feed([b('0123456789AB')], limits).error).toBe('Protocol error: too big inline request');
    expect(feed([b('0123456789\r')], limits).error).toBeUndefined();
    expect(feed([b('x'.repeat(70_000))]).error).toBe('Protocol error: too big inline request');
  });
});

describe('splitInlineArgs (sdssplitargs)', () => {
  const split = (s: string) => splitInlineArgs(b(s))?.map((a) => a.toString('latin1')) ?? null;
  it('splits like Valkey', () => {
    expect(split('')).toEqual([]);
    expect(split('  \t ')).toEqual([]);
    expect(split('a b\tc')).toEqual(['a', 'b', 'c']);
    expect(split('a\vb')).toEqual(['a\vb']); // \v separates only leading whitespace, as in C
    expect(split('"a b" c')).toEqual(['a b', 'c']);
    expect(split('"\\x4a\\x4B\\xzz"')).toEqual(['JKxzz']);
    expect(split('"\\n\\r\\t\\b\\a\\\\\\q"')).toEqual(['\n\r\t\b\x07\\q']);
    expect(split("'a\\'b' '\\n'")).toEqual(["a'b", '\\n']);
    expect(split('ab"c d"e')).toBeNull(); // closing quote must be followed by a space
    expect(split('ab"c d" e')).toEqual(['abc d', 'e']); // a quote inside a word opens quoting
    expect(split('"abc')).toBeNull();
    expect(split("'abc")).toBeNull();
    expect(split('a\x00b c')).toEqual(['a']); // C string: NUL ends the line
  });
});

/** Random valid requests (multibulk and inline) with their expected args. */
function randomRequests(rand: () => number, count: number): { input: Buffer; expected: string[][] } {
  const parts: Buffer[] = [];
  const expected: string[][] = [];
  for (let i = 0; i < count; i++) {
    const r = rand();
    if (r < 0.15) {
      const n = 1 + Math.floor(rand() * 4);
      const args = Array.from({ length: n }, () => 'w' + Math.floor(rand() * 1000).toString(36));
      parts.push(b(args.join(rand() < 0.5 ? ' ' : '\t') + (rand() < 0.5 ? '\r\n' : '\n')));
      expected.push(args);
    } else if (r < 0.2) {
      parts.push(b(rand() < 0.5 ? '*0\r\n' : '\r\n'));
    } else {
      const n = 1 + Math.floor(rand() * 6);
      const args: Buffer[] = [];
      for (let j = 0; j < n; j++) {
        const len = rand() < 0.1 ? Math.floor(rand() * 3000) : Math.floor(rand() * 20);
        const arg = Buffer.alloc(len);
        for (let k = 0; k < len; k++) arg[k] = Math.floor(rand() * 256);
        args.push(arg);
      }
      parts.push(encodeCommand(args));
      expected.push(args.map((a) => a.toString('latin1')));
    }
  }
  return { input: Buffer.concat(parts), expected };
}

describe('RequestFramer randomized', () => {
  it('frames random request streams identically under random chunking', () => {
    const rand = seededRandom(0x5eed);
    for (let round = 0; round < 1000; round++) {
      const { input, expected } = randomRequests(rand, 1 + Math.floor(rand() * 8));
      const res = feed(randomChunks(rand, input, rand() < 0.3 ? 4 : 512));
      expect(res.error).toBeUndefined();
      expect(res.frames.map((f) => f.args)).toEqual(expected);
    }
  });

  it('never throws anything but ProtocolError on random bytes, and terminates', () => {
    const rand = seededRandom(42);
    const alphabet = b('*$\r\n\r\n0123456789-"\' \tab');
    let protocolErrors = 0;
    for (let round = 0; round < 5000; round++) {
      const len = Math.floor(rand() * 200);
      const input = Buffer.alloc(len);
      const biased = rand() < 0.7;
      for (let i = 0; i < len; i++) {
        input[i] = biased ? alphabet[Math.floor(rand() * alphabet.length)]! : Math.floor(rand() * 256);
      }
      const framer = new RequestFramer({ maxInlineLength: 64, maxBulkLength: 100, maxArrayLength: 20 });
      try {
        for (const c of randomChunks(rand, input, 1 + Math.floor(rand() * 40))) {
          framer.push(c);
          let guard = 0;
          for (let f = framer.next(); f !== null; f = framer.next()) {
            expect(++guard).toBeLessThanOrEqual(len); // every frame consumes at least one byte
            expect(f.raw.length).toBeGreaterThan(0);
          }
        }
        expect(framer.bufferedBytes).toBeLessThanOrEqual(len);
      } catch (err) {
        if (!(err instanceof ProtocolError)) throw err;
        protocolErrors++;
      }
    }
    expect(protocolErrors).toBeGreaterThan(100);
  });
});

describe('RequestFramer large bulk', () => {
  it('frames a 50 MB bulk fed in 64 KiB chunks in linear time', () => {
    const size = 50 * 1024 * 1024;
    const value = Buffer.alloc(size, 0x61);
    value.write('head', 0);
    value.write('tail', size - 4);
    const input = Buffer.concat([b('*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$' + size + '\r\n'), value, b('\r\n*1\r\n$4\r\nPING\r\n')]);
    const framer = new RequestFramer();
    const started = performance.now();
    const frames: RequestFrame[] = [];
    for (let i = 0; i < input.length; i += 65536) {
      framer.push(input.subarray(i, i + 65536));
      for (let f = framer.next(); f !== null; f = framer.next()) frames.push(f);
    }
    const ms = performance.now() - started;
    console.log(`50 MB request framed in ${ms.toFixed(0)} ms`);
    expect(frames).toHaveLength(2);
    const [set, ping] = frames;
    expect(set!.raw.length).toBe(input.length - 14);
    expect(set!.args[0]!.toString()).toBe('SET');
    expect(set!.args[2]!.length).toBe(size);
    expect(set!.args[2]!.equals(value)).toBe(true);
    expect(show(ping!).args).toEqual(['PING']);
  });
});

describe('framer limits shared between framers', () => {
  it('resolveLimits returns a frozen object, the same one while the same values are asked for (no copy per framer)', async () => {
    const { resolveLimits } = await import('../../src/resp/limits.js');
    const limits = resolveLimits({ maxBulkLength: 10 });
    expect(Object.isFrozen(limits)).toBe(true);
    expect(resolveLimits(limits)).toBe(limits);
    const config = { maxBulkLength: 10, maxPendingPerClient: 5 }; // like config.limits: other fields besides
    expect(resolveLimits(config)).toBe(limits);
    const other = resolveLimits({ maxBulkLength: 11 }); // a reload changed a bound: a new object
    expect(other).not.toBe(limits);
    expect(other.maxBulkLength).toBe(11);
    expect(() => resolveLimits({ maxBulkLength: -1 })).toThrow(RangeError);
    // Two framers on one limits object keep their own scanning state.
    const a = new RequestFramer(limits);
    const c = new RequestFramer(limits);
    a.push(b('*1\r\n$4\r\nPI'));
    c.push(b('*1\r\n$11\r\n'));
    expect(a.next()).toBeNull();
    expect(() => c.next()).toThrow('Protocol error: invalid bulk length'); // 11 > maxBulkLength 10
    a.push(b('NG\r\n'));
    expect(show(a.next()!)).toEqual({ args: ['PING'], raw: '*1\r\n$4\r\nPING\r\n' });
  });
});
