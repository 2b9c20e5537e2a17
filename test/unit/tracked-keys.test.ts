/** respool's tracking table (src/client/tracked-keys.ts): counts, evictions and the two views of one relation. */
import { describe, expect, it } from 'vitest';
import { TrackedKeys, type TrackedKeyReader } from '../../src/client/tracked-keys.js';
import { invalidatedKeys } from '../../src/keys/tracking-names.js';

function reader(): TrackedKeyReader & { told: string[] } {
  const told: string[] = [];
  return { trackedKeys: new Set(), told, evicted: (key) => told.push(key.toString('latin1')) };
}

const keys = (...names: string[]) => names.map((n) => Buffer.from(n));
const tick = () => new Promise((r) => setImmediate(r));

describe('TrackedKeys', () => {
  it('counts keys and (key, reader) items as Valkey does; a key read twice by one reader is one item', () => {
    const t = new TrackedKeys();
    const a = reader();
    const b = reader();
    t.remember(a, keys('k1', 'k2'));
    t.remember(b, keys('k2'));
    t.remember(a, keys('k1'));
    expect([t.keyCount, t.itemCount]).toEqual([2, 3]);
    t.forget(a, Buffer.from('k2'));
    expect([t.keyCount, t.itemCount]).toEqual([2, 2]);
    t.forget(b, Buffer.from('k2'));
    expect([t.keyCount, t.itemCount, [...a.trackedKeys], [...b.trackedKeys]]).toEqual([1, 1, ['k1'], []]);
    t.forget(b, Buffer.from('k1')); // b never read k1: nothing changes
    expect(t.itemCount).toBe(1);
  });

  it('over the limit the oldest keys are evicted, each reader told once; the newest key stays', async () => {
    const t = new TrackedKeys();
    const a = reader();
    const b = reader();
    t.remember(a, keys('k1', 'k2', 'k3'));
    t.remember(b, keys('k1'));
    t.setMaxKeys(1);
    expect(t.keyCount).toBe(3); // evicted once CONFIG SET's reply is out, as Valkey does at its next cron
    await tick();
    expect([a.told, b.told, t.keyCount, t.itemCount, [...a.trackedKeys]]).toEqual([['k1', 'k2'], ['k1'], 1, 1, ['k3']]);
    t.remember(b, keys('k4'));
    expect([a.told, [...a.trackedKeys], [...b.trackedKeys]]).toEqual([['k1', 'k2', 'k3'], [], ['k4']]);
  });

  it('0 is no limit; forgetReader and forgetAll leave no key without readers', async () => {
    const t = new TrackedKeys();
    const a = reader();
    const b = reader();
    t.setMaxKeys(0);
    await tick();
    t.remember(a, keys(...Array.from({ length: 50 }, (_, i) => `k${i}`)));
    t.remember(b, keys('k0', 'x'));
    expect([t.keyCount, a.told]).toEqual([51, []]);
    t.forgetReader(a);
    expect([t.keyCount, t.itemCount, a.trackedKeys.size]).toEqual([2, 2, 0]);
    t.forgetAll();
    expect([t.keyCount, t.itemCount, b.trackedKeys.size]).toEqual([0, 0, 0]);
  });
});

describe('invalidatedKeys (keys/tracking-names.ts): what the table forgets for a node\'s invalidation', () => {
  const names = (list: Buffer[] | null | undefined) => (list === null || list === undefined ? list : list.map((k) => k.toString('latin1')));
  it('the keys of `invalidate`, null for a null key list (every key), undefined for any other push', () => {
    expect(names(invalidatedKeys(Buffer.from('>2\r\n$10\r\ninvalidate\r\n*2\r\n$2\r\nk1\r\n$3\r\nns:\r\n')))).toEqual(['k1', 'ns:']);
    expect(invalidatedKeys(Buffer.from('>2\r\n$10\r\ninvalidate\r\n_\r\n'))).toBeNull();
    expect(invalidatedKeys(Buffer.from('>2\r\n$10\r\ninvalidate\r\n$-1\r\n'))).toBeNull();
    expect(invalidatedKeys(Buffer.from('>3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\nv\r\n'))).toBeUndefined();
  });
});
