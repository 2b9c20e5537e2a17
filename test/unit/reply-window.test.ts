import { describe, expect, it } from 'vitest';
import net from 'node:net';
import { replyWindow } from '../../src/client/fair-admission.js';
import { ClientOutput, type OutputOwner } from '../../src/session/client-output.js';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';

/**
 * The replies a client may owe at once (client/fair-admission.ts replyWindow) and how far its
 * nodes are (session/client-output.ts distanceMs): near nodes keep the window, far ones widen it
 * in proportion (bench/far-node.mjs: a 5 × 256 pipeline 50 ms away went from 0.46× to 0.87× a
 * direct client's throughput).
 */
describe('reply window', () => {
  const config = DEFAULT_CONFIG;

  it('is the cold window before any reply, then maxInflightPerClient for small replies', () => {
    expect(replyWindow(0, 0, config)).toBe(4);
    expect(replyWindow(10, 100, config)).toBe(128);
  });

  it('is bounded by the share of reply bytes for big replies', () => {
    expect(replyWindow(10, 1024 * 1024, config)).toBe(2); // 2 MiB ÷ 1 MiB
  });

  it('keeps its size for nodes up to 10 ms away, and grows in proportion past that, at most 16 times', () => {
    expect(replyWindow(10, 100, config, 0.2)).toBe(128);
    expect(replyWindow(10, 100, config, 10)).toBe(128);
    expect(replyWindow(10, 100, config, 50)).toBe(640);
    expect(replyWindow(10, 1024 * 1024, config, 50)).toBe(10); // the byte share stretches too
    expect(replyWindow(10, 100, config, 5000)).toBe(2048);
    expect(replyWindow(10, 100, { ...config, limits: { ...config.limits, maxPendingPerClient: 300 } }, 50)).toBe(300);
  });
});

describe('distanceMs', () => {
  function output(): ClientOutput {
    const socket = new net.Socket();
    const owner = { closed: false } as unknown as OutputOwner;
    const out = new ClientOutput(socket, owner);
    (out as unknown as { write(b: Buffer): void }).write = () => {}; // no socket behind it here
    return out;
  }

  it('is 0 until two blocks of 128 replies from nodes were seen; then the shorter of the two blocks\' shortest', () => {
    const out = output();
    const reply = Buffer.from('+OK\r\n');
    for (let i = 0; i < 128; i++) out.writeReply(reply, 50 + (i % 7));
    expect(out.distanceMs).toBe(0);
    for (let i = 0; i < 128; i++) out.writeReply(reply, 60 + (i % 5));
    expect(out.distanceMs).toBe(50);
    // A brief stall (one slow block) does not move it up while the block before was shorter.
    for (let i = 0; i < 128; i++) out.writeReply(reply, 900);
    expect(out.distanceMs).toBe(60);
  });

  it('leaves replies respool answered itself (no time at a node) out', () => {
    const out = output();
    const reply = Buffer.from('+OK\r\n');
    for (let i = 0; i < 256; i++) out.writeReply(reply, 40);
    for (let i = 0; i < 1000; i++) out.writeReply(reply, 0);
    expect(out.distanceMs).toBe(40);
  });
});
