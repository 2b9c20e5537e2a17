import { describe, expect, it } from 'vitest';
import calculateSlot from 'cluster-key-slot';
import { SpaceSaving } from '../../src/hotkeys/space-saving.js';
import { globMatch } from '../../src/util/glob.js';
import { copyName, copyTargets, hasHashTag, placeCopies } from '../../src/hotkeys/placement.js';
import { HotKeyDetector, displayKey } from '../../src/hotkeys/detector.js';
import { isEmptyReply } from '../../src/hotkeys/split-requests.js';
import { SplitKey, makeCopy, pickCopy, rewriteKey } from '../../src/hotkeys/split-key.js';
import { Topology, type ClusterNode } from '../../src/cluster/topology.js';

function node(port: number): ClusterNode {
  return { id: `n${port}`, host: '127.0.0.1', port, address: `127.0.0.1:${port}`, role: 'primary', health: 'online', zone: null, replicationOffset: 0 };
}
/** A topology of `p` primaries with evenly split slot ranges. */
function topology(p: number): Topology {
  const per = Math.ceil(16384 / p);
  return new Topology('cluster', Array.from({ length: p }, (_, i) => ({
    primary: node(7000 + i), replicas: [], slots: [[i * per, Math.min(16383, (i + 1) * per - 1)] as [number, number]],
  })), 'test');
}
const ownerOf = (t: Topology) => (slot: number) => t.primaryForSlot(slot)?.address;
const primariesOf = (t: Topology) => t.primaries().map((n) => n.address).sort();
function perNode(places: Array<{ node: string }>): number[] {
  const m = new Map<string, number>();
  for (const p of places) m.set(p.node, (m.get(p.node) ?? 0) + 1);
  return [...m.values()].sort((a, b) => a - b);
}

describe('SpaceSaving', () => {
  it('counts exactly while under capacity, and keeps heavy hitters when over it', () => {
    const s = new SpaceSaving(8);
    for (let i = 0; i < 5; i++) s.offer('a');
    s.offer('b', 3);
    expect(s.top(2)).toEqual([{ item: 'a', count: 5, error: 0 }, { item: 'b', count: 3, error: 0 }]);
    s.reset();
    // 10_000 items: 30% "hot", the rest unique; capacity 8.
    for (let i = 0; i < 10_000; i++) s.offer(i % 10 < 3 ? 'hot' : `cold${i}`);
    expect(s.total).toBe(10_000);
    expect(s.size).toBe(8);
    const [top] = s.top(1);
    expect(top!.item).toBe('hot');
    expect(top!.count - top!.error).toBeLessThanOrEqual(3000); // guaranteed lower bound ≤ truth
    expect(top!.count).toBeGreaterThanOrEqual(3000);
  });
});

describe('globMatch (Valkey stringmatchlen semantics)', () => {
  const m = (p: string, s: string) => globMatch(Buffer.from(p), Buffer.from(s));
  it('matches *, ?, classes, ranges, negation and escapes', () => {
    expect(m('feed:*:top', 'feed:42:top')).toBe(true);
    expect(m('feed:*:top', 'feed:42:topx')).toBe(false);
    expect(m('h?llo', 'hello')).toBe(true);
    expect(m('h?llo', 'hllo')).toBe(false);
    expect(m('h[ae]llo', 'hallo')).toBe(true);
    expect(m('h[^e]llo', 'hello')).toBe(false);
    expect(m('h[a-c]llo', 'hbllo')).toBe(true);
    expect(m('a\\*b', 'a*b')).toBe(true);
    expect(m('a\\*b', 'axb')).toBe(false);
    expect(m('*', '')).toBe(false); // as Valkey: the loop never runs on an empty string
    expect(m('**x', 'abcx')).toBe(true);
    expect(m('a[b', 'ab')).toBe(true); // an unterminated class ends at the pattern's end
    expect(m('*a*b*c', 'xxaxxbxxc')).toBe(true);
  });

  it('does not backtrack exponentially on patterns built to (CVE-2022-36021)', () => {
    const pattern = Buffer.from('*a*a*a*a*a*a*a*a*a*a*a*a*b');
    const subject = Buffer.from('a'.repeat(40));
    const started = process.hrtime.bigint();
    for (let i = 0; i < 100; i++) expect(globMatch(pattern, subject)).toBe(false);
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    // Not a speed target: a hang detector. Backtracking needs ~C(40,12) ≈ 5e9 steps for ONE match
    // of this pattern (hours); the ported guard needs a few thousand, so 100 take milliseconds.
    expect(ms).toBeLessThan(10_000);
    expect(globMatch(pattern, Buffer.from('a'.repeat(40) + 'b'))).toBe(true);
  });
});

describe('placement', () => {
  it('puts N=3 copies one per primary, the original first', () => {
    const t = topology(3);
    for (const key of ['hot', 'product:42', 'a', 'user:{7}:profile']) {
      const places = placeCopies(Buffer.from(key), 3, primariesOf(t), ownerOf(t));
      expect(places[0]!.name.toString()).toBe(key);
      expect(perNode(places)).toEqual([1, 1, 1]);
      for (const p of places) expect(calculateSlot(p.name)).toBe(p.slot);
    }
  });

  it('spreads N=6 two per primary and uneven N as evenly as possible', () => {
    const t = topology(3);
    expect(perNode(placeCopies(Buffer.from('hot'), 6, primariesOf(t), ownerOf(t)))).toEqual([2, 2, 2]);
    expect(perNode(placeCopies(Buffer.from('hot'), 4, primariesOf(t), ownerOf(t)))).toEqual([1, 1, 2]);
    expect(perNode(placeCopies(Buffer.from('hot'), 2, primariesOf(t), ownerOf(t)))).toEqual([1, 1]);
    const five = topology(5);
    expect(perNode(placeCopies(Buffer.from('hot'), 12, primariesOf(five), ownerOf(five)))).toEqual([2, 2, 2, 3, 3]);
  });

  it('names copies with their own hash tag, in front when the key has one', () => {
    expect(hasHashTag(Buffer.from('user:{7}'))).toBe(true);
    expect(hasHashTag(Buffer.from('a{}b'))).toBe(false);
    expect(copyName(Buffer.from('hot'), 5, 2).toString()).toBe('hot{rpcopy:5.2}');
    expect(copyName(Buffer.from('u:{7}'), 5, 2).toString()).toBe('{rpcopy:5.2}u:{7}');
    // Copies of a hash-tagged key do not all land in the tag's slot.
    const t = topology(3);
    const places = placeCopies(Buffer.from('u:{7}'), 3, primariesOf(t), ownerOf(t));
    expect(new Set(places.map((p) => p.slot)).size).toBe(3);
  });

  it('keeps copies that still fit after a topology change and moves only the rest', () => {
    const t = topology(3);
    const before = placeCopies(Buffer.from('hot'), 3, primariesOf(t), ownerOf(t));
    // Move the slot of copy 1 to the owner of copy 2.
    const moved = t.withSlotOwner(before[1]!.slot, '127.0.0.1', Number(before[2]!.node.split(':')[1]));
    const after = placeCopies(Buffer.from('hot'), 3, primariesOf(moved), ownerOf(moved), before.slice(1).map((p) => p.name));
    expect(perNode(after)).toEqual([1, 1, 1]);
    const kept = after.filter((p) => before.some((b) => b.name.equals(p.name)));
    expect(kept).toHaveLength(2); // the original and one of the two copies
  });

  it('gives extra copies to the original\'s primary first', () => {
    const targets = copyTargets(4, ['a', 'b', 'c'], 'b', 0);
    expect(targets.get('b')).toBe(2);
    expect([...targets.values()].reduce((x, y) => x + y)).toBe(4);
  });
});

describe('HotKeyDetector', () => {
  it('ranks the hot key first with rate and share, and each node\'s share', () => {
    const t = topology(3);
    const d = new HotKeyDetector({ enabled: true, sampleRate: 0.1, windowMs: 1000, topK: 3 });
    const hotSlot = calculateSlot('hot');
    let sampled = 0;
    const start = 1_000_000;
    d.rotate(t, start);
    for (let i = 0; i < 100_000; i++) {
      const key = i % 10 === 0 ? `cold:${i}` : 'hot';
      if (d.shouldSample()) {
        sampled++;
        d.record(key, calculateSlot(key));
      }
    }
    expect(sampled).toBeGreaterThan(9000);
    expect(sampled).toBeLessThan(11000);
    const r = d.rotate(t, start + 2000);
    expect(r.topKeys[0]!.key).toBe('hot');
    expect(r.topKeys[0]!.slot).toBe(hotSlot);
    expect(r.topKeys[0]!.node).toBe(t.primaryForSlot(hotSlot)!.address);
    expect(r.topKeys[0]!.share).toBeGreaterThan(0.88);
    expect(r.topKeys[0]!.share).toBeLessThan(0.92);
    expect(r.topKeys[0]!.requestsPerSecond).toBeGreaterThan(90_000 / 2 * 0.9);
    expect(r.topKeys[0]!.requestsPerSecond).toBeLessThan(90_000 / 2 * 1.1);
    expect(r.nodes.find((n) => n.node === r.topKeys[0]!.node)!.share).toBeGreaterThan(0.9);
    expect(d.lastWindow).toBe(r);
    expect(d.current(t).sampled).toBe(0);
  });

  it('displays binary keys escaped', () => {
    expect(displayKey('plain')).toBe('plain');
    expect(displayKey(Buffer.from('é').toString('latin1'))).toBe('é');
    expect(displayKey('\x00\xff')).toBe('\\x00\\xff');
  });
});

describe('split requests', () => {
  it('recognizes empty replies (a copy may be missing) and nothing else', () => {
    for (const e of ['$-1\r\n', '*-1\r\n', '_\r\n', '*0\r\n', '%0\r\n', '~0\r\n', ':0\r\n', ':-2\r\n', '+none\r\n']) {
      expect(isEmptyReply(Buffer.from(e))).toBe(true);
    }
    for (const e of ['$1\r\nx\r\n', ':1\r\n', ':-1\r\n', '*1\r\n$1\r\nx\r\n', '+OK\r\n', '-ERR x\r\n', '$0\r\n\r\n', ':10\r\n']) {
      expect(isEmptyReply(Buffer.from(e))).toBe(false);
    }
  });

  it('rewrites the key argument of a command', () => {
    const out = rewriteKey([Buffer.from('HGET'), Buffer.from('k'), Buffer.from('f')], 1, Buffer.from('k{rpcopy:1.0}'));
    expect(out.toString()).toBe('*3\r\n$4\r\nHGET\r\n$13\r\nk{rpcopy:1.0}\r\n$1\r\nf\r\n');
  });

  it('round-robin spreads reads exactly; random drifts (measured)', () => {
    const split = new SplitKey(Buffer.from('hot'), { kind: 'key', text: 'hot', bytes: Buffer.from('hot'), copies: 3, auto: false, reading: true });
    split.active = [split.original, makeCopy(Buffer.from('hot{rpcopy:1.0}'), 'b'), makeCopy(Buffer.from('hot{rpcopy:1.1}'), 'c')];
    const deviation = (random: boolean, reads: number) => {
      const counts = new Map<unknown, number>();
      for (let i = 0; i < reads; i++) {
        const c = pickCopy(split, random);
        counts.set(c, (counts.get(c) ?? 0) + 1);
      }
      return Math.max(...[...counts.values()].map((c) => Math.abs(c - reads / 3))) / (reads / 3);
    };
    const rr = [300, 3000, 30_000].map((n) => deviation(false, n));
    const rnd = [300, 3000, 30_000].map((n) => deviation(true, n));
    // Round-robin: off by at most one read. Random: several % over small counts.
    expect(Math.max(...rr)).toBeLessThanOrEqual(1 / 100);
    expect(rnd[0]!).toBeGreaterThan(rr[0]!);
    console.log(`read choice max deviation from even (300/3000/30000 reads): roundRobin ${rr.map((x) => (x * 100).toFixed(2) + '%').join(' / ')}, random ${rnd.map((x) => (x * 100).toFixed(2) + '%').join(' / ')}`);
  });
});
