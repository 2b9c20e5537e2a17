import type { CommandRequest, HandlerSession } from '../client/handler-session.js';
import type { ClusterNode } from '../cluster/topology.js';
import { decodeReply, RespError, type RespValue } from '../resp/decode.js';
import { encodeArray, encodeBulk, encodeCommand, encodeError, encodeInteger, encodeVerbatim } from '../resp/encode.js';
import { nodeCall } from '../routing/internal-call.js';
import { fanOutTargets } from '../routing/fan-out.js';
import type { CallClient } from '../routing/upstream-call.js';

/**
 * Valkey's latency monitor (LATENCY LATEST / HISTORY / DOCTOR / GRAPH / RESET) in a cluster, where
 * each node keeps its own events (expire-cycle, fork, aof-*, eviction-*, command …): every node
 * is asked and the answers are merged, each event named with its node as `<event>@<host:port>`.
 * In front of one standalone server the server answers as it is (no merge, no names changed).
 *
 *   LATEST        every node's rows, named, nodes in the topology's order
 *   HISTORY e@n   that node's history of e; HISTORY e: every node's samples of e, by time
 *   DOCTOR        every node's report, each under a line naming its node
 *   GRAPH e@n     that node's graph; GRAPH e: the first node that has e
 *   RESET [e…]    every node; e@n only on n; the events reset, summed (Valkey's count)
 */
export function latencyEvents(session: HandlerSession, req: CommandRequest): boolean {
  const ctx = session.ctx;
  const topology = ctx.router.topology();
  if (topology === null || topology.mode !== 'cluster' || req.spec === undefined) return false;
  const sub = req.command;
  if (sub !== 'latency|latest' && sub !== 'latency|history' && sub !== 'latency|doctor' && sub !== 'latency|graph' && sub !== 'latency|reset') return false;
  const proto = session.state.protocol;
  const targets = fanOutTargets(req.spec, topology);
  const client: CallClient = { id: session.id, protocol: proto, db: 0, identity: session.identity, closed: false };
  const ask = (node: ClusterNode, role: 'primary' | 'replica', args: ReadonlyArray<string | Buffer>) =>
    nodeCall(ctx.router, client, node, role, encodeCommand(args), sub);
  const entry = session.reserve();
  const eventArg = req.args.length > 2 ? req.args[2]!.toString('utf8') : '';
  const named = splitName(eventArg);
  const pinned = named === null ? null : targets.find((t) => t.node.address === named.node) ?? null;
  const answer = async (): Promise<Buffer> => {
    switch (sub) {
      case 'latency|latest': {
        const replies = await Promise.all(targets.map((t) => ask(t.node, t.role, ['LATENCY', 'LATEST'])));
        const rows: Buffer[] = [];
        for (let i = 0; i < targets.length; i++) {
          const value = decodeReply(replies[i]!);
          if (value instanceof RespError) return replies[i]!;
          for (const row of asArray(value)) {
            const [event, ...numbers] = asArray(row);
            rows.push(encodeArray([encodeBulk(`${text(event)}@${targets[i]!.node.address}`, proto), ...numbers.map((n) => encodeInteger(Number(n)))]));
          }
        }
        return encodeArray(rows);
      }
      case 'latency|history': {
        if (pinned !== null && named !== null) return ask(pinned.node, pinned.role, ['LATENCY', 'HISTORY', named.event]);
        const replies = await Promise.all(targets.map((t) => ask(t.node, t.role, ['LATENCY', 'HISTORY', eventArg])));
        const samples: Array<[number, number]> = [];
        for (const reply of replies) {
          const value = decodeReply(reply);
          if (value instanceof RespError) return reply;
          for (const s of asArray(value)) samples.push(asArray(s).map(Number) as [number, number]);
        }
        samples.sort((a, b) => a[0] - b[0]);
        return encodeArray(samples.map(([time, ms]) => encodeArray([encodeInteger(time), encodeInteger(ms)])));
      }
      case 'latency|doctor': {
        const replies = await Promise.all(targets.map((t) => ask(t.node, t.role, ['LATENCY', 'DOCTOR'])));
        const parts: string[] = [];
        for (let i = 0; i < targets.length; i++) {
          const value = decodeReply(replies[i]!);
          if (value instanceof RespError) return replies[i]!;
          parts.push(`--- ${targets[i]!.node.address} (${targets[i]!.role}) ---\n${text(value)}`);
        }
        return encodeVerbatim(parts.join('\n'), proto);
      }
      case 'latency|graph': {
        if (pinned !== null && named !== null) return ask(pinned.node, pinned.role, ['LATENCY', 'GRAPH', named.event]);
        let first: Buffer | null = null;
        for (const t of targets) {
          const reply = await ask(t.node, t.role, ['LATENCY', 'GRAPH', eventArg]);
          if (reply[0] !== 0x2d /* - */) return reply;
          first ??= reply;
        }
        return first ?? encodeError('ERR No samples available for event');
      }
      default: {
        // RESET: an event named with its node resets there only; the others everywhere.
        const events = req.args.slice(2).map((a) => a.toString('utf8'));
        const perTarget = targets.map((t) => events.filter((e) => splitName(e)?.node === t.node.address || splitName(e) === null).map((e) => splitName(e)?.event ?? e));
        const replies = await Promise.all(targets.map((t, i) => (events.length > 0 && perTarget[i]!.length === 0 ? Promise.resolve(encodeInteger(0)) : ask(t.node, t.role, ['LATENCY', 'RESET', ...perTarget[i]!]))));
        let sum = 0;
        for (const reply of replies) {
          const value = decodeReply(reply);
          if (value instanceof RespError) return reply;
          sum += Number(value);
        }
        return encodeInteger(sum);
      }
    }
  };
  void answer().then((reply) => entry.fill(reply));
  return true;
}

/** `event@host:port` → its parts; null for a plain event name. */
function splitName(name: string): { event: string; node: string } | null {
  const at = name.lastIndexOf('@');
  return at <= 0 || at === name.length - 1 ? null : { event: name.slice(0, at), node: name.slice(at + 1) };
}

function asArray(value: RespValue): RespValue[] {
  return Array.isArray(value) ? value : [];
}

function text(value: RespValue | undefined): string {
  return value === undefined ? '' : Buffer.isBuffer(value) ? value.toString('utf8') : String(value);
}
