// Throughput, latency and cost per request: valkey-benchmark against one standalone valkey-server,
// directly, through respool and through twemproxy (nutcracker), side by side in one run.
//
//   node bench/throughput.mjs            (normally via bash bench/run.sh)
//
// Env: BENCH_QUICK=1 (short runs), BENCH_ROUNDS (5), BENCH_N_P1 (200000), BENCH_N_P16 (1500000),
//      BENCH_CLIENTS (50), BENCH_TWEMPROXY_CONNECTIONS (2), BENCH_RUN_TIMEOUT_S (180),
//      BENCH_WARMUP_N (20000 per target, pipeline and test before round 1; 0: none),
//      BENCH_PROBE_N_P1 (100000), BENCH_PROBE_N_P16 (500000), BENCH_SKIP_PROBE=1 (no instrumented respool),
//      BENCH_STRACE_N_P1 (20000), BENCH_STRACE_N_P16 (100000), BENCH_SKIP_STRACE=1 (no syscall counts),
//      RESPOOL_BENCH_SKIP_RESPOOL=1 (leave respool out), RESPOOL_BENCH_EXTRA_ARGS (more CLI flags),
//      RESPOOL_BENCH_BIN (another respool entry script instead of bin/respool.js).
//   node bench/throughput.mjs --render bench/out/throughput-STAMP.json   (redo the report only)
//
// Each round runs every target once per pipeline depth and test (GET, SET: one valkey-benchmark
// invocation each), the targets back to back in an order rotated every round, so machine noise
// lands on all targets alike. Per run: rps and latency (valkey-benchmark's summary and HdrHistogram
// percentile lines, for p99.9), CPU time (utime+stime from /proc/<pid>/stat) of valkey-server,
// respool and twemproxy over the run ÷ requests, and for respool its prom-client event-loop delay
// and GC figures (GET /metrics on its admin port right before and right after the run).
// Reported: medians over rounds with their min–max, and the median of per-round ratios.
//
// Also, outside the compared runs:
// - an instrumented respool (a second instance, preloading bench/lib/respool-probe.mjs), one run per
//   pipeline and test in every round: V8 heap bytes allocated per request (v8.GCProfiler), every
//   GC pause (PerformanceObserver), event-loop delay at 1 ms resolution;
// - after the rounds, `strace -c -f -p PID` on respool, twemproxy and valkey-server (direct)
//   during short runs: system calls per 1,000 requests.
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import {
  BENCH_DIR, HOST, OUT_DIR, RESPOOL_CONNECTIONS_PER_NODE, RespConn, checkSetGet, envFlag, envInt, fmt, fmtInt,
  log, makeTmpRoot, mdTable, median, parseInfo, run, sleep, startRespool, startTwemproxy, startValkey,
  respoolArgs, shellLine, stop, upstreamConnsByOwner, writeOutputs,
} from './lib/common.mjs';
import { lineCharts, writeChart } from './lib/svg-chart.mjs';
import {
  CLK_TCK, PROM_ELD_RESOLUTION_MS, cpuSeconds, parseBenchmarkText, probeMark, respoolMetricsDelta, scrapeMetrics, straceCounts,
} from './lib/measure.mjs';

const QUICK = envFlag('BENCH_QUICK');
const SKIP_RESPOOL = envFlag('RESPOOL_BENCH_SKIP_RESPOOL');
const SKIP_PROBE = SKIP_RESPOOL || envFlag('BENCH_SKIP_PROBE');
const SKIP_STRACE = envFlag('BENCH_SKIP_STRACE');
const ROUNDS = envInt('BENCH_ROUNDS', QUICK ? 1 : 5);
const N = { 1: envInt('BENCH_N_P1', QUICK ? 20_000 : 200_000), 16: envInt('BENCH_N_P16', QUICK ? 200_000 : 1_500_000) };
const PROBE_N = { 1: envInt('BENCH_PROBE_N_P1', QUICK ? 20_000 : 100_000), 16: envInt('BENCH_PROBE_N_P16', QUICK ? 200_000 : 500_000) };
const STRACE_N = { 1: envInt('BENCH_STRACE_N_P1', 20_000), 16: envInt('BENCH_STRACE_N_P16', 100_000) };
const WARMUP_N = envInt('BENCH_WARMUP_N', QUICK ? 5_000 : 20_000);
const CLIENTS = envInt('BENCH_CLIENTS', 50);
const DATA_SIZE = 100;
const PIPELINES = [1, 16];
const TWEMPROXY_CONNS = envInt('BENCH_TWEMPROXY_CONNECTIONS', 2);
const RUN_TIMEOUT_MS = envInt('BENCH_RUN_TIMEOUT_S', 180) * 1000;
const TARGETS = ['direct', 'respool', 'twemproxy'];
const TESTS = ['GET', 'SET'];
const SAMPLE_EVERY_MS = 250;
const PROBE_FILE = path.join(OUT_DIR, 'respool-probe.jsonl');
const PROBE_URL = pathToFileURL(path.join(BENCH_DIR, 'lib', 'respool-probe.mjs')).href;
const PROBE_ELD_MS = 1;

function benchArgs(port, pipeline, test, n) {
  return ['-h', HOST, '-p', String(port), '-c', String(CLIENTS), '-n', String(n), '-d', String(DATA_SIZE),
    '-P', String(pipeline), '-t', test.toLowerCase()];
}

/** CPU seconds of every process we started, now. */
const cpuNow = (pids) => Object.fromEntries(Object.entries(pids).filter(([, p]) => p).map(([k, p]) => [k, cpuSeconds(p)]));

async function main() {
  const tmpRoot = makeTmpRoot();
  fs.mkdirSync(OUT_DIR, { recursive: true });
  const started = new Date();
  const result = {
    bench: 'throughput',
    started: started.toISOString(),
    quick: QUICK,
    config: { rounds: ROUNDS, n: N, probeN: PROBE_N, straceN: STRACE_N, warmupN: WARMUP_N, clients: CLIENTS, dataSize: DATA_SIZE,
      pipelines: PIPELINES, tests: TESTS, twemproxyServerConnections: TWEMPROXY_CONNS,
      respoolConnectionsPerNode: RESPOOL_CONNECTIONS_PER_NODE, skipRespool: SKIP_RESPOOL, skipProbe: SKIP_PROBE,
      skipStrace: SKIP_STRACE, clkTck: CLK_TCK, promEldResolutionMs: PROM_ELD_RESOLUTION_MS, probeEldResolutionMs: PROBE_ELD_MS },
    commands: {},
    errors: [],
    runs: [],
    probeRuns: [],
    strace: [],
  };
  let valkey, twem, respool, probe, info;
  const live = { direct: true, respool: !SKIP_RESPOOL, twemproxy: true, probe: !SKIP_PROBE };
  try {
    valkey = await startValkey({ tmpRoot });
    result.commands.valkey = valkey.cmd;
    log(`valkey-server on ${valkey.port}`);
    info = await RespConn.connect(valkey.port);
    // Warm the key valkey-benchmark uses (no -r: "key:__rand_int__") so GETs hit from the start.
    await info.call('SET', 'key:__rand_int__', 'x'.repeat(DATA_SIZE));

    twem = await startTwemproxy({ upstreamPort: valkey.port, serverConnections: TWEMPROXY_CONNS, tmpRoot });
    result.commands.twemproxy = twem.cmd;
    result.twemproxyConfig = twem.config;
    await checkSetGet(twem.port, 'twemproxy');
    log(`twemproxy on ${twem.port} (server_connections: ${TWEMPROXY_CONNS})`);

    if (SKIP_RESPOOL) result.commands.respool = `# skipped (RESPOOL_BENCH_SKIP_RESPOOL=1): ${shellLine('node', respoolArgs('PORT', valkey.port))}`;
    else {
      try {
        respool = await startRespool({ upstreamPort: valkey.port, admin: true, logFile: path.join(OUT_DIR, 'respool-throughput.log') });
        result.commands.respool = respool.cmd;
        await checkSetGet(respool.port, 'respool');
        await scrapeMetrics(respool.adminPort);
        log(`respool on ${respool.port} (admin ${respool.adminPort})`);
      } catch (e) {
        log(`respool unusable: ${e.message}`);
        result.errors.push(`respool: ${e.message}`);
        live.respool = false;
        live.probe = false;
        await stop(respool?.child);
      }
    }
    if (live.probe) {
      try {
        fs.rmSync(PROBE_FILE, { force: true });
        probe = await startRespool({
          upstreamPort: valkey.port, admin: true, logFile: path.join(OUT_DIR, 'respool-throughput-probe.log'),
          nodeArgs: ['--import', PROBE_URL],
          env: { RESPOOL_BENCH_PROBE_OUT: PROBE_FILE, RESPOOL_BENCH_PROBE_ELD_MS: String(PROBE_ELD_MS) },
        });
        result.commands.respoolProbe = probe.cmd.replace(PROBE_URL, './bench/lib/respool-probe.mjs').replace(PROBE_FILE, 'bench/out/respool-probe.jsonl');
        await checkSetGet(probe.port, 'respool (instrumented)');
        await probeMark(probe.child, PROBE_FILE);
        log(`instrumented respool on ${probe.port} (admin ${probe.adminPort})`);
      } catch (e) {
        log(`instrumented respool unusable: ${e.message}`);
        result.errors.push(`instrumented respool: ${e.message}`);
        live.probe = false;
        await stop(probe?.child);
      }
    }
    const ports = { direct: valkey.port, respool: respool?.port, twemproxy: twem.port, probe: probe?.port };
    const pids = () => ({ valkey: valkey.child.pid, respool: respool?.child.pid, twemproxy: twem.child.pid, probe: probe?.child.pid });
    const owners = () => ({ respool: respool?.child.pid, twemproxy: twem.child.pid, 'respool (instrumented)': probe?.child.pid });
    result.idleUpstreamConns = await upstreamConnsByOwner(info, owners(), valkey.port);
    log('idle upstream connections by owner:', JSON.stringify(result.idleUpstreamConns));

    result.commands.benchmark = `valkey-benchmark -h ${HOST} -p PORT -c ${CLIENTS} -n {${N[1]}|${N[16]}} -d ${DATA_SIZE} -P {1|16} -t {get|set}`;
    const ctx = { info, upstreamPort: valkey.port, owners, pids, respool, probe };

    if (WARMUP_N > 0) {
      log(`warm-up: ${WARMUP_N} requests per target, pipeline and test (not measured)`);
      for (const target of [...TARGETS, 'probe']) {
        if (!live[target]) continue;
        for (const pipeline of PIPELINES) {
          for (const test of TESTS) await run('valkey-benchmark', [...benchArgs(ports[target], pipeline, test, WARMUP_N), '-q'], { timeoutMs: RUN_TIMEOUT_MS });
        }
      }
    }

    for (let round = 1; round <= ROUNDS; round++) {
      const order = TARGETS.map((_, i) => TARGETS[(i + round - 1) % TARGETS.length]);
      log(`round ${round}: order ${order.join(', ')}`);
      for (const pipeline of PIPELINES) {
        for (const test of TESTS) {
          for (const target of order) {
            if (!live[target]) continue;
            const r = await oneRun({ ...ctx, target, port: ports[target], pipeline, test, n: N[pipeline], round });
            result.runs.push(r);
            if (r.error) {
              result.errors.push(`${target} ${test} P${pipeline} round ${round}: ${r.error}`);
              if (target === 'respool' && (respool.child.exitCode !== null || respool.child.signalCode !== null)) {
                live.respool = false;
                result.errors.push('respool exited; its remaining runs are skipped');
              }
            }
          }
        }
      }
      if (live.probe) {
        for (const pipeline of PIPELINES) {
          for (const test of TESTS) {
            const r = await oneRun({ ...ctx, target: 'probe', port: ports.probe, pipeline, test, n: PROBE_N[pipeline], round });
            result.probeRuns.push(r);
            if (r.error) {
              result.errors.push(`instrumented respool ${test} P${pipeline} round ${round}: ${r.error}`);
              if (probe.child.exitCode !== null || probe.child.signalCode !== null) {
                live.probe = false;
                result.errors.push('instrumented respool exited; its remaining runs are skipped');
              }
            }
          }
        }
      }
    }

    if (!SKIP_STRACE) {
      const straced = { respool: respool?.child.pid, twemproxy: twem.child.pid, direct: valkey.child.pid };
      result.commands.strace = `strace -c -f -U name,calls,errors -o FILE -p PID   (PID: respool, twemproxy, or valkey-server for "direct"), around valkey-benchmark … -n {${STRACE_N[1]}|${STRACE_N[16]}} -P {1|16} -t {get|set}`;
      for (const pipeline of PIPELINES) {
        for (const test of TESTS) {
          for (const target of ['respool', 'twemproxy', 'direct']) {
            if (!live[target]) continue;
            const n = STRACE_N[pipeline];
            const args = benchArgs(ports[target], pipeline, test, n);
            log(`strace ${target} ${test} P${pipeline}: valkey-benchmark ${args.join(' ')}`);
            try {
              const { calls, errors, fnResult: res } = await straceCounts(straced[target], path.join(tmpRoot, `strace-${target}-${test}-${pipeline}.txt`),
                () => run('valkey-benchmark', args, { timeoutMs: RUN_TIMEOUT_MS }));
              const parsed = parseBenchmarkText(res.out)[test] ?? {};
              const rec = { target, test, pipeline, n, calls, errors, rpsUnderStrace: parsed.rps, exitCode: res.code };
              if (res.code !== 0 || parsed.requests !== n) rec.error = `valkey-benchmark exited ${res.code}, ${parsed.requests ?? 0} of ${n} requests`;
              result.strace.push(rec);
              const per = (k) => fmt(((calls[k] ?? 0) / n) * 1000, 0);
              log(`  → per 1,000 requests: read ${per('read')}, write ${per('write')}, writev ${per('writev')}, epoll_ctl ${per('epoll_ctl')}${rec.error ? ' ERROR ' + rec.error : ''}`);
              if (rec.error) result.errors.push(`strace ${target} ${test} P${pipeline}: ${rec.error}`);
            } catch (e) {
              result.errors.push(`strace ${target} ${test} P${pipeline}: ${e.message}`);
              log(`  strace failed: ${e.message}`);
            }
          }
        }
      }
    }
  } finally {
    info?.close();
    await stop(probe?.child);
    await stop(respool?.child);
    await stop(twem?.child);
    await stop(valkey?.child);
    fs.rmSync(tmpRoot, { recursive: true, force: true });
  }
  result.finished = new Date().toISOString();
  result.summary = summarize(result);
  writeOutputs('throughput', result, markdown(result));
  if (result.errors.length) {
    log(`finished with ${result.errors.length} error(s):\n  ${result.errors.join('\n  ')}`);
    process.exitCode = 1;
  }
}

async function oneRun({ target, port, upstreamPort, pipeline, test, n, round, info, owners, pids, respool, probe }) {
  const args = benchArgs(port, pipeline, test, n);
  const main = target !== 'probe';
  const admin = target === 'respool' ? respool : target === 'probe' ? probe : null;
  const before = parseInfo(await info.call('INFO', 'stats'));
  const samples = [];
  const snapshots = [];
  let benchPid;
  let done = false;
  // respool's metrics and the probe first (a scrape resets prom-client's event-loop histogram),
  // then CPU, right before valkey-benchmark starts.
  let metricsBefore, metricsErr;
  if (admin) metricsBefore = await scrapeMetrics(admin.adminPort).catch((e) => ((metricsErr = e), null));
  let probeErr;
  if (target === 'probe') await probeMark(probe.child, PROBE_FILE).catch((e) => (probeErr = e));
  const cpu0 = cpuNow(pids());
  const t0 = Date.now();
  // INFO clients every 250 ms; every 4th tick (from 500 ms on) also attribute CLIENT LIST to
  // processes; the snapshot nearest the middle of the run is reported. Not for the probe's runs.
  const sampler = (async () => {
    for (let tick = 1; main && !done; tick++) {
      await sleep(SAMPLE_EVERY_MS);
      if (done) break;
      try {
        const c = parseInfo(await info.callT(2000, 'INFO', 'clients'));
        samples.push({ t: Date.now() - t0, connected: c.connected_clients - 1 });
        if (tick % 4 === 2 && benchPid) {
          const m = await upstreamConnsByOwner(info, { ...owners(), 'valkey-benchmark': benchPid }, upstreamPort);
          if (!done) snapshots.push({ atMs: Date.now() - t0, ...m });
        }
      } catch {
        /* a missed sample is fine */
      }
    }
  })();
  const label = target === 'probe' ? 'respool (instrumented)' : target;
  log(`round ${round} ${test} P${pipeline} ${label}: valkey-benchmark ${args.join(' ')}`);
  const res = await run('valkey-benchmark', args, { timeoutMs: RUN_TIMEOUT_MS, onSpawn: (ch) => (benchPid = ch.pid) });
  const cpu1 = cpuNow(pids());
  done = true;
  let probeLine;
  if (target === 'probe' && !probeErr) probeLine = await probeMark(probe.child, PROBE_FILE).catch((e) => ((probeErr = e), null));
  let metricsAfter;
  if (admin && metricsBefore) metricsAfter = await scrapeMetrics(admin.adminPort).catch((e) => ((metricsErr = e), null));
  await sampler;
  const mid = snapshots.length
    ? snapshots.reduce((best, x) => (Math.abs(x.atMs - res.ms / 2) < Math.abs(best.atMs - res.ms / 2) ? x : best))
    : null;
  const after = parseInfo(await info.call('INFO', 'stats'));
  const parsed = parseBenchmarkText(res.out)[test];
  const cpuSec = Object.fromEntries(Object.keys(cpu1).map((k) => [k, cpu1[k] - cpu0[k]]));
  const cpuUsPerReq = Object.fromEntries(Object.entries(cpuSec).map(([k, v]) => [k, (v / n) * 1e6]));
  const r = {
    round, target, pipeline, test, n, ms: Math.round(res.ms), exitCode: res.code,
    bench: parsed ?? null,
    cpuSec, cpuUsPerReq,
    upstream: {
      connectionsAccepted: after.total_connections_received - before.total_connections_received,
      commandsProcessed: after.total_commands_processed - before.total_commands_processed,
      connectedSamples: samples,
      connectedMin: samples.length ? Math.min(...samples.map((s) => s.connected)) : null,
      connectedMax: samples.length ? Math.max(...samples.map((s) => s.connected)) : null,
      midRunByOwner: mid,
    },
    stderr: res.err.trim().slice(0, 2000),
  };
  if (metricsBefore && metricsAfter) r.respoolMetrics = respoolMetricsDelta(metricsBefore, metricsAfter);
  if (probeLine) r.probe = probeLine;
  if (res.timedOut) r.error = `timed out after ${RUN_TIMEOUT_MS / 1000} s`;
  else if (res.code !== 0) r.error = `valkey-benchmark exited ${res.code}: ${res.err.trim().slice(0, 300)}`;
  else if (!parsed?.rps || parsed.requests !== n) r.error = `no complete ${test} report from valkey-benchmark (${parsed?.requests ?? 0} of ${n} requests)`;
  else if (metricsErr) r.error = `respool /metrics: ${metricsErr.message}`;
  else if (probeErr) r.error = `probe: ${probeErr.message}`;
  const who = target === 'direct' ? 'valkey' : target;
  const extra = r.respoolMetrics ? `; GC ${r.respoolMetrics.gc.count} (${fmt(r.respoolMetrics.gc.ms, 1)} ms), loop p99 late ${fmt(r.respoolMetrics.eld.p99LateMs, 2)} ms` : '';
  const alloc = r.probe ? `; heap ${fmtInt(r.probe.heap.allocatedBytes / n)} B/req` : '';
  log(`  → ${(res.ms / 1000).toFixed(1)} s: ${fmtInt(parsed?.rps)} rps, p50/p99/p99.9 ${fmt(parsed?.p50Ms, 3)}/${fmt(parsed?.p99Ms, 3)}/${fmt(parsed?.p999Ms, 3)} ms; ` +
    `${who} CPU ${fmt(cpuUsPerReq[who], 2)} µs/req${extra}${alloc}${r.error ? ' ERROR ' + r.error : ''}`);
  return r;
}

// ---------------------------------------------------------------- summary

/** { median, min, max, values } of the finite values (null when none). */
function stat(xs) {
  const v = xs.filter((x) => Number.isFinite(x));
  if (!v.length) return null;
  return { median: median(v), min: Math.min(...v), max: Math.max(...v), values: v };
}

const proxyOf = (target) => (target === 'direct' ? 'valkey' : target);

function summarize(result) {
  const cells = {};
  const ok = (r) => !r.error;
  for (const pipeline of PIPELINES) {
    for (const test of TESTS) {
      for (const target of [...TARGETS, 'probe']) {
        const runs = (target === 'probe' ? result.probeRuns : result.runs).filter((r) => r.target === target && r.pipeline === pipeline && r.test === test && ok(r));
        if (!runs.length) continue;
        const b = (k) => stat(runs.map((r) => r.bench[k]));
        const cell = {
          rounds: runs.length,
          rps: b('rps'), avgMs: b('avgMs'), p50Ms: b('p50Ms'), p95Ms: b('p95Ms'), p99Ms: b('p99Ms'), p999Ms: b('p999Ms'), maxMs: b('maxMs'),
          p999Levels: [...new Set(runs.map((r) => r.bench.p999Level))],
          cpuUsPerReq: stat(runs.map((r) => r.cpuUsPerReq[proxyOf(target === 'probe' ? 'probe' : target)])),
          valkeyCpuUsPerReq: stat(runs.map((r) => r.cpuUsPerReq.valkey)),
          totalCpuUsPerReq: target === 'direct' ? null : stat(runs.map((r) => r.cpuUsPerReq[proxyOf(target)] + r.cpuUsPerReq.valkey)),
        };
        if (runs.some((r) => r.respoolMetrics)) {
          const m = runs.map((r) => r.respoolMetrics).filter(Boolean);
          cell.upstreamIo = { perWrite: stat(m.map((x) => x.upstreamIo?.perWrite)), perRead: stat(m.map((x) => x.upstreamIo?.perRead)) };
          cell.promEld = {
            p50LateMs: stat(m.map((x) => x.eld.p50LateMs)), p99LateMs: stat(m.map((x) => x.eld.p99LateMs)), maxLateMs: stat(m.map((x) => x.eld.maxLateMs)),
          };
          cell.promGc = {
            per1000: stat(runs.map((r) => (r.respoolMetrics.gc.count / r.n) * 1000)),
            msPerRun: stat(m.map((x) => x.gc.ms)),
            msPer1000: stat(runs.map((r) => (r.respoolMetrics.gc.ms / r.n) * 1000)),
            maxPauseAtMostMs: stat(m.map((x) => x.gc.maxPauseAtMostMs)),
            runMs: stat(runs.map((r) => r.ms)),
          };
        }
        if (target === 'probe') {
          const p = runs.map((r) => r.probe).filter(Boolean);
          const gcCount = (x) => Object.values(x.gc).reduce((a, g) => a + g.count, 0);
          const gcMs = (x) => Object.values(x.gc).reduce((a, g) => a + g.totalMs, 0);
          const gcMax = (x) => Math.max(0, ...Object.values(x.gc).map((g) => g.maxMs));
          const late = (x, k) => (x.eventLoopDelay.count ? x.eventLoopDelay[k] / 1e6 - x.eventLoopDelay.resolutionMs : NaN);
          cell.probe = {
            allocBytesPerReq: stat(runs.map((r) => r.probe.heap.allocatedBytes / r.n)),
            majorGcs: p.reduce((a, x) => a + (x.heap.gcProfilerTypes.MarkSweepCompact ?? 0), 0),
            runsWithMajorGc: p.filter((x) => x.heap.gcProfilerTypes.MarkSweepCompact).length,
            // how far the runs with a full collection are from the row's median (does it blur the figure?)
            majorGcRunsMaxDeviation: (() => {
              const all = runs.map((r) => r.probe.heap.allocatedBytes / r.n);
              const m = median(all);
              const dev = runs.filter((r) => r.probe.heap.gcProfilerTypes.MarkSweepCompact).map((r) => Math.abs(r.probe.heap.allocatedBytes / r.n / m - 1));
              return dev.length ? Math.max(...dev) : null;
            })(),
            gcPer1000: stat(runs.map((r) => (gcCount(r.probe) / r.n) * 1000)),
            gcMsPer1000: stat(runs.map((r) => (gcMs(r.probe) / r.n) * 1000)),
            gcMaxMs: stat(p.map(gcMax)),
            gcCount: stat(p.map(gcCount)),
            promGcCount: stat(runs.map((r) => r.respoolMetrics?.gc.count)),
            gcProfilerCount: stat(p.map((x) => Object.values(x.heap.gcProfilerTypes).reduce((a, c) => a + c, 0))),
            eldP50LateMs: stat(p.map((x) => late(x, 'p50Ns'))), eldP99LateMs: stat(p.map((x) => late(x, 'p99Ns'))),
            eldP999LateMs: stat(p.map((x) => late(x, 'p999Ns'))), eldMaxLateMs: stat(p.map((x) => late(x, 'maxNs'))),
            eldSamples: stat(p.map((x) => x.eventLoopDelay.count)),
            selfCpuUsPerReq: stat(runs.map((r) => ((r.probe.cpu.userUs + r.probe.cpu.systemUs) / r.n))),
            elu: stat(p.map((x) => x.eventLoopUtilization)),
            newSpaceMiB: stat(p.flatMap((x) => (x.heap.newSpaceBytes ? [x.heap.newSpaceBytes.min, x.heap.newSpaceBytes.max] : [])).map((b) => b / 2 ** 20)),
          };
        }
        cells[`${target}/${pipeline}/${test}`] = cell;
      }
      for (const target of TARGETS) {
        const runs = result.runs.filter((r) => r.target === target && r.pipeline === pipeline && r.test === test && ok(r));
        if (!runs.length) continue;
        const mids = runs.map((r) => r.upstream.midRunByOwner).filter(Boolean);
        cells[`${target}/${pipeline}/${test}/conns`] = {
          connectedMin: Math.min(...runs.map((r) => r.upstream.connectedMin ?? Infinity)),
          connectedMax: Math.max(...runs.map((r) => r.upstream.connectedMax ?? -Infinity)),
          accepted: runs.map((r) => r.upstream.connectionsAccepted),
          midRunByOwner: mids,
        };
      }
    }
  }
  // Per-round ratios (each round's runs of one pipeline and test were back to back) → median, min–max.
  const ratios = {};
  for (const pipeline of PIPELINES) {
    for (const test of TESTS) {
      const perRound = (one, other, f) => {
        const xs = [];
        for (let round = 1; round <= result.config.rounds; round++) {
          const find = (t) => result.runs.find((r) => r.round === round && r.target === t && r.pipeline === pipeline && r.test === test && ok(r));
          const a = find(one);
          const b = find(other);
          if (a && b) xs.push(f(a) / f(b));
        }
        return stat(xs);
      };
      const rps = (r) => r.bench.rps;
      const cpu = (r) => r.cpuUsPerReq[proxyOf(r.target)];
      ratios[`${pipeline}/${test}`] = {
        respoolOverTwemproxy: {
          rps: perRound('respool', 'twemproxy', rps),
          cpuPerReq: perRound('respool', 'twemproxy', cpu),
          p50: perRound('respool', 'twemproxy', (r) => r.bench.p50Ms),
          p99: perRound('respool', 'twemproxy', (r) => r.bench.p99Ms),
          p999: perRound('respool', 'twemproxy', (r) => r.bench.p999Ms),
        },
        respoolOverDirect: { rps: perRound('respool', 'direct', rps) },
        twemproxyOverDirect: { rps: perRound('twemproxy', 'direct', rps) },
      };
    }
  }
  // Syscalls per 1,000 requests.
  const syscalls = result.strace.filter((x) => !x.error).map((x) => ({
    target: x.target, test: x.test, pipeline: x.pipeline, n: x.n, rpsUnderStrace: x.rpsUnderStrace,
    per1000: Object.fromEntries(Object.entries(x.calls).map(([k, v]) => [k, (v / x.n) * 1000])),
  }));
  return { cells, ratios, syscalls };
}

// ---------------------------------------------------------------- report

/** "median (min–max)" of a stat(), each through `f`; just the value for one round. */
function mm(x, f = (v) => fmt(v, 2)) {
  if (!x) return '—';
  if (x.values.length === 1 || x.min === x.max) return f(x.median);
  return `${f(x.median)} (${f(x.min)}–${f(x.max)})`;
}
const ms3 = (v) => fmt(v, 3);
const ms2 = (v) => fmt(v, 2);
const f1 = (v) => fmt(v, 1);
const f2 = (v) => fmt(v, 2);

/**
 * One chart per pipeline depth, drawn from the runs themselves: requests/s and p99 of every round,
 * direct, respool and twemproxy, GET and SET (bench/charts/throughput-p<P>.svg).
 */
function roundCharts(result) {
  const lines = [];
  for (const pipeline of PIPELINES) {
    const series = (value) => TARGETS.flatMap((target) => TESTS.map((test) => ({
      name: `${target} ${test}`,
      points: result.runs
        .filter((r) => r.target === target && r.pipeline === pipeline && r.test === test && !r.error && r.bench)
        .map((r) => [r.round, value(r)]),
    }))).filter((s) => s.points.length > 0);
    const rps = series((r) => r.bench.rps);
    if (rps.length === 0) continue;
    const svg = lineCharts({
      title: `Pipeline ${pipeline}: requests/s and p99 per round (valkey-benchmark, ${result.config.clients} clients)`,
      xLabel: 'round',
      xTicks: Array.from({ length: result.config.rounds }, (_, i) => i + 1),
      xFormat: (v) => String(v),
      panels: [
        { yLabel: 'requests/s', series: rps },
        { yLabel: 'p99 (ms)', series: series((r) => r.bench.p99Ms), yFormat: (v) => String(Number(v.toPrecision(3))) },
      ],
    });
    lines.push(writeChart(`throughput-p${pipeline}`, svg, `requests/s and p99 per round at pipeline ${pipeline}: direct, respool, twemproxy`));
  }
  return lines;
}

const SYSCALL_ORDER = ['read', 'readv', 'recvfrom', 'recvmsg', 'write', 'writev', 'sendto', 'sendmsg', 'epoll_wait', 'epoll_pwait', 'epoll_ctl', 'getpeername', 'futex'];

function markdown(result) {
  const { cells, ratios, syscalls } = result.summary;
  const c = result.config;
  const out = [];
  const nTxt = (n) => `${n[1].toLocaleString('en-US')} requests per run at pipeline 1, ${n[16].toLocaleString('en-US')} at pipeline 16`;
  const cell = (t, p, test) => cells[`${t}/${p}/${test}`];
  const rowsBy = (f) => PIPELINES.flatMap((p) => TESTS.map((t) => f(p, t)));
  const noData = (t) => (c.skipRespool && t === 'respool' ? 'skipped' : 'no data');

  out.push(`### Throughput and latency (valkey-benchmark, ${c.clients} clients, ${c.dataSize}-byte values)`);
  out.push('');
  out.push(`${c.rounds} round(s); each round runs, for each pipeline depth and test, direct, respool and twemproxy back to back ` +
    '(one valkey-benchmark invocation per test; the order of the three is rotated every round). Every figure is the median over rounds ' +
    `with the lowest and highest round in parentheses. N = ${nTxt(c.n)}` +
    `${c.warmupN ? `; before round 1 every target got ${c.warmupN.toLocaleString('en-US')} unmeasured requests per pipeline and test` : ''}. ` +
    `respool: --connections-per-node ${c.respoolConnectionsPerNode}; twemproxy: server_connections: ${c.twemproxyServerConnections} (same number of upstream links as respool). ` +
    'Latency in ms from valkey-benchmark\'s summary; p99.9 from its HdrHistogram "percentile distribution" lines: the value of the first line whose cumulative count reaches 99.9% of the requests ' +
    `(in this run the lines at ${[...new Set(Object.values(cells).flatMap((x) => x.p999Levels ?? []))].sort().map((l) => `${l}%`).join(', ') || '—'}), so an upper bound of the true p99.9 within one line's step.`);
  out.push('');
  const lrows = [];
  for (const pipeline of PIPELINES) {
    for (const test of TESTS) {
      for (const target of TARGETS) {
        const x = cell(target, pipeline, test);
        if (!x) {
          lrows.push([test, pipeline, target, noData(target), '', '', '', '']);
          continue;
        }
        lrows.push([test, pipeline, target, mm(x.rps, fmtInt), mm(x.p50Ms, ms3), mm(x.p99Ms, ms3), mm(x.p999Ms, ms3), mm(x.maxMs, ms2)]);
      }
    }
  }
  out.push(mdTable(['test', 'P', 'target', 'requests/s', 'p50 ms', 'p99 ms', 'p99.9 ms', 'max ms'], lrows, ['l', 'r', 'l', 'r', 'r', 'r', 'r', 'r']));
  out.push('');
  for (const line of roundCharts(result)) out.push(line, '');

  out.push('### respool / twemproxy, per round');
  out.push('');
  out.push('Each ratio is taken within a round (runs back to back), then the median over rounds with the lowest and highest round. ' +
    'Above 1 is better for respool in requests/s, worse in CPU per request and latency.');
  out.push('');
  out.push(mdTable(['test', 'P', 'requests/s', 'CPU µs per request', 'p50', 'p99', 'p99.9', 'respool / direct requests/s', 'twemproxy / direct requests/s'],
    rowsBy((p, t) => {
      const r = ratios[`${p}/${t}`];
      return [t, p, mm(r.respoolOverTwemproxy.rps), mm(r.respoolOverTwemproxy.cpuPerReq), mm(r.respoolOverTwemproxy.p50), mm(r.respoolOverTwemproxy.p99),
        mm(r.respoolOverTwemproxy.p999), mm(r.respoolOverDirect.rps), mm(r.twemproxyOverDirect.rps)];
    })));
  out.push('');

  out.push('### CPU time per request (µs)');
  out.push('');
  out.push(`utime + stime of the whole process (all threads) from /proc/<pid>/stat, read right before valkey-benchmark starts and right after it exits, ÷ requests. ` +
    `The clock tick is ${1000 / c.clkTck} ms, so a figure is ±${fmt((2 / c.clkTck / c.n[1]) * 1e6, 2)} µs at pipeline 1 and ±${fmt((2 / c.clkTck / c.n[16]) * 1e6, 3)} µs at pipeline 16 from rounding alone. ` +
    'The valkey-server columns are the one server during the direct run and during the runs through each proxy (it also answers this bench\'s INFO polling, 4 per second). valkey-benchmark\'s own CPU is not counted.');
  out.push('');
  out.push(mdTable(['test', 'P', 'respool', 'twemproxy', 'valkey-server, direct', 'valkey-server behind respool', 'valkey-server behind twemproxy', 'respool + its valkey-server', 'twemproxy + its valkey-server'],
    rowsBy((p, t) => {
      const r = cell('respool', p, t);
      const tw = cell('twemproxy', p, t);
      const d = cell('direct', p, t);
      return [t, p, mm(r?.cpuUsPerReq), mm(tw?.cpuUsPerReq), mm(d?.cpuUsPerReq), mm(r?.valkeyCpuUsPerReq), mm(tw?.valkeyCpuUsPerReq), mm(r?.totalCpuUsPerReq), mm(tw?.totalCpuUsPerReq)];
    })));
  out.push('');

  out.push('### Requests per upstream write and read (respool)');
  out.push('');
  out.push('How many requests each of respool\'s writes to valkey-server carried, and how many replies each read from it brought (the growth of `respool_upstream_io_total{op=requests|writes|reads}` over the run, from its /metrics). More per write and per read means fewer system calls on the server for the same requests: its CPU per request above.');
  out.push('');
  out.push(mdTable(['test', 'P', 'requests per upstream write', 'requests per upstream read'],
    rowsBy((p, t) => {
      const r = cell('respool', p, t);
      return [t, p, mm(r?.upstreamIo?.perWrite), mm(r?.upstreamIo?.perRead)];
    })));
  out.push('');

  out.push('### respool\'s event loop and GC during those runs (its prom-client default metrics)');
  out.push('');
  out.push('GET /metrics on respool\'s admin port right before and right after each run. Event-loop delay: prom-client\'s `perf_hooks.monitorEventLoopDelay` ' +
    `(resolution ${c.promEldResolutionMs} ms), reset at every scrape, so the after-scrape covers the run. Node records the interval between two ${c.promEldResolutionMs} ms timer callbacks; ` +
    `shown here is that minus ${c.promEldResolutionMs} ms, i.e. how late the timer fired (can be slightly negative). With one sample per ${c.promEldResolutionMs} ms, a run yields only ` +
    `a few hundred samples and any stall shorter than the tick it lands in is invisible, so this p99 rests on a handful of samples; see the instrumented respool below for 1 ms. ` +
    'GC: the growth of `nodejs_gc_duration_seconds` (count, sum) over the run, all kinds; prom-client records only the first entry of each PerformanceObserver callback, ' +
    'so it can undercount (compare with the probe\'s count below), and the longest pause is known only as a histogram bucket bound (1, 10, 100 ms …). ' +
    'GC pauses per 1,000 requests depend on the size of V8\'s new space at the time (see below), so they vary with what the process did before.');
  out.push('');
  out.push(mdTable(['test', 'P', 'loop delay p50 ms', 'loop delay p99 ms', 'loop delay max ms', 'GC pauses per 1,000 requests', 'GC ms per run', 'GC ms per 1,000 requests', 'longest GC pause ≤ ms'],
    rowsBy((p, t) => {
      const x = cell('respool', p, t);
      if (!x?.promEld) return [t, p, noData('respool'), '', '', '', '', '', ''];
      return [t, p, mm(x.promEld.p50LateMs, ms2), mm(x.promEld.p99LateMs, ms2), mm(x.promEld.maxLateMs, ms2), mm(x.promGc.per1000),
        mm(x.promGc.msPerRun, f1), mm(x.promGc.msPer1000, ms3), mm(x.promGc.maxPauseAtMostMs, (v) => fmt(v, 0))];
    })));
  out.push('');

  if (!c.skipProbe) {
    out.push('### Instrumented respool: heap allocation per request, every GC pause, event-loop delay at 1 ms');
    out.push('');
    out.push(`A second respool, not the one compared above, started with \`node --import ./bench/lib/respool-probe.mjs\` (the probe only watches the process), ` +
      `run once per pipeline and test at the end of every round, ${nTxt(c.probeN)}. On SIGUSR2 right before and right after each run the probe reports:`);
    out.push('');
    out.push('- **heap bytes allocated per request**: from `v8.GCProfiler`. The V8 heap only grows by allocation between collections, so allocation over the run = Σ over its collections of ' +
      '(used heap before it − used heap after the previous one) + the growth since the last one (`v8.getHeapStatistics().used_heap_size`), ÷ requests. ' +
      'It covers everything respool allocates on the V8 heap (including the JS objects of Buffers), but not Buffer/ArrayBuffer backing stores, which live outside the V8 heap ' +
      '(socket reads, Buffer.alloc*). It includes the 50 client connections valkey-benchmark opens and closes per run. ' +
      'A full (mark-compact) collection in the window could blur the figure if V8 accounted its freed bytes late (after "after GC" is read): ' +
      `${Object.values(cells).reduce((a, x) => a + (x.probe?.runsWithMajorGc ?? 0), 0)} of the ${Object.values(cells).reduce((a, x) => a + (x.probe?.allocBytesPerReq?.values.length ?? 0), 0)} runs had one, ` +
      `and their figures are within ${fmt(Math.max(0, ...Object.values(cells).map((x) => x.probe?.majorGcRunsMaxDeviation ?? 0)) * 100, 1)}% of their row's median.`);
    out.push('- **GC pauses**: every entry of a PerformanceObserver on `gc` (all kinds), and their count as seen by GCProfiler and by prom-client in the same process (an undercount check). ' +
      'How many collections a request costs depends on the size of V8\'s new space at the time, which grows under allocation and shrinks when the process idles ' +
      '(this instance idles while the others are measured), so pauses per 1,000 requests here and above are not comparable with each other; bytes allocated per request is the stable figure. ' +
      `New space size at the collections in these runs: ${mm(stat(Object.values(cells).flatMap((x) => x.probe?.newSpaceMiB?.values ?? [])), (v) => fmt(v, 0))} MiB.`);
    out.push(`- **event-loop delay**: \`monitorEventLoopDelay({ resolution: ${c.probeEldResolutionMs} })\`, reset per run, minus ${c.probeEldResolutionMs} ms as above. The 1 ms timer itself wakes the loop up to 1,000 times a second.`);
    out.push('- **event-loop utilization**: `performance.eventLoopUtilization()` over the run, the share of time the loop was not waiting in epoll.');
    out.push('- **CPU per request**: /proc as above (the probe\'s own `process.cpuUsage()` agrees within a tick).');
    out.push('');
    out.push(mdTable(['test', 'P', 'requests/s', 'heap bytes allocated per request', 'GC pauses per 1,000 requests', 'GC ms per 1,000 requests', 'longest GC pause ms',
      'GCs per run: probe / GCProfiler / prom-client', 'loop delay p50 / p99 / p99.9 / max ms', 'loop delay samples', 'event-loop utilization', 'CPU µs per request'],
    rowsBy((p, t) => {
      const x = cell('probe', p, t);
      if (!x?.probe) return [t, p, 'no data', '', '', '', '', '', '', '', '', ''];
      const q = x.probe;
      return [t, p, mm(x.rps, fmtInt), mm(q.allocBytesPerReq, fmtInt), mm(q.gcPer1000), mm(q.gcMsPer1000, ms3), mm(q.gcMaxMs, ms2),
        `${fmt(q.gcCount?.median, 0)} / ${fmt(q.gcProfilerCount?.median, 0)} / ${fmt(q.promGcCount?.median, 0)}`,
        [q.eldP50LateMs, q.eldP99LateMs, q.eldP999LateMs, q.eldMaxLateMs].map((v) => fmt(v?.median, 2)).join(' / '),
        fmtInt(q.eldSamples?.median), mm(q.elu), mm(x.cpuUsPerReq)];
    }), ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r']));
    out.push('');
    out.push('Columns with one figure per cell are medians over rounds; the loop-delay and GC-count cells list medians only.');
    out.push('');
  }

  if (!c.skipStrace) {
    out.push('### System calls per 1,000 requests (strace)');
    out.push('');
    out.push(`\`strace -c -f -p PID\` attached to the process (every thread) during one short run per row, after the rounds (strace slows the process, so these runs are not timed): ` +
      `${nTxt(c.straceN)}. "direct" is valkey-server itself. Counts include the ${c.clients} client connections valkey-benchmark opens and closes per run ` +
      `(accept4, close, setsockopt, epoll_ctl …: about ${fmt((c.clients / c.straceN[1]) * 1000, 1)} per 1,000 requests per call per connection at pipeline 1, ` +
      `${fmt((c.clients / c.straceN[16]) * 1000, 1)} at pipeline 16). Columns: the read/write/poll calls made at least once per 1,000 requests in some row, and any other call made at least 5 times per 1,000 requests in some row; the rest are in "other".`);
    out.push('');
    if (!syscalls.length) out.push('_No strace results in this run (see errors)._');
    else {
      const names = new Set();
      // the I/O and polling calls when made at all (≥ 1 per 1,000 requests), any other call from 5 per 1,000 requests
      for (const s of syscalls) for (const [k, v] of Object.entries(s.per1000)) if (v >= (SYSCALL_ORDER.includes(k) ? 1 : 5)) names.add(k);
      const folded = new Set(syscalls.flatMap((s) => Object.keys(s.per1000)).filter((k) => !names.has(k)));
      const cols = [...names].sort((a, b) => {
        const ia = SYSCALL_ORDER.indexOf(a);
        const ib = SYSCALL_ORDER.indexOf(b);
        return (ia < 0 ? 99 : ia) - (ib < 0 ? 99 : ib) || a.localeCompare(b);
      });
      const srows = [];
      for (const target of ['respool', 'twemproxy', 'direct']) {
        for (const pipeline of PIPELINES) {
          for (const test of TESTS) {
            const s = syscalls.find((x) => x.target === target && x.pipeline === pipeline && x.test === test);
            if (!s) continue;
            const other = Object.entries(s.per1000).filter(([k]) => !names.has(k)).reduce((a, [, v]) => a + v, 0);
            const total = Object.values(s.per1000).reduce((a, v) => a + v, 0);
            srows.push([target, test, pipeline, ...cols.map((k) => fmt(s.per1000[k] ?? 0, 0)), fmt(other, 0), fmt(total, 0)]);
          }
        }
      }
      out.push(mdTable(['target', 'test', 'P', ...cols, 'other', 'total'], srows, ['l', 'l', 'r', ...cols.map(() => 'r'), 'r', 'r']));
      out.push('');
      out.push(`"other": ${[...folded].sort().join(', ') || 'none'}.`);
    }
    out.push('');
  }

  out.push(`### Upstream connections during the ${c.clients}-client benchmark`);
  out.push('');
  out.push('`connected_clients` from `INFO clients` on the upstream, sampled every 250 ms during each run, minus the ' +
    "benchmark's own INFO connection. It counts every client of the server, so it includes the other proxies' idle links " +
    '(twemproxy preconnects; respool, and the instrumented respool, keep their pools). The "mid-run, by owner" column attributes each `CLIENT LIST` entry ' +
    'to a process by its peer port (`ss -tnp`, or /proc when ss is missing), once mid-run. "accepted" is the growth of ' +
    '`total_connections_received` over each run (direct: 50 clients + 1 connection valkey-benchmark opens to read CONFIG).');
  out.push('');
  const idle = result.idleUpstreamConns ?? {};
  out.push(`Idle, before any run (by owner, including this benchmark's INFO connection): ${Object.entries(idle).map(([k, v]) => `${k} ${v}`).join(', ')}.`);
  out.push('');
  const crows = [];
  for (const pipeline of PIPELINES) {
    for (const test of TESTS) {
      for (const target of TARGETS) {
        const x = cells[`${target}/${pipeline}/${test}/conns`];
        if (!x) continue;
        const each = x.midRunByOwner.map((m) => Object.entries(m).filter(([k]) => k !== 'atMs' && k !== 'bench (INFO)')
          .sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `${k} ${v}`).join(', '));
        const byOwner = !each.length ? '—' : new Set(each).size === 1 ? `${each[0]} (every round)` : [...new Set(each)].join(' · ');
        const range = Number.isFinite(x.connectedMin) ? `${x.connectedMin}–${x.connectedMax}` : '—';
        crows.push([target, test, pipeline, range, byOwner, [...new Set(x.accepted)].join(' / ')]);
      }
    }
  }
  out.push(mdTable(['target', 'test', 'P', 'connected_clients (min–max)', 'mid-run, by owner (distinct snapshots)', 'accepted per run (distinct values)'], crows, ['l', 'l', 'r', 'r', 'l', 'r']));
  out.push('');
  if (result.errors.length) {
    out.push('**Errors in this run:**');
    out.push('');
    for (const e of result.errors) out.push(`- ${e.replace(/\n/g, ' ')}`);
    out.push('');
  }
  out.push('<details><summary>twemproxy config used</summary>');
  out.push('');
  out.push('```yaml');
  out.push((result.twemproxyConfig ?? '').trim());
  out.push('```');
  out.push('');
  out.push('</details>');
  return out.join('\n');
}

// `node bench/throughput.mjs --render FILE.json`: rewrite bench/out/throughput.md from a saved
// result (summary recomputed), without measuring anything.
const renderFrom = process.argv[2] === '--render' ? process.argv[3] : null;
if (renderFrom) {
  const saved = JSON.parse(fs.readFileSync(renderFrom, 'utf8'));
  saved.summary = summarize(saved);
  fs.writeFileSync(path.join(OUT_DIR, 'throughput.md'), markdown(saved) + '\n');
  log(`rendered bench/out/throughput.md from ${renderFrom}`);
} else main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
