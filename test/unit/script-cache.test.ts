import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ScriptCache, noteScript, SCRIPT_CACHE_MAX_BYTES, SCRIPT_CACHE_MAX_COUNT } from '../../src/scripts/script-cache.js';

const sha1 = (s: string) => createHash('sha1').update(s).digest('hex');

describe('ScriptCache (bodies of scripts seen, by SHA1, least recently used out)', () => {
  it('names a body by its lower-case SHA1 and finds it in any case', () => {
    const cache = new ScriptCache();
    expect(cache.remember(Buffer.from('return 1'))).toBe(sha1('return 1'));
    expect(cache.body(sha1('return 1'))?.toString()).toBe('return 1');
    expect(cache.body(sha1('return 1').toUpperCase())?.toString()).toBe('return 1');
    expect(cache.body(sha1('return 2'))).toBeUndefined();
  });

  it('copies the body (the argument is a view into a read buffer)', () => {
    const cache = new ScriptCache();
    const buf = Buffer.from('return 7');
    cache.remember(buf);
    buf.fill(0x20);
    expect(cache.body(sha1('return 7'))?.toString()).toBe('return 7');
  });

  it('is bounded by count: the least recently used goes first', () => {
    const cache = new ScriptCache(3, 1 << 20);
    for (const s of ['return 1', 'return 2', 'return 3']) cache.remember(Buffer.from(s));
    cache.body(sha1('return 1')); // used: now the most recent
    cache.remember(Buffer.from('return 4'));
    expect(cache.size).toBe(3);
    expect(cache.body(sha1('return 2'))).toBeUndefined();
    for (const s of ['return 1', 'return 3', 'return 4']) expect(cache.body(sha1(s))?.toString()).toBe(s);
    cache.remember(Buffer.from('return 3')); // seen again: most recent
    cache.remember(Buffer.from('return 5'));
    expect(cache.body(sha1('return 1'))).toBeUndefined();
    expect(cache.body(sha1('return 3'))).toBeDefined();
  });

  it('is bounded by bytes; a body larger than the bound is not kept', () => {
    const cache = new ScriptCache(100, 25);
    cache.remember(Buffer.from('return "aaaaaa"')); // 15 bytes
    cache.remember(Buffer.from('return "bbb"')); // 12 bytes: 27 > 25, the first goes
    expect(cache.body(sha1('return "aaaaaa"'))).toBeUndefined();
    expect(cache.bytes).toBe(12);
    cache.remember(Buffer.from('x'.repeat(26)));
    expect(cache.size).toBe(1);
    expect(cache.bytes).toBe(12);
  });

  it('defaults to 10,000 scripts and 64 MiB', () => {
    const cache = new ScriptCache();
    expect([cache.maxCount, cache.maxBytes]).toEqual([SCRIPT_CACHE_MAX_COUNT, SCRIPT_CACHE_MAX_BYTES]);
    expect([SCRIPT_CACHE_MAX_COUNT, SCRIPT_CACHE_MAX_BYTES]).toEqual([10_000, 64 * 1024 * 1024]);
  });

  it('notes EVAL / EVAL_RO and SCRIPT LOAD bodies, nothing else', () => {
    const cache = new ScriptCache();
    const note = (command: string, ...args: string[]) => noteScript(cache, command, args.map((a) => Buffer.from(a)));
    note('eval', 'eval', 'return 1', '0');
    note('eval_ro', 'eval_ro', 'return 2', '0');
    note('script|load', 'script', 'load', 'return 3');
    note('evalsha', 'evalsha', 'return 4', '0');
    note('eval', 'eval', 'return 5'); // wrong arity: Valkey refuses it
    note('dbsize', 'dbsize');
    expect(cache.size).toBe(3);
    for (const s of ['return 1', 'return 2', 'return 3']) expect(cache.body(sha1(s))?.toString()).toBe(s);
  });
});
