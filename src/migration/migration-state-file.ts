import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import type { CopyCounts } from './key-copier.js';

/** One SCAN of the source: a primary (a standalone source's only node) and a database. */
export interface ScanTask {
  host: string;
  port: number;
  db: number;
  /** SCAN's cursor to go on from ("0" and done: finished). */
  cursor: string;
  done: boolean;
}

/** What a migration keeps on disk so that a restarted respool goes on where it stopped (no credentials: those come from the config). */
export interface SavedMigration {
  version: 1;
  /** The upstreams respool was in front of: a saved migration resumes only in front of the same ones. */
  source: Array<{ host: string; port: number }>;
  target: { host: string; port: number };
  merge: boolean;
  /** The target held no key when the migration started (ABORT may empty it again). */
  targetWasEmpty: boolean;
  startedAt: number;
  tasks: ScanTask[];
  counts: CopyCounts;
}

/** Reads the saved migration, or null when there is none (or it cannot be read: said in `problem`). */
export function readSavedMigration(path: string): { saved: SavedMigration | null; problem: string | null } {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    return { saved: null, problem: (err as NodeJS.ErrnoException).code === 'ENOENT' ? null : (err as Error).message };
  }
  try {
    const saved = JSON.parse(text) as SavedMigration;
    if (saved.version !== 1 || !Array.isArray(saved.tasks)) return { saved: null, problem: `${path}: not a migration state this respool writes` };
    return { saved, problem: null };
  } catch (err) {
    return { saved: null, problem: `${path}: ${(err as Error).message}` };
  }
}

/** Writes it whole (a temporary file renamed over the old one: a crash leaves one or the other). */
export function writeSavedMigration(path: string, saved: SavedMigration): void {
  const temporary = `${path}.${process.pid}.tmp`;
  writeFileSync(temporary, JSON.stringify(saved), { mode: 0o600 });
  renameSync(temporary, path);
}

export function removeSavedMigration(path: string): void {
  rmSync(path, { force: true });
}
