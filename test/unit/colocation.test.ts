import { describe, expect, it } from 'vitest';
import { FLEET_TAG } from '../../src/fleet/fleet-store.js';
import { KeyColocation, colocationProblem } from '../../src/keys/colocation.js';
import { escapeGlob, globsOverlap } from '../../src/keys/glob-overlap.js';
import { replyNamesFor } from '../../src/keys/reply-names.js';
import { KeyNames } from '../../src/keys/key-names.js';
import { globMatch } from '../../src/util/glob.js';

const b = (s: string) => Buffer.from(s);

describe('globsOverlap', () => {
  it.each([
    ['rq:*', 'rq:job:*', true],
    ['rq:*', 'celery*', false],
    ['*', 'anything', true],
    ['a?c', 'ab*', true],
    ['[abc]x', '[^abc]x', false],
    ['[a-c]x', 'bx', true],
    ['\\*x', '*x', true],
    ['\\*x', 'ax', false],
    ['user:*:name', 'user:*:mail', false],
  ])('%s and %s: %s', (x, y, overlap) => {
    expect(globsOverlap(b(x), b(y))).toBe(overlap);
    expect(globsOverlap(b(y), b(x))).toBe(overlap);
  });

  it('escapeGlob matches the text itself only', () => {
    const text = b('{a*b?[c]\\}');
    expect(globMatch(escapeGlob(text), text)).toBe(true);
    expect(globMatch(escapeGlob(text), b('{aXb?[c]\\}'))).toBe(false);
  });
});

describe('colocation rules', () => {
  const rules = new KeyColocation([{ keys: 'rq:*', tag: 'rq' }]);

  it('stores a matching key under its tag and reads it back', () => {
    expect(rules.storedName(b('rq:job:1'))).toEqual(b('{rq}rq:job:1'));
    expect(rules.storedName(b('other'))).toBeNull();
    expect(rules.ruleName(b('{rq}rq:job:1'))).toEqual(b('rq:job:1'));
    expect(rules.ruleName(b('{rq}other'))).toBeNull();
  });

  it('a key stored before the rule is seen by no client name; a name that is a stored form collides', () => {
    expect(rules.visibleName(b('rq:job:1'))).toBeNull();
    expect(rules.visibleName(b('plain'))).toEqual(b('plain'));
    expect(rules.collides(b('{rq}rq:x'))).toBe(true);
    expect(rules.collides(b('{rq}x'))).toBe(false);
  });

  it('is checked at load', () => {
    expect(colocationProblem([{ keys: 'rq:*', tag: 'rq' }, { keys: 'rq:job:*', tag: 'rq' }])).toBeNull();
    expect(colocationProblem([{ keys: 'rq:*', tag: 'rq' }, { keys: 'rq:job:*', tag: 'jobs' }])).toMatch(/can match the same key with different tags/);
    expect(colocationProblem([{ keys: '*', tag: 'respool-fleet' }])).toMatch(/respool's own/);
    expect(colocationProblem([{ keys: '*', tag: 'a}b' }])).toMatch(/without \{ or \}/);
    expect(FLEET_TAG).toBe('{respool-fleet}'); // the fleet's keys (fleet/fleet-store.ts) and the rule above name one tag
  });

  it('turns popped keys, stream names and key lists back into client names', () => {
    const names = new KeyNames(null, rules);
    const blpop = replyNamesFor(names, 'blpop', [])!;
    expect(blpop(b('*2\r\n$12\r\n{rq}rq:queue\r\n$2\r\nj1\r\n')).toString()).toBe('*2\r\n$8\r\nrq:queue\r\n$2\r\nj1\r\n');
    expect(blpop(b('*-1\r\n')).toString()).toBe('*-1\r\n');
    const xread = replyNamesFor(names, 'xread', [])!;
    expect(xread(b('%1\r\n$8\r\n{rq}rq:s\r\n*0\r\n')).toString()).toBe('%1\r\n$4\r\nrq:s\r\n*0\r\n');
    const keys = replyNamesFor(names, 'keys', [b('keys'), b('rq:j*')])!;
    // the node was asked for every key: the client's pattern and the rule decide what is seen
    expect(keys(b('*4\r\n$9\r\n{rq}rq:j1\r\n$9\r\n{rq}rq:q1\r\n$5\r\nrq:j2\r\n$5\r\nplain\r\n')).toString()).toBe('*1\r\n$5\r\nrq:j1\r\n');
    expect(replyNamesFor(names, 'get', [])).toBeNull();
  });
});
