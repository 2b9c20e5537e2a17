import type { Handler, HandlerSession } from '../client/handler-session.js';
import { keyed } from './keyed.js';
import { latencyEvents } from './latency-events.js';
import { wait } from './wait.js';
import { scriptExistsReply } from '../scripts/script-cache.js';
import type { CallOwner } from '../routing/upstream-call.js';
import { configSet, isWellFormedConfigSet } from './config-set.js';
import { configSetHere, setWhereUnchanged } from './node-settings.js';
import { asRespoolClient, nodeCall } from '../routing/internal-call.js';
import { fanOutTargets } from '../routing/fan-out.js';
import { encodeCommand } from '../resp/encode.js';

/** CONFIG SET of per-node settings only: answered once every node was asked whether it has those values already. */
function setPerNode(session: HandlerSession, pairs: Array<[string, Buffer]>): void {
  const ctx = session.ctx;
  session.runExclusive(() => {
    const entry = session.reserve();
    const topology = ctx.router.topology();
    const spec = ctx.commands().get('config|set');
    const targets = topology === null || spec === undefined ? [] : fanOutTargets(spec, topology);
    const client = asRespoolClient(entry.client);
    const get = (name: string) => Promise.all(targets.map((t) => nodeCall(ctx.router, client, t.node, t.role, encodeCommand(['CONFIG', 'GET', name]), 'config|get')));
    void setWhereUnchanged(pairs, get).then((reply) => entry.fill(reply));
  });
}

/** CONFIG SET of extended-redis-compatibility: the nodes' HELLO names them otherwise from now on. */
function renamesServer(args: readonly Buffer[]): boolean {
  for (let i = 2; i < args.length; i += 2) if (args[i]!.toString('latin1').toLowerCase() === 'extended-redis-compatibility') return true;
  return false;
}

const FUNCTION_CHANGES: ReadonlySet<string> = new Set(['function|load', 'function|delete', 'function|flush', 'function|restore']);

/**
 * Commands that speak for the whole data set (DBSIZE, KEYS, FLUSHALL, SCAN, SCRIPT LOAD, …): in
 * cluster mode every shard (or node) answers and routing/fan-out.ts merges the replies; against a
 * standalone server they are ordinary keyless commands. CONFIG SET: all or nothing (config-set.ts);
 * WAIT / WAITAOF: on the client's own links (wait.ts).
 */
export const allShards: Handler = (session, req) => {
  const ctx = session.ctx;
  if (req.command === 'wait' || req.command === 'waitaof') return wait(session, req);
  if (FUNCTION_CHANGES.has(req.command)) ctx.functions?.forget(); // CLIENT PAUSE asks the nodes again (scripts/function-flags.ts)
  if (req.command === 'config|resetstat' && req.args.length === 2) ctx.observer?.commands.reset(); // LATENCY HISTOGRAM starts over, as on Valkey
  if (req.command === 'config|set') {
    // a node's port, files, identity: never half-applied; respool's own log settings: set here (node-settings.ts)
    const reply = configSetHere(session, req.args);
    if (Buffer.isBuffer(reply)) {
      // slowlog-log-slower-than 0: the +OK once the nodes' scripts are followed (client/script-commands.ts), so the next script's commands are logged
      const followed = ctx.scriptCommands?.sync() ?? null;
      if (followed === null) return session.replyNow(reply);
      const entry = session.reserve();
      return void followed.then(() => entry.fill(reply));
    }
    if (reply !== null) return setPerNode(session, reply.perNode);
    if (renamesServer(req.args)) {
      // HELLO's server name follows (client/hello-identity.ts): asked once this CONFIG SET was answered.
      ctx.hello?.stale();
      if (!ctx.isCluster()) return session.runExclusive(() => keyed(session, req));
    }
  }
  if (!ctx.isCluster() || req.spec === undefined) return keyed(session, req);
  if (req.command === 'latency|reset' && latencyEvents(session, req)) return; // events named with their node reset there only
  if (req.command === 'config|set' && isWellFormedConfigSet(req)) return configSet(session, req, req.spec);
  const entry = session.reserve();
  let owner: CallOwner = entry;
  if (req.command === 'script|exists') {
    const shas = req.args.slice(2).map((a) => Buffer.from(a));
    owner = { client: entry.client, onCallDone: (reply) => entry.fill(scriptExistsReply(ctx.scripts, shas, reply)) };
  }
  const error = ctx.router.send({ to: 'all-nodes', owner, request: { raw: req.raw, args: req.args, spec: req.spec, command: req.command } });
  if (error !== null) entry.fill(error);
};
