/**
 * Space-Saving top-k counter (Metwally, Agrawal, El Abbadi 2005) over a bounded number of
 * monitored items. Every monitored item has a count that overestimates its true count by at
 * most its `error`; any item whose true frequency exceeds total/capacity is guaranteed to be
 * monitored. Items live in a binary min-heap by count, so an offer is O(log capacity) and never
 * allocates once the structure is full (the evicted entry object is reused).
 */
export interface SpaceSavingEntry {
  item: string;
  count: number;
  /** Upper bound on how much `count` overestimates the item's true count. */
  error: number;
  /** Position in the heap (internal). */
  pos: number;
}

export class SpaceSaving {
  private readonly heap: SpaceSavingEntry[] = [];
  private readonly index = new Map<string, SpaceSavingEntry>();
  private totalCount = 0;

  constructor(readonly capacity: number) {
    if (!(capacity >= 1)) throw new Error(`SpaceSaving capacity must be >= 1 (got ${capacity})`);
  }

  /** Items offered since the last reset (the sum of all weights). */
  get total(): number {
    return this.totalCount;
  }

  get size(): number {
    return this.heap.length;
  }

  offer(item: string, weight = 1): void {
    this.totalCount += weight;
    const hit = this.index.get(item);
    if (hit !== undefined) {
      hit.count += weight;
      this.siftDown(hit.pos);
      return;
    }
    if (this.heap.length < this.capacity) {
      const entry: SpaceSavingEntry = { item, count: weight, error: 0, pos: this.heap.length };
      this.heap.push(entry);
      this.index.set(item, entry);
      this.siftUp(entry.pos);
      return;
    }
    // Replace the minimum: the newcomer inherits its count as the error bound.
    const min = this.heap[0]!;
    this.index.delete(min.item);
    min.error = min.count;
    min.count += weight;
    min.item = item;
    this.index.set(item, min);
    this.siftDown(0);
  }

  /** The `n` items with the highest counts, highest first (copies). */
  top(n: number): Array<{ item: string; count: number; error: number }> {
    return [...this.heap]
      .sort((a, b) => b.count - a.count || (a.item < b.item ? -1 : 1))
      .slice(0, n)
      .map((e) => ({ item: e.item, count: e.count, error: e.error }));
  }

  reset(): void {
    this.heap.length = 0;
    this.index.clear();
    this.totalCount = 0;
  }

  private siftUp(i: number): void {
    const heap = this.heap;
    const entry = heap[i]!;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const p = heap[parent]!;
      if (p.count <= entry.count) break;
      heap[i] = p;
      p.pos = i;
      i = parent;
    }
    heap[i] = entry;
    entry.pos = i;
  }

  private siftDown(i: number): void {
    const heap = this.heap;
    const n = heap.length;
    const entry = heap[i]!;
    for (;;) {
      let child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && heap[child + 1]!.count < heap[child]!.count) child++;
      const c = heap[child]!;
      if (c.count >= entry.count) break;
      heap[i] = c;
      c.pos = i;
      i = child;
    }
    heap[i] = entry;
    entry.pos = i;
  }
}
