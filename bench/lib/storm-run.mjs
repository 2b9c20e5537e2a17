// A connection storm's pieces shared by bench/storm.mjs and bench/node-versions.mjs: the storm child
// (bench/lib/storm-child.mjs) run to its result line, and what a target's processes hold and spend
// (CPU, RSS, open fds) read from /proc.
import fs from 'node:fs';
import { log, sleep, spawn } from './common.mjs';
import { CLK_TCK } from './measure.mjs';

function statFields(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** utime + stime of these processes (every thread), in µs. */
export function cpuMicros(pids) {
  let ticks = 0;
  for (const pid of pids) {
    try {
      const f = statFields(pid);
      ticks += Number(f[11]) + Number(f[12]);
    } catch {
      /* gone */
    }
  }
  return (ticks * 1e6) / CLK_TCK;
}

export function rssBytes(pids) {
  let sum = 0;
  for (const pid of pids) {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    sum += m ? Number(m[1]) * 1024 : NaN;
  }
  return sum;
}

export function fdCount(pids) {
  let n = 0;
  for (const pid of pids) {
    try {
      n += fs.readdirSync(`/proc/${pid}/fd`).length;
    } catch {
      /* gone */
    }
  }
  return n;
}

/** Until the target's fd count is at most `base` (the storm's sockets closed), or timeout. */
export async function waitFdsBack(target, base, timeoutMs = 30_000) {
  const t0 = performance.now();
  for (;;) {
    const n = fdCount(target.pids());
    if (n <= base) return true;
    if (performance.now() - t0 > timeoutMs) {
      log(`${target.name}: still ${n} fds (base ${base}) after ${timeoutMs} ms`);
      return false;
    }
    await sleep(25);
  }
}

/**
 * A storm child: `count` connections to 127.0.0.1:port at once, in `mode` "hold" or "cycle"
 * (storm-child.mjs), under `nice` when not 0, with `node` (default: this process's runtime).
 * Resolves with the child (stop it when done) and its result line.
 */
export async function runStormChild(port, mode, count, { nice = 0, node = process.execPath } = {}) {
  const nodeArgs = ['bench/lib/storm-child.mjs', JSON.stringify({ port, count, mode })];
  const child = nice !== 0
    ? spawn('nice', ['-n', String(nice), node, ...nodeArgs], { match: `${node} bench/lib/storm-child.mjs` })
    : spawn(node, nodeArgs, { match: `${node} bench/lib/storm-child.mjs` });
  const t0 = Date.now();
  while (!child.out.includes('\n')) {
    if (child.exitCode !== null) throw new Error(`storm child exited: ${child.err}`);
    if (Date.now() - t0 > 120_000) throw new Error('storm did not finish in 120 s');
    await sleep(10);
  }
  return { child, result: JSON.parse(child.out.trim().split('\n')[0]) };
}
