/**
 * FUNCTION DUMP's payload, read and written, so a namespace can have a dump of its own libraries
 * (handlers/namespace-functions.ts): the node's dump holds every namespace's. The format is
 * Valkey's (functions.c functionDumpCommand, cluster.c verifyDumpPayload):
 *
 *   ( 0xF5 RDB_OPCODE_FUNCTION2, an RDB string: the library's code )*  rdb version (2 bytes LE)  CRC-64 of all before (8 bytes LE)
 *
 * An RDB string is a length (6, 14, 32 or 64 bits) and its bytes, or an integer, or LZF-compressed
 * bytes (Valkey compresses codes longer than 20 bytes when rdbcompression is on). Written here
 * uncompressed, which every server reads.
 */

const OPCODE_FUNCTION2 = 0xf5;
const OPCODE_FUNCTION_PRE_GA = 0xf6;

/** The payload of `codes` for a server of RDB version `rdbVersion`. */
export function functionPayload(codes: readonly Buffer[], rdbVersion: number): Buffer {
  const parts: Buffer[] = [];
  for (const code of codes) parts.push(Buffer.from([OPCODE_FUNCTION2]), rdbLength(code.length), code);
  parts.push(Buffer.from([rdbVersion & 0xff, (rdbVersion >> 8) & 0xff]));
  const body = Buffer.concat(parts);
  const crc = Buffer.alloc(8);
  crc.writeBigUInt64LE(crc64(body));
  return Buffer.concat([body, crc]);
}

/** The RDB version in a payload's footer, or null when it has none. */
export function payloadVersion(payload: Buffer): number | null {
  return payload.length < 10 ? null : payload.readUInt16LE(payload.length - 10);
}

/**
 * The library codes in a payload, or Valkey's error for it: `DUMP payload version or checksum
 * are wrong` (shorter than a footer, newer than the node's `rdbVersion`, bad CRC), or what its
 * content is not.
 */
export function libraryCodes(payload: Buffer, rdbVersion: number): Buffer[] | string {
  const version = payloadVersion(payload);
  if (version === null || version > rdbVersion) return 'DUMP payload version or checksum are wrong';
  const end = payload.length - 10;
  if (crc64(payload.subarray(0, payload.length - 8)) !== payload.readBigUInt64LE(payload.length - 8)) return 'DUMP payload version or checksum are wrong';
  const codes: Buffer[] = [];
  const at = { pos: 0 };
  try {
    while (at.pos < end) {
      const type = payload[at.pos++]!;
      if (type === OPCODE_FUNCTION_PRE_GA) return 'Pre-GA function format not supported';
      if (type !== OPCODE_FUNCTION2) return 'given type is not a function';
      codes.push(rdbString(payload, at, end));
    }
  } catch {
    return 'failed loading the given functions payload';
  }
  return codes;
}

function rdbLength(n: number): Buffer {
  if (n < 0x40) return Buffer.from([n]);
  if (n < 0x4000) return Buffer.from([0x40 | (n >> 8), n & 0xff]);
  const out = Buffer.alloc(5);
  out[0] = 0x80;
  out.writeUInt32BE(n, 1);
  return out;
}

/** An RDB length, or the special encoding it announces (encoded: true). */
function readLength(b: Buffer, at: { pos: number }, end: number): { value: number; encoded: boolean } {
  if (at.pos >= end) throw new RangeError('truncated');
  const first = b[at.pos++]!;
  const kind = first >> 6;
  if (kind === 0) return { value: first & 0x3f, encoded: false };
  if (kind === 1) return { value: ((first & 0x3f) << 8) | b[at.pos++]!, encoded: false };
  if (kind === 3) return { value: first & 0x3f, encoded: true };
  if (first === 0x80) {
    const v = b.readUInt32BE(at.pos);
    at.pos += 4;
    return { value: v, encoded: false };
  }
  if (first === 0x81) {
    const v = Number(b.readBigUInt64BE(at.pos));
    at.pos += 8;
    return { value: v, encoded: false };
  }
  throw new RangeError('bad length');
}

function rdbString(b: Buffer, at: { pos: number }, end: number): Buffer {
  const { value, encoded } = readLength(b, at, end);
  let out: Buffer;
  if (!encoded) {
    out = Buffer.from(b.subarray(at.pos, at.pos + value));
    at.pos += value;
  } else if (value === 0) {
    out = Buffer.from(String(b.readInt8(at.pos)));
    at.pos += 1;
  } else if (value === 1) {
    out = Buffer.from(String(b.readInt16LE(at.pos)));
    at.pos += 2;
  } else if (value === 2) {
    out = Buffer.from(String(b.readInt32LE(at.pos)));
    at.pos += 4;
  } else if (value === 3) {
    const compressed = readLength(b, at, end).value;
    const length = readLength(b, at, end).value;
    out = lzfDecompress(b.subarray(at.pos, at.pos + compressed), length);
    at.pos += compressed;
  } else {
    throw new RangeError('unknown string encoding');
  }
  if (at.pos > end) throw new RangeError('truncated');
  return out;
}

/** liblzf's decompressor (lzf_d.c), as Valkey's rdbLoadLzfStringObject uses it. */
export function lzfDecompress(input: Buffer, length: number): Buffer {
  const out = Buffer.alloc(length);
  let ip = 0;
  let op = 0;
  while (ip < input.length) {
    let ctrl = input[ip++]!;
    if (ctrl < 32) {
      ctrl++; // a run of literal bytes
      if (op + ctrl > length || ip + ctrl > input.length) throw new RangeError('lzf: overrun');
      input.copy(out, op, ip, ip + ctrl);
      ip += ctrl;
      op += ctrl;
    } else {
      let len = ctrl >> 5; // a back reference
      let ref = op - ((ctrl & 0x1f) << 8) - 1;
      if (len === 7) len += input[ip++]!;
      ref -= input[ip++]!;
      len += 2;
      if (ref < 0 || op + len > length) throw new RangeError('lzf: bad reference');
      for (let i = 0; i < len; i++) out[op++] = out[ref++]!;
    }
  }
  if (op !== length) throw new RangeError('lzf: short');
  return out;
}

/** CRC-64/Jones (reflected, polynomial 0xad93d23594c935a9, no final xor): Valkey's crc64. */
export function crc64(data: Buffer): bigint {
  let crc = 0n;
  for (const byte of data) crc = CRC_TABLE[Number((crc ^ BigInt(byte)) & 0xffn)]! ^ (crc >> 8n);
  return crc;
}

const CRC_TABLE: bigint[] = (() => {
  const poly = 0x95ac9329ac4bc9b5n; // 0xad93d23594c935a9 bit-reversed
  const table: bigint[] = [];
  for (let n = 0; n < 256; n++) {
    let c = BigInt(n);
    for (let k = 0; k < 8; k++) c = c & 1n ? poly ^ (c >> 1n) : c >> 1n;
    table.push(c);
  }
  return table;
})();
