import { CommandFlag } from '../commands/command-flags.js';
import type { CommandSpec } from '../commands/command-table.js';
import { RequestFrame } from '../resp/request-framer.js';
import type { HandlerSession } from './handler-session.js';

/** A session whose next request CLIENT PAUSE holds back (ClientSession). */
export interface PausedClient {
  /** The pause ended (or loosened): handle the held request, or hold it again. */
  resumeAfterPause(): void;
}

/**
 * CLIENT PAUSE over respool's own clients (Valkey 8.0.1 networking.c pauseClientsByClient,
 * pauseActions, updatePausedActions): one server-wide state that dispatch (handlers/index.ts)
 * consults before each request — one boolean (`active`) on the hot path — and `heldByPause`
 * below, the rule for which request it holds. The session keeps a held request until the end.
 *
 *   pause   : the later end wins; ALL stays ALL when a WRITE pause comes while ALL is in force
 *   end     : a timer at the end time resumes the held clients, in the order they were held
 *   unpause : ends it at once
 */
export class ClientPause {
  /** True while a pause is in force. */
  active = false;
  /** ALL (every command) rather than WRITE (commands that may write or replicate). */
  all = false;
  /** When it ends (Date.now() ms). */
  private end = 0;
  private timer: NodeJS.Timeout | null = null;
  private readonly held = new Set<PausedClient>();
  /** Writes held by respool itself (a migration's cutover, src/migration), apart from any client's pause: CLIENT UNPAUSE does not end it. */
  private ownHold = false;

  /** CLIENT PAUSE `timeoutMs` [WRITE|ALL]. */
  pause(timeoutMs: number, all: boolean): void {
    const now = Date.now();
    if (this.end <= now) this.reset(); // an expired pause leaves nothing behind
    const wasAll = this.all;
    this.all = all || wasAll;
    if (timeoutMs > 0 && now + timeoutMs > this.end) this.end = now + timeoutMs;
    this.active = this.end > now || this.ownHold;
    if (this.end <= now) {
      this.reset();
      return;
    }
    this.schedule();
    // A pause that got less restrictive would re-process the held clients (Valkey); ALL → WRITE never happens here.
  }

  /** Holds writes (as CLIENT PAUSE WRITE) until holdWrites(false), whatever clients pause or unpause meanwhile. */
  holdWrites(on: boolean): void {
    this.ownHold = on;
    if (on) {
      this.active = true;
      return;
    }
    if (this.end <= Date.now()) this.reset();
    this.resumeHeld();
  }

  /** CLIENT UNPAUSE. */
  unpause(): void {
    this.reset();
    this.resumeHeld();
  }

  /** What decides a held request changed (a function's flags learned): each held client asks again, and is held again if it still is. */
  recheck(): void {
    this.resumeHeld();
  }

  hold(client: PausedClient): void {
    this.held.add(client);
  }

  /** The client went away while held. */
  forget(client: PausedClient): void {
    this.held.delete(client);
  }

  private schedule(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = setTimeout(() => this.onTimer(), Math.max(1, this.end - Date.now()));
    this.timer.unref();
  }

  private onTimer(): void {
    this.timer = null;
    if (this.active && Date.now() < this.end) return this.schedule();
    this.reset();
    this.resumeHeld();
  }

  private reset(): void {
    this.active = this.ownHold;
    this.all = false;
    this.end = 0;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  private resumeHeld(): void {
    const held = [...this.held];
    this.held.clear();
    for (const client of held) client.resumeAfterPause();
  }
}

/**
 * Whether CLIENT PAUSE holds this request (called only while a pause is active, for a request
 * admission let through: handlers/admission.ts answers the others at once, as Valkey does). ALL
 * holds everything, WRITE what may write or replicate (EXEC: any queued command that may).
 */
export function heldByPause(session: HandlerSession, spec: CommandSpec, args: readonly Buffer[]): boolean {
  const pause = session.ctx.clientPause;
  if (!pause.active) return false;
  if (pause.all) return true;
  return mayReplicate(session, spec, args);
}

const MAY_WRITE = CommandFlag.WRITE | CommandFlag.MAY_REPLICATE;

/** Commands whose flags a script's shebang replaces (Valkey's evalGetCommandFlags). */
const EVAL_COMMANDS: ReadonlySet<string> = new Set(['eval', 'eval_ro', 'evalsha', 'evalsha_ro']);
/** Commands whose flags a function's replace (Valkey's fcallGetCommandFlags). */
const FCALL_COMMANDS: ReadonlySet<string> = new Set(['fcall', 'fcall_ro']);
/**
 * Valkey flags EVAL, EVALSHA and FCALL may_replicate (their _RO forms not), a flag COMMAND does not
 * show: so a script or function whose flags say nothing is held by a WRITE pause (src/commands/*.json).
 */
const MAY_REPLICATE_SCRIPTS: ReadonlySet<string> = new Set(['eval', 'evalsha', 'fcall']);

function mayReplicate(session: HandlerSession, spec: CommandSpec, args: readonly Buffer[]): boolean {
  if (spec.name === 'exec') {
    const tx = session.state.transaction;
    if (tx === null) return false;
    const table = session.ctx.commands();
    return tx.queued.some((q) => {
      const s = table.get(q.command);
      return s !== undefined && commandMayWrite(session, s, () => new RequestFrame(q.raw).args);
    });
  }
  return commandMayWrite(session, spec, () => args);
}

/** Valkey's getCommandFlags & (WRITE | MAY_REPLICATE): a script's or function's flags in place of the command's. */
function commandMayWrite(session: HandlerSession, spec: CommandSpec, args: () => readonly Buffer[]): boolean {
  if (EVAL_COMMANDS.has(spec.name)) return evalMayWrite(session, spec, args());
  if (FCALL_COMMANDS.has(spec.name)) return fcallMayWrite(session, spec, args());
  return (spec.flags & MAY_WRITE) !== 0;
}

/** A script command whose script says nothing of its flags: the command's own, may_replicate included. */
function baseMayWrite(spec: CommandSpec): boolean {
  return MAY_REPLICATE_SCRIPTS.has(spec.name) || (spec.flags & MAY_WRITE) !== 0;
}

/**
 * FCALL / FCALL_RO: the function's flags replace the command's (Valkey's scriptFlagsToCmdFlags):
 * it writes unless registered no-writes. A function respool does not know (yet) is held as one
 * whose flags say nothing, and its flags are asked for: once known, the held clients ask again.
 */
function fcallMayWrite(session: HandlerSession, spec: CommandSpec, args: readonly Buffer[]): boolean {
  if (args.length < 2) return baseMayWrite(spec);
  const functions = session.ctx.functions;
  // The nodes list a namespaced user's functions under their stored names (keys/function-names.ts).
  const naming = session.state.acl.keyNames?.functions ?? null;
  const name = (naming === null ? args[1]! : naming.storedName(args[1]!)).toString('utf8');
  const flags = functions?.flagsOf(name);
  if (flags === undefined) {
    if (functions !== undefined) {
      const pause = session.ctx.clientPause;
      void functions.refresh().then(() => {
        if (functions.flagsOf(name) !== undefined) pause.recheck();
      });
    }
    return baseMayWrite(spec);
  }
  return !flags.includes('no-writes');
}

/**
 * EVAL's script is its argument; EVALSHA's the body respool remembers for that sha (the node's
 * script cache in Valkey): unknown, the command's own flags decide.
 */
function evalMayWrite(session: HandlerSession, spec: CommandSpec, args: readonly Buffer[]): boolean {
  if (args.length < 2) return baseMayWrite(spec);
  const script = spec.name.startsWith('evalsha')
    ? (args[1]!.length === 40 ? session.ctx.scripts.body(args[1]!.toString('latin1')) : undefined)
    : args[1]!;
  return script === undefined ? baseMayWrite(spec) : scriptMayWrite(spec, script);
}

/**
 * EVAL with a shebang: its flags replace the command's (Valkey's scriptFlagsToCmdFlags), so
 * `#!lua flags=no-writes` neither writes nor replicates; any other shebang writes (EVAL_RO too).
 */
function scriptMayWrite(spec: CommandSpec, script: Buffer): boolean {
  if (script.length < 2 || script[0] !== 0x23 || script[1] !== 0x21) return baseMayWrite(spec);
  const end = script.indexOf(0x0a);
  const line = script.toString('utf8', 2, end < 0 ? script.length : end);
  for (const part of line.trim().split(/\s+/)) {
    if (part.startsWith('flags=') && part.slice(6).split(',').includes('no-writes')) return false;
  }
  return true;
}
