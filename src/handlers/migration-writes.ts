import { CommandFlag } from '../commands/command-flags.js';
import type { CommandFamily } from '../commands/proxy-handling.js';
import type { CommandRequest, HandlerSession } from '../client/handler-session.js';
import type { ClientState } from '../client/client-state.js';
import { encodeError } from '../resp/encode.js';
import { ProxyError } from '../errors.js';

/** What carries writes in this process: the migration itself (migration/migration.ts) or a worker's part of it (migration-member.ts). */
interface WriteCarrier {
  readonly carriesWrites: boolean;
  writeBegan(): void;
  writeEnded(): void;
  written(db: number, keys: readonly Buffer[]): void;
}

// Where client writes meet a live migration (src/migration): handlers/index.ts asks
// noteMigrationWrite for every request that reaches a family's handler or MULTI's queue. Each
// write's keys are copied to the target once the source answered it (migration/key-copier.ts says
// why that loses no write).

/** Writes to every key of a database: refused while a migration carries writes (their keys are not known one by one). */
const WHOLE_KEYSPACE: ReadonlySet<string> = new Set(['flushall', 'flushdb', 'swapdb']);
/** Scripts and functions that may write their declared keys (their read-only forms may not). */
const SCRIPTS: ReadonlySet<string> = new Set(['eval', 'evalsha', 'fcall']);

/** A database and the keys a write names in it. */
interface WrittenKeys {
  db: number;
  keys: Buffer[];
}

/** Writes queued in a client's MULTI: carried when EXEC's reply is in. */
const queuedInMulti = new WeakMap<ClientState, WrittenKeys[]>();
/** Writes a client sent that have not been answered: carried when the session closes without their replies. */
const unanswered = new WeakMap<ClientState, Set<WrittenKeys>>();

/**
 * A request that may write keys while a migration carries writes: its keys are copied to the
 * target after its reply (inside MULTI: after EXEC's). A flush or SWAPDB is refused (a reply
 * written, true returned): the migration cannot name what it wrote.
 */
export function noteMigrationWrite(session: HandlerSession, req: CommandRequest, family: CommandFamily): boolean {
  const migration = session.ctx.migration;
  if (migration === undefined || !migration.carriesWrites) return false;
  const state = session.state;
  const inMulti = state.transaction !== null || state.lane?.inMulti === true;
  if (req.command === 'exec' || req.command === 'discard' || req.command === 'reset') {
    const queued = queuedInMulti.get(state);
    if (queued === undefined || queued.length === 0) return false;
    queuedInMulti.delete(state);
    if (req.command === 'exec') carryAfterReply(session, queued);
    return false;
  }
  const spec = req.spec;
  if (spec === undefined) return false;
  if (WHOLE_KEYSPACE.has(req.command)) {
    if (state.transaction !== null) state.transaction.dirty = true; // EXEC aborts, as for any refused command
    state.refusedNow = true;
    session.replyNow(encodeError(ProxyError.respool(`${req.command.toUpperCase()} is refused while a migration runs (RESPOOL MIGRATE STATUS; ABORT or CUTOVER first)`)));
    return true;
  }
  if ((spec.flags & CommandFlag.WRITE) === 0 && !(family === 'script' && SCRIPTS.has(req.command))) return false;
  const indexes = session.ctx.commands().keyIndexes(spec, req.args);
  if (indexes.length === 0) return false;
  const written: WrittenKeys[] = [{ db: state.db, keys: indexes.map((i) => Buffer.from(req.args[i]!)) }];
  const otherDb = destinationDb(req);
  if (otherDb !== null) written.push({ db: otherDb.db, keys: [Buffer.from(req.args[otherDb.keyAt]!)] });
  if (inMulti) {
    const queued = queuedInMulti.get(state) ?? [];
    queued.push(...written);
    queuedInMulti.set(state, queued);
  } else carryAfterReply(session, written, (spec.flags & CommandFlag.BLOCKING) === 0);
  return false;
}

/** MOVE key db, and COPY src dst DB n: the key they write in another database. */
function destinationDb(req: CommandRequest): { db: number; keyAt: number } | null {
  const args = req.args;
  if (req.command === 'move' && args.length === 3) return asDb(args[2]!, 1);
  if (req.command === 'copy') {
    for (let i = 3; i + 1 < args.length; i++) if (args[i]!.toString('latin1').toLowerCase() === 'db') return asDb(args[i + 1]!, 2);
  }
  return null;
}

function asDb(arg: Buffer, keyAt: number): { db: number; keyAt: number } | null {
  const db = Number(arg.toString('latin1'));
  return Number.isSafeInteger(db) && db >= 0 ? { db, keyAt } : null;
}

/**
 * Carries the write's keys once its reply is in, or once the session closed without it. Counted
 * in flight (the cutover waits for it) unless it may block: a BLPOP may wait for ever; the cutover
 * closes the source connection it waits on instead (migration.ts).
 */
function carryAfterReply(session: HandlerSession, written: WrittenKeys[], counted = true): void {
  const migration = session.ctx.migration!;
  const state = session.state;
  let pending = unanswered.get(state);
  if (pending === undefined) {
    const set = (pending = new Set());
    unanswered.set(state, set);
    session.onClose(() => {
      for (const w of set) carry(migration, w);
      set.clear();
    });
  }
  for (const w of written) {
    pending.add(w);
    if (counted) {
      migration.writeBegan();
      inFlight.add(w);
    }
  }
  const open = pending;
  session.afterNextReply(() => {
    for (const w of written) if (open.delete(w)) carry(migration, w);
  });
}

/** The writes counted in flight (writeBegan) and not ended yet. */
const inFlight = new WeakSet<WrittenKeys>();

/** A write answered (or whose session ended first: it may have been run): its keys are copied. */
function carry(migration: WriteCarrier, w: WrittenKeys): void {
  migration.written(w.db, w.keys);
  if (inFlight.delete(w)) migration.writeEnded();
}
