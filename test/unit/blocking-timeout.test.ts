import { describe, expect, it } from 'vitest';
import { blockingTimeoutMs } from '../../src/handlers/blocking.js';

const req = (command: string, ...words: string[]) => ({
  command,
  args: words.map((w) => Buffer.from(w)),
  raw: Buffer.alloc(0),
  spec: undefined,
});

describe('blockingTimeoutMs()', () => {
  it('reads the timeout where each blocking command keeps it', () => {
    expect(blockingTimeoutMs(req('blpop', 'BLPOP', 'a', 'b', '1.5'))).toBe(1500);
    expect(blockingTimeoutMs(req('blmove', 'BLMOVE', 'a', 'b', 'LEFT', 'RIGHT', '2'))).toBe(2000);
    expect(blockingTimeoutMs(req('blmpop', 'BLMPOP', '0.01', '1', 'k', 'LEFT'))).toBe(10);
    expect(blockingTimeoutMs(req('bzmpop', 'BZMPOP', '3', '1', 'k', 'MIN'))).toBe(3000);
    expect(blockingTimeoutMs(req('xread', 'XREAD', 'COUNT', '1', 'block', '250', 'STREAMS', 's', '$'))).toBe(250);
    expect(blockingTimeoutMs(req('xreadgroup', 'XREADGROUP', 'GROUP', 'g', 'c', 'BLOCK', '7', 'STREAMS', 's', '>'))).toBe(7);
  });

  it('0 and values past a timer\'s range wait forever; what does not parse is -1', () => {
    expect(blockingTimeoutMs(req('blpop', 'BLPOP', 'a', '0'))).toBeNull();
    expect(blockingTimeoutMs(req('blpop', 'BLPOP', 'a', '0x7FFFFFFFFFFFFF'))).toBe(-1);
    expect(blockingTimeoutMs(req('blpop', 'BLPOP', 'a', '36028797018963970'))).toBeNull();
    expect(blockingTimeoutMs(req('blpop', 'BLPOP', 'a', 'soon'))).toBe(-1);
    expect(blockingTimeoutMs(req('blpop', 'BLPOP', 'a', '-1'))).toBe(-1);
  });
});
