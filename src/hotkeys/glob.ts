/**
 * Valkey's glob (stringmatchlen in util.c) on bytes, case-sensitive: `*`, `?`, `[abc]`,
 * `[^a-z]`, and `\x` escapes. Works on Buffers so matching a request's key needs no string.
 */
export function globMatch(pattern: Uint8Array, str: Uint8Array): boolean {
  return match(pattern, 0, str, 0, 0);
}

const STAR = 0x2a;
const QUESTION = 0x3f;
const OPEN = 0x5b;
const CLOSE = 0x5d;
const CARET = 0x5e;
const BACKSLASH = 0x5c;
const DASH = 0x2d;

function match(p: Uint8Array, pi: number, s: Uint8Array, si: number, depth: number): boolean {
  if (depth > 1000) return false; // pathological patterns
  while (pi < p.length && si <= s.length) {
    const c = p[pi]!;
    switch (c) {
      case STAR: {
        while (pi + 1 < p.length && p[pi + 1] === STAR) pi++;
        if (pi + 1 === p.length) return true;
        for (let k = si; k <= s.length; k++) {
          if (match(p, pi + 1, s, k, depth + 1)) return true;
        }
        return false;
      }
      case QUESTION:
        if (si >= s.length) return false;
        si++;
        pi++;
        break;
      case OPEN: {
        if (si >= s.length) return false;
        pi++;
        const not = p[pi] === CARET;
        if (not) pi++;
        let matched = false;
        const ch = s[si]!;
        while (pi < p.length && p[pi] !== CLOSE) {
          if (p[pi] === BACKSLASH && pi + 1 < p.length) {
            pi++;
            if (p[pi] === ch) matched = true;
          } else if (pi + 2 < p.length && p[pi + 1] === DASH && p[pi + 2] !== CLOSE) {
            let lo = p[pi]!;
            let hi = p[pi + 2]!;
            if (lo > hi) [lo, hi] = [hi, lo];
            if (ch >= lo && ch <= hi) matched = true;
            pi += 2;
          } else if (p[pi] === ch) {
            matched = true;
          }
          pi++;
        }
        if (not) matched = !matched;
        if (!matched) return false;
        pi++; // past ']' (or the end of an unterminated class)
        si++;
        break;
      }
      default:
        // `\x` matches x itself; any other byte matches itself.
        if (c === BACKSLASH && pi + 1 < p.length) pi++;
        if (si >= s.length || p[pi] !== s[si]) return false;
        pi++;
        si++;
    }
  }
  while (pi < p.length && p[pi] === STAR) pi++;
  return pi === p.length && si === s.length;
}
