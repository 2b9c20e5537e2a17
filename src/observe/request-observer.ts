import { CommandFlag } from '../commands/command-flags.js';
import type { RespoolConfig } from '../config/types.js';
import type { Metrics } from '../metrics/metrics.js';
import type { CommandSpec } from '../commands/command-table.js';
import type { CommandFamily } from '../commands/proxy-handling.js';
import type { RequestFrame } from '../resp/request-framer.js';
import { shownArgs } from './redact.js';
import { CommandLog, cutArgs, type CommandLogEntry, type CommandLogType } from './command-log.js';
import { CommandLatency } from './command-latency.js';

/** What the observer reads of a reply-queue entry once its reply is written (client/reply-queue.ts ReplyEntry). */
export interface ObservedReply {
  /** The request it answers (null: not timed) and its family (dispatch computed it). */
  readonly request: RequestFrame | null;
  readonly family: CommandFamily | null;
  readonly silent: boolean;
  readonly reply: Buffer | null;
  /** The node(s) its call went to and the time there (RESPOOL SLOWLOG's split). */
  readonly node: string;
  readonly upstreamMs: number;
  /** The client that sent it, as `describe` (the constructor's) knows it. */
  readonly client: object;
}

/** Who sent a logged request, as SLOWLOG / COMMANDLOG show it: its address and name. */
export type DescribeClient = (client: object) => { readonly addr: string; readonly name: string };

/**
 * What happens when a request's reply is written (client/reply-queue.ts drainHead, one call per
 * timed entry): its time at respool — from the arrival of the chunk that held it to the write of
 * its reply — goes into its command's histogram (LATENCY HISTOGRAM, INFO latencystats), and the
 * request goes into the slow log when that time reaches slowlog.thresholdUs, into the
 * large-request / large-reply logs when its bytes reach their thresholds (COMMANDLOG), with the
 * node it went to and the time spent there (RESPOOL SLOWLOG).
 *
 * Cost per request: a property read and a histogram record; a log entry (arguments copied and cut)
 * only for a logged request. Not logged as slow: blocking commands (their wait is the client's
 * choice; Valkey logs only their run time) and commands respool does not know.
 */
export class RequestObserver {
  readonly logs: Readonly<Record<CommandLogType, CommandLog>> = {
    slow: new CommandLog(),
    'large-request': new CommandLog(),
    'large-reply': new CommandLog(),
  };

  readonly commands: CommandLatency;

  constructor(
    private readonly config: RespoolConfig,
    private readonly metrics: Metrics | undefined,
    private readonly describe: DescribeClient,
  ) {
    this.commands = new CommandLatency(config.latency.tracking);
  }

  /** respool_slowlog_entries_total{log}: counted as an entry is made. */
  private made(type: CommandLogType, entry: ObservedReply, request: RequestFrame, spec: CommandSpec, value: number): Omit<CommandLogEntry, 'id'> {
    this.metrics?.raw.slowlog_entries_total.labels(type).inc();
    return logEntry(entry, request, spec, value, this.describe);
  }

  /**
   * The commands a script or function of `client` ran on `node` (its MONITOR lines:
   * client/script-commands.ts), each `name` (the command table's, for the redactions) and its
   * arguments: logged as Valkey logs them — each its own entry, before the script's own — while
   * every command is logged (threshold 0). respool cannot time a command inside a script: 0 µs.
   */
  scriptRan(client: object, node: string, commands: ReadonlyArray<{ readonly name: string; readonly args: readonly Buffer[] }>): void {
    const { slowlog } = this.config;
    if (slowlog.thresholdUs !== 0) return;
    for (const command of commands) {
      this.logs.slow.offer(0, 0, slowlog.maxLen, () => {
        this.metrics?.raw.slowlog_entries_total.labels('slow').inc();
        const who = this.describe(client);
        return {
          time: Math.floor(Date.now() / 1000), value: 0, args: cutArgs(shownArgs(command.name, command.args)),
          client: who.addr, clientName: who.name, node, nodeUs: 0,
        };
      });
    }
  }

  requestDone(entry: ObservedReply, ms: number): void {
    const request = entry.request;
    if (request === null) return;
    const spec = request.spec as CommandSpec | undefined;
    if (spec === undefined) return;
    if (this.commands.enabled) this.commands.recordMs(spec, ms);
    const { slowlog, commandlog } = this.config;
    // Valkey logs a blocked command once it was served, with the time it ran — not the time it
    // waited; respool's share of it stands for that (the wait was at the node). EXEC is not
    // logged itself (skip_slowlog): the commands it ran are, each in its place.
    const us = Math.round((entry.family === 'blocking' ? Math.max(0, ms - entry.upstreamMs) : ms) * 1000);
    if (slowlog.thresholdUs >= 0 && us >= slowlog.thresholdUs && (spec.flags & CommandFlag.SKIP_SLOWLOG) === 0) {
      this.logs.slow.offer(us, slowlog.thresholdUs, slowlog.maxLen, () => this.made('slow', entry, request, spec, us));
    }
    if (commandlog.largeRequestBytes >= 0 && request.raw.length >= commandlog.largeRequestBytes) {
      this.logs['large-request'].offer(request.raw.length, commandlog.largeRequestBytes, commandlog.largeRequestMaxLen, () => this.made('large-request', entry, request, spec, request.raw.length));
    }
    const replyBytes = entry.silent || entry.reply === null ? 0 : entry.reply.length;
    if (commandlog.largeReplyBytes >= 0 && replyBytes >= commandlog.largeReplyBytes) {
      this.logs['large-reply'].offer(replyBytes, commandlog.largeReplyBytes, commandlog.largeReplyMaxLen, () => this.made('large-reply', entry, request, spec, replyBytes));
    }
  }
}

function logEntry(entry: ObservedReply, request: RequestFrame, spec: CommandSpec, value: number, describe: DescribeClient): Omit<CommandLogEntry, 'id'> {
  const client = describe(entry.client);
  return {
    time: Math.floor(Date.now() / 1000),
    value,
    args: cutArgs(shownArgs(spec.name, request.args)),
    client: client.addr,
    clientName: client.name,
    node: entry.node,
    nodeUs: Math.round(entry.upstreamMs * 1000),
  };
}
