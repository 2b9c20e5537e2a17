import type { Logger } from 'pino';
import type { RespoolConfig } from '../config/types.js';
import { KeyCopier, keyName } from './key-copier.js';
import { MigrationSide } from './migration-side.js';
import type { MemberCounts, MemberOp, MigrationJoin, MigrationStatus } from './migration-members.js';
import { drainUntil, switchUpstreams, type UpstreamSwitchDeps } from './upstream-switch.js';

/** How a member reaches the coordinator: over the supervisor's IPC (migration-members.ts) or the fleet's shared state (fleet-migration.ts). */
export interface MemberLink {
  /** Keys the coordinator must copy (a copy failed here, or written while paused). */
  dirty(keys: Array<[number, string]>): void;
  /** This member's copy counts (summed into the coordinator's STATUS). */
  counts(counts: MemberCounts & { pid: number }): void;
  /** A RESPOOL MIGRATE a client sent here, run by the coordinator: its RESP reply. */
  command(args: readonly Buffer[], protocol: 2 | 3): Promise<Buffer>;
}

export interface MigrationMemberDeps extends UpstreamSwitchDeps {
  log: Logger;
  clientPause: { holdWrites(on: boolean): void };
  /** Resolves once every request sent to the main upstreams before the call is answered. */
  writesBefore: () => Promise<void>;
}

/** Counts are sent to the coordinator this often while carrying. */
const COUNTS_EVERY_MS = 1_000;
/** A hold the coordinator never released ends this long after its deadline (the coordinator died mid-cutover). */
const HOLD_SLACK_MS = 5_000;

/**
 * A process other than the coordinator (another worker, another fleet member): it carries its own clients' writes
 * to the target while the coordinator says so, each copy confirmed against the source (other
 * workers copy the same keys: key-copier.ts), holds and switches at the coordinator's cutover,
 * and passes its clients' RESPOOL MIGRATE commands to the coordinator.
 *
 *   carrying : copier and its two sides, from a 'carry' op until 'stop' (or a new 'carry')
 *   paused   : written keys go to the coordinator's keys to copy (sent once per tick) instead
 *   writes   : writesInFlight counts this worker's client writes sent, not yet answered
 */
export class MigrationMember {
  private copier: KeyCopier | null = null;
  private sides: { from: MigrationSide; to: MigrationSide; op: Extract<MemberOp, { op: 'carry' }> } | null = null;
  private paused = false;
  private writesInFlight = 0;
  private writesSeen = 0;
  private readonly toSend = new Map<string, [number, string]>();
  private sendQueued = false;
  private countsTimer: NodeJS.Timeout | null = null;
  private lastStatus: MigrationStatus = { state: 'idle' };
  private holdTimer: NodeJS.Timeout | null = null;
  /** Set once the transport is made (it needs the member to run ops on). */
  link: MemberLink | null = null;

  constructor(private readonly deps: MigrationMemberDeps) {}

  /** What the supervisor says this worker starts into (a replacement's, during or after a migration). */
  async join(join: MigrationJoin): Promise<void> {
    if (join.switched !== null) {
      this.deps.clientPause.holdWrites(true);
      try {
        await switchUpstreams(this.deps, join.switched);
      } catch (err) {
        this.deps.log.error({ event: 'migration_join_failed', err: (err as Error).message }, `a cutover moved the upstreams, but this worker could not follow: ${(err as Error).message}`);
      } finally {
        this.deps.clientPause.holdWrites(false);
      }
    }
    if (join.carry !== null) await this.carry(join.carry);
  }

  get carriesWrites(): boolean {
    return this.copier !== null;
  }

  /** The carry in force, or null. */
  get carrying(): Extract<MemberOp, { op: 'carry' }> | null {
    return this.sides?.op ?? null;
  }

  writeBegan(): void {
    this.writesInFlight++;
  }

  writeEnded(): void {
    this.writesInFlight--;
  }

  written(db: number, keys: readonly Buffer[]): void {
    this.writesSeen++;
    const copier = this.copier;
    if (copier === null) return;
    for (const key of keys) {
      if (this.paused) {
        copier.counts.mirrored++;
        this.sendDirty(db, key);
      } else copier.carry(db, key); // a failure goes to the coordinator (onFailure)
    }
  }

  /** The coordinator's STATUS as last told (this worker's status page). */
  status(): MigrationStatus {
    return this.lastStatus;
  }

  /** A RESPOOL MIGRATE a client sent here: run by the coordinator; its RESP reply. */
  command(args: readonly Buffer[], protocol: 2 | 3): Promise<Buffer> {
    return this.link!.command(args, protocol);
  }

  /** Does what the coordinator asked: null, or why it could not. */
  runOp(op: MemberOp): Promise<string | null> {
    return this.run(op).catch((err: Error) => err.message);
  }

  private async run(op: MemberOp): Promise<string | null> {
    switch (op.op) {
      case 'carry':
        await this.carry(op);
        return null;
      case 'paused':
        this.paused = op.on;
        return null;
      case 'stop':
        await this.stop();
        return null;
      case 'hold': {
        this.deps.clientPause.holdWrites(true);
        // A coordinator that dies mid-cutover sends no release: writes go again on their own.
        if (this.holdTimer !== null) clearTimeout(this.holdTimer);
        this.holdTimer = setTimeout(() => this.release(), Math.max(0, op.deadline - Date.now()) + HOLD_SLACK_MS);
        this.holdTimer.unref();
        const copier = this.copier;
        const drained = await drainUntil(() => this.writesInFlight > 0 || (copier?.inFlight ?? 0) > 0, op.deadline, async () => copier?.flush());
        this.flushDirty(); // before the ack: the coordinator copies them before it switches
        return drained ? null : `writes in flight did not drain in time (${this.writesInFlight} writes, ${copier?.inFlight ?? 0} copies)`;
      }
      case 'switch':
        // The carry was from the upstreams left now: a write to the new ones must not be overwritten by a copy of the old side.
        await this.stop();
        await switchUpstreams(this.deps, op.to);
        this.deps.log.info({ event: 'migration_member_switched', upstreams: op.to.seeds }, 'migration: the coordinator\'s cutover switched this process\'s upstreams');
        return null;
      case 'release':
        this.release();
        return null;
      case 'status':
        this.lastStatus = op.status;
        return null;
      default:
        return null;
    }
  }

  private release(): void {
    if (this.holdTimer !== null) clearTimeout(this.holdTimer);
    this.holdTimer = null;
    this.deps.clientPause.holdWrites(false);
  }

  private async carry(op: Extract<MemberOp, { op: 'carry' }>): Promise<void> {
    const now = this.sides;
    if (now !== null && JSON.stringify(now.op) === JSON.stringify(op)) return; // the coordinator resumed: the same carry
    await this.stop();
    const { config, log } = this.deps;
    const from = new MigrationSide('source', this.deps.signIns.at(op.from), config, log);
    const to = new MigrationSide('target', this.deps.signIns.at(op.to), config, log);
    this.sides = { from, to, op };
    this.paused = false;
    this.copier = new KeyCopier(from, to, (db, key) => this.sendDirty(db, key), op.maxPayloadBytes, true);
    // Both sides known before the first copy; a side that does not answer fails its copies, which go to the coordinator.
    await Promise.all([from.discover(), to.discover()]);
    // Writes on their way before carrying began land before the coordinator's scan reads their keys.
    await this.deps.writesBefore().catch(() => undefined);
    this.countsTimer = setInterval(() => this.sendCounts(), COUNTS_EVERY_MS);
    this.countsTimer.unref();
    log.info({ event: 'migration_member_carrying', from: op.from.seeds, to: op.to.seeds }, 'migration: this process carries its clients\' writes to the target');
  }

  private async stop(): Promise<void> {
    const copier = this.copier;
    if (copier === null) return;
    this.copier = null;
    if (this.countsTimer !== null) clearInterval(this.countsTimer);
    this.countsTimer = null;
    await copier.stop();
    this.sendCounts(copier);
    this.deps.log.info({ event: 'migration_member_stopped', ...copier.counts }, 'migration: this process no longer carries writes');
    this.sides?.from.close();
    this.sides?.to.close();
    this.sides = null;
    this.toSend.clear();
  }

  private sendCounts(copier = this.copier): void {
    if (copier === null) return;
    this.link?.counts({ ...copier.counts, writesSeen: this.writesSeen, pid: process.pid });
  }

  /** A key the coordinator must copy: sent with the others of this tick. */
  private sendDirty(db: number, key: Buffer): void {
    this.toSend.set(keyName(db, key), [db, key.toString('base64')]);
    if (this.sendQueued) return;
    this.sendQueued = true;
    setImmediate(() => this.flushDirty());
  }

  private flushDirty(): void {
    this.sendQueued = false;
    if (this.toSend.size === 0) return;
    this.link?.dirty([...this.toSend.values()]);
    this.toSend.clear();
  }

  close(): void {
    void this.stop();
  }
}
