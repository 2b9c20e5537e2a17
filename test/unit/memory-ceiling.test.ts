import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { GC_SLACK, HOLDER_BYTES, MemoryCeiling, resolveMaxMemory, type MemoryHolder } from '../../src/client/memory-ceiling.js';
import { cgroupMemoryLimit } from '../../src/util/cgroup-memory.js';
import type { LaneClass } from '../../src/client/lane-class.js';

// limits.maxMemory (client/memory-ceiling.ts): who is disconnected when respool holds too much —
// the clients holding the most, largest first, down to 90% of the ceiling; never one holding
// little; the resident size as a backstop. And where 'auto' takes its limit from (cgroups).

const MiB = 1024 * 1024;

class Holder implements MemoryHolder {
  closed = false;
  constructor(
    readonly address: string,
    public output: number,
    public coming = 0,
    public query = 0,
    readonly laneClass: LaneClass = 'bulk',
  ) {}
  outputBytes(): number {
    return this.output;
  }
  comingBytes(): number {
    return this.coming;
  }
  queryBytes(): number {
    return this.query;
  }
  dropForMemory(): void {
    this.closed = true;
  }
}

const ceilings: MemoryCeiling[] = [];
afterEach(() => {
  for (const c of ceilings.splice(0)) c.close();
});

function ceiling(limit: number, holders: Holder[], extra: { links?: number; rss?: number; rssLimit?: number } = {}) {
  const logged: Array<Record<string, unknown>> = [];
  const log = pino({ level: 'warn' }, { write: (line: string) => logged.push(JSON.parse(line) as Record<string, unknown>) });
  const c = new MemoryCeiling({
    limit,
    holders: () => holders,
    linkBytes: () => extra.links ?? 0,
    ...(extra.rssLimit !== undefined ? { rssLimit: extra.rssLimit, rss: () => extra.rss ?? 0 } : {}),
    log,
  });
  ceilings.push(c);
  return { c, logged };
}

describe('MemoryCeiling', () => {
  it('under the limit nobody is touched; past it the largest holders go first, down to 90% of the limit', () => {
    const hs = [new Holder('a', 10 * MiB), new Holder('b', 30 * MiB), new Holder('c', 20 * MiB), new Holder('d', 5 * MiB), new Holder('small', 100 * 1024, 0, 50 * 1024)];
    const { c, logged } = ceiling(100 * MiB, hs);
    c.scan();
    expect(hs.filter((h) => h.closed)).toEqual([]); // 65 MiB and a bit: under 100 MiB
    hs[0]!.output = 40 * MiB; // a: 40, b: 30, c: 20, d: 5 → 95 + small
    hs[1]!.output = 50 * MiB; // b: 50 → 115 MiB
    c.scan();
    // 115 MiB > 100: b (50) goes → 65 MiB ≤ 90. Only b.
    expect(hs.map((h) => h.closed)).toEqual([false, true, false, false, false]);
    expect(logged.map((l) => [l['client'], l['reason']])).toEqual([['b', 'max_memory']]);
    expect(c.buffered.total).toBeGreaterThan(100 * MiB); // the scan's figures are from before the drop
  });

  it('drops in order of size until under 90%, and never a client holding less than HOLDER_BYTES', () => {
    const hs = [
      ...Array.from({ length: 10 }, (_, i) => new Holder(`big${i}`, (10 + i) * MiB)),
      ...Array.from({ length: 200 }, (_, i) => new Holder(`little${i}`, HOLDER_BYTES - 1)),
    ];
    const { c, logged } = ceiling(60 * MiB, hs, { links: 5 * MiB });
    c.scan();
    const dropped = logged.filter((l) => l['reason'] === 'max_memory').map((l) => l['client']);
    expect(dropped).toEqual(['big9', 'big8', 'big7', 'big6', 'big5', 'big4', 'big3', 'big2', 'big1', 'big0']);
    const sizes = logged.map((l) => l['heldBytes'] as number);
    expect([...sizes].sort((x, y) => y - x)).toEqual(sizes); // largest first
    expect(hs.filter((h) => h.address.startsWith('little') && h.closed)).toEqual([]); // ~50 MiB of small holders stay
  });

  it('counts the replies still coming to a client, and its queued requests', () => {
    const hs = [new Holder('coming', 1 * MiB, 40 * MiB), new Holder('reading', 2 * MiB, 0, 30 * MiB)];
    const { c } = ceiling(60 * MiB, hs);
    c.scan(); // 1 + 40 + 2 + 30 = 73 MiB
    expect(hs.map((h) => h.closed)).toEqual([true, false]);
  });

  it('a client that grows is checked in the same turn, not at the next scan', async () => {
    const a = new Holder('a', 1 * MiB);
    const b = new Holder('b', 1 * MiB);
    const { c } = ceiling(10 * MiB, [a, b]);
    c.scan();
    a.output = 20 * MiB;
    c.grew(a);
    await new Promise((r) => setImmediate(r));
    expect(a.closed).toBe(true);
    expect(b.closed).toBe(false);
  });

  it('off (limit 0): nothing is dropped, the figures are still counted', () => {
    const hs = [new Holder('a', 500 * MiB, 0, 0, 'interactive')];
    const { c } = ceiling(0, hs, { links: 3 });
    c.grew(hs[0]!);
    const found = c.scan();
    expect(hs[0]!.closed).toBe(false);
    expect(found.output.interactive).toBe(500 * MiB);
    expect(found.links).toBe(3);
  });

  it('a resident size past rssLimit lowers the bar below what is counted: the largest go even under the limit', () => {
    const hs = [new Holder('a', 30 * MiB), new Holder('b', 10 * MiB), new Holder('c', 1 * MiB)];
    const { c } = ceiling(100 * MiB, hs, { rss: 200 * MiB, rssLimit: 190 * MiB });
    c.scan(); // 41 MiB counted, under 100, but the process is at 200 MiB resident: bar 35.9 MiB, target 32.3
    expect(hs.map((h) => h.closed)).toEqual([true, false, false]);
  });
});

describe('resolveMaxMemory (limits.maxMemory)', () => {
  it('auto: 75% of the cgroup limit less the start-up footprint and the GC slack; off without a limit; a size as given', () => {
    expect(resolveMaxMemory('auto', 256 * MiB, 60 * MiB)).toBe(256 * MiB * 0.75 - 60 * MiB - GC_SLACK);
    expect(resolveMaxMemory('auto', 128 * MiB, 60 * MiB)).toBe(16 * MiB); // at least an eighth of the limit
    expect(resolveMaxMemory('auto', null, 60 * MiB)).toBe(0);
    expect(resolveMaxMemory(300 * MiB, 256 * MiB, 60 * MiB)).toBe(300 * MiB);
    expect(resolveMaxMemory(0, 256 * MiB, 60 * MiB)).toBe(0);
  });
});

describe('cgroupMemoryLimit', () => {
  const files = (map: Record<string, string>) => (path: string) => map[path] ?? null;

  it('cgroup v1: the smallest limit from the process\'s group up to the root', () => {
    const read = files({
      '/proc/self/cgroup': '12:pids:/docker/abc\n4:memory:/docker/abc\n1:name=systemd:/docker/abc\n',
      '/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes': '268435456\n',
      '/sys/fs/cgroup/memory/docker/memory.limit_in_bytes': '1073741824\n',
      '/sys/fs/cgroup/memory/memory.limit_in_bytes': '9223372036854771712\n',
    });
    expect(cgroupMemoryLimit(read)).toBe(268435456);
  });

  it('cgroup v1 inside a container: the group\'s own path is not mounted, the mount\'s root holds the limit', () => {
    const read = files({
      '/proc/self/cgroup': '4:memory:/docker/abc\n',
      '/sys/fs/cgroup/memory/memory.limit_in_bytes': '536870912',
    });
    expect(cgroupMemoryLimit(read)).toBe(536870912);
  });

  it('cgroup v2: memory.max, "max" meaning none', () => {
    expect(cgroupMemoryLimit(files({ '/proc/self/cgroup': '0::/kubepods/pod1/c1\n', '/sys/fs/cgroup/kubepods/pod1/c1/memory.max': '268435456\n', '/sys/fs/cgroup/kubepods/memory.max': 'max\n' }))).toBe(268435456);
    expect(cgroupMemoryLimit(files({ '/proc/self/cgroup': '0::/\n', '/sys/fs/cgroup/memory.max': 'max\n' }))).toBe(null);
  });

  it('no limit anywhere, or no cgroup file: null', () => {
    expect(cgroupMemoryLimit(files({ '/proc/self/cgroup': '4:memory:/\n', '/sys/fs/cgroup/memory/memory.limit_in_bytes': '9223372036854771712' }))).toBe(null);
    expect(cgroupMemoryLimit(files({}))).toBe(null);
  });
});
