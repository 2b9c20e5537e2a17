import RedisParser from 'redis-parser';
import { describe, expect, it } from 'vitest';
import { decodeReply, RespError, type RespValue } from '../../src/resp/decode.js';
import { ProtocolError } from '../../src/resp/protocol-error.js';
import { ReplyFramer } from '../../src/resp/reply-framer.js';
import type { FramerLimits } from '../../src/resp/limits.js';
import { seededRandom, everySplit, randomChunks } from '../helpers/test-data.js';


const b = (s: string): Buffer => Buffer.from(s, 'latin1');

interface Result {
  frames: string[];
  error?: string;
}

/** Feeds chunks one at a time, draining after each push. */
function feed(chunks: Buffer[], limits?: Partial<FramerLimits>): Result {
  const framer = new ReplyFramer(limits);
  const frames: string[] = [];
  try {
    for (const c of chunks) {
      framer.push(c);
      for (let f = framer.next(); f !== null; f = framer.next()) frames.push(f.toString('latin1'));
    }
  } catch (err) {
    if (!(err instanceof ProtocolError)) throw err;
    return { frames, error: err.message };
  }
  return { frames };
}

/** One complete reply of every RESP2 and RESP3 type, nested aggregates and attributes. */
const corpus: string[] = [
  '+OK\r\n',
  '+\r\n',
  '-ERR unknown command\r\n',
  '-MOVED 3999 127.0.0.1:6381\r\n',
  ':0\r\n',
  ':-9223372036854775808\r\n',
  '$5\r\nhello\r\n',
  '$0\r\n\r\n',
  '$9\r\n\r\n*1\r\n:1\r\r\n', // protocol bytes inside a bulk
  '$-1\r\n',
  '*-1\r\n',
  '*0\r\n',
  '*3\r\n$1\r\na\r\n:1\r\n$-1\r\n',
  '*2\r\n*2\r\n+a\r\n*1\r\n*0\r\n*-1\r\n',
  '_\r\n',
  '#t\r\n',
  '#f\r\n',
  ',3.14\r\n',
  ',-1.5e-10\r\n',
  ',inf\r\n',
  ',-inf\r\n',
  ',nan\r\n',
  '(3492890328409238509324850943850943825024385\r\n',
  '=15\r\ntxt:Some string\r\n',
  '!21\r\nSYNTAX invalid syntax\r\n',
  '%2\r\n+first\r\n:1\r\n+second\r\n:2\r\n',
  '%1\r\n*1\r\n:1\r\n~1\r\n#t\r\n', // aggregate key
  '%0\r\n',
  '~3\r\n+a\r\n+b\r\n+c\r\n',
  '~0\r\n',
  '>3\r\n+message\r\n+chan\r\n$5\r\nhello\r\n',
  '|1\r\n+key-popularity\r\n%2\r\n$1\r\na\r\n,0.1923\r\n$1\r\nb\r\n,0.0012\r\n*2\r\n:2039123\r\n:9543892\r\n',
  '*3\r\n:1\r\n:2\r\n|1\r\n+ttl\r\n:3600\r\n:3\r\n', // attribute on a nested value
  '*1\r\n|1\r\n+a\r\n|1\r\n+b\r\n+c\r\n*1\r\n:1\r\n:2\r\n', // attribute inside an attribute
  '|0\r\n+OK\r\n',
  '|1\r\n+a\r\n+b\r\n|1\r\n+c\r\n+d\r\n>1\r\n+x\r\n', // two attributes before a push
  '*2\r\n%1\r\n+k\r\n~2\r\n_\r\n(1\r\n>0\r\n',
];

describe('ReplyFramer corpus', () => {
  for (const item of corpus) {
    it(`frames ${JSON.stringify(item).slice(0, 60)}`, () => {
      for (const [how, chunks] of everySplit(b(item))) expect(feed(chunks), how).toEqual({ frames: [item] });
      expect(() => decodeReply(b(item))).not.toThrow();
    });
  }

  it('frames the whole corpus as one stream, split at every offset and at random', () => {
    const all = b(corpus.join(''));
    for (const [how, chunks] of everySplit(all)) expect(feed(chunks), how).toEqual({ frames: corpus });
    const rand = seededRandom(7);
    for (let i = 0; i < 200; i++) expect(feed(randomChunks(rand, all, 1 + Math.floor(rand() * 64)))).toEqual({ frames: corpus });
  });

  it('returns views of the pushed chunk when a frame sits in one chunk, and concatenates spanning frames once', () => {
    const chunk = b('+OK\r\n*2\r\n:1\r\n:2\r\n$3\r\nab');
    const framer = new ReplyFramer();
    framer.push(chunk);
    const ok = framer.next()!;
    const arr = framer.next()!;
    expect(ok.buffer).toBe(chunk.buffer);
    expect(arr.buffer).toBe(chunk.buffer);
    expect(arr.byteOffset).toBe(chunk.byteOffset + 5);
    expect(framer.next()).toBeNull();
    expect(framer.bufferedBytes).toBe(6);
    framer.push(b('c\r'));
    expect(framer.next()).toBeNull();
    expect(framer.bufferedBytes).toBe(8);
    framer.push(b('\n:5\r\n'));
    expect(framer.next()!.toString()).toBe('$3\r\nabc\r\n');
    expect(framer.bufferedBytes).toBe(4);
    expect(framer.next()!.toString()).toBe(':5\r\n');
    expect(framer.bufferedBytes).toBe(0);
    expect(framer.next()).toBeNull();
  });

  it('returns a push frame on its own, so callers can test frame[0] === 0x3e', () => {
    const res = feed([b('>2\r\n+invalidate\r\n*1\r\n$1\r\nk\r\n+OK\r\n')]);
    expect(res.frames).toEqual(['>2\r\n+invalidate\r\n*1\r\n$1\r\nk\r\n', '+OK\r\n']);
  });
});

describe('ReplyFramer errors and limits', () => {
  const cases: Array<[string, string]> = [
    ['x\r\n', "Protocol error: invalid reply type byte 'x'"],
    ['\r\n', "Protocol error: invalid reply type byte '\r'"],
    ['*1\r\n@\r\n', "Protocol error: invalid reply type byte '@'"],
    ['$?\r\n;4\r\nabcd\r\n;0\r\n', 'Protocol error: streamed RESP3 types are not supported'],
    ['*?\r\n:1\r\n.\r\n', 'Protocol error: streamed RESP3 types are not supported'],
    ['$-2\r\n', 'Protocol error: invalid bulk length'],
    ['$-10\r\n', 'Protocol error: invalid bulk length'],
    ['$\r\n', 'Protocol error: invalid bulk length'],
    ['$1x\r\n', 'Protocol error: invalid bulk length'],
    ['$1\r\nab\r\n', 'Protocol error: invalid bulk length'],
    ['=-1\r\n', 'Protocol error: invalid bulk length'],
    ['*-2\r\n', 'Protocol error: invalid multibulk length'],
    ['%-1\r\n', 'Protocol error: invalid multibulk length'],
    ['*1\rx', 'Protocol error: invalid multibulk length'],
    ['+OK\rX', 'Protocol error: expected LF after CR'],
  ];
  for (const [input, message] of cases) {
    it(`rejects ${JSON.stringify(input)}`, () => {
      for (const [how, chunks] of everySplit(b(input))) expect(feed(chunks).error, how).toBe(message);
    });
  }

  it('rejects huge declared lengths at once, without waiting or allocating', () => {
    expect(feed([b('$999999999999\r\n')]).error).toBe('Protocol error: invalid bulk length');
    expect(feed([b('$99999999999')]).error).toBe('Protocol error: invalid bulk length');
    expect(feed([b('*99999999\r\n')]).error).toBe('Protocol error: invalid multibulk length');
    expect(feed([b('%' + '9'.repeat(300))]).error).toBe('Protocol error: invalid multibulk length');
    expect(feed([b('$' + '9'.repeat(300))]).error).toBe('Protocol error: invalid bulk length');
  });

  it('enforces maxBulkLength and maxArrayLength exactly', () => {
    const limits = { maxBulkLength: 5, maxArrayLength: 2 };
    expect(feed([b('$5\r\nabcde\r\n')], limits).frames).toHaveLength(1);
    expect(feed([b('$6\r\n')], limits).error).toBe('Protocol error: invalid bulk length');
    expect(feed([b('!6\r\n')], limits).error).toBe('Protocol error: invalid bulk length');
    expect(feed([b('*2\r\n:1\r\n:2\r\n')], limits).frames).toHaveLength(1);
    expect(feed([b('%2\r\n:1\r\n:2\r\n:3\r\n:4\r\n')], limits).frames).toHaveLength(1);
    expect(feed([b('*3\r\n')], limits).error).toBe('Protocol error: invalid multibulk length');
    expect(feed([b('~3\r\n')], limits).error).toBe('Protocol error: invalid multibulk length');
    expect(feed([b('+abcde\r\n')], limits).frames).toHaveLength(1);
    expect(feed([b('+abcdefgh')], limits).error).toBe('Protocol error: too big reply line');
  });

  it('enforces maxNestingDepth, counting attributes, in agreement with decodeReply', () => {
    const deep = (n: number) => '*1\r\n'.repeat(n) + ':1\r\n';
    expect(feed([b(deep(128))]).frames).toHaveLength(1);
    expect(feed([b(deep(129))]).error).toBe('Protocol error: reply nesting too deep');
    expect(feed([b(deep(100000))]).error).toBe('Protocol error: reply nesting too deep');
    const shapes = [
      (n: number) => '*1\r\n'.repeat(n) + ':1\r\n',
      (n: number) => '%1\r\n+k\r\n'.repeat(n) + ':1\r\n',
      (n: number) => '*1\r\n'.repeat(n) + '|1\r\n+a\r\n+b\r\n:1\r\n',
      (n: number) => '|1\r\n+a\r\n'.repeat(n) + '+b\r\n' + ':1\r\n'.repeat(n),
      (n: number) => '*2\r\n|1\r\n*1\r\n:1\r\n:2\r\n'.repeat(n) + ':1\r\n' + ':1\r\n'.repeat(n),
    ];
    for (const shape of shapes) {
      for (let n = 0; n < 6; n++) {
        const frame = b(shape(n));
        for (let max = 1; max < 6; max++) {
          const res = feed([frame], { maxNestingDepth: max });
          let decodeOk = true;
          try {
            decodeReply(frame, max);
          } catch (err) {
            expect(err).toBeInstanceOf(ProtocolError);
            decodeOk = false;
          }
          expect(res.error === undefined, `${JSON.stringify(shape(n))} max ${max}`).toBe(decodeOk);
          if (decodeOk) expect(res.frames).toEqual([shape(n)]);
        }
      }
    }
  });

  it('stays failed after an error', () => {
    const framer = new ReplyFramer();
    framer.push(b('+OK\r\n?'));
    expect(framer.next()!.toString()).toBe('+OK\r\n');
    expect(() => framer.next()).toThrow(ProtocolError);
    framer.push(b('+OK\r\n'));
    expect(() => framer.next()).toThrow("Protocol error: invalid reply type byte '?'");
  });
});

// ---- differential test against redis-parser (the RESP2 reference) ----

type Plain = null | number | string | { err: string } | Plain[];

interface Generated {
  bytes: string; // latin1
  value: Plain;
}

function randomText(rand: () => number, max: number): string {
  const n = Math.floor(rand() * max);
  let s = '';
  for (let i = 0; i < n; i++) s += String.fromCharCode(0x20 + Math.floor(rand() * 95));
  return s;
}

/** A random RESP2 reply and the value it encodes. */
function randomReply(rand: () => number, depth: number): Generated {
  const r = rand();
  if (r < 0.15) {
    const s = randomText(rand, 20);
    return { bytes: `+${s}\r\n`, value: s };
  }
  if (r < 0.22) {
    const s = 'ERR ' + randomText(rand, 20);
    return { bytes: `-${s}\r\n`, value: { err: s } };
  }
  if (r < 0.37) {
    const n = Math.floor((rand() - 0.5) * 2 * (rand() < 0.5 ? 1000 : 1e15));
    return { bytes: `:${n}\r\n`, value: n };
  }
  if (r < 0.42) return { bytes: '$-1\r\n', value: null };
  if (r < 0.45) return { bytes: '*-1\r\n', value: null };
  if (r < 0.75 || depth >= 4) {
    const len = rand() < 0.05 ? Math.floor(rand() * 70000) : Math.floor(rand() * 30);
    let s = '';
    for (let i = 0; i < len; i++) s += String.fromCharCode(rand() < 0.1 ? [13, 10][Math.floor(rand() * 2)]! : Math.floor(rand() * 256));
    return { bytes: `$${len}\r\n${s}\r\n`, value: s };
  }
  const n = Math.floor(rand() * 6);
  const children = Array.from({ length: n }, () => randomReply(rand, depth + 1));
  return { bytes: `*${n}\r\n` + children.map((c) => c.bytes).join(''), value: children.map((c) => c.value) };
}

function plainFromParser(v: unknown): Plain {
  if (v === null) return null;
  if (Buffer.isBuffer(v)) return v.toString('latin1');
  if (typeof v === 'number') return v;
  if (Array.isArray(v)) return v.map(plainFromParser);
  if (v instanceof Error) return { err: v.message };
  throw new Error(`unexpected parser value ${String(v)}`);
}

function plainFromDecode(v: RespValue): Plain {
  if (v === null || typeof v === 'number' || typeof v === 'string') return v;
  if (Buffer.isBuffer(v)) return v.toString('latin1');
  if (v instanceof RespError) return { err: v.message };
  if (Array.isArray(v)) return v.map(plainFromDecode);
  throw new Error(`unexpected RESP2 value ${String(v)}`);
}

describe('ReplyFramer + decodeReply vs redis-parser', () => {
  it('agree on framing and values for thousands of random RESP2 replies', () => {
    const rand = seededRandom(0xc0ffee);
    for (let round = 0; round < 3000; round++) {
      const replies = Array.from({ length: 1 + Math.floor(rand() * 5) }, () => randomReply(rand, 0));
      const input = b(replies.map((r) => r.bytes).join(''));
      const chunks = randomChunks(rand, input, [1, 7, 100, 4096, 100000][Math.floor(rand() * 5)]!);

      const fromParser: Plain[] = [];
      const parser = new RedisParser({
        returnReply: (reply: unknown) => fromParser.push(plainFromParser(reply)),
        returnError: (err: Error) => fromParser.push(plainFromParser(err)),
        returnFatalError: (err: Error) => {
          throw err;
        },
        returnBuffers: true,
      });
      const framer = new ReplyFramer();
      const frames: Buffer[] = [];
      for (const c of chunks) {
        parser.execute(c);
        framer.push(c);
        for (let f = framer.next(); f !== null; f = framer.next()) frames.push(f);
      }
      // boundaries: each frame is exactly one generated reply
      expect(frames.map((f) => f.toString('latin1'))).toEqual(replies.map((r) => r.bytes));
      // values: decodeReply agrees with redis-parser and with the generator
      const decoded = frames.map((f) => plainFromDecode(decodeReply(f)));
      expect(decoded).toEqual(fromParser);
      expect(decoded).toEqual(replies.map((r) => r.value));
    }
  });
});

describe('ReplyFramer robustness', () => {
  it('never throws anything but ProtocolError on random bytes, and terminates', () => {
    const rand = seededRandom(1234);
    const alphabet = b('+-:$*_#,(=!%~>|\r\n\r\n\r\n0123456789-?abt');
    let protocolErrors = 0;
    let framesSeen = 0;
    for (let round = 0; round < 5000; round++) {
      const len = Math.floor(rand() * 200);
      const input = Buffer.alloc(len);
      const biased = rand() < 0.8;
      for (let i = 0; i < len; i++) input[i] = biased ? alphabet[Math.floor(rand() * alphabet.length)]! : Math.floor(rand() * 256);
      const framer = new ReplyFramer({ maxBulkLength: 100, maxArrayLength: 20, maxNestingDepth: 8 });
      try {
        for (const c of randomChunks(rand, input, 1 + Math.floor(rand() * 40))) {
          framer.push(c);
          let guard = 0;
          for (let f = framer.next(); f !== null; f = framer.next()) {
            expect(++guard).toBeLessThanOrEqual(len);
            framesSeen++;
            try {
              decodeReply(f, 8); // framed garbage may still fail to decode, but only with ProtocolError
            } catch (err) {
              if (!(err instanceof ProtocolError)) throw err;
            }
          }
        }
      } catch (err) {
        if (!(err instanceof ProtocolError)) throw err;
        protocolErrors++;
      }
    }
    expect(protocolErrors).toBeGreaterThan(20);
    expect(framesSeen).toBeGreaterThan(20);
  });

  it('never throws anything but ProtocolError on mutated valid streams', () => {
    const rand = seededRandom(99);
    const valid = b(corpus.join(''));
    const alphabet = b('+-:$*_#,(=!%~>|\r\n0123456789-?');
    let protocolErrors = 0;
    let framesSeen = 0;
    for (let round = 0; round < 3000; round++) {
      const bytes = [...valid];
      for (let m = 1 + Math.floor(rand() * 4); m > 0; m--) {
        const at = Math.floor(rand() * bytes.length);
        const c = rand() < 0.7 ? alphabet[Math.floor(rand() * alphabet.length)]! : Math.floor(rand() * 256);
        const op = rand();
        if (op < 0.4) bytes[at] = c;
        else if (op < 0.7) bytes.splice(at, 0, c);
        else bytes.splice(at, 1);
      }
      const input = Buffer.from(bytes);
      const framer = new ReplyFramer({ maxNestingDepth: 4 });
      try {
        for (const c of randomChunks(rand, input, 1 + Math.floor(rand() * 100))) {
          framer.push(c);
          for (let f = framer.next(); f !== null; f = framer.next()) {
            framesSeen++;
            try {
              decodeReply(f, 4);
            } catch (err) {
              if (!(err instanceof ProtocolError)) throw err;
            }
          }
        }
      } catch (err) {
        if (!(err instanceof ProtocolError)) throw err;
        protocolErrors++;
      }
    }
    expect(protocolErrors).toBeGreaterThan(500);
    expect(framesSeen).toBeGreaterThan(10000);
  });
});

describe('ReplyFramer large replies', () => {
  it('frames a 50 MB bulk fed in 64 KiB chunks in linear time', () => {
    const size = 50 * 1024 * 1024;
    const value = Buffer.alloc(size, 0x62);
    value.write('\r\n$3\r\n', 1000);
    const input = Buffer.concat([b(`+OK\r\n$${size}\r\n`), value, b('\r\n:1\r\n')]);
    const framer = new ReplyFramer();
    const frames: Buffer[] = [];
    const started = performance.now();
    for (let i = 0; i < input.length; i += 65536) {
      framer.push(input.subarray(i, i + 65536));
      for (let f = framer.next(); f !== null; f = framer.next()) frames.push(f);
    }
    console.log(`50 MB reply framed in ${(performance.now() - started).toFixed(0)} ms`);
    expect(frames.map((f) => f.length)).toEqual([5, input.length - 9, 4]);
    const decoded = decodeReply(frames[1]!) as Buffer;
    expect(decoded.equals(value)).toBe(true);
  });

  it('frames an array of 1M small elements fed in 64 KiB chunks', () => {
    const n = 1_000_000;
    const input = b(`*${n}\r\n` + ':12345\r\n'.repeat(n) + '+OK\r\n');
    const framer = new ReplyFramer();
    const frames: Buffer[] = [];
    const started = performance.now();
    for (let i = 0; i < input.length; i += 65536) {
      framer.push(input.subarray(i, i + 65536));
      for (let f = framer.next(); f !== null; f = framer.next()) frames.push(f);
    }
    console.log(`1M-element array framed in ${(performance.now() - started).toFixed(0)} ms`);
    expect(frames.map((f) => f.length)).toEqual([input.length - 5, 5]);
    expect((decodeReply(frames[0]!) as number[]).length).toBe(n);
  });
});
