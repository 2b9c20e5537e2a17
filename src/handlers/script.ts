import { encodeCommand, encodeError } from '../resp/encode.js';
import { ProxyError } from '../errors.js';
import { oneShotCommand, type OneShotOptions } from '../upstream/one-shot.js';
import { nodeCall } from '../routing/internal-call.js';
import { keyed } from './keyed.js';
import { Link, ignoreReply, type LinkRequest } from '../upstream/link.js';
import { UpstreamCall, type CallFactory, type CallOwner } from '../routing/upstream-call.js';
import type { Router } from '../routing/router.js';
import type { ScriptCache } from '../scripts/script-cache.js';
import type { RunningScripts } from '../scripts/running-scripts.js';
import type { Handler, HandlerSession } from '../client/handler-session.js';
import type { MonitorFeed } from '../client/monitor-feed.js';
import type { ScriptCommands } from '../client/script-commands.js';
import type { RequestObserver } from '../observe/request-observer.js';
import type { CommandTable } from '../commands/command-table.js';
import { CommandFlag } from '../commands/command-flags.js';
import { decodeReply } from '../resp/decode.js';
import { CommandCountProbe } from '../scripts/command-count-probe.js';
import type { FramesAround } from '../upstream/link-request.js';

/**
 * EVAL/EVALSHA/FCALL (and the _RO forms): routed by their declared keys like any keyed command
 * (numkeys 0 → any primary; keys in different slots → CROSSSLOT). A script's effects cannot be
 * split, so the hot-key hook refuses scripts that touch a split key. EVALSHA / EVALSHA_RO travel
 * as an EvalShaCall: their bytes unchanged, and a NOSCRIPT for a script respool has seen is
 * answered by loading the script on that node and running the EVALSHA there once more.
 */
export const script: Handler = (session, req) => {
  if (req.command === 'script|kill' || req.command === 'function|kill') return scriptKill(session, req);
  if (req.command === 'function|stats') return functionStats(session, req);
  const entry = session.reserve();
  const ctx = session.ctx;
  const evalsha = (req.command === 'evalsha' || req.command === 'evalsha_ro') && req.args.length >= 3;
  // While anyone monitors, the reply waits for the script's lines (client/monitor-feed.ts); while
  // the slow log logs every command, for them too, and logs them (client/script-commands.ts).
  void ctx.scriptCommands?.sync(); // the threshold set some other way than CONFIG SET (which waits for it): followed from now on
  // What the script runs counts in the client's tot-cmds, as on Valkey, for the clients
  // clients.scriptCommandCounts names (it costs two CLIENT INFO per call: scripts/command-count-probe.ts).
  const state = session.state;
  const counts = ctx.config.clients.scriptCommandCounts;
  const lines: ScriptLines = {
    counted: counts === 'always' || (counts === 'self' && state.readsOwnCount) ? (n) => (state.commandCount += n) : null,
    monitors: ctx.monitors.active ? ctx.monitors : null,
    slowlog: ctx.scriptCommands?.active === true && ctx.observer !== undefined ? { commands: ctx.scriptCommands, observer: ctx.observer, table: ctx.commands() } : null,
  };
  const makeCall = evalsha ? evalShaCall(req.args[1]!, ctx.scripts, ctx.runningScripts, lines) : scriptCall(ctx.runningScripts, lines);
  const error = ctx.router.send({ to: 'keys', owner: entry, request: req, table: ctx.commands(), script: true, makeCall });
  if (error !== null) entry.fill(error);
};

const NOSCRIPT = Buffer.from('-NOSCRIPT');

/** Who waits for the lines of the commands a script runs on its node (null: nobody), and who counts them. */
interface ScriptLines {
  /** The calling client's tot-cmds: told how many commands the script ran (null: not counted). */
  readonly counted: ((n: number) => void) | null;
  /** MONITOR's clients (client/monitor-feed.ts). */
  readonly monitors: MonitorFeed | null;
  /** The slow log, while it logs every command (client/script-commands.ts). */
  readonly slowlog: { readonly commands: ScriptCommands; readonly observer: RequestObserver; readonly table: CommandTable } | null;
}

function scriptCall(running: RunningScripts, lines: ScriptLines): CallFactory {
  return (owner, router, raw, command, slot) => new ScriptCall(owner, router, raw, command, slot, running, lines);
}

function evalShaCall(sha: Buffer, scripts: ScriptCache, running: RunningScripts, lines: ScriptLines): CallFactory {
  return (owner, router, raw, command, slot) => new EvalShaCall(owner, router, raw, command, slot, running, lines, sha, scripts);
}

/**
 * A script call, listed in RunningScripts while in flight (so PING can reflect a busy node).
 * While anyone monitors (`lines.monitors`), its reply waits until the node that ran it relayed
 * the script's lines, so MONITOR shows them before the client's next command. While the slow log
 * logs every command (`lines.slowlog`), its reply waits for them too, and the commands the script
 * ran are logged before the script's own entry (its reply's), as Valkey logs them.
 */
class ScriptCall extends UpstreamCall {
  /** The node whose reply finished it, and the address that node knows its link by. */
  private ranOn: string | null = null;
  private ranFrom = '';
  private finishing = false;
  /** The node's command count read around the last send; `answered`: the script's reply to that send came. */
  private probe: CommandCountProbe | null = null;
  private answered = false;
  /** An EVALSHA run again after NOSCRIPT (EvalShaCall: once only). */
  protected ranAgain = false;

  constructor(owner: CallOwner, router: Router, raw: Buffer, command: string, slot: number, private readonly running: RunningScripts, private readonly lines: ScriptLines) {
    super(owner, router, raw, command, slot);
    running.add(this);
  }

  /**
   * CLIENT INFO right before and after it on its link, so the node's count tells how many commands
   * the script ran. Not for a client whose commands run as its own user on the nodes: that user
   * may not be allowed CLIENT INFO (each refusal would land in the nodes' ACL LOG).
   */
  override around(extra: number): FramesAround | null {
    this.answered = false;
    if (this.lines.counted === null || (this.client.identity !== null && !this.asRespool)) return (this.probe = null);
    this.probe = new CommandCountProbe(extra);
    return this.probe.frames;
  }

  override onReply(frame: Buffer, link: Link): void {
    this.ranOn = link.address;
    this.ranFrom = link.localEndpoint;
    this.answered = true;
    super.onReply(frame, link);
  }

  override finish(reply: Buffer): void {
    if (this.finishing) return;
    this.finishing = true;
    this.running.delete(this);
    // The script's reply came: the count's second reading is right behind it on the link. Any
    // other end (a timeout, a lost link) does not wait for it.
    const probe = this.answered ? this.probe : null;
    if (probe === null || probe.isSettled) return this.finishCounted(reply, probe);
    const copy = Buffer.from(reply); // a view into the link's read buffer
    probe.whenSettled(() => this.finishCounted(copy, probe));
  }

  /** The script's commands counted for its client; then its reply, once MONITOR's or the slow log's lines are in. */
  private finishCounted(reply: Buffer, probe: CommandCountProbe | null): void {
    const ran = probe?.ran ?? null;
    if (ran !== null && ran > 0) this.lines.counted?.(ran);
    const { monitors, slowlog } = this.lines;
    const node = this.ranOn;
    if ((monitors === null && slowlog === null) || node === null) return super.finish(reply);
    const copy = Buffer.from(reply); // a view into the link's read buffer
    // one wait serves both: the slow log's and MONITOR's lines come from the same relay
    const linesIn = slowlog !== null ? slowlog.commands.linesIn(node) : monitors!.scriptLinesIn(node);
    void linesIn.then(() => {
      if (slowlog !== null) this.logCommands(slowlog, node);
      super.finish(copy);
    });
  }

  /** The commands the script ran on `node`, into the slow log (before its own entry, made when its reply is written). */
  private logCommands(slowlog: NonNullable<ScriptLines['slowlog']>, node: string): void {
    let sent: unknown;
    try {
      sent = decodeReply(this.raw);
    } catch {
      return;
    }
    if (!Array.isArray(sent) || !sent.every(Buffer.isBuffer)) return;
    const ran = slowlog.commands.take(node, this.ranFrom, sent as Buffer[], this.ranAgain);
    if (ran.length === 0) return;
    const commands: Array<{ name: string; args: Buffer[] }> = [];
    for (const args of ran) {
      const spec = slowlog.table.lookup(args);
      if (spec !== undefined && (spec.flags & CommandFlag.SKIP_SLOWLOG) !== 0) continue;
      commands.push({ name: spec?.name ?? args[0]!.toString('latin1').toLowerCase(), args });
    }
    slowlog.observer.scriptRan(this.client, node, commands);
  }
}

/**
 * An EVALSHA whose node answered NOSCRIPT (it lost its script cache: a promoted replica, a
 * restart, SCRIPT FLUSH on that node). When respool knows the script's body (ScriptCache), it
 * sends SCRIPT LOAD and the EVALSHA again, back to back on the link that answered, so the client
 * never sees NOSCRIPT for a script respool has seen; once only (a second NOSCRIPT, or a script
 * respool never saw, reaches the client as Valkey's). The second run comes after whatever the
 * client had already sent to that node, as a router retry would.
 */
class EvalShaCall extends ScriptCall {
  constructor(
    owner: CallOwner,
    router: Router,
    raw: Buffer,
    command: string,
    slot: number,
    running: RunningScripts,
    lines: ScriptLines,
    /** The sha argument (a view into `raw`, which the call keeps anyway). */
    private readonly sha: Buffer,
    private readonly scripts: ScriptCache,
  ) {
    super(owner, router, raw, command, slot, running, lines);
  }

  override onReply(frame: Buffer, link: Link): void {
    if (!this.ranAgain && frame.length > NOSCRIPT.length && frame.compare(NOSCRIPT, 0, NOSCRIPT.length, 0, NOSCRIPT.length) === 0 && link instanceof Link) {
      const body = this.scripts.body(this.sha.toString('latin1'));
      if (body !== undefined) {
        this.ranAgain = true;
        link.send(encodeCommand(['SCRIPT', 'LOAD', body]), ignoreReply()) // its failure shows as the EVALSHA's NOSCRIPT;
        const around = this.around(0);
        if (around !== null) link.send(around.before.data, around.before.req);
        link.send(this.raw, this);
        if (around !== null) link.send(around.after.data, around.after.req);
        return;
      }
    }
    super.onReply(frame, link);
  }
}

/**
 * SCRIPT KILL / FUNCTION KILL: to every primary at once, each on a connection of its own (the
 * shared link to a busy node may be the one stuck behind the script), and merged: +OK from the
 * node that was busy; else UNKILLABLE if a node's script already wrote; else Valkey's NOTBUSY.
 */
export const scriptKill: Handler = (session, req) => {
  const ctx = session.ctx;
  const topology = ctx.router.topology();
  if (topology === null) return session.replyNow(encodeError(ProxyError.topologyUnknown()));
  const entry = session.reserve();
  const raw = req.args.map((a) => Buffer.from(a));
  const timeoutMs = ctx.config.timeouts.commandMs;
  ctx.metrics?.commandCounter(req.command).inc();
  Promise.all(
    topology.primaries().map((node) =>
      oneShotCommand({ host: node.host, port: node.port, auth: ctx.config.upstreamAuth, tls: ctx.config.upstreamTls, timeoutMs }, raw).catch((err: Error) => encodeError(err.message)),
    ),
  ).then((replies) => {
    const ok = replies.find((r) => r[0] !== 0x2d);
    const unkillable = replies.find((r) => r.toString('latin1', 1, 11) === 'UNKILLABLE');
    // BUSY: the node runs the other kind (SCRIPT KILL while a function runs, or the reverse).
    const busy = replies.find((r) => r.toString('latin1', 1, 5) === 'BUSY');
    entry.fill(ok ?? unkillable ?? busy ?? replies.find((r) => r.toString('latin1', 1, 8) === 'NOTBUSY') ?? replies[0]!);
  });
};

/** How to reach the node at `address` on a connection of its own (scripts/running-scripts.ts). */
export function oneShotTo(session: HandlerSession, address: string): OneShotOptions {
  const config = session.ctx.config;
  const colon = address.lastIndexOf(':');
  return {
    host: address.slice(0, colon), port: Number(address.slice(colon + 1)),
    auth: config.upstreamAuth, tls: config.upstreamTls, timeoutMs: config.timeouts.commandMs, protocol: session.state.protocol,
  };
}

/**
 * FUNCTION STATS: its `running_script` is what a user asks it for while a function runs long,
 * so then it goes to that node, on a connection of its own (FUNCTION STATS is allowed while
 * busy; the shared link waits behind the script). Otherwise any node answers, as today. For a
 * namespaced user the same node is also asked for the namespace's libraries, which its counts
 * become (keys/function-names.ts clientStats).
 */
const functionStats: Handler = (session, req) => {
  const busy = session.ctx.runningScripts.longRunning()[0];
  const functions = session.state.acl.keyNames?.functions ?? null;
  if (busy === undefined && functions === null) return keyed(session, req);
  const entry = session.reserve();
  const args = req.args.map((a) => Buffer.from(a));
  const router = session.ctx.router;
  const node = router.topology()?.shards[0]?.primary;
  let ask: (command: Buffer[], name: string) => Promise<Buffer>;
  if (busy !== undefined) ask = (command) => oneShotCommand(oneShotTo(session, busy), command).catch((err: Error) => encodeError(err.message));
  else if (node !== undefined) ask = (command, name) => nodeCall(router, entry.client, node, 'primary', encodeCommand(command), name);
  else return entry.fill(encodeError(ProxyError.topologyUnknown()));
  const stats = ask(args, 'function|stats');
  if (functions === null) return void stats.then((reply) => entry.fill(reply));
  const list = ask([Buffer.from('FUNCTION'), Buffer.from('LIST'), Buffer.from('LIBRARYNAME'), Buffer.concat([functions.marker, Buffer.from('*')])], 'function|list');
  void Promise.all([stats, list]).then(([s, l]) => entry.fill(functions.clientStats(s, l)));
};
