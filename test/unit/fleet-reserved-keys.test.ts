// The fleet's own keys ({respool-fleet}…) are refused to clients (src/fleet/reserved-keys.ts);
// any other key, whatever its length or where its '{' is, is not, and never throws.
import { describe, expect, it } from 'vitest';
import { CommandTable } from '../../src/commands/command-table.js';
import { touchesFleetKeys } from '../../src/fleet/reserved-keys.js';

const table = CommandTable.builtin();
const touches = (...words: string[]) => {
  const args = words.map((w) => Buffer.from(w));
  const spec = table.lookup(args)!;
  return touchesFleetKeys(table, spec, args);
};

describe('touchesFleetKeys', () => {
  it('finds the fleet tag as the first hash tag of any key the command names', () => {
    expect(touches('GET', '{respool-fleet}:state')).toBe(true);
    expect(touches('GET', 'a{respool-fleet}')).toBe(true);
    expect(touches('MGET', 'a', 'b', 'x:{respool-fleet}:y')).toBe(true);
    expect(touches('SUNIONSTORE', '{respool-fleet}:x', 'a', 'b')).toBe(true);
  });

  it('is false for other tags, for the name without braces, and for a second tag', () => {
    expect(touches('GET', 'respool-fleet')).toBe(false);
    expect(touches('GET', '{other}{respool-fleet}')).toBe(false);
    expect(touches('GET', '{respool-fleetX}')).toBe(false);
    expect(touches('PING')).toBe(false);
  });

  it("does not throw for a '{' too near the key's end to hold the tag", () => {
    for (const key of ['{', 'a{', 'short{key', 'x{respool-flee', '{respool-fleet', 'k'.repeat(40) + '{r']) {
      expect(touches('GET', key), key).toBe(false);
    }
  });
});
