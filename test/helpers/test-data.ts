/** Small pure helpers shared by tests: reproducible randomness, chunkings, percentiles. */

/** Seeded PRNG (mulberry32), so every failure reproduces from its seed. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The input whole, byte by byte, and split in two at every offset, each with a label. */
export function everySplit(input: Buffer): Array<[string, Buffer[]]> {
  const out: Array<[string, Buffer[]]> = [['whole', [input]]];
  const bytes: Buffer[] = [];
  for (let i = 0; i < input.length; i++) bytes.push(input.subarray(i, i + 1));
  out.push(['byte by byte', bytes]);
  for (let i = 1; i < input.length; i++) out.push([`split at ${i}`, [input.subarray(0, i), input.subarray(i)]]);
  return out;
}

/** The input cut into chunks of 1..maxChunk bytes, sizes drawn from `rand`. */
export function randomChunks(rand: () => number, input: Buffer, maxChunk: number): Buffer[] {
  const chunks: Buffer[] = [];
  for (let i = 0; i < input.length; ) {
    const n = 1 + Math.floor(rand() * maxChunk);
    chunks.push(input.subarray(i, i + n));
    i += n;
  }
  return chunks;
}

/** The p-th percentile (nearest rank) of `xs`. */
export function percentile(xs: number[], p: number): number {
  const a = [...xs].sort((x, y) => x - y);
  return a[Math.min(a.length - 1, Math.max(0, Math.ceil((p / 100) * a.length) - 1))]!;
}
