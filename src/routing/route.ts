import type { CommandSpec, CommandTable } from '../commands/command-table.js';
import type { ClusterNode } from '../cluster/topology.js';
import type { LinkRequest } from '../upstream/link.js';
import type { SplitCommand } from './split-command.js';
import type { CallClient, CallFactory, CallOwner, UpstreamCall } from './upstream-call.js';

/** A client's command as the router reads it: its bytes, its arguments (for the keys) and its table entry. */
export interface RoutedRequest {
  readonly raw: Buffer;
  readonly args: Buffer[];
  readonly spec: CommandSpec | undefined;
  /** The command's lower-case name (`config|get` for a subcommand): counters and the slow log. */
  readonly command: string;
}

/** Requests that run back to back on one connection (a MULTI … EXEC block), each with its own reply's owner. */
export type BlockItems = ReadonlyArray<{ readonly data: Buffer; readonly req: LinkRequest }>;

/**
 * Where a request goes — the one argument of Router.send, the only way to a node's links. Each
 * kind names its destination; the router answers where it is now (topology, read strategy,
 * hot-key hook) and what happens when the node says "not here" or "not now".
 *
 *   keys      the node its keys' slot maps to (keyless: any primary); read-only ones follow the
 *             read strategy; keyed ones are offered to the hot-key hook first. Keys in several
 *             slots: CROSSSLOT. `makeCall`: a subclass of UpstreamCall for the request (EVALSHA).
 *   slots     parts [from, until) of a command split by slot: each part to its slot's primary,
 *             the parts for one node as one write (split-command.ts).
 *   all-nodes every primary (or every node) of a command that speaks for the whole data set
 *             (DBSIZE, KEYS, SCAN …), replies merged (fan-out.ts).
 *   node      one named node, pinned: neither redirected nor retried (fan-out children, INFO).
 *   call      a call built by its owner (hot-key copies, respool's own calls) to its slot's node;
 *             finished with the error when it cannot leave.
 *   block     a MULTI … EXEC block on the client's shared link to `node`, one write, never retried
 *             (transaction-block.ts follows its redirects); `ask`: to a migration's target, ASKING first.
 */
export type Route =
  | { readonly to: 'keys'; readonly owner: CallOwner; readonly request: RoutedRequest; readonly table: CommandTable; readonly script?: boolean; readonly makeCall?: CallFactory }
  | { readonly to: 'slots'; readonly split: SplitCommand; readonly from: number; readonly until: number }
  | { readonly to: 'all-nodes'; readonly owner: CallOwner; readonly request: RoutedRequest & { readonly spec: CommandSpec } }
  | { readonly to: 'node'; readonly owner: CallOwner; readonly raw: Buffer; readonly command: string; readonly node: ClusterNode; readonly role: 'primary' | 'replica'; readonly index?: number }
  | { readonly to: 'call'; readonly call: UpstreamCall }
  | { readonly to: 'block'; readonly client: CallClient; readonly items: BlockItems; readonly node: ClusterNode }
  | { readonly to: 'block'; readonly client: CallClient; readonly items: BlockItems; readonly ask: { readonly host: string; readonly port: number } };
