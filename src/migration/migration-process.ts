import cluster from 'node:cluster';
import { Migration, type MigrationDeps } from './migration.js';
import { MigrationMember } from './migration-member.js';
import { COORDINATOR_INDEX, IpcMemberLink, isMigrationMessage, MigrationMembers, readJoin, type Send } from './migration-members.js';
import { switchUpstreams } from './upstream-switch.js';
import { FleetMemberLink, FleetMembers, FleetMigration } from './fleet-migration.js';
import type { FleetState } from '../fleet/fleet-state.js';
import type { FleetStore } from '../fleet/fleet-store.js';

/** This process's part in a migration, whichever it is. */
export type MigrationHandle = Migration | MigrationMember | FleetMigration;

export interface ProcessMigration {
  /** The coordinator's (or a lone process's) Migration, another worker's MigrationMember, or a fleet member's both. */
  migration: MigrationHandle;
  /** Before clients are served: a saved migration resumed, or what the supervisor says a new worker joins. */
  start(): Promise<void>;
}

/** RESPOOL MIGRATE run by a Migration (handlers/respool-migrate.ts migrateReply): a member's command forwarded to it. */
export type Answer = (migration: Migration, args: readonly Buffer[], protocol: 2 | 3) => Promise<Buffer>;

/**
 * This process's part in a live migration: a lone respool runs it whole; with workers (node's
 * cluster module), worker 0 coordinates it and every other worker is a member
 * (migration-members.ts); in a fleet with its shared state, the member (each worker of each
 * instance) that ran START coordinates, the others follow (fleet-migration.ts). Copies are
 * confirmed whenever more than one process may copy a key.
 */
export function migrationForThisProcess(fleet: { state: FleetState; store: FleetStore } | null, answer: Answer, deps: Omit<MigrationDeps, 'members' | 'confirmCopies'>): ProcessMigration {
  if (fleet !== null) {
    const members = new FleetMembers(fleet.state, fleet.store, () => deps.config.upstreams, deps.log);
    const local = new Migration({ ...deps, members, confirmCopies: true });
    members.onCommand((args, protocol) => answer(local, args, protocol));
    const member = new MigrationMember(deps);
    const link = new FleetMemberLink(fleet.state, fleet.store, member);
    return { migration: new FleetMigration(local, member, link, members, answer), start: () => local.resumeSaved() };
  }
  if (!cluster.isWorker) {
    const migration = new Migration({ ...deps, members: null, confirmCopies: false });
    return { migration, start: () => migration.resumeSaved() };
  }
  const send: Send = (msg) => {
    if (process.send !== undefined && process.connected) process.send(msg);
  };
  const join = readJoin();
  if (Number(process.env['RESPOOL_WORKER_INDEX'] ?? '0') === COORDINATOR_INDEX) {
    const members = new MigrationMembers(send);
    // Confirmed even with one worker: a takeover runs an old and a new worker 0 side by side for a while.
    const migration = new Migration({ ...deps, members, confirmCopies: true });
    members.onCommand((args, protocol) => answer(migration, args, protocol));
    process.on('message', (msg: unknown) => {
      if (isMigrationMessage(msg)) members.receive(msg);
    });
    return {
      migration,
      start: async () => {
        if (join.switched !== null) await switchUpstreams(deps, join.switched).catch((err: Error) => deps.log.error({ event: 'migration_join_failed', err: err.message }, `a cutover moved the upstreams, but this worker could not follow: ${err.message}`));
        await migration.resumeSaved();
      },
    };
  }
  const member = new MigrationMember(deps);
  const link = new IpcMemberLink(member, send);
  process.on('message', (msg: unknown) => {
    if (isMigrationMessage(msg)) link.receive(msg);
  });
  return { migration: member, start: () => member.join(join) };
}
