/**
 * A request's exact bytes with a namespace put before some of its arguments (its keys), made in
 * one walk over the request's "$<len>\r\n" headers into one new buffer: no argument views, no
 * argument array, no re-encoding. The rewriting's hot path for a namespace (request-names.ts):
 * a GET or SET as a namespaced user otherwise paid views of every argument, a copy of the
 * argument list, a Buffer.concat per key and encodeCommand — about a quarter more CPU per
 * request than a plain GET at pipeline 16 (docs/key-names.md "Cost").
 *
 *   *3\r\n $3\r\nSET\r\n $3\r\nkey\r\n $1\r\nv\r\n        keys [1], prefix "a:"
 *   *3\r\n $3\r\nSET\r\n $5\r\na:key\r\n $1\r\nv\r\n
 */

const CR = 0x0d;
const D0 = 0x30;
/** Keys one request may rename here; a request with more takes the general path (naming-plan.ts). */
export const MAX_PREFIXED_KEYS = 32;
/** Per key renamed: where its header starts, where its bytes start, how long they are (reused: one request at a time). */
const found = new Int32Array(MAX_PREFIXED_KEYS * 3);
/** Segments at most this long are copied byte by byte: Buffer.copy costs more than that in calls and views. */
const LOOP_COPY = 64;

/**
 * `raw` (a multibulk request the framer checked) with `prefix` before each argument whose index is
 * in `keys` (ascending, at most MAX_PREFIXED_KEYS, every one below the argument count); null when
 * a key would then be longer than `maxLength` (the nodes' proto-max-bulk-len).
 */
export function prefixedRequest(raw: Buffer, keys: readonly number[], prefix: Buffer, maxLength: number): Buffer | null {
  const n = keys.length;
  let p = 1;
  while (raw[p] !== CR) p++;
  p += 2; // past "*<argc>\r\n"
  let extra = 0;
  for (let arg = 0, k = 0; k < n; arg++) {
    const header = p;
    let len = 0;
    for (p++; raw[p] !== CR; p++) len = len * 10 + raw[p]! - D0;
    p += 2;
    if (arg === keys[k]) {
      if (len + prefix.length > maxLength) return null;
      found[k * 3] = header;
      found[k * 3 + 1] = p;
      found[k * 3 + 2] = len;
      extra += prefix.length + decimalDigits(len + prefix.length) - decimalDigits(len);
      k++;
    }
    p += len + 2;
  }
  const out = Buffer.allocUnsafe(raw.length + extra);
  if (n === 1) return oneKeyPrefixed(raw, out, extra, found[0]!, found[2]!, prefix);
  let from = 0;
  let at = 0;
  for (let k = 0; k < n; k++) {
    const header = found[k * 3]!;
    const body = found[k * 3 + 1]!;
    const len = found[k * 3 + 2]!;
    at = copy(raw, from, header, out, at);
    out[at++] = 0x24; // $
    at = writeDecimal(out, at, len + prefix.length);
    out[at++] = CR;
    out[at++] = 0x0a;
    at = copy(prefix, 0, prefix.length, out, at);
    from = body;
  }
  copy(raw, from, raw.length, out, at);
  return out;
}

/** What someArgument asks of each argument it is given: where its bytes lie in `raw`. */
export interface ArgumentTest {
  touches(raw: Buffer, start: number, end: number): boolean;
}

/**
 * Whether `test` holds for some argument whose index is in `keys` (ascending, each below the
 * argument count): the same walk over the headers, no view.
 */
export function someArgument(raw: Buffer, keys: readonly number[], test: ArgumentTest): boolean {
  const n = keys.length;
  let p = 1;
  while (raw[p] !== CR) p++;
  p += 2; // past "*<argc>\r\n"
  for (let arg = 0, k = 0; k < n; arg++) {
    let len = 0;
    for (p++; raw[p] !== CR; p++) len = len * 10 + raw[p]! - D0;
    p += 2;
    if (arg === keys[k]) {
      if (test.touches(raw, p, p + len)) return true;
      k++;
    }
    p += len + 2;
  }
  return false;
}

/**
 * One key (most requests): the whole request copied once, `extra` bytes in — which puts the key
 * and everything after it where they belong — then the bytes before the key's header moved to the
 * front (copyWithin: no view made) and the new header and the prefix written between. A copy of
 * a whole buffer makes no view either, where Node 20's Buffer.copy of a part makes one.
 */
function oneKeyPrefixed(raw: Buffer, out: Buffer, extra: number, header: number, len: number, prefix: Buffer): Buffer {
  out.set(raw, extra); // TypedArray set: no Node Buffer.copy argument checks
  out.copyWithin(0, extra, extra + header);
  let at = header;
  out[at++] = 0x24; // $
  at = writeDecimal(out, at, len + prefix.length);
  out[at++] = CR;
  out[at++] = 0x0a;
  for (let i = 0; i < prefix.length; i++) out[at++] = prefix[i]!;
  return out;
}

/** src[from, to) into dst at `at`; returns the end written. */
function copy(src: Buffer, from: number, to: number, dst: Buffer, at: number): number {
  if (to - from > LOOP_COPY) return at + src.copy(dst, at, from, to);
  for (let i = from; i < to; i++) dst[at++] = src[i]!;
  return at;
}

function decimalDigits(n: number): number {
  let d = 1;
  while (n >= 10) {
    n = Math.floor(n / 10);
    d++;
  }
  return d;
}

function writeDecimal(out: Buffer, at: number, n: number): number {
  const end = at + decimalDigits(n);
  for (let i = end - 1; i >= at; i--) {
    out[i] = D0 + (n % 10);
    n = Math.floor(n / 10);
  }
  return end;
}
