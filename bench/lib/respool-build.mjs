// Which respool build a bench runs: RESPOOL_BENCH_BIN (another checkout's bin/respool.js, e.g. a
// clean export of a commit built on its own) or this repository's bin/respool.js over its dist/
// (built from the work tree as it is, uncommitted edits included).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT_DIR } from './common.mjs';

export const RESPOOL_BIN = process.env.RESPOOL_BENCH_BIN || 'bin/respool.js';

/** A short description of the build: commit, and whether the work tree had edits under src/. */
export function respoolBuildLabel() {
  const dir = path.resolve(ROOT_DIR, path.dirname(RESPOOL_BIN), '..');
  const git = (...args) => execFileSync('git', args, { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  const commitFile = path.join(dir, 'COMMIT');
  if (fs.existsSync(commitFile)) return `commit ${fs.readFileSync(commitFile, 'utf8').trim()} (clean export, built on its own)`;
  try {
    const head = git('rev-parse', '--short', 'HEAD');
    const dirty = git('status', '--porcelain', '--', 'src').split('\n').filter(Boolean).length;
    return `commit ${head}${dirty ? ` + uncommitted edits in ${dirty} file(s) under src/` : ''}`;
  } catch {
    return `${RESPOOL_BIN} (no git information)`;
  }
}
