import { describe, expect, it } from 'vitest';
import { BIG_REPLY_BYTES, COLD_PIPELINE_BYTES, laneClass } from '../../src/client/lane-class.js';

// Which lane a client takes when placed afresh (client/lane-class.ts).
const SLICE = 16 * 1024;

describe('laneClass', () => {
  it('one request at a time, or a short pipeline of small replies: interactive', () => {
    expect(laneClass(0, SLICE, 0, 0, false)).toBe('interactive'); // a new client's first request alone
    expect(laneClass(40, SLICE, 0, 0, false)).toBe('interactive'); // SET then a GET behind it, before any reply
    expect(laneClass(600, SLICE, 10, 20, false)).toBe('interactive'); // a pipeline of 16 small GETs, replies known small
  });

  it('a deep pipeline, big replies, a client that does not read, or a new client\'s long pipeline: bulk', () => {
    expect(laneClass(SLICE, SLICE, 100, 10, false)).toBe('bulk'); // more than a slice waits
    expect(laneClass(0, SLICE, 3, BIG_REPLY_BYTES, false)).toBe('bulk'); // its replies average 64 KiB
    expect(laneClass(0, SLICE, 3, 10, true)).toBe('bulk'); // its output is held back
    expect(laneClass(COLD_PIPELINE_BYTES, SLICE, 0, 0, false)).toBe('bulk'); // twenty GETs before any reply showed their size
  });
});
