/**
 * Whether two of Valkey's globs (util/glob.ts: `*`, `?`, `[...]`, `\x`) can match one same
 * string. Colocation rules use it at load: two rules with different tags must never claim one
 * key. Each glob is read as a sequence of tokens (a star, or a set of bytes one position may
 * hold), and the pair walks both sequences at once: a star may match nothing (move on) or one
 * more byte (stay); two sets advance together when they share a byte. Reaching both ends is an
 * overlap. Positions are pairs (i, j), so the walk is at most len(a) × len(b) states.
 */
export function globsOverlap(a: Uint8Array, b: Uint8Array): boolean {
  const ta = tokens(a);
  const tb = tokens(b);
  const seen = new Set<number>();
  const width = tb.length + 1;
  const stack: Array<[number, number]> = [[0, 0]];
  while (stack.length > 0) {
    const [i, j] = stack.pop()!;
    const id = i * width + j;
    if (seen.has(id)) continue;
    seen.add(id);
    // Valkey's glob never matches the empty string with a lone star, but two globs that both
    // reach their ends here have matched at least one common byte or are both literally empty.
    if (i === ta.length && j === tb.length) return true;
    const x = ta[i];
    const y = tb[j];
    if (x === STAR) stack.push([i + 1, j]);
    if (y === STAR) stack.push([i, j + 1]);
    if (x === undefined || y === undefined) continue;
    if (!shareAByte(x, y)) continue;
    stack.push([x === STAR ? i : i + 1, y === STAR ? j : j + 1]);
  }
  return false;
}

const STAR = 'star' as const;
type Token = typeof STAR | Uint8Array; // a set: 256 flags

function shareAByte(x: Token, y: Token): boolean {
  if (x === STAR || y === STAR) return true;
  for (let c = 0; c < 256; c++) if (x[c] === 1 && y[c] === 1) return true;
  return false;
}

function one(byte: number): Uint8Array {
  const set = new Uint8Array(256);
  set[byte] = 1;
  return set;
}

/** The glob's tokens, read as util/glob.ts reads them (an unclosed class runs to the end). */
function tokens(p: Uint8Array): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < p.length) {
    const c = p[i]!;
    if (c === 0x2a /* * */) {
      if (out[out.length - 1] !== STAR) out.push(STAR);
      i++;
    } else if (c === 0x3f /* ? */) {
      out.push(new Uint8Array(256).fill(1));
      i++;
    } else if (c === 0x5b /* [ */) {
      i++;
      const not = p[i] === 0x5e; /* ^ */
      if (not) i++;
      const set = new Uint8Array(256);
      while (i < p.length && p[i] !== 0x5d /* ] */) {
        if (p[i] === 0x5c /* \ */ && i + 1 < p.length) {
          set[p[i + 1]!] = 1;
          i += 2;
        } else if (i + 2 < p.length && p[i + 1] === 0x2d /* - */) {
          let lo = p[i]!;
          let hi = p[i + 2]!;
          if (lo > hi) [lo, hi] = [hi, lo];
          for (let b = lo; b <= hi; b++) set[b] = 1;
          i += 3;
        } else {
          set[p[i]!] = 1;
          i++;
        }
      }
      i++; // the closing ]
      if (not) for (let b = 0; b < 256; b++) set[b] = set[b] === 1 ? 0 : 1;
      out.push(set);
    } else if (c === 0x5c /* \ */ && i + 1 < p.length) {
      out.push(one(p[i + 1]!));
      i += 2;
    } else {
      out.push(one(c));
      i++;
    }
  }
  return out;
}

/** `text` as a glob that matches exactly it (Valkey's special bytes escaped). */
export function escapeGlob(text: Buffer): Buffer {
  const out: number[] = [];
  for (const c of text) {
    if (c === 0x2a || c === 0x3f || c === 0x5b || c === 0x5d || c === 0x5c) out.push(0x5c);
    out.push(c);
  }
  return Buffer.from(out);
}
