// Shared by bench/hotkeys.mjs and bench/near-cache.mjs: load from bench/lib/hotkeys-loadgen.mjs
// processes against one port (their counts and latency histograms summed, the CPU of named
// processes over the run) or against several ports in turn (runAlternating: CPU per request of
// each, slot by slot), and CPU caps on processes with cgroup v1 (cpu.cfs_quota_us under
// /sys/fs/cgroup/cpu; the caller says so when that is not writable). Every cgroup made here is
// removed on exit, its processes moved back to the root group first.
import fs from 'node:fs';
import path from 'node:path';
import { log, sleep, spawn } from './common.mjs';
import { cpuSeconds, runTimeNs } from './measure.mjs';

// ---------------------------------------------------------------- cgroup v1 caps

export const CGROUP_ROOT = '/sys/fs/cgroup/cpu';
export const CFS_PERIOD_US = 100_000;

const cgroups = [];

/** Put `pid` in a cgroup of its own capped at `quotaUs` per CFS_PERIOD_US; throws when cgroup v1 is not writable. */
export function capProcess(pid, quotaUs) {
  const dir = path.join(CGROUP_ROOT, `respool-bench-${process.pid}-${cgroups.length}`);
  fs.mkdirSync(dir);
  cgroups.push(dir);
  fs.writeFileSync(path.join(dir, 'cpu.cfs_period_us'), String(CFS_PERIOD_US));
  fs.writeFileSync(path.join(dir, 'cpu.cfs_quota_us'), String(quotaUs));
  fs.writeFileSync(path.join(dir, 'cgroup.procs'), String(pid));
  return dir;
}

/** A new quota for every cap made here (-1: uncapped). */
export function setCapQuota(quotaUs) {
  for (const dir of cgroups) fs.writeFileSync(path.join(dir, 'cpu.cfs_quota_us'), String(quotaUs));
}

/** How many caps are in place. */
export const capCount = () => cgroups.length;

/** Move every capped process back to the root group and remove the cgroups made here. */
export function removeCaps() {
  for (const dir of cgroups.splice(0)) {
    try {
      for (const pid of fs.readFileSync(path.join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean)) {
        fs.writeFileSync(path.join(CGROUP_ROOT, 'cgroup.procs'), pid);
      }
      fs.rmdirSync(dir);
    } catch (e) {
      log(`could not remove cgroup ${dir}: ${e.message}`);
    }
  }
}
process.on('exit', removeCaps);

// ---------------------------------------------------------------- CPU of named processes

/** utime+stime (seconds) of each named pid, from /proc/<pid>/stat. */
export const cpuSnapshot = (pids) => Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, cpuSeconds(pid)]));
/** % of one core each named pid used between two snapshots `seconds` apart. */
export const cpuPercent = (a, b, seconds) => Object.fromEntries(Object.keys(a).map((k) => [k, ((b[k] - a[k]) / seconds) * 100]));

// ---------------------------------------------------------------- load generators

const LOADGEN = 'bench/lib/hotkeys-loadgen.mjs';

/** `gens` generator processes with these options (pinned to `cpus` with taskset when given). */
function spawnLoadgens(gens, opts, cpus) {
  const args = [LOADGEN, JSON.stringify(opts)];
  const match = `${process.execPath} ${LOADGEN}`;
  return Array.from({ length: gens }, () =>
    (cpus === undefined ? spawn(process.execPath, args, { match }) : spawn('taskset', ['-c', String(cpus), process.execPath, ...args], { match })));
}

/** Each generator's JSON line, once it has exited. */
const loadgenResults = (children) => Promise.all(children.map(async (g) => {
  await g.exited;
  const line = g.out.trim().split('\n').pop();
  if (!line) throw new Error(`load generator failed: ${g.err}`);
  return JSON.parse(line);
}));

/**
 * Run `gens` hotkeys-loadgen.mjs processes × `conns` connections × `depth` pipelined GETs against
 * 127.0.0.1:`port` for `seconds` (they connect first and start together 1.5 s after launch).
 * Share `hotShare` of the GETs on `hotKey`, the rest uniform over `coldKeys` keys `coldPrefix`N.
 * `pids`: { name: pid } whose CPU is measured over the run (the generators are added as loadgenN).
 * `cpus`: a CPU list for taskset (e.g. '1') to pin the generators, or undefined.
 * Returns { ops, errors, nils, seconds, opsPerSec, p50, p99 (ms), cpu: { name: % of one core } }.
 */
export async function runLoadgens({ port, seconds, gens, conns, depth, hotKey, coldPrefix = 'bench:cold:', coldKeys = 1, hotShare, pids = {}, cpus }) {
  const startAt = Date.now() + 1500; // generators connect first
  const children = spawnLoadgens(gens, { port, conns, depth, hotKey, coldPrefix, coldKeys, hotShare, startAt, durationMs: seconds * 1000 }, cpus);
  const allPids = { ...pids };
  children.forEach((g, i) => (allPids[`loadgen${i + 1}`] = g.pid));
  await sleep(Math.max(0, startAt - Date.now()));
  const t0 = performance.now();
  const a = cpuSnapshot(allPids);
  await sleep(seconds * 1000);
  const b = cpuSnapshot(allPids);
  const elapsed = (performance.now() - t0) / 1000;
  const results = await loadgenResults(children);
  const hist = new Map();
  let ops = 0;
  let errors = 0;
  let nils = 0;
  for (const r of results) {
    ops += r.ops;
    errors += r.errors;
    nils += r.nils;
    for (const [k, v] of Object.entries(r.hist)) hist.set(Number(k), (hist.get(Number(k)) ?? 0) + v);
  }
  return { ops, errors, nils, seconds, opsPerSec: ops / seconds, p50: histPercentile(hist, ops, 0.5), p99: histPercentile(hist, ops, 0.99), cpu: cpuPercent(a, b, elapsed) };
}

/**
 * The same generators against several ports in turn: `schedule` names, per slot of `slotMs`, the
 * index in `ports` that gets every request then (hotkeys-loadgen.mjs, alternating). `pids[i]` is
 * the process behind ports[i]; its CPU (runTimeNs, read at every slot boundary) from the start of
 * a slot to the start of its port's next slot (or the end, after the drain) is charged to that
 * slot: the work of the slot's requests and of their replies draining, plus the process's idle
 * ticking while the others are measured. Returns { errors, nils, slots: [{ slot, port, ops,
 * cpuNs, cpuUsPerOp }] } with `port` the index into `ports`.
 */
export async function runAlternating({ ports, pids, schedule, slotMs, gens, conns, depth, hotKey = 'unused', coldPrefix = 'bench:cold:', coldKeys = 1, hotShare, cpus }) {
  const durationMs = schedule.length * slotMs;
  const startAt = Date.now() + 1500; // generators connect first
  const children = spawnLoadgens(gens, { ports, schedule, slotMs, conns, depth, hotKey, coldPrefix, coldKeys, hotShare, startAt, durationMs }, cpus);
  const samples = [];
  for (let k = 0; k <= schedule.length; k++) {
    await sleep(Math.max(0, startAt + k * slotMs - Date.now()));
    samples.push(pids.map(runTimeNs));
  }
  const results = await loadgenResults(children);
  samples.push(pids.map(runTimeNs)); // after the drain
  const slots = schedule.map((port, slot) => {
    let next = schedule.indexOf(port, slot + 1);
    if (next < 0) next = samples.length - 1;
    const ops = results.reduce((s, r) => s + r.slotOps[slot], 0);
    const cpuNs = samples[next][port] - samples[slot][port];
    return { slot, port, ops, cpuNs, cpuUsPerOp: cpuNs / 1000 / ops };
  });
  return { errors: results.reduce((s, r) => s + r.errors, 0), nils: results.reduce((s, r) => s + r.nils, 0), slots };
}

/** Milliseconds at quantile q from the generators' bucket histogram (hotkeys-loadgen.mjs bucketOf). */
export function histPercentile(hist, total, q) {
  const want = total * q;
  let seen = 0;
  for (const k of [...hist.keys()].sort((x, y) => x - y)) {
    seen += hist.get(k);
    if (seen >= want) return k < 1000 ? (k * 10 + 5) / 1000 : 10 + (k - 1000) + 0.5;
  }
  return NaN;
}
