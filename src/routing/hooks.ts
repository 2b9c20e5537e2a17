import type { CommandSpec } from '../commands/command-table.js';
import type { CallOwner } from './upstream-call.js';

/**
 * The hook the router offers keyed calls to before sending them (src/hotkeys implements it:
 * sampling for detection, and split-key reads and writes). The router defines it so that it never
 * imports hotkeys/. Every keyed call goes through it, including each part of a split command.
 */
export interface KeyedRouteHook {
  /**
   * All of `keys` (indexes into args) hash to `slot`. Returns null to let the router send the call
   * unchanged, an error reply to refuse it, or true when the hook sent its own calls and will
   * complete `owner` itself.
   */
  route(owner: CallOwner, raw: Buffer, args: Buffer[], spec: CommandSpec, keys: number[], slot: number, command: string, isScript: boolean): Buffer | true | null;
  /**
   * A part of a command split by slot (routing/split-command.ts), before it is sent with the
   * other parts for its node: its keys are args[keys[order[i]]] for i in [from, to), all in
   * `slot`. True when route() would let it go unchanged — it is then recorded as route() records
   * a call (detection sampling); false when it must go through route() (nothing recorded yet).
   */
  passPart(args: readonly Buffer[], keys: readonly number[], order: Int32Array, from: number, to: number, slot: number, spec: CommandSpec): boolean;
  /**
   * A keyed command queued inside MULTI runs as it is, on one node, at EXEC: the error text that
   * refuses it when the hook could not apply its rules there (a split key), else null. `why`:
   * the reason given instead of a transaction's (a store or move over several slots also writes
   * the key on one node, handlers/cross-slot/dispatch.ts).
   */
  refuseInTransaction(args: Buffer[], keys: number[], slot: number, command: string, why?: string): string | null;
}
