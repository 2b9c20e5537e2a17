import { describe, expect, it } from 'vitest';
import { CommandTable } from '../../src/commands/command-table.js';
import { KeyColocation } from '../../src/keys/colocation.js';
import { KeyNames } from '../../src/keys/key-names.js';
import { onlyFixedKeysRenamed, untouchedByRules, withNamespacedKeys } from '../../src/keys/naming-plan.js';
import { MAX_PREFIXED_KEYS, prefixedRequest } from '../../src/keys/prefixed-request.js';
import { replyNamesFor } from '../../src/keys/reply-names.js';
import { STORED_KEY_TOO_LONG, requestWithStoredNames } from '../../src/keys/request-names.js';
import { encodeCommand } from '../../src/resp/encode.js';
import { RequestFrame, RequestFramer } from '../../src/resp/request-framer.js';

const table = CommandTable.builtin();
const b = (s: string) => Buffer.from(s, 'latin1');
const names = new KeyNames(b('ns:'), null);
const MAX = 512 * 1024 * 1024; // limits.maxBulkLength's default

/** A request as the framer hands it on: its exact bytes, no argument views yet. */
function framed(args: Buffer[]): RequestFrame {
  const framer = new RequestFramer();
  framer.push(encodeCommand(args));
  const frame = framer.next();
  if (frame === null) throw new Error('not framed');
  return frame;
}

/** What the general path (argument views, re-encoding) makes of the same request. */
function general(args: Buffer[]): Buffer {
  const spec = table.lookup(args)!;
  const out = requestWithStoredNames(names, table, spec, framed(args), MAX);
  return Buffer.isBuffer(out) ? out : out.raw;
}

describe('prefixedRequest (a namespace put into a request\'s bytes)', () => {
  const cases: Array<[string, string[], number[]]> = [
    ['one key', ['GET', 'k'], [1]],
    ['a value after the key, longer than the byte-copy limit', ['SET', 'key:1', 'v'.repeat(300)], [1]],
    ['a key whose length gains a digit (8 + 3 = 11)', ['GET', 'k'.repeat(8)], [1]],
    ['a key whose length gains a digit (98 + 3 = 101)', ['GET', 'k'.repeat(98)], [1]],
    ['an empty key', ['GET', ''], [1]],
    ['every other argument (MSET)', ['MSET', 'a', '1', 'b', '2', 'c', '3'], [1, 3, 5]],
    ['consecutive keys (MGET)', ['MGET', 'a', 'bb', 'ccc'], [1, 2, 3]],
    ['binary bytes in key and value', ['SET', '\r\n$3\r\n', '\x00\xff'], [1]],
  ];
  it.each(cases)('%s', (_what, words, keys) => {
    const args = words.map(b);
    const expected = encodeCommand(args.map((a, i) => (keys.includes(i) ? Buffer.concat([b('ns:'), a]) : a)));
    expect(prefixedRequest(encodeCommand(args), keys, b('ns:'), MAX)!.toString('latin1')).toBe(expected.toString('latin1'));
  });
});

describe('withNamespacedKeys (the hot path) against requestWithStoredNames (the general path)', () => {
  it('makes the same bytes for every command it takes, and no reply of those names a key', () => {
    let taken = 0;
    for (const name of table.names()) {
      const spec = table.get(name)!;
      if (!onlyFixedKeysRenamed(spec)) continue;
      const words = name.split('|');
      // Enough arguments for any fixed key place, one of them long enough to change a header's digits.
      for (const extra of [1, 2, 5, 9]) {
        const args = [...words.map(b), ...Array.from({ length: extra }, (_, i) => b(i === 0 ? 'x'.repeat(9) : `arg${i}`))];
        const fast = withNamespacedKeys(framed(args), table.lookup(args)!, b('ns:'), MAX) as RequestFrame | null;
        expect(fast, name).not.toBeNull();
        expect(fast!.raw.toString('latin1'), `${name} with ${extra} arguments`).toBe(general(args).toString('latin1'));
        expect(replyNamesFor(names, spec.name, args), name).toBeNull();
      }
      taken++;
    }
    expect(taken).toBeGreaterThan(100); // GET, SET, HSET, MGET, DEL …: most of the table
    for (const name of ['sort', 'sort_ro', 'spublish', 'ssubscribe', 'blpop', 'xread', 'eval', 'keys', 'scan', 'randomkey']) {
      expect(onlyFixedKeysRenamed(table.get(name)!), name).toBe(false);
    }
  });

  it('leaves a request with more keys than it renames in place to the general path', () => {
    const args = [b('DEL'), ...Array.from({ length: MAX_PREFIXED_KEYS + 1 }, (_, i) => b(`k${i}`))];
    expect(withNamespacedKeys(framed(args), table.lookup(args)!, b('ns:'), MAX)).toBeNull();
    const fits = [b('DEL'), ...Array.from({ length: MAX_PREFIXED_KEYS }, (_, i) => b(`k${i}`))];
    expect((withNamespacedKeys(framed(fits), table.lookup(fits)!, b('ns:'), MAX) as RequestFrame).raw.equals(general(fits))).toBe(true);
  });

  it("answers Valkey's protocol error for a key the namespace makes longer than the nodes take, on both paths", () => {
    const at = (key: string) => [b('SET'), b(key), b('v')];
    expect(withNamespacedKeys(framed(at('k'.repeat(7))), table.get('set')!, b('ns:'), 10)).toBeInstanceOf(RequestFrame); // 3 + 7 = 10
    expect(withNamespacedKeys(framed(at('k'.repeat(8))), table.get('set')!, b('ns:'), 10)).toBe(STORED_KEY_TOO_LONG);
    expect(requestWithStoredNames(names, table, table.get('set')!, framed(at('k'.repeat(8))), 10)).toBe(STORED_KEY_TOO_LONG);
    expect(STORED_KEY_TOO_LONG.toString()).toBe('-ERR Protocol error: invalid bulk length\r\n');
  });
});

describe('untouchedByRules (colocation rules a request\'s keys do not match) against requestWithStoredNames', () => {
  const rules = new KeyColocation([
    { keys: 'rq:*', tag: 'rq' },
    { keys: 'job?:[ab]*', tag: 'jobs' },
    { keys: 'esc\\*x*', tag: 'esc' },
  ]);
  const ruled = new KeyNames(null, rules);
  const cases: Array<[string, string[], boolean]> = [
    ['a key no rule matches', ['GET', 'app:1'], true],
    ['a literal-prefix rule', ['GET', 'rq:job:1'], false],
    ['shorter than the literal start', ['GET', 'rq'], true],
    ['a glob rule (matched through a view)', ['SET', 'job1:a-1', 'v'], false],
    ['a glob rule, unmatched', ['SET', 'job1:c-1', 'v'], true],
    ['an escaped star in the glob', ['GET', 'esc*x1'], false],
    ['what looks like a stored form: the general path refuses it', ['GET', '{rq}rq:x'], false],
    ['a brace that is no stored form', ['GET', '{other}k'], false],
    ['several keys, the last one matched', ['MGET', 'a', 'b', 'rq:c'], false],
    ['several keys, none matched', ['MSET', 'a', '1', 'b', '2'], true],
    ['a keyless command takes the general path (it has no key finder by count)', ['PING'], false],
  ];
  it.each(cases)('%s', (_what, words, untouched) => {
    const args = words.map(b);
    const spec = table.lookup(args)!;
    expect(untouchedByRules(framed(args), spec, rules)).toBe(untouched);
    if (untouched) {
      const frame = framed(args);
      expect(requestWithStoredNames(ruled, table, spec, frame, MAX)).toBe(frame); // the general path changes nothing either
    }
  });

  it('leaves every command whose rewriting is more than its fixed keys to the general path', () => {
    for (const name of ['sort', 'blpop', 'eval', 'keys', 'scan', 'spublish']) {
      const args = [...name.split('|').map(b), b('x'), b('0')];
      expect(untouchedByRules(framed(args), table.get(name)!, rules), name).toBe(false);
    }
  });
});
