import { repr } from './monitor-feed.js';
import type { ScriptLineRelay, ScriptRun } from './script-line-relay.js';

/**
 * The commands the scripts and functions of respool's clients run on the nodes, for the slow log
 * (Valkey's SLOWLOG logs each one, older than the script's own entry, with the calling client's
 * address and name). respool sees only the EVAL / FCALL it forwards; the node's own MONITOR
 * prints the commands a script runs (`[<db> lua]` lines) right after the script's line. While
 * respool's slow log logs every command (slowlog.thresholdUs 0: the only threshold a command
 * inside a script is known to reach, since respool cannot time it), the nodes are monitored for
 * it (client/script-line-relay.ts follow) and each script call claims its run (take).
 *
 * Which run is whose: a node prints each script's line with the address of the connection that
 * sent it, and runs one connection's commands in order; respool's call knows the link its reply
 * came on (its local address is that address) and the exact arguments it sent. A call takes the
 * oldest run from its link with its arguments — the runs of one link are claimed in the order its
 * replies came, so two identical scripts pipelined on one link are told apart by their order —
 * and drops that link's older unclaimed runs (scripts respool sent on it that no script call
 * claims: those of a MULTI … EXEC). An EVALSHA that respool ran again after SCRIPT LOAD (its node
 * answered NOSCRIPT: that first run ran no command) takes the oldest such run that ran commands. When the node sees other addresses than respool's own
 * sockets (a NAT or TCP relay between them: no run from a link was ever matched on that node), a
 * call takes the oldest run with its arguments from any connection: then two clients' identical
 * scripts running at once on one node may each be given the other's commands.
 */
export class ScriptCommands {
  private following = false;
  /** Nodes where a run was claimed by its link's address: no guessing by arguments alone there. */
  private readonly seenByAddress = new Set<string>();

  constructor(private readonly relay: ScriptLineRelay | null, private readonly config: { readonly slowlog: { readonly thresholdUs: number } }) {}

  /** True while scripts' commands are logged: every command is (threshold 0), and the nodes are followed. */
  get active(): boolean {
    return this.following && this.config.slowlog.thresholdUs === 0;
  }

  /**
   * slowlog.thresholdUs may have changed (CONFIG SET, a reload, the start): the nodes are followed
   * while it is 0. A promise when they just began to be followed (resolved once every node
   * answered MONITOR), else null.
   */
  sync(): Promise<void> | null {
    const want = this.relay !== null && this.config.slowlog.thresholdUs === 0;
    if (want === this.following) return null;
    this.following = want;
    if (!want) this.seenByAddress.clear();
    const followed = this.relay!.follow(want);
    return want ? followed : null;
  }

  /** respool stops: the nodes are no longer followed. */
  close(): void {
    if (!this.following) return;
    this.following = false;
    this.seenByAddress.clear();
    void this.relay?.follow(false);
  }

  /** Resolves once the lines of what the node at `address` ran so far are in: at once when not followed, after SCRIPT_LINES_WAIT_MS at the latest. */
  linesIn(address: string): Promise<void> {
    if (this.relay === null || !this.following) return Promise.resolve();
    return this.relay.settleWithin(address);
  }

  /**
   * The commands of the script that `sent` (its arguments as sent to the node) ran on the node at
   * `address`, on the connection the node knows as `client`, each as its arguments; [] when its
   * run is not found. `ranAgain`: an EVALSHA run again after NOSCRIPT (its first run ran nothing).
   */
  take(address: string, client: string, sent: readonly Buffer[], ranAgain = false): Buffer[][] {
    const runs = this.relay?.runsOn(address) ?? null;
    if (runs === null || runs.length === 0) return [];
    const call = Buffer.from(sent.map(repr).join(' '), 'latin1');
    const fits = (run: ScriptRun) => run.call.equals(call) && (!ranAgain || run.lines.length > 0);
    for (let i = 0; i < runs.length; i++) {
      const run = runs[i]!;
      if (run.client !== client || !fits(run)) continue;
      this.seenByAddress.add(address);
      // this link's older runs: sent by respool, claimed by no script call (a MULTI's) — they go
      for (let j = i; j >= 0; j--) if (runs[j]!.client === client) runs.splice(j, 1);
      return commandsOf(run);
    }
    if (this.seenByAddress.has(address)) return [];
    for (let i = 0; i < runs.length; i++) {
      if (!fits(runs[i]!)) continue;
      return commandsOf(runs.splice(i, 1)[0]!);
    }
    return [];
  }
}

function commandsOf(run: ScriptRun): Buffer[][] {
  const out: Buffer[][] = [];
  for (const line of run.lines) {
    const args = monitorArgs(line);
    if (args !== null && args.length > 0) out.push(args);
  }
  return out;
}

/** A MONITOR line's arguments (`"set" "k" "a\"b\x00"`, Valkey's sdscatrepr) as bytes; null when it does not parse. */
export function monitorArgs(text: Buffer): Buffer[] | null {
  const out: Buffer[] = [];
  let i = 0;
  while (i < text.length) {
    if (text[i] === 0x20) {
      i++;
      continue;
    }
    if (text[i] !== 0x22 /* " */) return null;
    const bytes: number[] = [];
    i++;
    for (;;) {
      if (i >= text.length) return null;
      const c = text[i]!;
      if (c === 0x22) {
        i++;
        break;
      }
      if (c !== 0x5c /* \ */) {
        bytes.push(c);
        i++;
        continue;
      }
      const e = text[i + 1];
      if (e === undefined) return null;
      const simple = ESCAPES[e];
      if (simple !== undefined) {
        bytes.push(simple);
        i += 2;
      } else if (e === 0x78 /* x */ && i + 3 < text.length && isHex(text[i + 2]!) && isHex(text[i + 3]!)) {
        bytes.push(parseInt(String.fromCharCode(text[i + 2]!, text[i + 3]!), 16));
        i += 4;
      } else {
        bytes.push(c);
        i++;
      }
    }
    out.push(Buffer.from(bytes));
  }
  return out;
}

/** sdscatrepr's one-letter escapes, by the letter's byte. */
const ESCAPES: Readonly<Record<number, number>> = {
  0x5c: 0x5c, 0x22: 0x22, 0x6e: 0x0a, 0x72: 0x0d, 0x74: 0x09, 0x61: 0x07, 0x62: 0x08,
};

function isHex(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46);
}
