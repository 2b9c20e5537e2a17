import cluster from 'node:cluster';
import { Migration, type MigrationDeps } from './migration.js';
import { MigrationMember } from './migration-member.js';
import { COORDINATOR_INDEX, isMigrationMessage, MigrationMembers, readJoin, type Send } from './migration-members.js';
import { switchUpstreams } from './upstream-switch.js';

export interface ProcessMigration {
  /** The coordinator's (or a lone process's) Migration, or another worker's MigrationMember. */
  migration: Migration | MigrationMember;
  /** The coordinator's end of the members' channel (its RESPOOL MIGRATE commands are answered there), or null. */
  members: MigrationMembers | null;
  /** Before clients are served: a saved migration resumed, or what the supervisor says a new worker joins. */
  start(): Promise<void>;
}

/**
 * This process's part in a live migration: a lone respool runs it whole; with workers (node's
 * cluster module), worker 0 coordinates it and every other worker is a member
 * (migration-members.ts). Copies are confirmed whenever more than one process may copy a key.
 */
export function migrationForThisProcess(deps: Omit<MigrationDeps, 'members' | 'confirmCopies'>): ProcessMigration {
  if (!cluster.isWorker) {
    const migration = new Migration({ ...deps, members: null, confirmCopies: false });
    return { migration, members: null, start: () => migration.resumeSaved() };
  }
  const send: Send = (msg) => {
    if (process.send !== undefined && process.connected) process.send(msg);
  };
  const join = readJoin();
  if (Number(process.env['RESPOOL_WORKER_INDEX'] ?? '0') === COORDINATOR_INDEX) {
    const members = new MigrationMembers(send);
    // Confirmed even with one worker: a takeover runs an old and a new worker 0 side by side for a while.
    const migration = new Migration({ ...deps, members, confirmCopies: true });
    process.on('message', (msg: unknown) => {
      if (isMigrationMessage(msg)) members.receive(msg);
    });
    return {
      migration,
      members,
      start: async () => {
        if (join.switched !== null) await switchUpstreams(deps, join.switched).catch((err: Error) => deps.log.error({ event: 'migration_join_failed', err: err.message }, `a cutover moved the upstreams, but this worker could not follow: ${err.message}`));
        await migration.resumeSaved();
      },
    };
  }
  const member = new MigrationMember({ ...deps, send });
  process.on('message', (msg: unknown) => {
    if (isMigrationMessage(msg)) member.receive(msg);
  });
  return { migration: member, members: null, start: () => member.join(join) };
}
