import { commandMayHaveKeys, type CommandTable } from '../commands/command-table.js';
import { encodeCommand } from '../resp/encode.js';
import { RequestFrame } from '../resp/request-framer.js';
import { namesChannels } from './channel-names.js';
import type { KeyNames } from './key-names.js';

/**
 * One command of a replication stream (SYNC through respool, handlers/replication.ts) as a client
 * with a namespace or colocation rules must see it (key-names.ts): every key argument its key
 * specs name, and PUBLISH's channel, under the client's name; null when a key or the channel is
 * not the client's to see (another namespace's), so the command is left out. Commands without
 * keys (SELECT, MULTI, EXEC, SCRIPT LOAD, FLUSHALL …) pass as they are.
 */
export function clientStreamCommand(names: KeyNames, table: CommandTable, raw: Buffer): Buffer | null {
  const frame = new RequestFrame(raw);
  const spec = table.lookupFrame(frame);
  if (spec === undefined) return raw;
  let args: Buffer[] | null = null;
  const set = (i: number, value: Buffer) => {
    if (args === null) args = [...frame.args];
    args[i] = value;
  };
  if (spec.name === 'publish' || spec.name === 'spublish') {
    const channel = frame.args[1];
    if (channel === undefined) return raw;
    const name = names.clientChannel(channel, false);
    if (name === null) return null;
    if (name !== channel) set(1, name);
  } else if (commandMayHaveKeys(spec) && !namesChannels(spec.name)) {
    for (const i of table.keyIndexes(spec, frame.args)) {
      const stored = frame.args[i]!;
      const name = names.visibleName(stored);
      if (name === null) return null;
      if (name !== stored) set(i, name);
    }
  }
  return args === null ? raw : encodeCommand(args);
}
