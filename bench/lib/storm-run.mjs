// A connection storm's pieces shared by bench/storm.mjs and bench/node-versions.mjs: the storm child
// (bench/lib/storm-child.mjs) run to its result line, what a target's processes hold and spend
// (CPU, RSS, open fds) read from /proc, and the two measurements made of them: RSS per held
// connection and CPU per connect + PING + close.
import fs from 'node:fs';
import { log, sleep, spawn, stop } from './common.mjs';
import { cpuSeconds, rssBytes } from './measure.mjs';

/** utime + stime of these processes (every thread), in µs; a process that is gone counts 0. */
export function cpuMicros(pids) {
  let seconds = 0;
  for (const pid of pids) {
    const s = cpuSeconds(pid);
    if (!Number.isNaN(s)) seconds += s;
  }
  return seconds * 1e6;
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

/**
 * RSS per idle connection of `target` ({ name, port, pids() }): a warm-up storm (connect + PING +
 * close, so JIT-compiled paths are in place), then `count` connections held open for `settleMs`;
 * (RSS then − before) / count, no GC forced. Every storm socket is closed again on return.
 */
export async function heldRssPerConnection(target, count, settleMs, opts = {}) {
  const base = fdCount(target.pids());
  const warm = await runStormChild(target.port, 'cycle', Math.min(count, 3000), opts);
  await stop(warm.child);
  await waitFdsBack(target, base);
  const rss0 = rssBytes(target.pids());
  const held = await runStormChild(target.port, 'hold', count, opts);
  await sleep(settleMs);
  const perConnection = (rssBytes(target.pids()) - rss0) / count;
  await stop(held.child);
  await waitFdsBack(target, base);
  return perConnection;
}

/**
 * CPU per connection of `target`: a storm of `count` connections, each closed after its PONG,
 * nothing else running; the CPU of the target's processes until it closed them all (+ 300 ms),
 * less its idle rate (measured over 1 s before). Returns the storm child's result and the CPU.
 */
export async function stormCpuPerConnection(target, count, opts = {}) {
  await sleep(500);
  const pids = target.pids();
  const fdBase = fdCount(pids);
  const i0 = cpuMicros(pids);
  const it0 = performance.now();
  await sleep(1000);
  const idleRate = (cpuMicros(pids) - i0) / (performance.now() - it0); // µs per ms
  log(`${target.name}: storm of ${count} connections (connect + PING + close), idle CPU ${((idleRate * 100) / 1000).toFixed(1)}%`);
  const c0 = cpuMicros(pids);
  const t0 = performance.now();
  const cycle = await runStormChild(target.port, 'cycle', count, opts);
  await waitFdsBack(target, fdBase);
  await sleep(300);
  const c1 = cpuMicros(pids);
  const elapsed = performance.now() - t0;
  await stop(cycle.child);
  const perConnUs = (c1 - c0 - idleRate * elapsed) / count;
  return { cycle, cpu: { perConnUs, totalMs: (c1 - c0) / 1000, idleRatePct: (idleRate * 100) / 1000, elapsedMs: elapsed } };
}
