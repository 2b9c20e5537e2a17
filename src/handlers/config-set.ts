import type { CommandSpec } from '../commands/command-table.js';
import type { ClusterNode } from '../cluster/topology.js';
import { ProxyError } from '../errors.js';
import { splitAggregate } from '../resp/decode.js';
import { encodeCommand, encodeError } from '../resp/encode.js';
import { fanOutTargets } from '../routing/fan-out.js';
import { errorLine } from '../routing/redirect.js';
import type { Router } from '../routing/router.js';
import { nodeCall } from '../routing/internal-call.js';
import type { CallClient } from '../routing/upstream-call.js';
import type { CommandRequest, HandlerSession } from '../client/handler-session.js';

type Target = { node: ClusterNode; role: 'primary' | 'replica' };

/**
 * CONFIG SET in a cluster: every node (primaries and replicas, request_policy:all_nodes), all or
 * nothing as far as a proxy can make it:
 *
 *   1. CONFIG GET each parameter on every node (its value now). A node that refuses (BUSY, down)
 *      → its error, unchanged, and no node is changed.
 *   2. CONFIG SET on every node (the client's bytes, unchanged).
 *   3. Every node applied it → +OK. None did → the first node's error, unchanged (the same error
 *      one Valkey would give). Some did → CONFIG SET of the values from step 1 on those, and
 *      ProxyError.configSetRolledBack naming the node that refused and its error.
 *
 * A lane switch (runExclusive): the client's next commands wait for the answer, so they run under
 * the configuration it reports. A parameter that is unknown (or a pattern) on some node is not
 * snapshotted: CONFIG SET then goes to every node as a plain fan-out, and Valkey's own error
 * comes back. Another client's CONFIG SET between steps 1 and 3 may be overwritten by a restore.
 */
export function configSet(session: HandlerSession, req: CommandRequest, spec: CommandSpec): void {
  const ctx = session.ctx;
  const router = ctx.router;
  const args = req.args.map((a) => Buffer.from(a));
  const raw = Buffer.from(req.raw);
  session.runExclusive(() => {
    const entry = session.reserve();
    const topology = router.topology();
    if (topology === null) return entry.fill(encodeError(ProxyError.topologyUnknown()));
    const targets = fanOutTargets(spec, topology);
    // Control-plane calls on RESP2 links, in the client's link affinity.
    const client: CallClient = { id: entry.client.id, protocol: 2, db: 0, identity: entry.client.identity, closed: false };
    run(router, client, targets, args, raw).then(
      (reply) => {
        if (reply === null) {
          const error = router.send({ to: 'all-nodes', owner: entry, request: { raw, args, spec, command: 'config|set' } });
          if (error !== null) entry.fill(error);
          return;
        }
        ctx.metrics?.commandCounter('config|set').inc();
        entry.fill(reply);
      },
      (err: Error) => entry.fill(encodeError(ProxyError.respool(err.message))),
    );
  });
}

function isError(frame: Buffer): boolean {
  return frame[0] === 0x2d /* - */ || frame[0] === 0x21 /* ! */;
}

/** Valkey 8 has about 250 parameters and aliases; a CONFIG SET naming more repeats one or is unknown. */
const MAX_SNAPSHOT_PARAMETERS = 1024;

/** The reply for the client, or null when the parameters could not be snapshotted (plain fan-out). */
async function run(router: Router, client: CallClient, targets: Target[], args: Buffer[], raw: Buffer): Promise<Buffer | null> {
  const names: Buffer[] = [];
  for (let i = 2; i < args.length; i += 2) names.push(args[i]!);
  // More names than Valkey has parameters: some name repeats or is unknown, which every node
  // refuses before changing anything; a plain fan-out gives its own error. Without this, each
  // name would cost a CONFIG GET per node (issue 10: 500,000 names → 1.5 million calls).
  if (names.length > MAX_SNAPSHOT_PARAMETERS) return null;
  // 1. The current values, per node, per parameter.
  const snapshots = await Promise.all(targets.map((t) => Promise.all(names.map((name) => callNode(router, client, t, encodeCommand(['CONFIG', 'GET', name]), 'config|get')))));
  const previous: Buffer[][] = [];
  for (const replies of snapshots) {
    const values: Buffer[] = [];
    for (const reply of replies) {
      if (isError(reply)) return reply; // nothing changed yet: the node's own error
      const pair = splitAggregate(reply);
      if (pair === null || pair.length !== 2 || pair[1]![0] !== 0x24 /* $ */) return null;
      values.push(bulkValue(pair[1]!));
    }
    previous.push(values);
  }
  // 2. The client's CONFIG SET on every node.
  const results = await Promise.all(targets.map((t) => callNode(router, client, t, raw, 'config|set')));
  const failed = results.findIndex(isError);
  if (failed < 0) return results[0]!;
  const applied = targets.map((_, i) => i).filter((i) => !isError(results[i]!));
  if (applied.length === 0) return results[failed]!;
  // 3. Undo it where it was applied.
  const restores = await Promise.all(applied.map((i) => {
    const restore: Buffer[] = [Buffer.from('CONFIG'), Buffer.from('SET')];
    names.forEach((name, p) => restore.push(name, previous[i]![p]!));
    return callNode(router, client, targets[i]!, encodeCommand(restore), 'config|set');
  }));
  const unrestored = applied
    .map((i, k) => (isError(restores[k]!) ? `${targets[i]!.node.address} (${errorLine(restores[k]!)})` : ''))
    .filter((s) => s !== '')
    .join(', ');
  return encodeError(ProxyError.configSetRolledBack(targets[failed]!.node.address, errorLine(results[failed]!), unrestored));
}

/** The contents of a complete bulk-string frame ($<n>\r\n<bytes>\r\n). */
function bulkValue(frame: Buffer): Buffer {
  const start = frame.indexOf(0x0a) + 1;
  return frame.subarray(start, frame.length - 2);
}

/** One command to one node (pinned: not redirected, not retried); its reply, copied. */
function callNode(router: Router, client: CallClient, target: Target, raw: Buffer, command: string): Promise<Buffer> {
  return nodeCall(router, client, target.node, target.role, raw, command);
}

/** True for a CONFIG SET that names at least one parameter and a value for each. */
export function isWellFormedConfigSet(req: CommandRequest): boolean {
  return req.args.length >= 4 && req.args.length % 2 === 0;
}
