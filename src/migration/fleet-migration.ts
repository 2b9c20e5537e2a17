import type { Logger } from 'pino';
import { FLEET_TAG } from '../keys/reserved-tag.js';
import type { FleetState } from '../fleet/fleet-state.js';
import type { FleetStore } from '../fleet/fleet-store.js';
import { encodeBulk, encodeError } from '../resp/encode.js';
import type { Migration } from './migration.js';
import type { MemberLink, MigrationMember } from './migration-member.js';
import { sumCounts, type MemberChannel, type MemberCounts, type MemberOp, type MigrationStatus } from './migration-members.js';
import type { MigrationSide, SidePlace } from './migration-side.js';

/**
 * A live migration in a fleet (cluster.peers / peersFrom with the fleet's shared state): the
 * member that ran START coordinates it, every other member (each worker of each instance) carries
 * its own clients' writes. They meet in the fleet's shared state, in the upstream:
 *
 *   doc.migration                       what every member must be doing (FleetMigrationDoc): the
 *                                       carry, paused, the write hold, where the upstreams point;
 *                                       written by the coordinator (a new seq each time), read by
 *                                       every member at its beat; a member started later joins it
 *   {respool-fleet}:migration-acks      hash: member → { seq done, error, counts }
 *   {respool-fleet}:migration-dirty     list: keys whose copy failed at a member (the coordinator copies them)
 *   {respool-fleet}:migration-status    the coordinator's STATUS (every second, expires)
 *   {respool-fleet}:migration-requests  list: RESPOOL MIGRATE commands members' clients sent
 *   {respool-fleet}:migration-reply:<id> their replies (expire)
 *
 * Around a cutover the members are on two sides at once (each switches when told): the doc is
 * written to the side the coordinator is not on as well, and acks and dirty keys are read on
 * both sides. A member's ack of a doc means it did what the doc says (its writes drained, say).
 */
/**
 * The fleet's keys ({respool-fleet}:…) are never copied or compared: the coordinator writes the
 * state on the target itself (mirrorDoc, at every change), the members register there once they
 * switched — a scan's copy landing after a newer mirror would set the state back (and a request
 * copied to the target would run again there).
 */
const FLEET_KEYS_PREFIX = `${FLEET_TAG}:`;
const ACKS_KEY = `${FLEET_TAG}:migration-acks`;
const DIRTY_KEY = `${FLEET_TAG}:migration-dirty`;
const STATUS_KEY = `${FLEET_TAG}:migration-status`;
const REQUESTS_KEY = `${FLEET_TAG}:migration-requests`;
const REPLY_PREFIX = `${FLEET_TAG}:migration-reply:`;
const STATE_KEY = `${FLEET_TAG}:state`;
const BUS_CHANNEL = `${FLEET_TAG}:bus`;
/** Writes the state unless the side holds a newer version already (two mirrors may land out of order). */
const MIRROR = `
local v = tonumber(redis.call('HGET', KEYS[1], 'version') or '-1')
if v >= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'version', ARGV[1], 'doc', ARGV[2])
return 1`;

/** The coordinator and the members poll their keys this often. */
const POLL_MS = 100;
/** Acks are read this often while the coordinator waits for them. */
const ACK_POLL_MS = 20;
const STATUS_TTL_MS = 5_000;
const REPLY_TTL_MS = 60_000;
const COMMAND_TIMEOUT_MS = 60_000;
const DIRTY_BATCH = 1_000;

/** What every member must be doing (doc.migration in the fleet's shared state). */
export interface FleetMigrationDoc {
  /** The coordinator's member id and address. */
  coordinator: string;
  address: string;
  /** Bumped at each change: a member acks the seq it has done. */
  seq: number;
  carry: Extract<MemberOp, { op: 'carry' }> | null;
  paused: boolean;
  /** Writes held until this deadline's release (the cutover), or null. */
  held: number | null;
  /** Where a cutover (or rollback) pointed the upstreams; null: as configured. */
  switched: SidePlace | null;
}

function migrationDoc(doc: { migration?: unknown }): FleetMigrationDoc | null {
  const m = doc.migration as FleetMigrationDoc | undefined;
  return m !== undefined && m !== null && typeof m === 'object' && typeof m.seq === 'number' && typeof m.coordinator === 'string' ? m : null;
}

interface Ack {
  seq: number;
  error: string | null;
  counts: MemberCounts | null;
}

/** The coordinator's end (Migration's MemberChannel): ops become docs, acks are read back. */
export class FleetMembers implements MemberChannel {
  private sidesNow: { source: MigrationSide; target: MigrationSide } | null = null;
  private dirtyHandler: (db: number, key: Buffer) => void = () => undefined;
  private commandHandler: (args: Buffer[], protocol: 2 | 3) => Promise<Buffer> = async () => encodeError('ERR no migration here');
  private readonly acks = new Map<string, Ack>();
  private timer: NodeJS.Timeout | null = null;
  private polling = false;
  private writes: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly fleet: FleetState,
    private readonly store: FleetStore,
    /** The coordinator's main upstreams now (the source until its own switch). */
    private readonly upstreams: () => ReadonlyArray<{ host: string; port: number }>,
    private readonly log: Logger,
  ) {
    // Every change of the shared state while a migration has sides (a split rule, a user, the
    // migration's own doc) is written on the other side too: members that switched read it there.
    fleet.onDoc(() => {
      if (this.sidesNow !== null) void this.mirrorDoc();
    });
  }

  readonly isOwnKey = isFleetKey;

  /** Is the coordinator on the source now (else the target)? */
  private onSource(): boolean {
    const seeds = this.sidesNow?.source.address.seeds ?? [];
    return this.upstreams().some((u) => seeds.some((s) => s.host === u.host && s.port === u.port));
  }

  /** The migration's two sides: the doc, acks and dirty keys are read and written on both around a cutover. */
  sides(source: MigrationSide, target: MigrationSide): void {
    this.sidesNow = { source, target };
    if (this.timer === null) {
      this.timer = setInterval(() => void this.poll(), POLL_MS);
      this.timer.unref();
    }
  }

  onDirty(handler: (db: number, key: Buffer) => void): void {
    this.dirtyHandler = handler;
  }

  onCommand(handler: (args: Buffer[], protocol: 2 | 3) => Promise<Buffer>): void {
    this.commandHandler = handler;
  }

  refusal(): string | null {
    const m = migrationDoc(this.fleet.doc);
    if (m === null || m.coordinator === this.fleet.memberId || (m.carry === null && m.held === null)) return null;
    if (!this.fleet.liveMembers().includes(m.coordinator)) return `member ${m.address} (${m.coordinator}) ran a migration and is gone: RESPOOL MIGRATE ABORT here stops every member carrying it first`;
    return `member ${m.address} (${m.coordinator}) runs a migration now; send RESPOOL MIGRATE there (or ABORT it)`;
  }

  /**
   * The doc names a coordinator that is gone (not a live member) while members still carry or hold:
   * every member is told to stop. The target is left as it is (its keys are the gone migration's).
   */
  async forgetGone(): Promise<string | null> {
    const m = migrationDoc(this.fleet.doc);
    if (m === null || m.coordinator === this.fleet.memberId || this.fleet.liveMembers().includes(m.coordinator)) return null;
    await this.fleet.update((doc) => ({ ...doc, migration: { ...m, seq: m.seq + 1, carry: null, held: null, paused: false } }));
    return m.address;
  }

  async ask(op: MemberOp, timeoutMs: number): Promise<string[]> {
    const deadline = Date.now() + timeoutMs;
    const expected = this.fleet.liveMembers().filter((id) => id !== this.fleet.memberId);
    let seq: number;
    try {
      seq = await this.change(op);
    } catch (err) {
      return [`the fleet's shared state could not be changed: ${(err as Error).message}`];
    }
    for (;;) {
      await this.readAcks();
      const behind = expected.filter((id) => (this.acks.get(id)?.seq ?? 0) < seq);
      if (behind.length === 0) break;
      if (Date.now() > deadline) {
        return [...this.errorsAt(expected, seq), `${behind.length} of ${expected.length} members did not answer '${op.op}' within ${timeoutMs} ms (${behind.join(', ')})`];
      }
      await new Promise((resolve) => setTimeout(resolve, ACK_POLL_MS));
    }
    await this.pullDirty(); // what the members could not copy is copied before the coordinator goes on
    return this.errorsAt(expected, seq);
  }

  tell(op: MemberOp): void {
    if (op.op === 'status') {
      // On the coordinator's side only: nothing of the migration's own is left on a target an ABORT emptied.
      void this.store.call(['SET', STATUS_KEY, JSON.stringify(op.status), 'PX', STATUS_TTL_MS]).catch(() => undefined);
      return;
    }
    void this.change(op).catch((err: Error) => this.log.warn({ event: 'migration_fleet_change_failed', op: op.op, err: err.message }, `migration: the fleet could not be told '${op.op}': ${err.message}`));
  }

  total(): MemberCounts {
    return sumCounts([...this.acks.values()].flatMap((ack) => (ack.counts === null ? [] : [ack.counts])));
  }

  resetCounts(): void {
    this.acks.clear();
    void this.store.call(['DEL', ACKS_KEY, DIRTY_KEY]).catch(() => undefined);
  }

  /** The sides are closed: an ABORT's emptied target, or the source left after a cutover, gets nothing more from here. */
  ended(): void {
    this.sidesNow = null;
  }

  close(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  /** The doc changed as `op` says, committed in the shared state (and written on the other side); its seq. */
  private change(op: MemberOp): Promise<number> {
    // One change at a time: each builds on the one before.
    const next = this.writes.then(async () => {
      let seq = 0;
      await this.fleet.update((doc) => {
        const now = migrationDoc(doc);
        const m: FleetMigrationDoc = now !== null && now.coordinator === this.fleet.memberId
          ? { ...now }
          : { coordinator: this.fleet.memberId, address: '', seq: now?.seq ?? 0, carry: null, paused: false, held: null, switched: now?.switched ?? null };
        m.address = this.fleet.members().find((r) => r.id === this.fleet.memberId)?.address ?? m.address;
        m.seq += 1;
        seq = m.seq;
        if (op.op === 'carry') m.carry = op;
        else if (op.op === 'stop') m.carry = null;
        else if (op.op === 'paused') m.paused = op.on;
        else if (op.op === 'hold') m.held = op.deadline;
        else if (op.op === 'release') m.held = null;
        else if (op.op === 'switch') {
          m.switched = op.to;
          m.carry = null; // a switch ends the carry (migration-member.ts)
        }
        return { ...doc, migration: m };
      });
      await this.mirrorDoc();
      return seq;
    });
    this.writes = next.catch(() => undefined);
    return next;
  }

  /** The doc as committed here, written on the side the coordinator is not on (members there read it). */
  private async mirrorDoc(): Promise<void> {
    const sides = this.sidesNow;
    if (sides === null) return;
    const other = this.onSource() ? sides.target : sides.source;
    const key = Buffer.from(STATE_KEY);
    const version = this.fleet.version;
    await other.callFor(key, 0, ['EVAL', MIRROR, 1, key, version, JSON.stringify(this.fleet.doc)]).catch(() => undefined);
    // A notice on that side's bus too: its members read the change now, not at their next beat.
    await other.callFor(key, 0, ['PUBLISH', BUS_CHANNEL, JSON.stringify({ t: 'state', v: version })]).catch(() => undefined);
  }

  private errorsAt(ids: string[], seq: number): string[] {
    return ids.flatMap((id) => {
      const ack = this.acks.get(id);
      return ack !== undefined && ack.seq === seq && ack.error !== null ? [`member ${id}: ${ack.error}`] : [];
    });
  }

  /** Every member's latest ack, from both sides (a member acks where its upstreams are). */
  private async readAcks(): Promise<void> {
    const replies = await this.readBoth(['HGETALL', ACKS_KEY]);
    for (const flat of replies) {
      if (!Array.isArray(flat)) continue;
      for (let i = 0; i + 1 < flat.length; i += 2) {
        try {
          const ack = JSON.parse(String(flat[i + 1])) as Ack;
          const id = String(flat[i]);
          if ((this.acks.get(id)?.seq ?? -1) <= ack.seq) this.acks.set(id, ack);
        } catch {
          // a member's entry that does not parse counts as no ack
        }
      }
    }
  }

  private async readBoth(args: Array<string | number>): Promise<unknown[]> {
    const key = Buffer.from(String(args[1]));
    const sides = this.sidesNow;
    const reads = [this.store.call(args)];
    if (sides !== null) reads.push((this.onSource() ? sides.target : sides.source).callFor(key, 0, args));
    return (await Promise.allSettled(reads)).flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  }

  private async pullDirty(): Promise<void> {
    for (const batch of await this.readBoth(['LPOP', DIRTY_KEY, DIRTY_BATCH])) {
      if (!Array.isArray(batch)) continue;
      for (const entry of batch) {
        try {
          for (const [db, key] of JSON.parse(String(entry)) as Array<[number, string]>) this.dirtyHandler(db, Buffer.from(key, 'base64'));
        } catch {
          // not ours
        }
      }
    }
  }

  /** Every POLL_MS while a migration has sides: dirty keys, counts, members' commands. */
  private async poll(): Promise<void> {
    // Only the coordinator the shared state names takes members' keys and commands: one that ran an earlier migration must not answer for the next one's.
    if (this.polling || migrationDoc(this.fleet.doc)?.coordinator !== this.fleet.memberId) return;
    this.polling = true;
    try {
      if (this.sidesNow !== null) {
        // While the migration is live; after it, only members' commands (a STATUS) are answered.
        await this.pullDirty();
        await this.readAcks().catch(() => undefined);
      }
      const requests = await this.store.call(['LPOP', REQUESTS_KEY, 10]).catch(() => null);
      if (Array.isArray(requests)) {
        for (const text of requests) {
          let request: { id: string; args: string[]; protocol: 2 | 3 };
          try {
            request = JSON.parse(String(text)) as typeof request;
          } catch {
            continue;
          }
          void this.commandHandler(request.args.map((a) => Buffer.from(a, 'base64')), request.protocol).then((reply) =>
            this.store.call(['SET', `${REPLY_PREFIX}${request.id}`, reply.toString('base64'), 'PX', REPLY_TTL_MS]).catch(() => undefined),
          );
        }
      }
    } finally {
      this.polling = false;
    }
  }
}

/**
 * A member's end: does what doc.migration says (when its seq moves) and acks it; sends its dirty
 * keys and counts; passes its clients' RESPOOL MIGRATE commands to the coordinator.
 */
export class FleetMemberLink implements MemberLink {
  private applied: FleetMigrationDoc | null = null;
  private queue: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | null = null;
  private lastAck: Ack = { seq: 0, error: null, counts: null };
  private holding = false;

  constructor(private readonly fleet: FleetState, private readonly store: FleetStore, private readonly member: MigrationMember) {
    member.link = this;
    fleet.onDoc((doc) => {
      const m = migrationDoc(doc);
      if (m === null || m.coordinator === fleet.memberId || m.seq === this.applied?.seq) return;
      this.queue = this.queue.then(() => this.follow(m));
    });
  }

  /** The coordinator of the migration the doc names, when it is another member. */
  coordinatorElsewhere(): string | null {
    const m = migrationDoc(this.fleet.doc);
    // A coordinator no longer among the live members answers nothing: steps run here (ABORT forgets its migration).
    return m === null || m.coordinator === this.fleet.memberId || !this.fleet.liveMembers().includes(m.coordinator) ? null : m.address;
  }

  private async follow(m: FleetMigrationDoc): Promise<void> {
    if (this.applied !== null && m.seq <= this.applied.seq) return;
    const before = this.applied;
    const errors: string[] = [];
    const run = async (op: MemberOp) => {
      const error = await this.member.runOp(op);
      if (error !== null) errors.push(error);
    };
    if (JSON.stringify(m.switched) !== JSON.stringify(before?.switched ?? null) && m.switched !== null) await run({ op: 'switch', to: m.switched });
    if (m.paused !== (before?.paused ?? false)) await run({ op: 'paused', on: m.paused });
    if (JSON.stringify(m.carry) !== JSON.stringify(this.member.carrying)) await run(m.carry === null ? { op: 'stop' } : m.carry);
    if (m.held !== null && !this.holding) {
      this.holding = true;
      await run({ op: 'hold', deadline: m.held });
    } else if (m.held === null && this.holding) {
      this.holding = false;
      await run({ op: 'release' });
    }
    this.applied = m;
    this.lastAck = { seq: m.seq, error: errors.length === 0 ? null : errors.join('; '), counts: this.lastAck.counts };
    await this.sendAck();
    this.startPolling();
  }

  private startPolling(): void {
    if (this.timer !== null) return;
    this.timer = setInterval(() => {
      // The coordinator's STATUS for this member's status page.
      void this.store.call(['GET', STATUS_KEY]).then((text) => {
        if (text !== null) void this.member.runOp({ op: 'status', status: JSON.parse(String(text)) as MigrationStatus });
      }, () => undefined);
    }, 1_000);
    this.timer.unref();
  }

  private sendAck(): Promise<void> {
    return this.store.call(['HSET', ACKS_KEY, this.fleet.memberId, JSON.stringify(this.lastAck)]).then(() => undefined, () => undefined);
  }

  dirty(keys: Array<[number, string]>): void {
    void this.store.call(['RPUSH', DIRTY_KEY, JSON.stringify(keys)]).catch(() => undefined);
  }

  counts(counts: MemberCounts & { pid: number }): void {
    this.lastAck = { ...this.lastAck, counts };
    void this.sendAck();
  }

  async command(args: readonly Buffer[], protocol: 2 | 3): Promise<Buffer> {
    const id = `${this.fleet.memberId}:${Date.now()}:${Math.random().toString(36).slice(2)}`;
    try {
      await this.store.call(['RPUSH', REQUESTS_KEY, JSON.stringify({ id, args: args.map((a) => a.toString('base64')), protocol })]);
    } catch (err) {
      return encodeError(`ERR respool: the fleet's shared state could not take the command: ${(err as Error).message}`);
    }
    const deadline = Date.now() + COMMAND_TIMEOUT_MS;
    while (Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      const reply = await this.store.call(['GET', `${REPLY_PREFIX}${id}`]).catch(() => null);
      if (reply !== null) {
        void this.store.call(['DEL', `${REPLY_PREFIX}${id}`]).catch(() => undefined);
        return Buffer.from(String(reply), 'base64');
      }
    }
    return encodeError(`ERR respool: the migration's coordinator (${this.coordinatorElsewhere() ?? 'none'}) did not answer within ${COMMAND_TIMEOUT_MS} ms`);
  }

  close(): void {
    if (this.timer !== null) clearInterval(this.timer);
  }
}

/**
 * In a fleet, each process may coordinate (it ran START) or follow (another did): the request
 * path and RESPOOL MIGRATE see this, which passes each call to the part that plays now.
 */
export class FleetMigration {
  constructor(
    readonly local: Migration,
    readonly member: MigrationMember,
    private readonly link: FleetMemberLink,
    private readonly members: FleetMembers,
    /** RESPOOL MIGRATE run here (handlers/respool-migrate.ts migrateReply). */
    private readonly answer: (migration: Migration, args: readonly Buffer[], protocol: 2 | 3) => Promise<Buffer>,
  ) {}

  /** This process runs the fleet's migration (or ran the last one, and none runs elsewhere). */
  get coordinating(): boolean {
    return this.local.carriesWrites || this.link.coordinatorElsewhere() === null;
  }

  /** Where the migration runs when not here (a member's address), or null. */
  coordinatorElsewhere(): string | null {
    return this.local.carriesWrites ? null : this.link.coordinatorElsewhere();
  }

  get carriesWrites(): boolean {
    return this.local.carriesWrites || this.member.carriesWrites;
  }

  writeBegan(): void {
    this.local.writeBegan();
    this.member.writeBegan();
  }

  writeEnded(): void {
    this.local.writeEnded();
    this.member.writeEnded();
  }

  written(db: number, keys: readonly Buffer[]): void {
    this.local.written(db, keys);
    this.member.written(db, keys);
  }

  status(): MigrationStatus {
    return this.coordinating ? this.local.status() : this.member.status();
  }

  async command(args: readonly Buffer[], protocol: 2 | 3): Promise<Buffer> {
    const what = args[2]?.toString('latin1').toUpperCase();
    if (what !== 'START' && this.coordinatorElsewhere() !== null) return this.link.command(args, protocol);
    if (what === 'ABORT' && args.length === 3 && !this.local.carriesWrites) {
      const gone = await this.members.forgetGone().catch((err: Error) => `? (${err.message})`);
      if (gone !== null) return encodeBulk(`aborted: the coordinator ${gone} is gone; every member stopped carrying (the target was left as it is)`, protocol);
    }
    return this.answer(this.local, args, protocol);
  }

  close(): void {
    this.local.close();
    this.member.close();
    this.link.close();
    this.members.close();
  }
}

/** Whether a key is one of the fleet's own (never copied, never compared: FLEET_KEYS_PREFIX). */
export function isFleetKey(key: Buffer): boolean {
  return key.length >= FLEET_KEYS_PREFIX.length && key.toString('latin1', 0, FLEET_KEYS_PREFIX.length) === FLEET_KEYS_PREFIX;
}
