import type { MigrationSide, SidePlace } from './migration-side.js';
import type { CopyCounts } from './key-copier.js';
import type { MemberLink, MigrationMember } from './migration-member.js';
import { encodeError } from '../resp/encode.js';

/**
 * With `workers` > 1 each worker carries its own clients' writes to a migration's target, and one
 * of them — the coordinator, worker 0 — runs the migration itself: the scan, the verifier, the
 * saved state, the cutover. They talk over the supervisor's IPC channel (workers/migration-relay.ts
 * passes the messages on). This file holds the messages and the coordinator's end.
 *
 *   coordinator → members  op        carry | paused | stop | hold | switch | release | status
 *   supervisor  → coord.   sent      how many members an op went to (acks expected)
 *   member      → coord.   ack       an op done (or its error)
 *                          dirty     keys whose copy failed there: the coordinator copies them
 *                          counts    the member's copy counts, every second while it carries
 *                          command   a RESPOOL MIGRATE a member's client sent; answered by reply
 *   coordinator → member   reply     that command's RESP reply
 *
 * IPC between two processes keeps order, and the supervisor passes messages on in the order it
 * got them: a member's dirty keys reach the coordinator before that member's ack of a later hold.
 */
export const MIGRATION_MESSAGE = 'respool:migration';

/** The worker that runs a migration; the others are its members. */
export const COORDINATOR_INDEX = 0;

/** What the coordinator asks of every member. */
export type MemberOp =
  /** Copy every write this worker's clients make from `from` to `to`, each copy confirmed (key-copier.ts). */
  | { op: 'carry'; from: SidePlace; to: SidePlace; maxPayloadBytes: number }
  /** The migration paused (a side failed): written keys are sent to the coordinator rather than copied. */
  | { op: 'paused'; on: boolean }
  /** Carry no more (ABORT, the end of a rollback window); acked once this worker's copies ended. */
  | { op: 'stop' }
  /** Hold writes (reads flow), and ack once this worker's writes in flight and their copies are done. */
  | { op: 'hold'; deadline: number }
  /** Point the main upstreams at `to` (acked once discovered there). */
  | { op: 'switch'; to: SidePlace }
  /** Let writes go. */
  | { op: 'release' }
  /** The coordinator's STATUS, for this worker's status page (not acked). */
  | { op: 'status'; status: MigrationStatus };

export type MigrationStatus = Record<string, string | number | boolean | null>;

/** What a member counts (summed into the coordinator's STATUS). */
export type MemberCounts = CopyCounts & { writesSeen: number };

/** Several processes' counts as one. */
export function sumCounts(all: Iterable<MemberCounts>): MemberCounts {
  const sum: MemberCounts = { copied: 0, mirrored: 0, recopied: 0, deleted: 0, bytes: 0, writesSeen: 0 };
  for (const c of all) for (const k of Object.keys(sum) as Array<keyof MemberCounts>) sum[k] += c[k];
  return sum;
}

export type MigrationMessage = { type: typeof MIGRATION_MESSAGE; from?: number } & (
  | { to: 'members'; kind: 'op'; seq: number; op: MemberOp }
  | { to: number; kind: 'sent'; seq: number; count: number }
  | { to: 'coordinator'; kind: 'ack'; seq: number; error: string | null }
  | { to: 'coordinator'; kind: 'dirty'; keys: Array<[number, string]> }
  | { to: 'coordinator'; kind: 'counts'; counts: MemberCounts & { pid: number } }
  | { to: 'coordinator'; kind: 'command'; id: number; args: string[]; protocol: 2 | 3 }
  | { to: number; kind: 'reply'; id: number; reply: string }
);

export function isMigrationMessage(msg: unknown): msg is MigrationMessage {
  return (msg as { type?: unknown } | null)?.type === MIGRATION_MESSAGE;
}

/** The supervisor's state a worker started later joins (workers/migration-relay.ts): in its environment. */
export interface MigrationJoin {
  /** The carry in force (members only). */
  carry: Extract<MemberOp, { op: 'carry' }> | null;
  /** Where a cutover (or rollback) pointed the main upstreams, if one did. */
  switched: SidePlace | null;
}
export const JOIN_ENV = 'RESPOOL_MIGRATION_JOIN';

export function readJoin(): MigrationJoin {
  const text = process.env[JOIN_ENV];
  if (text === undefined || text === '') return { carry: null, switched: null };
  return JSON.parse(text) as MigrationJoin;
}

/** Sends a message on the IPC channel (process.send), or nowhere outside a worker. */
export type Send = (msg: MigrationMessage) => void;

/**
 * What the coordinator's Migration sees of the other processes, whatever carries the messages
 * (this file's IPC, or the fleet's shared state: fleet-migration.ts).
 */
export interface MemberChannel {
  /** Every member does `op`: their errors (one for those that did not answer within timeoutMs); empty when all did. */
  ask(op: MemberOp, timeoutMs: number): Promise<string[]>;
  /** Every member does `op`; no answer awaited. */
  tell(op: MemberOp): void;
  onDirty(handler: (db: number, key: Buffer) => void): void;
  /** The members' counts, summed. */
  total(): MemberCounts;
  /** A new migration: earlier counts are not its. */
  resetCounts(): void;
  /** Why this process cannot run a migration now (another one runs it), or null. */
  refusal?(): string | null;
  /** The migration's two sides, once known (the fleet's channel reads and writes both around a cutover). */
  sides?(source: MigrationSide, target: MigrationSide): void;
  /** Keys the channel keeps on each side itself (a fleet's shared state): never copied or compared. */
  isOwnKey?(key: Buffer): boolean;
  /** The migration's sides are closed (cut over, aborted): nothing more is written on the other side. */
  ended?(): void;
}

interface Asked {
  expected: number | null;
  acks: number;
  errors: string[];
  done: (errors: string[]) => void;
}

/**
 * The coordinator's end: ops to every member (ask: waits for their acks), their dirty keys and
 * counts, and RESPOOL MIGRATE commands their clients sent.
 */
export class MigrationMembers implements MemberChannel {
  private seq = 0;
  private readonly asked = new Map<number, Asked>();
  private readonly counts = new Map<number, MemberCounts>();
  private dirtyHandler: (db: number, key: Buffer) => void = () => undefined;
  private commandHandler: (args: Buffer[], protocol: 2 | 3) => Promise<Buffer> = async () => Buffer.from('-ERR no migration here\r\n');

  constructor(private readonly send: Send) {}

  /** A message from the supervisor's channel. */
  receive(msg: MigrationMessage): void {
    switch (msg.kind) {
      case 'sent':
      case 'ack': {
        const asked = this.asked.get(msg.seq);
        if (asked === undefined) return;
        if (msg.kind === 'sent') asked.expected = msg.count;
        else {
          asked.acks++;
          if (msg.error !== null) asked.errors.push(`worker ${msg.from ?? '?'}: ${msg.error}`);
        }
        if (asked.expected !== null && asked.acks >= asked.expected) asked.done(asked.errors);
        return;
      }
      case 'dirty':
        for (const [db, key] of msg.keys) this.dirtyHandler(db, Buffer.from(key, 'base64'));
        return;
      case 'counts':
        this.counts.set(msg.counts.pid, msg.counts); // by process: a replaced worker's copies stay counted
        return;
      case 'command': {
        const from = msg.from;
        if (from === undefined) return;
        void this.commandHandler(msg.args.map((a) => Buffer.from(a, 'base64')), msg.protocol).then((reply) =>
          this.send({ type: MIGRATION_MESSAGE, to: from, kind: 'reply', id: msg.id, reply: reply.toString('base64') }),
        );
        return;
      }
      default:
    }
  }

  onDirty(handler: (db: number, key: Buffer) => void): void {
    this.dirtyHandler = handler;
  }

  onCommand(handler: (args: Buffer[], protocol: 2 | 3) => Promise<Buffer>): void {
    this.commandHandler = handler;
  }

  /** Every member does `op`: the members' errors (with a line for those that did not answer within timeoutMs); empty when all did it. */
  ask(op: MemberOp, timeoutMs: number): Promise<string[]> {
    const seq = ++this.seq;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        const asked = this.asked.get(seq);
        if (asked === undefined) return;
        const missing = asked.expected === null ? 'the supervisor' : `${asked.expected - asked.acks} of ${asked.expected} workers`;
        asked.done([...asked.errors, `${missing} did not answer '${op.op}' within ${timeoutMs} ms`]);
      }, timeoutMs);
      this.asked.set(seq, {
        expected: null,
        acks: 0,
        errors: [],
        done: (errors) => {
          clearTimeout(timer);
          this.asked.delete(seq);
          resolve(errors);
        },
      });
      this.send({ type: MIGRATION_MESSAGE, to: 'members', kind: 'op', seq, op });
    });
  }

  /** Every member does `op`; no answer awaited. */
  tell(op: MemberOp): void {
    this.send({ type: MIGRATION_MESSAGE, to: 'members', kind: 'op', seq: 0, op });
  }

  /** The members' counts, summed (their latest report each). */
  total(): MemberCounts {
    return sumCounts(this.counts.values());
  }

  /** A new migration: the counts of an earlier one's carrying are not its. */
  resetCounts(): void {
    this.counts.clear();
  }
}

/** A RESPOOL MIGRATE a client sent to a member waits this long for the coordinator's answer. */
const COMMAND_TIMEOUT_MS = 60_000;

/** A member's end of the IPC channel: the coordinator's ops run on the member and acked; its keys, counts and commands sent. */
export class IpcMemberLink implements MemberLink {
  private nextCommand = 0;
  private readonly commands = new Map<number, (reply: Buffer) => void>();

  constructor(private readonly member: MigrationMember, private readonly send: Send) {
    member.link = this;
  }

  receive(msg: MigrationMessage): void {
    if (msg.kind === 'reply') {
      this.commands.get(msg.id)?.(Buffer.from(msg.reply, 'base64'));
      return;
    }
    if (msg.kind !== 'op') return;
    const seq = msg.seq;
    void this.member.runOp(msg.op).then((error) => {
      if (seq !== 0) this.send({ type: MIGRATION_MESSAGE, to: 'coordinator', kind: 'ack', seq, error });
    });
  }

  dirty(keys: Array<[number, string]>): void {
    this.send({ type: MIGRATION_MESSAGE, to: 'coordinator', kind: 'dirty', keys });
  }

  counts(counts: MemberCounts & { pid: number }): void {
    this.send({ type: MIGRATION_MESSAGE, to: 'coordinator', kind: 'counts', counts });
  }

  command(args: readonly Buffer[], protocol: 2 | 3): Promise<Buffer> {
    const id = ++this.nextCommand;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.commands.delete(id);
        resolve(encodeError(`ERR respool: the migration's coordinator (worker 0) did not answer within ${COMMAND_TIMEOUT_MS} ms`));
      }, COMMAND_TIMEOUT_MS);
      this.commands.set(id, (reply) => {
        clearTimeout(timer);
        this.commands.delete(id);
        resolve(reply);
      });
      this.send({ type: MIGRATION_MESSAGE, to: 'coordinator', kind: 'command', id, args: args.map((a) => a.toString('base64')), protocol });
    });
  }
}
