/**
 * Valkey's glob (stringmatchlen in util.c, 8.0.1) on bytes, case-sensitive: `*`, `?`, `[abc]`,
 * `[^a-z]`, and `\x` escapes. Works on Buffers so matching a request's key needs no string.
 *
 * Ported with Valkey's guard against patterns built to backtrack (after CVE-2022-36021): once
 * the rest of the pattern after a `*` failed to match at every later position, no earlier `*`
 * tries a longer match either (`skipLongerMatches`), so `*a*a*a*a*a*a*a*b` against 40 `a`s
 * costs a few thousand steps, not seconds; and nesting is capped at 1000 like Valkey.
 */
export function globMatch(pattern: Uint8Array, str: Uint8Array): boolean {
  return matchFrom(pattern, 0, str, 0, { skipLongerMatches: false }, 0);
}

const STAR = 0x2a;
const QUESTION = 0x3f;
const OPEN = 0x5b;
const CLOSE = 0x5d;
const CARET = 0x5e;
const BACKSLASH = 0x5c;
const DASH = 0x2d;

/** A byte of `b` at `i`, or 0 past the end (the C code reads the terminating NUL). */
const at = (b: Uint8Array, i: number): number => (i < b.length ? b[i]! : 0);

function matchFrom(p: Uint8Array, pi: number, s: Uint8Array, si: number, flags: { skipLongerMatches: boolean }, nesting: number): boolean {
  if (nesting > 1000) return false; // protection against abusive patterns, as Valkey
  let plen = p.length - pi;
  let slen = s.length - si;
  while (plen > 0 && slen > 0) {
    switch (p[pi]) {
      case STAR: {
        while (plen > 1 && p[pi + 1] === STAR) {
          pi++;
          plen--;
        }
        if (plen === 1) return true;
        while (slen > 0) {
          if (matchFrom(p, pi + 1, s, si, flags, nesting + 1)) return true;
          if (flags.skipLongerMatches) return false;
          si++;
          slen--;
        }
        // The rest of the pattern matches nowhere in the rest of the string: an earlier `*`
        // matching more could only start it later, so stop every outer `*` too.
        flags.skipLongerMatches = true;
        return false;
      }
      case QUESTION:
        si++;
        slen--;
        break;
      case OPEN: {
        pi++;
        plen--;
        const not = at(p, pi) === CARET;
        if (not) {
          pi++;
          plen--;
        }
        let matched = false;
        const ch = s[si]!;
        for (;;) {
          if (at(p, pi) === BACKSLASH && plen >= 2) {
            pi++;
            plen--;
            if (p[pi] === ch) matched = true;
          } else if (at(p, pi) === CLOSE) {
            break;
          } else if (plen === 0) {
            pi--;
            plen++;
            break;
          } else if (plen >= 3 && p[pi + 1] === DASH) {
            let lo = p[pi]!;
            let hi = p[pi + 2]!;
            if (lo > hi) [lo, hi] = [hi, lo];
            pi += 2;
            plen -= 2;
            if (ch >= lo && ch <= hi) matched = true;
          } else if (p[pi] === ch) {
            matched = true;
          }
          pi++;
          plen--;
        }
        if (not) matched = !matched;
        if (!matched) return false;
        si++;
        slen--;
        break;
      }
      default:
        // `\x` matches x itself; any other byte matches itself.
        if (p[pi] === BACKSLASH && plen >= 2) {
          pi++;
          plen--;
        }
        if (p[pi] !== s[si]) return false;
        si++;
        slen--;
        break;
    }
    pi++;
    plen--;
    if (slen === 0) {
      while (at(p, pi) === STAR) {
        pi++;
        plen--;
      }
      break;
    }
  }
  return plen === 0 && slen === 0;
}
