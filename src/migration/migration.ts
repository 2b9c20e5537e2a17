import type { Logger } from 'pino';
import type { RespoolConfig } from '../config/types.js';
import type { TopologyRefresher } from '../cluster/topology-refresher.js';
import type { LeasePools } from '../upstream/lease-pools.js';
import { MigrationSide, NodeError } from './migration-side.js';
import { placeOf, type SignIns } from './sign-ins.js';
import type { CutoverRecord } from './cutover-record.js';
import { LatencyGuard } from './latency-guard.js';
import type { RecentLatency } from '../metrics/recent-latency.js';
import { KeyCopier, KeyKeptChanging, keyName } from './key-copier.js';
import { sumCounts, type MemberChannel, type MemberOp } from './migration-members.js';
import { currentUpstreams, drainUntil, switchUpstreams, SwitchFailed } from './upstream-switch.js';
import { sameOnBothSides } from './key-compare.js';
import { readSavedMigration, removeSavedMigration, writeSavedMigration, type SavedMigration, type ScanTask } from './migration-state-file.js';
import { WriteRates } from './write-rates.js';
import { usesFleetState } from '../fleet/fleet-state.js';

/**
 * Where a migration is:
 *   idle → copying → verifying → synced → cutting-over → cut-over
 *   copying | verifying | synced → paused (a side failed; retried every RETRY_MS) → copying
 *   any before cut-over → aborted (ABORT)
 */
export type MigrationPhase = 'idle' | 'copying' | 'paused' | 'verifying' | 'synced' | 'cutting-over' | 'cut-over' | 'aborted';

export interface MigrationDeps {
  /** The proxy's config: its upstreams, mode, upstreamAuth and upstreamTls change at cutover. */
  config: RespoolConfig;
  log: Logger;
  /** The main upstreams' topology: reseeded at cutover. */
  refresher: TopologyRefresher;
  /** The main upstreams' leased connections: those left on the source close at cutover. */
  dedicated: LeasePools;
  /** Writes are held here during the cutover, reads flow (client/client-pause.ts ClientPause). */
  clientPause: { holdWrites(on: boolean): void };
  /** Whether a command (as the nodes' COMMAND names it) writes: for the source's write rate. */
  isWrite: (command: string) => boolean;
  /**
   * Resolves once every request sent to the source before the call is answered: writes that were
   * on their way when START began carrying writes (not noted by it) land before the scan reads.
   */
  writesBefore: () => Promise<void>;
  /** Told after the cutover switched the upstreams (the near cache drops what the source's tracking said). */
  onCutover?: () => void;
  /** This process's credentials for each side: the other processes are told places, never credentials (sign-ins.ts). */
  signIns: SignIns;
  /** Where a cutover moved the upstreams, kept for a restart (cutover-record.ts); null: not kept. */
  record: CutoverRecord | null;
  /** The other workers, each carrying its own clients' writes (migration-members.ts); null in a lone process. */
  members: MemberChannel | null;
  /** Other processes may copy the same keys (workers, a takeover's two workers): copies are confirmed (key-copier.ts). */
  confirmCopies: boolean;
  /** This process's clients' data requests, second by second (the scan's pace guards them: latency-guard.ts); null: not measured. */
  clientLatency: RecentLatency | null;
}

export interface StartOptions {
  target: { host: string; port: number };
  /** Copy into a target that holds keys already. */
  merge: boolean;
}

/** A refusal at START (nothing changed on either side), or of a step asked in the wrong phase. */
export class MigrationRefusal extends Error {}

/** A paused migration asks its sides again this often. */
const RETRY_MS = 1_000;
/** Progress is saved at most this often (and at every phase change). */
const SAVE_EVERY_MS = 1_000;
/** Keys to copy first (failed, or written while paused) kept one by one up to this; past it every key is compared instead. */
const MAX_DIRTY_KEYS = 1_000_000;
/** The verifier reads a key this many times before it counts a difference (a write may land between its reads). */
const VERIFY_ATTEMPTS = 3;
/** The members answer a carry or stop within this. */
const MEMBERS_ANSWER_MS = 10_000;
/** The coordinator's STATUS is told to the members this often (their status pages). */
const STATUS_TO_MEMBERS_MS = 1_000;

/**
 * A live migration of the main upstreams' keyspace to a target (docs/migration.md). respool stays
 * in front of the source (the truth) until the cutover; the target is filled by a paced scan of
 * the source (KeyCopier: DUMP → RESTORE), kept current by a copy of every key a client's
 * acknowledged write touched, checked by a verifier, and switched to at the cutover, with writes
 * held at respool meanwhile.
 *
 *   dirty   : keys whose copy failed or waited while paused; copied first when the migration goes on
 *             (at most MAX_DIRTY_KEYS: past it the list is dropped and every key compared)
 *   writes  : writesInFlight counts client writes sent but not answered (the cutover waits for 0)
 *   saved   : tasks (SCAN cursors) and counts on disk (migration.stateFile), so a restart resumes;
 *             a resumed copy then compares every key (a write acknowledged just before the stop
 *             may not have been copied), not a sample
 */
export class Migration {
  phase: MigrationPhase = 'idle';
  private source: MigrationSide | null = null;
  private target: MigrationSide | null = null;
  private copier: KeyCopier | null = null;
  private saved: SavedMigration | null = null;
  private reason: string | null = null;
  private resumed = false;
  /** Every key compared before synced, not a sample: after a resume, or once the dirty list overflowed. */
  private compareAll = false;
  private readonly dirty = new Map<string, { db: number; key: Buffer }>();
  private sample: Array<{ db: number; key: Buffer }> = [];
  private scanned = 0;
  private verified = 0;
  private mismatched = 0;
  private writesInFlight = 0;
  private writesSeen = 0;
  private lastSave = 0;
  private retryTimer: NodeJS.Timeout | null = null;
  private rates: WriteRates | null = null;
  private cutoverPauseMs: number | null = null;
  private cutoverAt: number | null = null;
  /** After the cutover, within migration.rollbackWindowMs: writes copied back to the source. */
  private reverse: KeyCopier | null = null;
  private rollbackUntil: number | null = null;
  private rollbackTimer: NodeJS.Timeout | null = null;
  private startedAt = 0;
  /** The scan's pace, held to the clients' p99 (migration.paceByLatency); null without one. */
  private guard: LatencyGuard | null = null;
  /** When this process last had a migration running (its copies are not part of a "before"). */
  private quietSince = 0;
  /** A START is checking its target (a second one is refused meanwhile). */
  private starting = false;
  /** Bumped by ABORT: loops of an earlier run stop. */
  private run = 0;

  constructor(private readonly deps: MigrationDeps) {
    const members = deps.members;
    if (members !== null) {
      members.onDirty((db, key) => this.memberCopyFailed(db, key));
      // While the migration is live; stopSides() tells the final one (a finished migration sends nothing every second).
      const timer = setInterval(() => {
        if (this.carriesWrites) members.tell({ op: 'status', status: this.status() });
      }, STATUS_TO_MEMBERS_MS);
      timer.unref();
      this.statusTimer = timer;
    }
  }

  private statusTimer: NodeJS.Timeout | null = null;

  private get settings(): RespoolConfig['migration'] {
    return this.deps.config.migration;
  }

  /** Whether client writes are carried to the target now. */
  get carriesWrites(): boolean {
    return this.phase === 'copying' || this.phase === 'paused' || this.phase === 'verifying' || this.phase === 'synced' || this.phase === 'cutting-over' || (this.phase === 'cut-over' && this.reverse !== null);
  }

  /** START: refused (MigrationRefusal, nothing changed) unless the target can be reached, signs respool in, is empty (or merge), and restores the source's DUMP format. */
  async start(options: StartOptions): Promise<void> {
    if (this.carriesWrites) throw new MigrationRefusal(`a migration is ${this.phase} already (RESPOOL MIGRATE STATUS; ABORT ends it)`);
    if (this.starting) throw new MigrationRefusal('another START is being checked');
    this.starting = true;
    try {
      await this.checkAndStart(options);
    } finally {
      this.starting = false;
    }
  }

  private async checkAndStart(options: StartOptions): Promise<void> {
    const { config } = this.deps;
    if ((config.cluster.peers.length > 0 || config.cluster.peersFrom !== null) && !usesFleetState(config)) {
      throw new MigrationRefusal('a fleet migrates through its shared state (cluster.fleetState), which this fleet does not use (docs/migration.md)');
    }
    const elsewhere = this.deps.members?.refusal?.() ?? null;
    if (elsewhere !== null) throw new MigrationRefusal(elsewhere);
    const { source, target } = this.sides(options.target);
    try {
      const problem = (await target.discover()) ?? (await source.discover());
      if (problem !== null) throw new MigrationRefusal(`cannot reach ${problem}`);
      const tasks = await this.scanTasks(source);
      if (target.isCluster && tasks.some((t) => t.db !== 0)) throw new MigrationRefusal(`the source has keys in database ${tasks.find((t) => t.db !== 0)!.db}; a cluster target has database 0 only`);
      const held = await this.keysOn(target);
      if (held > 0 && !options.merge) throw new MigrationRefusal(`the target holds ${held} keys already (MERGE copies over them)`);
      await this.checkDumpFormat(source, target, tasks);
      if (this.deps.confirmCopies) await this.checkExpireTime(source, target);
      this.deps.members?.resetCounts();
      this.install(source, target, {
        version: 1,
        source: source.address.seeds,
        target: options.target,
        merge: options.merge,
        targetWasEmpty: held === 0,
        startedAt: Date.now(),
        tasks,
        counts: { copied: 0, mirrored: 0, recopied: 0, deleted: 0, bytes: 0 },
      }, false);
    } catch (err) {
      source.close();
      target.close();
      throw err instanceof MigrationRefusal ? err : new MigrationRefusal((err as Error).message);
    }
  }

  /** A migration saved by an earlier run of this process (migration.stateFile): goes on where it stopped. */
  async resumeSaved(): Promise<void> {
    const { saved, problem } = readSavedMigration(this.settings.stateFile);
    if (problem !== null) this.deps.log.warn({ event: 'migration_state_unreadable', problem }, `migration state not read: ${problem}`);
    if (saved === null) return;
    const here = this.deps.config.upstreams.map((u) => `${u.host}:${u.port}`).join(',');
    if (saved.source?.map((u) => `${u.host}:${u.port}`).join(',') !== here) {
      this.deps.log.warn({ event: 'migration_state_other_upstreams', stateFile: this.settings.stateFile }, `migration state ${this.settings.stateFile} is of other upstreams than these (${here}): not resumed`);
      return;
    }
    const { source, target } = this.sides(saved.target);
    // Both sides known before the first client's write asks for a copy; one that does not answer pauses it.
    const unreachable = (await target.discover()) ?? (await source.discover());
    this.install(source, target, saved, true);
    if (unreachable !== null) this.pause(`cannot reach ${unreachable}`);
    this.deps.log.info({ event: 'migration_resumed', target: `${saved.target.host}:${saved.target.port}` }, 'migration resumed from its saved state');
  }

  private sides(to: { host: string; port: number }): { source: MigrationSide; target: MigrationSide } {
    const { config, log, signIns } = this.deps;
    const sourceAddress = signIns.at(currentUpstreams(this.deps));
    const targetAddress = signIns.at({ seeds: [to], mode: 'auto', signIn: 'migration' });
    return { source: new MigrationSide('source', sourceAddress, config, log), target: new MigrationSide('target', targetAddress, config, log) };
  }

  private install(source: MigrationSide, target: MigrationSide, saved: SavedMigration, resumed: boolean): void {
    this.source = source;
    this.target = target;
    this.saved = saved;
    this.resumed = resumed;
    this.compareAll = resumed;
    this.deps.members?.sides?.(source, target);
    this.copier = new KeyCopier(source, target, (db, key, err) => this.copyFailed(db, key, err), this.settings.maxPayloadBytes, this.deps.confirmCopies);
    Object.assign(this.copier.counts, saved.counts);
    this.reason = null;
    this.sample = [];
    this.scanned = 0;
    this.verified = 0;
    this.mismatched = 0;
    this.dirty.clear();
    this.cutoverPauseMs = null;
    this.cutoverAt = null;
    this.startedAt = saved.startedAt;
    this.rates = new WriteRates(source, this.deps.isWrite, () => this.writesSeen + (this.deps.members?.total().writesSeen ?? 0));
    this.rates.start();
    const recent = this.deps.clientLatency;
    const earlier = this.guard?.state().p99BeforeUs ?? 0;
    this.guard = this.settings.paceByLatency && recent !== null ? new LatencyGuard(recent, 1 + this.settings.maxP99RisePercent / 100, this.quietSince, earlier) : null;
    this.phase = 'copying';
    this.save(true);
    this.deps.log.info({ event: 'migration_started', target: `${saved.target.host}:${saved.target.port}`, resumed }, resumed ? 'migration going on' : 'migration started');
    void this.copyLoop(++this.run);
  }

  /** The tasks of a scan of the source: each primary's database 0 (cluster), or each database that holds keys (standalone). */
  private async scanTasks(source: MigrationSide): Promise<ScanTask[]> {
    const tasks: ScanTask[] = [];
    for (const node of source.primaries()) {
      const dbs = source.isCluster ? [0] : databasesWithKeys(String(await source.call(node, 0, ['INFO', 'keyspace'])));
      for (const db of dbs) tasks.push({ host: node.host, port: node.port, db, cursor: '0', done: false });
    }
    return tasks;
  }

  private async keysOn(side: MigrationSide): Promise<number> {
    let keys = 0;
    for (const node of side.primaries()) {
      const info = String(await side.call(node, 0, ['INFO', 'keyspace']));
      for (const m of info.matchAll(/^db\d+:keys=(\d+)/gm)) keys += Number(m[1]);
    }
    return keys;
  }

  /**
   * The target restores the source's DUMP format: one source key's payload RESTOREd there under a
   * name of respool's with an absolute expiry in the past — the node checks the payload's version
   * and checksum first, then creates nothing (the key would be expired at once).
   */
  private async checkDumpFormat(source: MigrationSide, target: MigrationSide, tasks: readonly ScanTask[]): Promise<void> {
    for (const task of tasks) {
      const reply = await source.call(task, task.db, ['SCAN', '0', 'COUNT', 100]);
      const key = Array.isArray(reply) && Array.isArray(reply[1]) ? (reply[1][0] as Buffer | undefined) : undefined;
      if (key === undefined) continue;
      const payload = await source.call(task, task.db, ['DUMP', key]);
      if (!Buffer.isBuffer(payload)) continue;
      const probe = Buffer.from(`{respool-migration}probe:${process.pid}:${Date.now()}`);
      try {
        await target.callFor(probe, task.db, ['RESTORE', probe, 1, payload, 'ABSTTL']);
      } catch (err) {
        throw new MigrationRefusal(`the ${target.name} cannot restore the ${source.name}'s DUMP format (${(err as Error).message})`);
      }
      return;
    }
  }

  /** Confirmed copies read PEXPIRETIME (Redis and Valkey 7 on): both sides must answer it (the target, for a rollback window's copies back). */
  private async checkExpireTime(source: MigrationSide, target: MigrationSide): Promise<void> {
    const probe = Buffer.from('{respool-migration}probe');
    for (const side of [source, target]) {
      try {
        await side.callFor(probe, 0, ['PEXPIRETIME', probe]);
      } catch (err) {
        throw new MigrationRefusal(`with workers, each copy is checked with PEXPIRETIME, which the ${side.name} does not answer (${(err as Error).message}); run respool with one worker for this migration`);
      }
    }
  }

  // ---- copy ------------------------------------------------------------------------------------

  private async copyLoop(run: number): Promise<void> {
    const saved = this.saved!;
    const copier = this.copier!;
    const source = this.source!;
    const guard = this.guard;
    const pace = new Pacer(this.settings.maxKeysPerSecond, this.settings.maxBytesPerSecond, () => copier.counts.bytes, () => guard?.currentShare() ?? 1);
    const live = () => run === this.run && this.phase === 'copying';
    // Every worker carries its clients' writes (and waited for the writes it sent before) before the scan reads a key.
    const members = await this.deps.members?.ask(this.carryOp(source, this.target!), MEMBERS_ANSWER_MS);
    if (!live()) return;
    if (members !== undefined && members.length > 0) return this.pause(`not every worker carries writes yet: ${members.join('; ')}`);
    await this.deps.writesBefore().catch(() => undefined); // a node that fails them fails them: nothing of theirs landed late
    // Keys a failure or pause left uncopied go first.
    if (!(await this.copyDirty(run))) return;
    for (const task of saved.tasks) {
      while (!task.done && live()) {
        let keys: Buffer[];
        let next: string;
        try {
          const reply = await source.call(task, task.db, ['SCAN', task.cursor, 'COUNT', this.settings.batchKeys]);
          if (!Array.isArray(reply) || !Array.isArray(reply[1])) throw new NodeError(`SCAN answered ${String(reply)}`);
          next = String(reply[0]);
          keys = reply[1] as Buffer[];
        } catch (err) {
          if (live()) this.pause(`source ${task.host}:${task.port}: SCAN failed: ${(err as Error).message}`);
          return;
        }
        if (!live()) return; // ABORTed (or paused) while the SCAN was out: nothing more lands on the target
        const own = this.deps.members?.isOwnKey;
        if (own !== undefined) keys = keys.filter((k) => !own(k)); // a fleet's own keys: written on each side by the fleet
        // copiesInFlight keys at a time, started together — their DUMPs reach the source in one write,
        // their RESTOREs the target in one, so each node wakes once for the group — then paced: a
        // trickle of small groups, not a batch's burst that a client's request waits behind.
        const copied = await inGroups(keys, this.settings.copiesInFlight, async (group) => {
          const results = await Promise.allSettled(group.map((k) => copier.copy(task.db, k, 'scan')));
          if (results.some((r) => r.status === 'rejected')) throw new Error('a copy failed'); // copyFailed paused the migration
          await pace.after(group.length);
        });
        if (!live()) return;
        if (!copied) return; // paused (copyFailed); this batch is copied again
        for (const k of keys) this.offerSample(task.db, k);
        task.cursor = next;
        task.done = next === '0';
        this.save(task.done);
      }
      if (!live()) return;
    }
    if (run !== this.run || this.phase !== 'copying') return;
    this.phase = 'verifying';
    this.save(true);
    await this.verifyCopy(run);
  }

  /** Copies the keys left dirty; false when the migration paused or ended meanwhile. */
  private async copyDirty(run: number): Promise<boolean> {
    while (this.dirty.size > 0) {
      const batch: Array<{ db: number; key: Buffer }> = [];
      for (const [name, entry] of this.dirty) {
        this.dirty.delete(name); // deleting the entry just visited keeps the iteration valid
        batch.push(entry);
        if (batch.length === this.settings.batchKeys) break;
      }
      const results = await Promise.allSettled(batch.map(({ db, key }) => this.copier!.copy(db, key, 'repair')));
      if (run !== this.run || results.some((r) => r.status === 'rejected')) return false;
    }
    return true;
  }

  /** A client write the source acknowledged (or that ended without a reply): its keys are copied again. */
  written(db: number, keys: readonly Buffer[]): void {
    this.writesSeen++;
    if (!this.carriesWrites) return;
    const reverse = this.reverse;
    if (reverse !== null && (this.phase === 'cut-over' || this.phase === 'cutting-over')) {
      for (const key of keys) reverse.carry(db, key); // a failure ends the window (cutover())
      return;
    }
    for (const key of keys) {
      if (this.phase === 'paused') {
        this.copier!.counts.mirrored++;
        this.markDirty(db, key);
      } else this.copier!.carry(db, key); // a failure marks it dirty and pauses (copyFailed)
    }
  }

  /** A client write sent to the source; writeEnded() follows it (after written(), once its reply is in or its client gone). */
  writeBegan(): void {
    this.writesInFlight++;
  }

  writeEnded(): void {
    this.writesInFlight--;
  }

  private markDirty(db: number, key: Buffer): void {
    if (this.dirty.size >= MAX_DIRTY_KEYS) {
      // A long pause under many writes: the list would grow without bound. Dropped; every key is compared instead.
      this.dirty.clear();
      this.compareAll = true;
    }
    this.dirty.set(keyName(db, key), { db, key: Buffer.from(key) });
  }

  private copyFailed(db: number, key: Buffer, err: Error): void {
    this.markDirty(db, key);
    if (err instanceof KeyKeptChanging) return; // written all along: copied again from the keys to copy (the cutover drains them)
    if (this.phase === 'copying' || this.phase === 'verifying' || this.phase === 'synced') this.pause(`copy of a key failed: ${err.message}`);
  }

  /** A member's copy of a key failed (or it wrote the key while paused): copied here, one copy at a time with this process's. */
  private memberCopyFailed(db: number, key: Buffer): void {
    if (this.phase === 'copying' || this.phase === 'verifying' || this.phase === 'synced' || this.phase === 'cutting-over') {
      void this.copier!.copy(db, key, 'repair').catch(() => undefined); // a failure here marks it dirty (copyFailed)
    } else if (this.phase === 'paused') this.markDirty(db, key);
  }

  /** The op that has every member carry writes from one side to the other (confirmed copies). */
  private carryOp(from: MigrationSide, to: MigrationSide): MemberOp {
    return { op: 'carry', from: placeOf(from.address), to: placeOf(to.address), maxPayloadBytes: this.settings.maxPayloadBytes };
  }

  // ---- pause and retry ---------------------------------------------------------------------------

  private pause(reason: string): void {
    // Only a migration that is copying pauses: an ABORTed one's late failures (its sides closed) change nothing.
    if (this.phase !== 'copying' && this.phase !== 'verifying' && this.phase !== 'synced') return;
    this.phase = 'paused';
    this.reason = reason;
    this.deps.members?.tell({ op: 'paused', on: true });
    this.save(true);
    this.deps.log.warn({ event: 'migration_paused', reason }, `migration paused: ${reason}`);
    const run = this.run;
    const retry = () => {
      this.retryTimer = setTimeout(() => void this.tryAgain(run, retry), RETRY_MS);
      this.retryTimer.unref();
    };
    retry();
  }

  private async tryAgain(run: number, retry: () => void): Promise<void> {
    if (run !== this.run || this.phase !== 'paused') return;
    const problem = (await this.target!.discover()) ?? (await this.source!.discover());
    if (run !== this.run || this.phase !== 'paused') return;
    if (problem !== null) {
      this.reason = `still cannot reach ${problem}`;
      return retry();
    }
    this.deps.log.info({ event: 'migration_going_on', after: this.reason }, 'migration going on');
    this.reason = null;
    this.phase = 'copying';
    this.deps.members?.tell({ op: 'paused', on: false });
    void this.copyLoop(run);
  }

  // ---- verify --------------------------------------------------------------------------------------

  /** After the copy: a sample of the copied keys compared (every key, after a resume); differences copied again. Then synced. */
  private async verifyCopy(run: number): Promise<void> {
    const live = () => run === this.run && this.phase === 'verifying';
    if (!(await this.copyDirty(run)) || !live()) return;
    if (this.compareAll) {
      // Every key of the source, then — unless merged into keys of its own — every key of the
      // target: a DEL, or a write while paused, lost with the stopped process shows as a difference.
      const scans = [...this.saved!.tasks.map((t) => ({ side: this.source!, ...t }))];
      if (!this.saved!.merge) scans.push(...(await this.scanTasks(this.target!).catch(() => [])).map((t) => ({ side: this.target!, ...t })));
      for (const { side, ...task } of scans) {
        let cursor = '0';
        do {
          let reply;
          try {
            reply = await side.call(task, task.db, ['SCAN', cursor, 'COUNT', this.settings.batchKeys]);
          } catch (err) {
            if (live()) this.pause(`${side.name} ${task.host}:${task.port}: SCAN failed: ${(err as Error).message}`);
            return;
          }
          if (!live()) return;
          cursor = String((reply as unknown[])[0]);
          for (const key of (reply as unknown[])[1] as Buffer[]) if (this.deps.members?.isOwnKey?.(key) !== true && !(await this.verifyKey(task.db, key)) && !live()) return;
          if (!live()) return;
        } while (cursor !== '0');
      }
    } else {
      for (const { db, key } of this.sample) {
        await this.verifyKey(db, key);
        if (!live()) return;
      }
    }
    if (!live()) return;
    this.phase = 'synced';
    this.save(true);
    this.deps.log.info({ event: 'migration_synced', ...this.copier!.counts, verified: this.verified, mismatched: this.mismatched }, 'migration synced: every key copied, every write carried');
  }

  /** Compares one key on both sides (again while a write's copy of it runs); a difference is counted and copied again. False if a side failed. */
  private async verifyKey(db: number, key: Buffer): Promise<boolean> {
    const copier = this.copier!;
    try {
      for (let attempt = 0; attempt < VERIFY_ATTEMPTS; attempt++) {
        await copier.settled(db, key);
        if (await sameOnBothSides(this.source!, this.target!, db, key)) {
          this.verified++;
          return true;
        }
        await sleep(20);
      }
      this.mismatched++;
      this.verified++;
      await copier.copy(db, key, 'repair');
      return true;
    } catch (err) {
      this.pause(`verifying a key failed: ${(err as Error).message}`);
      return false;
    }
  }

  /** RESPOOL MIGRATE VERIFY: the sample compared again now; the differences found. */
  async verifyNow(): Promise<{ compared: number; mismatched: number }> {
    if (this.phase !== 'synced') throw new MigrationRefusal(this.phase === 'cut-over' ? 'the migration is cut over: the source is no longer kept current' : `VERIFY compares a synced migration; this one is ${this.phase}`);
    const before = this.mismatched;
    let compared = 0;
    for (const { db, key } of this.sample) {
      if (!(await this.verifyKey(db, key))) break;
      compared++;
    }
    return { compared, mismatched: this.mismatched - before };
  }

  /** Reservoir sampling: each scanned key has the same chance to be among the verifier's migration.verifySample. */
  private offerSample(db: number, key: Buffer): void {
    this.scanned++;
    const size = this.settings.verifySample;
    if (this.sample.length < size) this.sample.push({ db, key: Buffer.from(key) });
    else {
      const i = Math.floor(Math.random() * this.scanned);
      if (i < size) this.sample[i] = { db, key: Buffer.from(key) };
    }
  }

  // ---- cutover and rollback --------------------------------------------------------------------------

  /**
   * CUTOVER: writes held at respool (reads flow); the writes in flight answered and their copies
   * on the target; the main upstreams pointed at the target (discovered before anything is
   * switched: a target that does not answer leaves everything as it was); connections leased on
   * the source closed; writes let go, now to the target. Bounded by migration.cutoverMaxPauseMs.
   * With migration.rollbackWindowMs, writes are then carried back to the source for that long,
   * so that ABORT can switch back to it with nothing lost (the source must restore the target's
   * DUMP format: checked here, else no window).
   */
  async cutover(): Promise<number> {
    if (this.phase !== 'synced') throw new MigrationRefusal(`CUTOVER needs a synced migration; this one is ${this.phase}${this.reason === null ? '' : ` (${this.reason})`}`);
    const source = this.source!;
    const target = this.target!;
    let rollback: string | null = null;
    if (this.settings.rollbackWindowMs > 0) {
      // Before the switch: whether the old side can take the new side's DUMPs (Valkey 8 → Redis 7 cannot).
      rollback = await this.checkDumpFormat(target, source, target.primaries().map((n) => ({ host: n.host, port: n.port, db: 0, cursor: '0', done: false })))
        .then(() => null, (err: Error) => err.message);
    }
    this.phase = 'cutting-over';
    let pauseMs: number;
    try {
      pauseMs = await this.switchTo(target, this.copier!);
    } catch (err) {
      this.phase = 'synced';
      throw err;
    }
    this.phase = 'cut-over';
    this.cutoverPauseMs = pauseMs;
    this.cutoverAt = Date.now();
    removeSavedMigration(this.settings.stateFile);
    this.deps.log.info({ event: 'migration_cut_over', pauseMs, upstreams: this.deps.config.upstreams }, `migration cut over: writes held ${pauseMs} ms; the upstreams are now the target`);
    if (this.settings.rollbackWindowMs > 0 && rollback === null) {
      this.reverse = new KeyCopier(target, source, (_db, _key, err) => this.endRollbackWindow(`a write could not be carried back to the source (${err.message}): no rollback`), this.settings.maxPayloadBytes, this.deps.confirmCopies);
      // Every worker carries its writes back too; one that cannot ends the window (its copies fail: a dirty key).
      void this.deps.members?.ask(this.carryOp(target, source), MEMBERS_ANSWER_MS).then((errors) => {
        if (errors.length > 0) this.endRollbackWindow(`not every worker carries writes back to the source (${errors.join('; ')}): no rollback`);
      });
      this.rollbackUntil = Date.now() + this.settings.rollbackWindowMs;
      this.rollbackTimer = setTimeout(() => this.endRollbackWindow('the rollback window ended'), this.settings.rollbackWindowMs);
      this.rollbackTimer.unref();
    } else {
      if (rollback !== null) this.reason = `no rollback window: ${rollback}`;
      this.stopSides();
    }
    return pauseMs;
  }

  /**
   * Holds writes, drains the writes in flight and `copier`'s copies (every worker's: each holds and
   * drains its own, then this one), points the main upstreams at `side` in every worker (nothing
   * switched anywhere if one cannot: those that did switch back), lets writes go. The time writes
   * were held, in ms.
   */
  private async switchTo(side: MigrationSide, copier: KeyCopier): Promise<number> {
    const { config, clientPause, members } = this.deps;
    const began = performance.now();
    const deadline = Date.now() + this.settings.cutoverMaxPauseMs;
    const before = currentUpstreams(this.deps);
    const refused = (why: string) => new MigrationRefusal(`${why}; nothing switched`);
    let membersSwitched = false;
    clientPause.holdWrites(true);
    try {
      if (members !== null) {
        const errors = await members.ask({ op: 'hold', deadline }, Math.max(1, deadline - Date.now()) + 100);
        if (errors.length > 0) throw refused(`not every worker drained its writes within ${this.settings.cutoverMaxPauseMs} ms (migration.cutoverMaxPauseMs): ${errors.join('; ')}`);
      }
      const drained = await drainUntil(
        () => this.writesInFlight > 0 || copier.inFlight > 0 || (copier === this.copier && this.dirty.size > 0),
        deadline,
        async () => {
          copier.flush();
          if (copier === this.copier && this.dirty.size > 0) await this.copyDirty(this.run);
        },
      );
      if (!drained) throw refused(`writes in flight did not drain within ${this.settings.cutoverMaxPauseMs} ms (migration.cutoverMaxPauseMs)`);
      if (members !== null) {
        membersSwitched = true;
        const errors = await members.ask({ op: 'switch', to: placeOf(side.address) }, this.settings.cutoverMaxPauseMs);
        if (errors.length > 0) throw refused(`not every worker could switch: ${errors.join('; ')}`);
      }
      await switchUpstreams(this.deps, side.address);
    } catch (err) {
      if (membersSwitched) {
        // Back where they were, carrying as before (a switch ends a member's carry).
        await members!.ask({ op: 'switch', to: before }, this.settings.cutoverMaxPauseMs);
        await members!.ask(side === this.target ? this.carryOp(this.source!, side) : this.carryOp(this.target!, side), MEMBERS_ANSWER_MS);
      }
      throw err instanceof MigrationRefusal ? err : err instanceof SwitchFailed ? new MigrationRefusal(err.message) : new MigrationRefusal((err as Error).message);
    } finally {
      clientPause.holdWrites(false);
      members?.tell({ op: 'release' });
    }
    return Math.round((performance.now() - began) * 10) / 10;
  }

  private endRollbackWindow(why: string): void {
    if (this.reverse === null) return;
    if (this.rollbackTimer !== null) clearTimeout(this.rollbackTimer);
    this.rollbackTimer = null;
    this.reverse = null;
    this.rollbackUntil = null;
    this.reason = why;
    this.deps.members?.tell({ op: 'stop' });
    this.deps.log.info({ event: 'migration_rollback_window_ended', reason: why }, `migration: ${why}`);
    this.stopSides();
  }

  // ---- abort ---------------------------------------------------------------------------------------

  /**
   * ABORT before the cutover: copying stops; a target that was empty is emptied again (FLUSHALL
   * on its primaries); the source is as it was. After the cutover, within the rollback window:
   * respool switches back to the source, which the window kept current.
   */
  async abort(): Promise<{ flushed: boolean; rolledBack: boolean }> {
    if (this.phase === 'cut-over' && this.reverse !== null) return this.rollback();
    if (!this.carriesWrites || this.phase === 'cutting-over') throw new MigrationRefusal(`no migration to abort (${this.phase}${this.phase === 'cut-over' ? ': its rollback window is over' : ''})`);
    this.run++;
    const target = this.target!;
    const flush = this.saved!.targetWasEmpty && !this.saved!.merge;
    this.phase = 'aborted';
    // Nothing restored after the FLUSHALL below: this process's copies ended, and every worker's.
    const [, members] = await Promise.all([this.copier!.stop(), this.deps.members?.ask({ op: 'stop' }, MEMBERS_ANSWER_MS) ?? []]);
    if (members.length > 0) this.reason = `not every worker stopped carrying: ${members.join('; ')}`;
    this.deps.members?.ended?.(); // nothing of the fleet's written there after the FLUSHALL below
    let flushed = false;
    if (flush) {
      try {
        for (const node of target.primaries()) await target.call(node, 0, ['FLUSHALL']);
        flushed = true;
      } catch (err) {
        this.reason = `the target was not emptied: ${(err as Error).message}`;
      }
      if (members.length > 0) flushed = false; // a worker may still have restored keys there
    }
    this.stopSides();
    removeSavedMigration(this.settings.stateFile);
    this.deps.log.info({ event: 'migration_aborted', targetEmptied: flushed }, 'migration aborted');
    return { flushed, rolledBack: false };
  }

  /** ABORT within the rollback window: the same switch as the cutover, back to the source. */
  private async rollback(): Promise<{ flushed: boolean; rolledBack: boolean }> {
    const reverse = this.reverse!;
    this.phase = 'cutting-over';
    let pauseMs: number;
    try {
      pauseMs = await this.switchTo(this.source!, reverse);
    } catch (err) {
      this.phase = 'cut-over';
      throw err;
    }
    this.endRollbackWindow('rolled back to the source');
    this.phase = 'aborted';
    this.deps.log.info({ event: 'migration_rolled_back', pauseMs, upstreams: this.deps.config.upstreams }, `migration rolled back: writes held ${pauseMs} ms; the upstreams are the source again`);
    return { flushed: false, rolledBack: true };
  }

  private stopSides(): void {
    this.quietSince = Date.now();
    if (this.retryTimer !== null) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    this.deps.members?.ended?.();
    this.deps.members?.tell({ op: 'status', status: this.status() });
    this.rates?.stop();
    this.source?.close();
    this.target?.close();
  }

  close(): void {
    this.run++;
    if (this.statusTimer !== null) clearInterval(this.statusTimer);
    if (this.rollbackTimer !== null) clearTimeout(this.rollbackTimer);
    this.stopSides();
  }

  // ---- status --------------------------------------------------------------------------------------

  status(): Record<string, string | number | boolean | null> {
    const saved = this.saved;
    const own = { ...(this.copier?.counts ?? { copied: 0, mirrored: 0, recopied: 0, deleted: 0, bytes: 0 }), writesSeen: this.writesSeen };
    // Every worker's copies: this one's scan and writes, the members' writes.
    const counts = this.deps.members === null ? own : sumCounts([own, this.deps.members.total()]);
    const tasks = saved?.tasks ?? [];
    const elapsed = Math.max(1, Date.now() - this.startedAt) / 1000;
    return {
      state: this.phase,
      target: saved === null ? null : `${saved.target.host}:${saved.target.port}`,
      reason: this.reason,
      resumed: this.resumed,
      scans_done: tasks.filter((t) => t.done).length,
      scans: tasks.length,
      copied: counts.copied,
      mirrored: counts.mirrored,
      recopied: counts.recopied,
      deleted: counts.deleted,
      bytes: counts.bytes,
      verified: this.verified,
      mismatched: this.mismatched,
      copies_in_flight: this.copier?.inFlight ?? 0,
      dirty: this.dirty.size,
      writes_seen: counts.writesSeen,
      keys_per_second: this.phase === 'copying' ? Math.round(counts.copied / elapsed) : 0,
      ...this.paceStatus(),
      source_writes_per_second: this.rates?.sourceWritesPerSecond ?? 0,
      unseen_writes_per_second: this.rates?.unseenWritesPerSecond ?? 0,
      cutover_pause_ms: this.cutoverPauseMs,
      cut_over_at: this.cutoverAt,
      rollback_until: this.rollbackUntil,
      carried_back: this.reverse?.counts.mirrored ?? 0,
    };
  }

  /** The scan's pace now and why (the latency guard: latency-guard.ts; 'off': migration.paceByLatency false). */
  private paceStatus(): Record<string, string | number> {
    const g = this.guard?.state() ?? null;
    const share = g?.share ?? 1;
    return {
      pace_keys_per_second: Math.round(this.settings.maxKeysPerSecond * share),
      pace_guard: g === null ? 'off' : g.guard,
      clients_p99_before_us: g?.p99BeforeUs ?? 0,
      clients_p99_us: g?.p99NowUs ?? 0,
    };
  }

  private save(now: boolean): void {
    const saved = this.saved;
    if (saved === null || (!now && Date.now() - this.lastSave < SAVE_EVERY_MS)) return;
    this.lastSave = Date.now();
    saved.counts = { ...this.copier!.counts };
    try {
      writeSavedMigration(this.settings.stateFile, saved);
    } catch (err) {
      this.deps.log.warn({ event: 'migration_state_unsaved', err: (err as Error).message }, `migration state not saved (a restart would begin again): ${(err as Error).message}`);
    }
  }
}

/** A pace that fell behind (a slow node) catches up at most this much: not a burst of everything it missed. */
const PACE_CATCH_UP_MS = 100;

/**
 * Paces the scan: at most share × maxKeys keys and share × maxBytes payload bytes (copied since
 * the last key, the writes' copies too) per second, where `share` (0..1) is the latency guard's.
 */
class Pacer {
  /** When the next key may start (performance.now()). */
  private nextAt = performance.now();
  private bytesSeen: number;

  constructor(
    private readonly maxKeys: number,
    private readonly maxBytes: number,
    private readonly bytes: () => number,
    private readonly share: () => number,
  ) {
    this.bytesSeen = bytes();
  }

  /** `keys` more copied: waits until the pace allows the next. */
  async after(keys: number): Promise<void> {
    const bytes = this.bytes();
    const share = this.share();
    const costMs = Math.max(keys / (this.maxKeys * share), (bytes - this.bytesSeen) / (this.maxBytes * share)) * 1000;
    this.bytesSeen = bytes;
    const now = performance.now();
    this.nextAt = Math.max(this.nextAt, now - PACE_CATCH_UP_MS) + costMs;
    const ahead = this.nextAt - now;
    if (ahead > 1) await sleep(ahead);
  }
}

/** Runs `work` over the items in groups of `size`, one group after another; false (and no more started) once one failed. */
async function inGroups<T>(items: readonly T[], size: number, work: (group: readonly T[]) => Promise<void>): Promise<boolean> {
  for (let i = 0; i < items.length; i += size) {
    try {
      await work(items.slice(i, i + size));
    } catch {
      return false;
    }
  }
  return true;
}

function databasesWithKeys(info: string): number[] {
  return [...info.matchAll(/^db(\d+):keys=(\d+)/gm)].filter((m) => Number(m[2]) > 0).map((m) => Number(m[1]));
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
