import { decodeReply } from '../resp/decode.js';
import { encodeCommand } from '../resp/encode.js';

/**
 * A blocking pop's non-blocking form over one of its keys, and its reply put back into the
 * blocking command's shape — what a parked client is served with (parked-pops.ts). Valkey serves a
 * blocked client from the key that got data, and counts and propagates the pop it did (LPOP,
 * LMOVE …), not a second BLPOP: so does respool.
 *
 *   BLPOP / BRPOP k… t           LPOP / RPOP key              $v          → [key, v]
 *   BLMOVE src dst wf wt t       LMOVE src dst wf wt          $v          (the same)
 *   BRPOPLPUSH src dst t         RPOPLPUSH src dst            $v          (the same)
 *   BLMPOP t n k… dir [COUNT c]  LMPOP 1 key dir [COUNT c]    [key, […]]  (the same)
 *   BZPOPMIN / BZPOPMAX k… t     ZPOPMIN / ZPOPMAX key        [m, s]      → [key, m, s]
 *   BZMPOP t n k… how [COUNT c]  ZMPOP 1 key how [COUNT c]    [key, […]]  (the same)
 *
 * Nothing popped (nil, RESP3 null, ZPOPMIN's empty array): null.
 */
export interface PopForm {
  command(key: Buffer): Buffer;
  /** The blocking command's reply for `key`'s pop reply (a frame), or null when it popped nothing. */
  reply(frame: Buffer, key: Buffer): Buffer | null;
}

const NON_BLOCKING: Readonly<Record<string, string>> = {
  blpop: 'LPOP', brpop: 'RPOP', blmove: 'LMOVE', brpoplpush: 'RPOPLPUSH', blmpop: 'LMPOP', bzpopmin: 'ZPOPMIN', bzpopmax: 'ZPOPMAX', bzmpop: 'ZMPOP',
};

/** The pops respool knows the non-blocking form of (the ones it parks). */
export const PARKABLE_POPS: ReadonlySet<string> = new Set(Object.keys(NON_BLOCKING));

/** A nil reply: RESP2's null bulk or null array, RESP3's null (a blocking pop that popped nothing, or timed out). */
export function isNilReply(frame: Buffer): boolean {
  if (frame.length === 3) return frame[0] === 0x5f /* _ */;
  return frame.length === 5 && frame[2] === 0x31 /* 1 */ && frame[1] === 0x2d /* - */ && (frame[0] === 0x24 /* $ */ || frame[0] === 0x2a /* * */);
}

/** Nothing popped: nil, or ZPOPMIN's / ZPOPMAX's empty array. */
function popsNothing(frame: Buffer): boolean {
  return isNilReply(frame) || frame.toString('latin1', 0, 4) === '*0\r\n';
}

const bulk = (b: Buffer) => Buffer.concat([Buffer.from(`$${b.length}\r\n`, 'latin1'), b, Buffer.from('\r\n', 'latin1')]);

/** A request's arguments (views into `raw`, a RESP array of bulk strings). */
export function requestArgs(raw: Buffer): Buffer[] {
  const value = decodeReply(raw);
  return Array.isArray(value) ? value.filter((v): v is Buffer => Buffer.isBuffer(v)) : [];
}

/** Where BLMPOP's / BZMPOP's arguments after the keys start (numkeys at index 2, the keys after it). */
function afterKeys(args: readonly Buffer[]): number {
  return 3 + Number(args[2]?.toString('latin1'));
}

/** The form of `command` (lower case) for its arguments `args` (the whole request); null for another command. */
export function popForm(command: string, args: readonly Buffer[]): PopForm | null {
  const name = NON_BLOCKING[command];
  if (name === undefined) return null;
  const kept = (frame: Buffer) => (popsNothing(frame) ? null : frame);
  switch (command) {
    case 'blpop':
    case 'brpop':
      return {
        command: (key) => encodeCommand([name, key]),
        reply: (frame, key) => (popsNothing(frame) || frame[0] !== 0x24 /* $ */ ? (frame[0] === 0x2d ? frame : null) : Buffer.concat([Buffer.from('*2\r\n'), bulk(key), frame])),
      };
    case 'blmove':
      return { command: () => encodeCommand([name, ...args.slice(1, 5)]), reply: kept };
    case 'brpoplpush':
      return { command: () => encodeCommand([name, args[1]!, args[2]!]), reply: kept };
    case 'blmpop':
    case 'bzmpop':
      return { command: (key) => encodeCommand([name, '1', key, ...args.slice(afterKeys(args))]), reply: kept };
    default: // bzpopmin, bzpopmax
      return {
        command: (key) => encodeCommand([name, key]),
        reply: (frame, key) => {
          if (frame[0] === 0x2d) return frame;
          if (popsNothing(frame) || !frame.toString('latin1', 0, 4).startsWith('*2\r\n')) return null;
          return Buffer.concat([Buffer.from('*3\r\n'), bulk(key), frame.subarray(4)]);
        },
      };
  }
}

/** BLMOVE's / BRPOPLPUSH's destination, else null. */
export function moveDestination(command: string, args: readonly Buffer[]): Buffer | null {
  return command === 'blmove' || command === 'brpoplpush' ? (args[2] ?? null) : null;
}

/** Whether a value the pop took came from the left end (BLPOP, BLMPOP … LEFT): a put-back goes there. */
export function popsFromLeft(command: string, args: readonly Buffer[]): boolean {
  return command === 'blpop' || (command === 'blmpop' && args[afterKeys(args)]?.toString('latin1').toLowerCase() === 'left');
}
