import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import type { Logger } from 'pino';
import type { HostPort } from '../config/types.js';
import type { SidePlace } from './migration-side.js';
import { placeOf } from './sign-ins.js';
import { formatHostPort } from '../config/values.js';

/** What the record holds: the upstreams the config names, and where a cutover moved them. */
interface RecordedMove {
  version: 1;
  configured: HostPort[];
  to: SidePlace;
  at: number;
}

/**
 * Where a cutover (or a rollback) moved this process's main upstreams, kept on disk so that a
 * respool restarted with a config that still names the old side starts where they went — not on
 * the old side, which the cutover left behind (writes there would be lost to the clients' data).
 * The file sits beside migration.stateFile (`respool-migration.json` →
 * `respool-migration.upstreams.json`): the copy's state comes and goes with each migration, the
 * move outlives it. Every process that switches writes it (workers of one instance write the
 * same content; the rename makes each write whole). Credentials are not in it (sign-ins.ts).
 *
 *   no file                      the config's upstreams
 *   configured = the config's    the upstreams are `to` (a warning: put them in the config)
 *   to = the config's upstreams  the config was updated: the file is removed
 *   anything else                of other upstreams: left, with a warning
 */
export class CutoverRecord {
  readonly path: string;

  constructor(stateFile: string, private readonly configured: readonly HostPort[], private readonly log: Logger) {
    this.path = cutoverRecordPath(stateFile);
  }

  /** Where the configured upstreams moved, or null (none recorded, the config names them already, or a record of other upstreams). */
  read(): { to: SidePlace; at: number } | null {
    let saved: RecordedMove;
    try {
      saved = JSON.parse(readFileSync(this.path, 'utf8')) as RecordedMove;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') this.log.warn({ event: 'migration_upstreams_record_unreadable', file: this.path, err: (err as Error).message }, `${this.path}: not read (${(err as Error).message}); the configured upstreams are used`);
      return null;
    }
    if (saved.version !== 1 || !Array.isArray(saved.configured) || !Array.isArray(saved.to?.seeds)) {
      this.log.warn({ event: 'migration_upstreams_record_unreadable', file: this.path }, `${this.path}: not a record this respool writes; the configured upstreams are used`);
      return null;
    }
    if (sameSeeds(saved.to.seeds, this.configured)) {
      this.remove(); // the operator put the new upstreams in the config
      return null;
    }
    if (!sameSeeds(saved.configured, this.configured)) {
      this.log.warn({ event: 'migration_upstreams_record_other', file: this.path }, `${this.path} records a move of other upstreams (${names(saved.configured)}) than the configured ${names(this.configured)}: not followed`);
      return null;
    }
    return { to: saved.to, at: saved.at };
  }

  /** The main upstreams now point at `to`: recorded, or the record removed when that is the configured upstreams again (a rollback). */
  moved(to: SidePlace): void {
    if (sameSeeds(to.seeds, this.configured)) {
      this.remove();
      return;
    }
    const record: RecordedMove = { version: 1, configured: this.configured.map((u) => ({ host: u.host, port: u.port })), to: placeOf(to), at: Date.now() };
    const temporary = `${this.path}.${process.pid}.tmp`;
    try {
      writeFileSync(temporary, JSON.stringify(record), { mode: 0o600 });
      renameSync(temporary, this.path);
    } catch (err) {
      this.log.error({ event: 'migration_upstreams_record_failed', file: this.path, err: (err as Error).message }, `the upstreams moved to ${names(to.seeds)} but ${this.path} could not be written (${(err as Error).message}): put them in the config before this respool restarts`);
    }
  }

  private remove(): void {
    try {
      rmSync(this.path, { force: true });
    } catch (err) {
      this.log.warn({ event: 'migration_upstreams_record_failed', file: this.path, err: (err as Error).message }, `${this.path} could not be removed: ${(err as Error).message}`);
    }
  }
}

/** The record's file, beside the copy's state file. */
export function cutoverRecordPath(stateFile: string): string {
  return stateFile.endsWith('.json') ? `${stateFile.slice(0, -'.json'.length)}.upstreams.json` : `${stateFile}.upstreams`;
}

function sameSeeds(a: readonly HostPort[], b: readonly HostPort[]): boolean {
  return names(a) === names(b);
}

function names(seeds: readonly HostPort[]): string {
  return seeds.map(formatHostPort).sort().join(',');
}
