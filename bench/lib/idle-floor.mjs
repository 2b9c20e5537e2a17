// Node's own idle floor for the memory benches (bench/footprint.mjs, bench/memory-for-cpu.mjs):
// an empty TCP server that answers any chunk with +PONG (so it can be waited for as respool is),
// run with `node -e`, no module file, the smallest process a runtime makes that listens.
import { HOST, spawn } from './common.mjs';

const FLOOR_SRC = `require('net').createServer((s) => s.on('data', () => s.write('+PONG\\r\\n'))).listen(Number(process.argv[1]), '${HOST}')`;

/** The floor on `port`, run by `node` with `nodeFlags` (stop it with common.mjs stop()). */
export function spawnIdleFloor(port, { node = process.execPath, nodeFlags = [] } = {}) {
  return spawn(node, [...nodeFlags, '-e', FLOOR_SRC, String(port)], { match: node });
}
