// Slow readers of big replies (issue 35): the latency of normal clients while N slow readers of
// 1 MiB values are connected, for N = 0, 20 and 200, through respool (default settings, in a
// 256 MiB memory cgroup as a container with a memory limit runs it) and directly on Valkey, side
// by side in one run.
//
//   npm run bench:slow-readers  (= npm run build && npm run build:harness &&
//                                  bash -c 'ulimit -n <hard limit> && node bench/slow-readers.mjs')
//
// Env: BENCH_QUICK=1 (smoke run, under a minute: 1 round, 3 s runs, N = 0 and 20 only),
//      BENCH_ROUNDS (3), BENCH_SLOW_SECONDS (6 s: the normal clients' run beside the slow readers),
//      BENCH_SLOW_ALONE_SECONDS (2 s: the normal clients' run on the same fresh target before the
//      slow readers come), BENCH_SLOW_READERS ("0,20,200"), BENCH_SLOW_SETTLE_MS (1500: from
//      starting the slow readers to starting the normal clients), RESPOOL_BENCH_BIN (another
//      checkout's bin/respool.js; the section names the build it ran), RESPOOL_BENCH_EXTRA_ARGS
//      (appended to respool's command line, as in every bench: leave empty for default settings).
//
// Set-up: one valkey-server (no persistence) holding big:0 … big:19, each 1 MiB of the byte 'v'.
// Load, in child processes of their own (bench/lib/slow-readers-load.mjs, over the tests' load code
// test/harness/slow-readers.ts) so that neither event loop is the bench's:
//  - slow readers: N connections, each pipelining GET big:0 … GET big:19 in one write (20 MiB of
//    replies owed) and then reading at most 64 KiB/s, one socket read a second;
//  - normal clients: 4 connections, each SETting its own small key and GETting it back (one
//    pipeline of two), every reply checked, each round trip timed; p50/p99/max of those.
// A measured run for (target, N): a fresh target (respool started anew for every run; direct:
// Valkey with no client but the bench's INFO connection), the normal clients alone for ALONE s,
// then the slow readers (N > 0) and SETTLE ms for their connections and pipelines, then the normal
// clients for SECONDS s beside them, then the slow readers end (Valkey frees what it buffered for
// them when they go: up to 4 GiB for 200 of them), respool is stopped, and the next run waits
// until Valkey's INFO clients is back to the bench's own connection.
// respool: `node bin/respool.js --listen … --upstream … --mode standalone --connections-per-node 2`
// (bench/lib/common.mjs respoolArgs; otherwise every setting at its default, limits.maxMemory
// 'auto' included). As root on cgroup v1, it runs in a memory cgroup of its own
// (/sys/fs/cgroup/memory/respool-bench-<pid>-<n>, memory.limit_in_bytes and
// memory.memsw.limit_in_bytes 256 MiB), joined before exec so that 'auto' reads the limit at start;
// elsewhere without a limit (the section says so). Per respool run: peak RSS (VmRSS every 200 ms),
// OOM kills (oom_kill of memory.oom_control, or an exit by SIGKILL the bench did not send), clients
// disconnected for memory (its log lines with "event":"client_dropped", "reason":"max_memory" and a
// "client" field).
// Rounds: for each round, for each N, direct then respool (d0, r0, d20, r20, d200, r200, d0, …);
// medians over rounds, with every round's p99 alongside.
// Everything on 127.0.0.1, started here and stopped at the end.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  OUT_DIR, RespConn, envFlag, envInt, fmt, fmtInt, log, makeTmpRoot, mdTable, median, parseInfo, respoolArgs,
  run, shellLine, sleep, spawn, startValkey, stop, uniquePort, waitForPing, writeOutputs,
} from './lib/common.mjs';
import { rssBytes } from './lib/measure.mjs';
import { writeSection } from './lib/results-file.mjs';
import { RESPOOL_BIN, respoolBuildLabel } from './lib/respool-build.mjs';

const QUICK = envFlag('BENCH_QUICK');
const ROUNDS = envInt('BENCH_ROUNDS', QUICK ? 1 : 3);
const RUN_S = envInt('BENCH_SLOW_SECONDS', QUICK ? 3 : 6);
const ALONE_S = envInt('BENCH_SLOW_ALONE_SECONDS', 2);
const SETTLE_MS = envInt('BENCH_SLOW_SETTLE_MS', 1500);
const NS = (process.env.BENCH_SLOW_READERS || (QUICK ? '0,20' : '0,20,200')).split(',').map((s) => Number(s.trim())).filter((n) => Number.isInteger(n) && n >= 0);
const NORMAL_CLIENTS = 4;
const VALUES = 20;
const MiB = 1024 * 1024;
const VALUE_BYTES = MiB;
const READ_BYTES_PER_S = 65536; // bench/lib/slow-readers-load.mjs
const CGROUP_LIMIT = 256 * MiB;
const CGROUP_ROOT = '/sys/fs/cgroup/memory';
const RSS_SAMPLE_MS = 200;
const TARGETS = ['direct', 'respool'];
const LOAD = 'bench/lib/slow-readers-load.mjs';

const loadavg = () => fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
function openFileLimit() {
  const m = /Max open files\s+(\d+)/.exec(fs.readFileSync('/proc/self/limits', 'utf8'));
  return m ? Number(m[1]) : NaN;
}
const mib = (b) => (Number.isFinite(b) ? fmt(b / MiB, 0) : '—');

// ---------------------------------------------------------------- the memory cgroup

let cgroupSeq = 0;

/** Whether this process can give respool a cgroup v1 memory limit: root, and the v1 memory hierarchy mounted. */
function cgroupSupport() {
  if (process.getuid?.() !== 0) return { ok: false, why: 'not running as root' };
  if (!fs.existsSync(path.join(CGROUP_ROOT, 'memory.limit_in_bytes'))) return { ok: false, why: `no cgroup v1 memory controller at ${CGROUP_ROOT}` };
  const cg = makeCgroup(); // a trial: some containers mount it read-only
  if (!cg.dir) return { ok: false, why: cg.why };
  removeCgroupSync(cg.dir);
  return { ok: true };
}

/** A fresh memory cgroup limited to CGROUP_LIMIT (memsw too, where the kernel has it). */
function makeCgroup() {
  const dir = path.join(CGROUP_ROOT, `respool-bench-${process.pid}-${++cgroupSeq}`);
  try {
    fs.mkdirSync(dir);
  } catch (e) {
    return { why: `cannot make ${dir}: ${e.message}` };
  }
  try {
    fs.writeFileSync(path.join(dir, 'memory.limit_in_bytes'), String(CGROUP_LIMIT));
    const memsw = path.join(dir, 'memory.memsw.limit_in_bytes');
    if (fs.existsSync(memsw)) fs.writeFileSync(memsw, String(CGROUP_LIMIT));
  } catch (e) {
    removeCgroupSync(dir);
    return { why: `cannot set the limit of ${dir}: ${e.message}` };
  }
  return { dir };
}

function removeCgroupSync(dir) {
  try {
    fs.rmdirSync(dir);
    return true;
  } catch {
    return false;
  }
}

/** rmdir, retried: the kernel lets go of a group a moment after its last process exits. */
async function removeCgroup(dir) {
  for (let i = 0; i < 50; i++) {
    if (removeCgroupSync(dir) || !fs.existsSync(dir)) return true;
    await sleep(100);
  }
  log(`warning: could not remove ${dir}`);
  return false;
}

/** A `name value` line of a cgroup file, as a number (NaN when absent). */
function cgroupField(dir, file, name) {
  try {
    const line = fs.readFileSync(path.join(dir, file), 'utf8').split('\n').find((l) => l.startsWith(`${name} `));
    return line === undefined ? NaN : Number(line.split(' ')[1]);
  } catch {
    return NaN;
  }
}
function cgroupNumber(dir, file) {
  try {
    return Number(fs.readFileSync(path.join(dir, file), 'utf8').trim());
  } catch {
    return NaN;
  }
}

// ---------------------------------------------------------------- respool

/**
 * respool with bench/lib/common.mjs's arguments (startRespool's), in a fresh memory cgroup when
 * `useCgroup`: started through `sh -c 'echo $$ > cgroup.procs && exec node …'`, so the process is
 * in the group before node starts. Samples its VmRSS every RSS_SAMPLE_MS.
 */
async function startRespoolRun(upstreamPort, useCgroup, logFile) {
  const port = await uniquePort();
  const args = respoolArgs(port, upstreamPort);
  let cgroup = null;
  if (useCgroup) {
    const cg = makeCgroup();
    if (!cg.dir) throw new Error(cg.why);
    cgroup = cg.dir;
  }
  fs.mkdirSync(path.dirname(logFile), { recursive: true });
  fs.writeFileSync(logFile, ''); // one log per start
  const match = `${process.execPath} ${args[0]}`; // its /proc cmdline after the exec
  const child = cgroup
    ? spawn('sh', ['-c', 'echo $$ > "$0" && exec "$@"', path.join(cgroup, 'cgroup.procs'), process.execPath, ...args], { logFile, match })
    : spawn(process.execPath, args, { logFile, match });
  const r = {
    port, child, cgroup, logFile, peakRss: 0, killedByBench: false, exitedEarly: null,
    cmd: shellLine('node', args),
  };
  const sample = () => {
    try {
      const b = rssBytes([child.pid]); // NaN for a zombie (no VmRSS line)
      if (Number.isFinite(b)) r.peakRss = Math.max(r.peakRss, b);
    } catch {
      /* gone */
    }
  };
  r.sampler = setInterval(sample, RSS_SAMPLE_MS);
  child.exited.then(({ code, signal }) => {
    if (!r.stopping) r.exitedEarly = { code, signal, at: new Date().toISOString() };
  });
  try {
    await waitForPing(port, { child, what: 'respool', timeoutMs: 15_000 });
  } catch (e) {
    clearInterval(r.sampler);
    await stop(child);
    if (cgroup) await removeCgroup(cgroup);
    const lines = fs.readFileSync(logFile, 'utf8').split('\n').map((l) => l.trim()).filter(Boolean);
    e.message += ` (${path.relative(process.cwd(), logFile)}: ${lines.slice(-3).join(' ⏎ ').slice(0, 600) || 'empty'})`;
    throw e;
  }
  sample();
  return r;
}

/** Stop respool (SIGTERM; SIGKILL after 15 s, noted as the bench's), read what the run did to it, remove its cgroup. */
async function stopRespoolRun(r) {
  r.stopping = true;
  const alive = r.child.exitCode === null && r.child.signalCode === null;
  let t;
  if (alive) {
    r.child.kill('SIGTERM');
    t = setTimeout(() => {
      r.killedByBench = true;
      r.child.kill('SIGKILL');
    }, 15_000);
  }
  const { code, signal } = await r.child.exited;
  clearTimeout(t);
  clearInterval(r.sampler);
  const out = { exit: { code, signal }, exitedEarly: r.exitedEarly, killedByBench: r.killedByBench, peakRssBytes: r.peakRss || NaN };
  if (r.cgroup) {
    out.cgroup = r.cgroup;
    out.cgroupOomKills = cgroupField(r.cgroup, 'memory.oom_control', 'oom_kill');
    out.cgroupMaxUsageBytes = cgroupNumber(r.cgroup, 'memory.max_usage_in_bytes');
    out.cgroupFailcnt = cgroupNumber(r.cgroup, 'memory.failcnt');
    out.cgroupRemoved = await removeCgroup(r.cgroup);
  }
  const sigkilled = signal === 'SIGKILL' && !r.killedByBench;
  out.oomKills = Math.max(Number.isFinite(out.cgroupOomKills) ? out.cgroupOomKills : 0, sigkilled ? 1 : 0);
  Object.assign(out, respoolLogCounts(r.logFile));
  return out;
}

/** From respool's JSON log: clients disconnected for memory, and the other client_dropped reasons. */
function respoolLogCounts(logFile) {
  const lines = fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8').split('\n').filter(Boolean) : [];
  let droppedForMemory = 0; // lines naming one client
  let summarized = 0; // clients past the 20 listed per check, in its summary line
  let limit = null;
  const otherDrops = {};
  for (const line of lines) {
    if (!line.includes('"event":"client_dropped"')) continue;
    let e = null;
    try {
      e = JSON.parse(line);
    } catch {
      /* not JSON: fall back to the text */
    }
    const reason = e ? e.reason : /"reason":"([^"]+)"/.exec(line)?.[1];
    if (reason === 'max_memory') {
      if (e ? typeof e.client === 'string' : line.includes('"client":"')) droppedForMemory++;
      else if (e && typeof e.clients === 'number') summarized += Math.max(0, e.clients - 20);
      if (e && typeof e.limit === 'number') limit = e.limit;
    } else {
      otherDrops[reason ?? '?'] = (otherDrops[reason ?? '?'] ?? 0) + 1;
    }
  }
  return { droppedForMemory, droppedForMemoryPastListed: summarized, maxMemoryLimitLogged: limit, otherDrops,
    otherDropCount: Object.values(otherDrops).reduce((a, b) => a + b, 0) };
}

// ---------------------------------------------------------------- the load children

/** The normal clients for `ms` on `port`, in a child; resolves its JSON line. */
async function normalRun(port, ms, prefix) {
  const args = [LOAD, 'normal', String(port), String(NORMAL_CLIENTS), String(ms), prefix];
  const r = await run(process.execPath, args, { timeoutMs: ms + 60_000 });
  const line = r.out.trim().split('\n').filter(Boolean).pop();
  if (r.code !== 0 || !line) throw new Error(`normal clients (${shellLine('node', args)}) exited ${r.code ?? r.signal}${r.timedOut ? ' (timed out)' : ''}: ${r.err.trim().slice(0, 400)}`);
  return JSON.parse(line);
}

/** N slow readers on `port`, in a child; resolves once they are all connected and their pipelines written. */
async function startSlow(port, n, seconds) {
  const args = [LOAD, 'slow', String(port), String(n), String(seconds)];
  const child = spawn(process.execPath, args, { match: `${process.execPath} ${LOAD}` });
  const t0 = performance.now();
  for (;;) {
    const line = child.out.split('\n').find((l) => l.includes('"ready"'));
    if (line) return { child, t0, ready: JSON.parse(line) };
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`slow readers exited (${child.exitCode ?? child.signalCode}): ${child.err.trim().slice(0, 400)}`);
    if (performance.now() - t0 > 60_000) {
      await stop(child);
      throw new Error(`slow readers: ${n} connections not made within 60 s`);
    }
    await sleep(20);
  }
}

/** End the slow readers (SIGTERM: it prints its last line, stops its sockets and exits). */
async function endSlow(slow) {
  await stop(slow.child, 10_000);
  const line = slow.child.out.split('\n').filter((l) => l.includes('"ended"')).pop();
  return line ? JSON.parse(line) : { ended: NaN, error: `no last line (${slow.child.exitCode ?? slow.child.signalCode}): ${slow.child.err.trim().slice(0, 300)}` };
}

// ---------------------------------------------------------------- main

async function main() {
  const started = new Date();
  const limit = openFileLimit();
  const maxN = Math.max(...NS);
  if (limit < maxN * 2 + 200) log(`warning: ulimit -n is ${limit}; ${maxN} slow readers through respool need about ${maxN * 2 + 200} (run via npm run bench:slow-readers)`);
  const cg = cgroupSupport();
  log(cg.ok ? `respool runs in a ${CGROUP_LIMIT / MiB} MiB memory cgroup (v1) per run` : `respool runs WITHOUT a memory limit: ${cg.why}`);

  const result = {
    bench: 'slow-readers', started: started.toISOString(), loadavgStart: loadavg(), quick: QUICK, machine: machine(),
    config: { rounds: ROUNDS, runSeconds: RUN_S, aloneSeconds: ALONE_S, settleMs: SETTLE_MS, slowReaders: NS, normalClients: NORMAL_CLIENTS,
      values: VALUES, valueBytes: VALUE_BYTES, readBytesPerSecond: READ_BYTES_PER_S, cgroup: cg.ok ? { limitBytes: CGROUP_LIMIT, root: CGROUP_ROOT } : { none: cg.why } },
    respool: { build: respoolBuildLabel(), bin: RESPOOL_BIN },
    runs: [], errors: [],
  };

  const tmpRoot = makeTmpRoot('slow-readers-');
  const valkey = await startValkey({ tmpRoot, name: 'valkey-slow' });
  result.valkeyCmd = valkey.cmd;
  let monitor;
  let current = null; // the respool run in progress, stopped in finally if a run throws
  let slow = null;
  try {
    monitor = await RespConn.connect(valkey.port);
    const value = 'v'.repeat(VALUE_BYTES);
    for (let i = 0; i < VALUES; i++) {
      const r = await monitor.callT(10_000, 'SET', `big:${i}`, value);
      if (r !== 'OK') throw new Error(`SET big:${i} answered ${JSON.stringify(r?.message ?? r)}`);
    }
    const len = await monitor.callT(3000, 'STRLEN', `big:${VALUES - 1}`);
    if (len !== VALUE_BYTES) throw new Error(`STRLEN big:${VALUES - 1} = ${len}`);
    log(`valkey-server on ${valkey.port} holds big:0 … big:${VALUES - 1} (${VALUE_BYTES} bytes each)`);

    const info = async (section) => parseInfo(await monitor.callT(10_000, 'INFO', section));
    const flush = async () => {
      const t0 = performance.now();
      for (;;) {
        const c = await info('clients');
        const m = await info('memory');
        if (c.connected_clients <= 2 && m.mem_clients_normal < 16 * MiB) return { ms: performance.now() - t0, usedMemory: m.used_memory };
        if (performance.now() - t0 > 120_000) throw new Error(`Valkey still has ${c.connected_clients} clients and ${m.mem_clients_normal} bytes of client buffers after 120 s`);
        await sleep(100);
      }
    };

    for (let round = 1; round <= ROUNDS; round++) {
      log(`round ${round}/${ROUNDS} (load ${loadavg()})`);
      for (const n of NS) {
        for (const target of TARGETS) {
          const tag = `${target} N=${n} round ${round}`;
          const x = { round, n, target };
          let port = valkey.port;
          if (target === 'respool') {
            current = await startRespoolRun(valkey.port, cg.ok, path.join(OUT_DIR, 'respool-slow-readers.log'));
            port = current.port;
            result.respool.cmd ??= current.cmd.replace(/:\d+( |$)/g, ':<port>$1');
          }
          x.alone = await normalRun(port, ALONE_S * 1000, `alone-${round}-${n}-${target}`);
          if (n > 0) {
            slow = await startSlow(port, n, SETTLE_MS / 1000 + RUN_S + 120);
            x.slowReady = slow.ready;
            const waited = performance.now() - slow.t0;
            if (waited < SETTLE_MS) await sleep(SETTLE_MS - waited);
          }
          // Diagnostic, not awaited until the run is over: how long Valkey itself (the bench's own
          // connection) takes to answer a PING sent as the normal clients start.
          const pingT0 = performance.now();
          const ping = monitor.callT(120_000, 'PING').then(() => performance.now() - pingT0, () => NaN);
          x.during = await normalRun(port, RUN_S * 1000, `normal-${round}-${n}-${target}`);
          x.valkeyPingAtStartMs = await ping;
          const mem = await info('memory');
          const cl = await info('clients');
          x.valkeyAtEnd = { usedMemory: mem.used_memory, memClientsNormal: mem.mem_clients_normal, connectedClients: cl.connected_clients };
          if (slow) {
            x.slow = await endSlow(slow);
            slow = null;
          }
          if (current) {
            x.respool = await stopRespoolRun(current);
            current = null;
          }
          x.flush = await flush();
          const rr = x.respool;
          log(`${tag}: p50 ${fmt(x.during.p50)} ms, p99 ${fmt(x.during.p99)} ms (alone ${fmt(x.alone.p99)} ms), max ${fmt(x.during.max, 1)} ms, ` +
            `${x.during.ok} ok, ${x.during.errors} errors${x.slow ? `; slow readers ended ${x.slow.ended}/${n}` : ''}` +
            `; Valkey answered the bench's PING in ${fmt(x.valkeyPingAtStartMs, 1)} ms` +
            `; valkey client buffers ${mib(x.valkeyAtEnd.memClientsNormal)} MiB` +
            (rr ? `; respool peak RSS ${mib(rr.peakRssBytes)} MiB, OOM kills ${rr.oomKills}, dropped for memory ${rr.droppedForMemory}` +
              `${rr.otherDropCount ? `, other drops ${JSON.stringify(rr.otherDrops)}` : ''}${rr.exitedEarly ? `, EXITED during the run ${JSON.stringify(rr.exitedEarly)}` : ''}` : '') +
            `; flushed in ${fmtInt(x.flush.ms)} ms`);
          if (x.during.errors) log(`  first errors: ${JSON.stringify(x.during.firstErrors)}`);
          result.runs.push(x);
        }
      }
    }
  } finally {
    if (slow) await stop(slow.child);
    if (current) await stopRespoolRun(current).catch(() => {});
    monitor?.close();
    await stop(valkey.child);
    fs.rmSync(tmpRoot, { recursive: true, force: true });
  }
  result.finished = new Date().toISOString();
  result.loadavgEnd = loadavg();
  report(result);
}

function machine() {
  const sh = (cmd, args) => {
    try {
      return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim().split('\n')[0];
    } catch {
      return '?';
    }
  };
  const cpu = (fs.readFileSync('/proc/cpuinfo', 'utf8').match(/model name\s*:\s*(.*)/)?.[1] ?? os.cpus()[0]?.model ?? '?').trim();
  return {
    nproc: os.availableParallelism?.() ?? os.cpus().length, cpu, memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    kernel: `${os.type()} ${os.release()}`, node: process.version, valkey: sh('valkey-server', ['--version']),
  };
}

// ---------------------------------------------------------------- report

function report(result) {
  const runs = result.runs;
  const rounds = [...new Set(runs.map((x) => x.round))];
  const get = (round, n, target) => runs.find((x) => x.round === round && x.n === n && x.target === target);
  const of = (n, target) => rounds.map((r) => get(r, n, target)).filter(Boolean);
  const perRound = (xs, f, digits = 2) => xs.map((x, i) => fmt(f(x, i), digits)).join(' / ');
  const withRounds = (xs, f, digits = 2) => `${fmt(median(xs.map((x, i) => f(x, i))), digits)}${xs.length > 1 ? ` (${perRound(xs, f, digits)})` : ''}`;
  const sum = (xs, f) => xs.reduce((s, x) => s + (Number(f(x)) || 0), 0);
  const m = result.machine;
  const cgroupOn = !result.config.cgroup.none;

  const rows = [];
  const summary = {};
  for (const n of NS) {
    for (const target of TARGETS) {
      const xs = of(n, target);
      if (!xs.length) continue;
      const vsZero = xs.map((x) => x.during.p99 / (get(x.round, 0, target)?.during.p99 ?? NaN));
      const isR = target === 'respool';
      const drops = xs.map((x) => x.respool?.droppedForMemory);
      const past = sum(xs, (x) => x.respool?.droppedForMemoryPastListed);
      rows.push([
        n, target,
        fmt(median(xs.map((x) => x.during.p50)), 2),
        withRounds(xs, (x) => x.during.p99),
        fmt(median(xs.map((x) => x.alone.p99)), 2),
        n === 0 ? '1.00' : withRounds(xs, (_, i) => vsZero[i]),
        fmt(Math.max(...xs.map((x) => x.during.max)), 1),
        `${fmtInt(median(xs.map((x) => x.during.ok)))}`,
        `${sum(xs, (x) => x.during.errors)} / ${sum(xs, (x) => x.alone.errors)}`,
        mib(median(xs.map((x) => x.valkeyAtEnd.memClientsNormal))),
        isR ? mib(Math.max(...xs.map((x) => x.respool.peakRssBytes).filter(Number.isFinite))) : '—',
        isR ? String(sum(xs, (x) => x.respool.oomKills)) : '—',
        isR ? `${fmt(median(drops), 0)}${past ? ` (+${past} past the 20 listed, summed)` : ''}` : '—',
        isR ? fmt(median(xs.map((x) => x.respool.otherDropCount)), 0) : '—',
      ]);
      summary[`${target}:${n}`] = {
        p50: median(xs.map((x) => x.during.p50)), p99: median(xs.map((x) => x.during.p99)), aloneP99: median(xs.map((x) => x.alone.p99)),
        p99VsZero: median(vsZero), errors: sum(xs, (x) => x.during.errors),
        ...(isR ? { peakRssBytes: Math.max(...xs.map((x) => x.respool.peakRssBytes).filter(Number.isFinite)), oomKills: sum(xs, (x) => x.respool.oomKills), droppedForMemory: median(drops) } : {}),
      };
    }
  }
  const ratioRows = NS.map((n) => {
    const ratios = rounds.map((r) => (get(r, n, 'respool')?.during.p99 ?? NaN) / (get(r, n, 'direct')?.during.p99 ?? NaN));
    const p50s = rounds.map((r) => (get(r, n, 'respool')?.during.p50 ?? NaN) / (get(r, n, 'direct')?.during.p50 ?? NaN));
    summary[`ratio:${n}`] = { p99: median(ratios), p50: median(p50s) };
    return [n, fmt(median(ratios), 2), ratios.length > 1 ? ratios.map((v) => fmt(v, 2)).join(' / ') : '—', fmt(median(p50s), 2)];
  });
  result.summary = summary;

  const mainTable = mdTable(
    ['slow readers', 'target', 'p50 ms (median)', 'p99 ms (median; per round)', 'alone p99 ms (median)', 'p99 / same target\'s N=0 p99 (median; per round)',
      'max ms (max)', 'round trips (median)', 'errors beside / alone (sum)', 'Valkey client buffers MiB (median)',
      'respool peak RSS MiB (max)', 'OOM kills (sum)', 'clients disconnected for memory (median)', 'other client_dropped (median)'],
    rows, ['r', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
  );
  const ratioTable = mdTable(
    ['slow readers', 'p99 respool / direct (median of per-round ratios)', 'per round', 'p50 respool / direct (median)'],
    ratioRows,
  );
  const errs = runs.reduce((s, x) => s + x.during.errors + x.alone.errors, 0);
  const early = runs.filter((x) => x.respool?.exitedEarly);
  const limitLogged = [...new Set(runs.map((x) => x.respool?.maxMemoryLimitLogged).filter((v) => v != null))];
  const slowPing = runs.filter((x) => x.valkeyPingAtStartMs > 100);
  const firstErrors = runs.flatMap((x) => (x.during.firstErrors ?? []).map((e) => `${x.target} N=${x.n} r${x.round}: ${e}`)).slice(0, 5);

  const md = [
    '## Slow readers of big replies (issue 35)',
    '',
    `${QUICK ? '**BENCH_QUICK=1 smoke run — not for comparison.** ' : ''}` +
      `One valkey-server (no persistence) holding ${VALUES} values of 1 MiB (\`big:0\` … \`big:${VALUES - 1}\`, the byte \`v\`). ` +
      `N = ${NS.join(', ')} slow readers each pipeline \`GET big:0\` … \`GET big:${VALUES - 1}\` in one write (${VALUES} MiB of replies owed to each) and then read at most ${READ_BYTES_PER_S / 1024} KiB/s, one socket read a second; ` +
      `beside them ${NORMAL_CLIENTS} normal clients each SET their own small key and GET it back (one pipeline of two), every reply checked, each round trip timed; ` +
      'both in child processes of their own (bench/lib/slow-readers-load.mjs over test/harness/slow-readers.ts). ' +
      `Each measured run starts a fresh target — respool started anew, or Valkey with no other client — runs the normal clients alone for ${ALONE_S} s, starts the slow readers and waits ${fmt(SETTLE_MS / 1000, 1)} s for their connections and pipelines, ` +
      `then times the normal clients for ${RUN_S} s beside them; then the slow readers go (Valkey frees what it buffered for them) and the next run waits until Valkey's INFO clients is back to the bench's own connection. ` +
      `respool has its default settings (\`${result.respool.cmd ?? 'not run'}\`; limits.maxMemory \`auto\`)` +
      (cgroupOn
        ? `, each run in a memory cgroup of its own limited to ${CGROUP_LIMIT / MiB} MiB (cgroup v1 memory.limit_in_bytes and memory.memsw.limit_in_bytes, joined before node starts, as in a container with a memory limit)` +
          `${limitLogged.length ? `; the ceiling it resolved, from its log: ${limitLogged.map((v) => `${fmtInt(v)} bytes (${fmt(v / MiB, 0)} MiB)`).join(', ')}` : ''}. `
        : `, **without a memory limit** (${result.config.cgroup.none}: no cgroup, so limits.maxMemory \`auto\` is off). `) +
      `Rounds: ${rounds.length}, each running, for every N, direct then respool; medians over rounds, each round's p99 in parentheses. ` +
      `Peak RSS: VmRSS of respool every ${RSS_SAMPLE_MS} ms; OOM kills: the cgroup's memory.oom_control oom_kill, or an exit by a SIGKILL the bench did not send; disconnected for memory: respool's log lines with \`"event":"client_dropped"\`, \`"reason":"max_memory"\` and a \`"client"\` field. ` +
      `Rerun: \`npm run bench:slow-readers\`. respool build: ${result.respool.build}. ` +
      `Machine: ${m.nproc} cores (${m.cpu}), ${m.memoryGiB} GiB, ${m.kernel}, node ${m.node}, ${m.valkey.replace(/ sha=.*/, '')}; load average ${result.loadavgStart} at the start, ${result.loadavgEnd} at the end. ` +
      `Date: ${result.started} – ${result.finished}.`,
    '',
    mainTable,
    '',
    ratioTable,
    '',
    '**How to read:** latencies are the normal clients\' SET+GET round trips (ms) while the slow readers are connected; "alone" is the same target, fresh, just before the slow readers came. ' +
      '"p99 / same target\'s N=0 p99" compares with the run without slow readers of the same round and target. Valkey holds every slow reader\'s 20 MiB in its own client output buffers ' +
      '("Valkey client buffers", INFO memory mem_clients_normal at the end of the run: through respool, only respool\'s links are Valkey\'s clients). ' +
      'A slow reader notices that respool closed its connection only once it has read what was already in its socket buffers, so the readers\' own count of ended connections (bench/out/slow-readers.json, runs[].slow.ended) lags behind respool\'s log; the table counts the log. ' +
      (slowPing.length ? `Valkey itself took ${slowPing.map((x) => `${fmtInt(x.valkeyPingAtStartMs)} ms (${x.target} N=${x.n}, round ${x.round})`).join(', ')} to answer the bench's own PING, sent to it as the normal clients started (runs[].valkeyPingAtStartMs; over 100 ms listed). ` : '') +
      `Errors beside / alone: ${errs ? `**${errs}**` : 'none'}` + (firstErrors.length ? ` (first: ${firstErrors.join('; ')})` : '') + '. ' +
      (early.length ? `**respool exited during ${early.length} run(s):** ${early.map((x) => `N=${x.n} round ${x.round} ${JSON.stringify(x.respool.exitedEarly)}`).join('; ')}. ` : '') +
      'All processes share this machine\'s cores, on loopback.',
    '',
    'Raw numbers: bench/out/slow-readers.json.',
  ].join('\n');
  console.log(md);
  writeOutputs('slow-readers', result, md);
  writeSection('slow-readers', md);
  log('wrote the slow-readers section in bench/RESULTS.md');
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
