/**
 * A first-in first-out queue with O(1) push and shift (Array#shift is O(n) on long queues).
 *
 *   items: [ consumed … | head → oldest … newest | tail → free … ]
 *   invariant: items[head .. tail) are the live entries, in insertion order.
 *   Emptied, it rewinds to 0 and keeps its array (up to KEEP_SLOTS): a queue that fills and
 *   empties once per request — a reply queue, a link's in-flight queue at pipeline 1 — would
 *   otherwise give its array back (`length = 0`) and allocate a new one on the next push.
 *   The array is allocated on first push (an idle connection's queues hold none), and the
 *   consumed prefix is dropped once it is both large and more than half the array.
 */
const FIRST_SLOTS = 4;
const KEEP_SLOTS = 1024;

export class FifoQueue<T> {
  private items: (T | undefined)[] = [];
  private head = 0;
  private tail = 0;

  get length(): number {
    return this.tail - this.head;
  }

  push(item: T): void {
    const items = this.items;
    if (this.tail < items.length) items[this.tail] = item;
    else if (items.length === 0) (this.items = new Array<T | undefined>(FIRST_SLOTS))[0] = item;
    else items.push(item);
    this.tail++;
  }

  peek(): T | undefined {
    return this.head < this.tail ? this.items[this.head] : undefined;
  }

  shift(): T | undefined {
    if (this.head >= this.tail) return undefined;
    const item = this.items[this.head];
    this.items[this.head] = undefined; // let the GC have it
    this.head++;
    if (this.head === this.tail) {
      this.head = 0;
      this.tail = 0;
      if (this.items.length > KEEP_SLOTS) this.items = [];
    } else if (this.head > KEEP_SLOTS && this.head * 2 > this.tail) {
      this.items = this.items.slice(this.head, this.tail);
      this.tail -= this.head;
      this.head = 0;
    }
    return item;
  }

  /** Removes and returns every entry, oldest first. */
  drain(): T[] {
    const out = this.items.slice(this.head, this.tail) as T[];
    this.items = [];
    this.head = 0;
    this.tail = 0;
    return out;
  }

  *[Symbol.iterator](): IterableIterator<T> {
    for (let i = this.head; i < this.tail; i++) yield this.items[i] as T;
  }
}
