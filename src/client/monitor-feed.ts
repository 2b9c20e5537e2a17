import { clientAddr, type ListedClient } from './client-address.js';
import { shownArgs } from '../observe/redact.js';
import type { HandlerSession } from './handler-session.js';
import type { ScriptLineRelay } from './script-line-relay.js';

/**
 * MONITOR, answered by respool from what its clients send: each command once, as the client sent
 * it (its case, its arguments, secrets redacted as Valkey does), with the client's own address
 * and database, in Valkey 8.0.1's line format (replicationFeedMonitors):
 *
 *   +1700000000.123456 [0 127.0.0.1:53422] "set" "k" "v"
 *
 * Nothing respool sends on its own (topology refreshes, INFO for a client's INFO, MULTI … EXEC
 * blocks, replicas' copies of writes) appears, since no node is monitored. Valkey's rules for
 * what is shown: not unknown commands or wrong arities (rejected before they run), not commands
 * flagged admin or skip_monitor (CONFIG, MONITOR, …), commands queued in MULTI when EXEC runs
 * them, then EXEC. Commands a script runs on a node ("[0 lua]" lines) are relayed from the nodes'
 * own MONITOR while anyone monitors respool (script-line-relay.ts).
 *
 * Those lines come on another connection than the script's reply, so a client that got the reply
 * could send its next command, and see its line, before them. Valkey prints them before the next
 * command's line: while anyone monitors, a script's reply waits until its node's lines are in
 * (scriptLinesIn, asked by handlers/script.ts). A client that pipelines commands after a script
 * may still see their lines before the script's, since each line is fed when its command arrives.
 */
export class MonitorFeed {
  private readonly clients = new Set<HandlerSession>();

  /** `relay`: the nodes' script lines (absent in stand-in contexts: none are shown). */
  constructor(private readonly relay: ScriptLineRelay | null = null) {}

  /** True while someone monitors: the one test every request pays. */
  get active(): boolean {
    return this.clients.size > 0;
  }

  /** `session` monitors from now on; resolves once the nodes' script lines are relayed too. */
  add(session: HandlerSession): Promise<void> {
    this.clients.add(session);
    return this.relay === null ? Promise.resolve() : this.relay.start();
  }

  remove(session: HandlerSession): void {
    if (!this.clients.delete(session)) return;
    if (this.clients.size === 0) this.relay?.stop();
  }

  /** The topology changed: the relay follows its nodes (while anyone monitors, or the slow log follows them: script-commands.ts). */
  topologyChanged(): void {
    void this.relay?.sync();
  }

  /**
   * Resolves once the lines of what the node at `address` ran so far were relayed — at once when
   * nobody monitors, and after SCRIPT_LINES_WAIT_MS at the latest (a node that stopped answering).
   */
  scriptLinesIn(address: string): Promise<void> {
    if (this.relay === null || this.clients.size === 0) return Promise.resolve();
    return this.relay.settleWithin(address);
  }

  /** A line as it is (a node's script line) to every monitoring client. */
  deliver(line: Buffer): void {
    for (const client of this.clients) client.push(line);
  }

  /** One line for `args`, sent by `from`, to every monitoring client. */
  feed(from: HandlerSession, command: string, args: readonly Buffer[]): void {
    const line = monitorLine(from.state.db, clientAddr(from as ListedClient), shownArgs(command, args));
    for (const client of this.clients) client.push(line);
  }
}


/** Valkey's sdscatrepr: quoted, `\\ \" \n \r \t \a \b` escaped, other non-printable bytes as \xHH. */
export function repr(arg: Buffer): string {
  let out = '"';
  for (const c of arg) {
    if (c === 0x5c) out += '\\\\';
    else if (c === 0x22) out += '\\"';
    else if (c === 0x0a) out += '\\n';
    else if (c === 0x0d) out += '\\r';
    else if (c === 0x09) out += '\\t';
    else if (c === 0x07) out += '\\a';
    else if (c === 0x08) out += '\\b';
    else if (c >= 0x20 && c < 0x7f) out += String.fromCharCode(c);
    else out += `\\x${c.toString(16).padStart(2, '0')}`;
  }
  return `${out}"`;
}

/** One MONITOR line, `+<seconds>.<microseconds> [<db> <addr>] "arg" …\r\n`. */
export function monitorLine(db: number, addr: string, args: readonly Buffer[]): Buffer {
  const micros = Math.floor((performance.timeOrigin + performance.now()) * 1000);
  const seconds = Math.floor(micros / 1_000_000);
  return Buffer.from(`+${seconds}.${String(micros % 1_000_000).padStart(6, '0')} [${db} ${addr}] ${args.map(repr).join(' ')}\r\n`, 'latin1');
}
