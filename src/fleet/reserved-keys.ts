import type { CommandSpec, CommandTable } from '../commands/command-table.js';
import { commandMayHaveKeys } from '../commands/command-table.js';
import { FLEET_TAG } from './fleet-store.js';

const TAG = Buffer.from(FLEET_TAG);

/**
 * True when a request names a key under the fleet's own hash tag ({respool-fleet}: the shared
 * state, registrations, fill locks; fleet-store.ts). A client that could write them would change
 * split rules or users for the whole fleet without any permission an operator granted, so
 * respool refuses such requests (handlers/index.ts, only while the fleet's state is in use).
 * The hash tag is the first {…} of the key, as Valkey reads it.
 */
export function touchesFleetKeys(table: CommandTable, spec: CommandSpec, args: readonly Buffer[]): boolean {
  if (!commandMayHaveKeys(spec)) return false;
  for (const i of table.keyIndexes(spec, args)) {
    const key = args[i]!;
    const open = key.indexOf(0x7b /* { */);
    // A key too short to hold the tag after its first '{' (Buffer.compare would throw on the range).
    if (open >= 0 && key.length - open >= TAG.length && key.compare(TAG, 0, TAG.length, open, open + TAG.length) === 0) return true;
  }
  return false;
}
