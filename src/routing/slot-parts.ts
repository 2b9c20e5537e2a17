import calculateSlot from 'cluster-key-slot';
import { encodeCommand } from '../resp/encode.js';

/** A part of a multi-key command: its slot, its keys' positions in the client's args, the command over them. */
export interface SlotPart {
  readonly slot: number;
  readonly positions: number[];
  readonly raw: Buffer;
}

/**
 * A multi-key command's keys grouped by slot (slots in the order their first key comes), each
 * group as the same command over its keys (MSET: with their values). For a transaction over
 * several slots (handlers/cross-slot/transaction-split.ts), where each part runs in its slot's block.
 */
export function partsBySlot(command: string, args: readonly Buffer[], keys: readonly number[]): SlotPart[] {
  const width = command === 'mset' ? 2 : 1;
  const bySlot = new Map<number, number[]>();
  for (const k of keys) {
    const slot = calculateSlot(args[k]!);
    let positions = bySlot.get(slot);
    if (positions === undefined) bySlot.set(slot, (positions = []));
    positions.push(k);
  }
  return [...bySlot.entries()].map(([slot, positions]) => {
    const partArgs: Buffer[] = [args[0]!];
    for (const p of positions) for (let w = 0; w < width; w++) partArgs.push(args[p + w]!);
    return { slot, positions, raw: encodeCommand(partArgs) };
  });
}
