import type { CommandRequest, HandlerSession } from '../client/handler-session.js';
import type { ClusterNode } from '../cluster/topology.js';
import type { FunctionNames } from '../keys/function-names.js';
import { functionPayload, libraryCodes, payloadVersion } from '../keys/function-payload.js';
import { bulkPayload } from '../resp/decode.js';
import { encodeBulk, encodeCommand } from '../resp/encode.js';
import { nodeCall } from '../routing/internal-call.js';
import type { CallClient } from '../routing/upstream-call.js';

/** A node's error reply (its text without the leading -), answered to the client as the node gave it. */
class NodeError extends Error {}

/**
 * FUNCTION FLUSH, DUMP and RESTORE of a namespaced user, as one server holding only the
 * namespace's libraries would answer them (keys/function-names.ts names them on the nodes):
 *
 *   FLUSH    the namespace's libraries deleted on every primary (FUNCTION LIST LIBRARYNAME <marker>*, DELETE each)
 *   DUMP     a payload of the namespace's libraries with their code as the client loaded it
 *            (keys/function-payload.ts), in the node's RDB version
 *   RESTORE  the payload's libraries loaded under the namespace on every primary, by its policy:
 *            APPEND (default) refuses when one exists already, REPLACE replaces, FLUSH first
 *            flushes the namespace's
 *
 * Every primary holds the same libraries (FUNCTION LOAD goes to all of them); the first answers
 * for the listing. Run as respool's own client (namespace-scope.ts), after the user's ACL check.
 */
export async function namespaceFunctions(session: HandlerSession, client: CallClient, primaries: ClusterNode[], functions: FunctionNames, req: CommandRequest): Promise<Buffer> {
  const ask = (node: ClusterNode, args: Array<string | Buffer>, name: string) => nodeCall(session.ctx.router, client, node, 'primary', encodeCommand(args), name);
  const first = primaries[0];
  if (first === undefined) return Buffer.from('-ERR respool: no primary known\r\n');
  session.ctx.functions?.forget(); // CLIENT PAUSE asks the nodes again (scripts/function-flags.ts)
  try {
    if (req.command === 'function|flush') {
      await removeLibraries(ask, primaries, functions);
      return Buffer.from('+OK\r\n');
    }
    const nodeDump = bulkPayload(await checked(ask(first, ['FUNCTION', 'DUMP'], 'function|dump')));
    const version = nodeDump === null ? null : payloadVersion(nodeDump); // the node's RDB version, in its own dump's footer
    if (version === null) return Buffer.from('-ERR respool: the node gave no FUNCTION DUMP payload\r\n');
    if (req.command === 'function|dump') {
      const list = await checked(ask(first, ['FUNCTION', 'LIST', 'WITHCODE', 'LIBRARYNAME', pattern(functions)], 'function|list'));
      return encodeBulk(functionPayload(functions.libraryCodes(list), version), 2);
    }
    return await restore(ask, primaries, functions, req, version);
  } catch (e) {
    if (e instanceof NodeError) return Buffer.from(`-${e.message}\r\n`);
    throw e;
  }
}

type Ask = (node: ClusterNode, args: Array<string | Buffer>, name: string) => Promise<Buffer>;

async function restore(ask: Ask, primaries: ClusterNode[], functions: FunctionNames, req: CommandRequest, version: number): Promise<Buffer> {
  const args = req.args;
  if (args.length > 4) return Buffer.from(`-ERR unknown subcommand or wrong number of arguments for '${args[1]!.toString('utf8')}'. Try FUNCTION HELP.\r\n`);
  const policy = args.length === 4 ? args[3]!.toString('latin1').toLowerCase() : 'append';
  if (policy !== 'append' && policy !== 'replace' && policy !== 'flush') {
    return Buffer.from('-ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.\r\n');
  }
  const codes = libraryCodes(args[2]!, version);
  if (typeof codes === 'string') return Buffer.from(`-ERR ${codes}\r\n`);
  if (policy === 'append') {
    const list = await checked(ask(primaries[0]!, ['FUNCTION', 'LIST', 'LIBRARYNAME', pattern(functions)], 'function|list'));
    const loaded = new Set(functions.storedLibraryNames(list).map((n) => functions.clientName(n)!.toString('latin1').toLowerCase()));
    for (const code of codes) {
      const name = libraryNameOf(code);
      if (name !== null && loaded.has(name.toLowerCase())) return Buffer.from(`-ERR Library ${name} already exists\r\n`);
    }
  }
  if (policy === 'flush') await removeLibraries(ask, primaries, functions);
  for (const code of codes) {
    const load = policy === 'append' ? ['FUNCTION', 'LOAD'] : ['FUNCTION', 'LOAD', 'REPLACE'];
    const replies = await Promise.all(primaries.map((node) => ask(node, [...load, functions.storedCode(code)], 'function|load')));
    const error = replies.find((r) => r[0] === 0x2d);
    if (error !== undefined) return functions.clientError(error);
  }
  return Buffer.from('+OK\r\n');
}

/** The library name a code's first line gives (`#!lua name=lib`), or null. */
function libraryNameOf(code: Buffer): string | null {
  const line = code.toString('latin1', 0, Math.max(0, code.indexOf(0x0a)) || code.length);
  return /\bname=([A-Za-z0-9_]+)/.exec(line)?.[1] ?? null;
}

async function removeLibraries(ask: Ask, primaries: ClusterNode[], functions: FunctionNames): Promise<void> {
  await Promise.all(primaries.map(async (node) => {
    const list = await checked(ask(node, ['FUNCTION', 'LIST', 'LIBRARYNAME', pattern(functions)], 'function|list'));
    for (const name of functions.storedLibraryNames(list)) {
      const reply = await ask(node, ['FUNCTION', 'DELETE', name], 'function|delete');
      if (reply[0] === 0x2d && !reply.toString('latin1').includes('not found')) throw new NodeError(reply.toString('latin1', 1).trim());
    }
  }));
}

function pattern(functions: FunctionNames): Buffer {
  return Buffer.concat([functions.marker, Buffer.from('*')]);
}

/** A node's reply, or its error (BUSY, LOADING, NOPERM …) thrown to be answered as the node gave it. */
async function checked(reply: Promise<Buffer>): Promise<Buffer> {
  const r = await reply;
  if (r[0] === 0x2d) throw new NodeError(r.toString('latin1', 1).trim());
  return r;
}
