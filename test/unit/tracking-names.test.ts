import { describe, expect, it } from 'vitest';
import { KeyColocation } from '../../src/keys/colocation.js';
import { KeyNames } from '../../src/keys/key-names.js';
import { storedTrackingLine } from '../../src/keys/tracking-names.js';

const words = (...w: string[]) => w.map((x) => Buffer.from(x));
const text = (args: readonly Buffer[]) => args.map((a) => a.toString());

describe('storedTrackingLine (BCAST prefixes as the nodes match them)', () => {
  it("moves the PREFIX pairs last, in their stored forms, and says where REDIRECT's id went", () => {
    const line = { args: words('CLIENT', 'TRACKING', 'ON', 'PREFIX', 'p', 'REDIRECT', '7', 'BCAST', 'PREFIX', 'q'), redirectAt: 6 };
    const stored = storedTrackingLine(new KeyNames(Buffer.from('a:'), null), line);
    expect(text(stored.args)).toEqual(['CLIENT', 'TRACKING', 'ON', 'REDIRECT', '7', 'BCAST', 'PREFIX', 'a:p', 'PREFIX', 'a:q']);
    expect(stored.args[stored.redirectAt]!.toString()).toBe('7');
  });

  it('gives a prefix one stored form per place a key of it can be stored (as it is, behind each tag)', () => {
    const names = new KeyNames(null, new KeyColocation([{ keys: 'rq:*', tag: 'rq' }]));
    const stored = storedTrackingLine(names, { args: words('CLIENT', 'TRACKING', 'ON', 'BCAST', 'PREFIX', 'rq:'), redirectAt: -1 });
    expect(text(stored.args)).toEqual(['CLIENT', 'TRACKING', 'ON', 'BCAST', 'PREFIX', 'rq:', 'PREFIX', '{rq}rq:']);
    expect(stored.redirectAt).toBe(-1);
  });
});
