// Hot keys: reproduce the "one key takes ~90% of the reads" experiment through respool.
//
//   npm run bench:hotkeys          (= npm run build && node bench/hotkeys.mjs)
//
// A 3-primary cluster (no replicas), each valkey-server's CPU capped with cgroup v1
// (cpu.cfs_quota_us under /sys/fs/cgroup/cpu; skipped, and said so, when not writable), 1 KB
// values, GETs with ~90% on one key and the rest uniform over 10,000 keys, sent by separate
// Node load-generator processes (raw RESP, pipelined) through one respool process.
//
// Part 1 (nodes capped): conditions no split / split N=3 / split N=6, RUNS rounds of RUN_S
//   seconds, interleaved. Per run: throughput, p50/p99, each node's share of GETs (INFO
//   commandstats cmdstat_get after CONFIG RESETSTAT) and CPU (utime+stime from /proc/<pid>/stat)
//   of every node, respool and each generator.
// Part 2 (nodes uncapped): the cost of hot-key detection: respool with detection off, on at
//   the default 1% sample rate, and on at 100%, same load, uniform keys (the detector's worst
//   case: every sample is a new key), interleaved rounds. Also: how long after the load starts
//   the hot key is ranked first in a closed detection window.
//
// Env: BENCH_QUICK=1 (short smoke run), BENCH_HK_RUN_S (15), BENCH_HK_RUNS (3),
//      BENCH_HK_DET_S (8), BENCH_HK_DET_ROUNDS (5), BENCH_HK_QUOTA (3000 of period 100000 µs
//      per node), BENCH_HK_GENS (2 processes), BENCH_HK_CONNS (16 per process), BENCH_HK_DEPTH (100).
//
// Why 3% and not 10-15% of a core: respool multiplexes all clients onto 2 pipelined links per
// node, so a node reads big batches and serves a GET in ~1 µs; at 12% a node served >110k GETs/s
// and respool (one Node thread on this 2-core machine) became the bottleneck. At 3% the nodes are.
// Many requests in flight (GENS × CONNS × DEPTH) keep every node's batches large in all conditions.
import fs from 'node:fs';
import path from 'node:path';
import {
  HOST, OUT_DIR, ReplyError, RespConn, ROOT_DIR, envFlag, envInt, fmt, fmtInt, log, mdTable, median, parseInfo,
  sleep, spawn, stop, uniquePort, waitForPing, writeOutputs,
} from './lib/common.mjs';
import { writeSection } from './lib/results-file.mjs';
import { CFS_PERIOD_US as PERIOD, capCount, capProcess, removeCaps, runLoadgens, setCapQuota } from './lib/loadgen-run.mjs';
import { barChart, writeChart } from './lib/svg-chart.mjs';

const QUICK = envFlag('BENCH_QUICK');
const RUN_S = envInt('BENCH_HK_RUN_S', QUICK ? 3 : 15);
const RUNS = envInt('BENCH_HK_RUNS', QUICK ? 1 : 3);
const DET_S = envInt('BENCH_HK_DET_S', QUICK ? 3 : 8);
const DET_ROUNDS = envInt('BENCH_HK_DET_ROUNDS', QUICK ? 1 : 5);
const QUOTA = envInt('BENCH_HK_QUOTA', 3_000);
const GENS = envInt('BENCH_HK_GENS', 2);
const CONNS = envInt('BENCH_HK_CONNS', 16);
const DEPTH = envInt('BENCH_HK_DEPTH', 100);
const COLD_KEYS = 10_000;
const HOT_SHARE = 0.9;
const VALUE_BYTES = 1024;
const HOT_KEY = 'bench:hot';
const COLD_PREFIX = 'bench:cold:';
const WINDOW_S = 2;

const { startCluster } = await import(path.join(ROOT_DIR, 'build/harness/valkey-processes.js'));

// ---------------------------------------------------------------- helpers

async function startRespool(seed, extra, name) {
  const port = await uniquePort();
  const args = ['bin/respool.js', '--listen', `${HOST}:${port}`, '--upstream', `${HOST}:${seed.port}`,
    '--mode', 'cluster', '--log-level', 'warn', '--hot-keys-window', `${WINDOW_S}s`, ...extra];
  const logFile = path.join(OUT_DIR, `respool-hotkeys-${name}.log`);
  fs.writeFileSync(logFile, '');
  const child = spawn(process.execPath, args, { logFile });
  await waitForPing(port, { child, what: `respool ${name}`, timeoutMs: 15_000 });
  return { port, child, cmd: `node ${args.join(' ')}` };
}

/** The load generators (bench/lib/loadgen-run.mjs) on `port`: GENS processes, the hot/cold key mix. */
const runLoad = (port, seconds, hotShare, pids, conns = CONNS, depth = DEPTH) =>
  runLoadgens({ port, seconds, gens: GENS, conns, depth, hotKey: HOT_KEY, coldPrefix: COLD_PREFIX, coldKeys: COLD_KEYS, hotShare, pids });

async function getCounts(cluster, primaries) {
  return Promise.all(primaries.map(async (p) => {
    const info = parseInfo(String(await cluster.call(p, 'INFO', 'commandstats')));
    return Number(/calls=(\d+)/.exec(String(info.cmdstat_get ?? ''))?.[1] ?? 0);
  }));
}

async function split(conn, copies) {
  const r = await conn.call('RESPOOL', 'SPLIT', 'ADD', HOT_KEY, String(copies));
  if (r !== 'OK') throw new Error(`RESPOOL SPLIT ADD: ${r instanceof ReplyError ? r.message : JSON.stringify(r)}`);
  for (let i = 0; i < 200; i++) {
    const list = await conn.call('RESPOOL', 'SPLIT', 'LIST');
    const entry = list.find((e) => e[0] === HOT_KEY);
    if (entry && entry[1].length === copies) return entry[1];
    await sleep(50);
  }
  throw new Error('split copies not placed in time');
}

// ---------------------------------------------------------------- main

const tStart = Date.now();
fs.mkdirSync(OUT_DIR, { recursive: true });
log(`hot keys bench: ${RUNS} round(s) × 3 conditions × ${RUN_S}s, detection ${DET_S}s runs; quota ${QUOTA}/${PERIOD}`);
const cluster = await startCluster({ primaries: 3, replicasPerPrimary: 0 });
const respools = [];
let capNote;
try {
  const primaries = await cluster.primaries();
  const nodeName = (p) => `node:${p.port}`;
  let capped = false;
  try {
    primaries.forEach((p) => capProcess(p.pid, QUOTA));
    capped = true;
    capNote = `each valkey-server in its own cgroup v1 with cpu.cfs_quota_us=${QUOTA} per cpu.cfs_period_us=${PERIOD} (${QUOTA / PERIOD * 100}% of one core)`;
  } catch (e) {
    removeCaps();
    capNote = `**not capped**: cgroup v1 cpu controller not writable here (${e.message}); the nodes ran uncapped`;
  }
  log(capNote);

  const main = await startRespool(primaries[0], [], 'main');
  respools.push(main);
  const conn = await RespConn.connect(main.port);
  // Data: the hot key and the cold keys, 1 KB each, written through respool.
  const value = 'x'.repeat(VALUE_BYTES);
  await conn.call('SET', HOT_KEY, value);
  for (let i = 0; i < COLD_KEYS; i += 500) {
    await Promise.all(Array.from({ length: Math.min(500, COLD_KEYS - i) }, (_, j) => conn.call('SET', `${COLD_PREFIX}${i + j}`, value)));
  }
  const pids = { respool: main.child.pid };
  for (const p of primaries) pids[nodeName(p)] = p.pid;

  // ---- part 1: split conditions
  const conditions = [{ name: 'no split', copies: 1 }, { name: 'split N=3', copies: 3 }, { name: 'split N=6', copies: 6 }];
  const runs = [];
  let detectionLatency = null;
  for (let round = 1; round <= RUNS; round++) {
    for (const cond of conditions) {
      let placement = null;
      if (cond.copies > 1) placement = await split(conn, cond.copies);
      for (const p of primaries) await cluster.call(p, 'CONFIG', 'RESETSTAT');
      // Detection latency (first round, no split): poll for the first closed window ranking the hot key first.
      let poll = null;
      if (round === 1 && cond.copies === 1) {
        const probe = await RespConn.connect(main.port);
        const began = Date.now();
        let stopPoll = false;
        poll = (async () => {
          await sleep(1500); // generators start 1.5 s after launch
          const t0 = Date.now();
          while (!stopPoll) {
            const top = await probe.call('RESPOOL', 'HOTKEYS', 'COUNT', '1');
            if (Array.isArray(top) && top[0]?.[1] === HOT_KEY && Number(top[0][5]) > 0.5) {
              detectionLatency = { ms: Date.now() - t0, share: Number(top[0][5]), windowMs: WINDOW_S * 1000 };
              break;
            }
            await sleep(50);
          }
          probe.close();
          void began;
        })();
        poll.stop = () => (stopPoll = true);
      }
      log(`round ${round}: ${cond.name}`);
      const r = await runLoad(main.port, RUN_S, HOT_SHARE, pids);
      if (poll) {
        poll.stop();
        await poll;
      }
      const gets = await getCounts(cluster, primaries);
      const total = gets.reduce((x, y) => x + y, 0);
      runs.push({ round, condition: cond.name, ...r, gets, shares: gets.map((g) => g / total), placement });
      log(`  ${fmtInt(r.opsPerSec)} ops/s p50 ${fmt(r.p50)} ms p99 ${fmt(r.p99)} ms shares ${gets.map((g) => fmt((g / total) * 100, 1)).join('/')}% cpu ${Object.entries(r.cpu).map(([k, v]) => `${k}=${fmt(v, 0)}%`).join(' ')}`);
      if (cond.copies > 1) {
        await conn.call('RESPOOL', 'SPLIT', 'DEL', HOT_KEY);
        await sleep(300);
      }
    }
  }

  // ---- part 2: detection cost, nodes uncapped
  if (capCount()) setCapQuota(-1);
  conn.close();
  const off = await startRespool(primaries[0], ['--hot-keys-detection', 'off'], 'detect-off');
  const full = await startRespool(primaries[0], ['--hot-keys-sample-rate', '1'], 'detect-full');
  respools.push(off, full);
  const modes = [
    { name: 'detection off', port: off.port, pid: off.child.pid },
    { name: 'detection on (1% sampled, default)', port: main.port, pid: main.child.pid },
    { name: 'detection on (100% sampled)', port: full.port, pid: full.child.pid },
  ];
  const detRuns = [];
  for (let round = 1; round <= DET_ROUNDS; round++) {
    // Alternate the order so that drift in the machine's load does not favour one mode.
    for (const m of round % 2 === 1 ? modes : [...modes].reverse()) {
      log(`detection round ${round}: ${m.name}`);
      const nodePids = Object.fromEntries(primaries.map((p) => [nodeName(p), p.pid]));
      const r = await runLoad(m.port, DET_S, 0, { respool: m.pid, ...nodePids }, 8, 32);
      detRuns.push({ round, mode: m.name, ...r });
      log(`  ${fmtInt(r.opsPerSec)} ops/s p50 ${fmt(r.p50)} ms, respool cpu ${fmt(r.cpu.respool, 0)}%`);
    }
  }

  // ---- part 3: the detector's own cost per request, in-process (no network noise)
  const { HotKeyDetector } = await import(path.join(ROOT_DIR, 'dist/hotkeys/detector.js'));
  const keyBufs = Array.from({ length: COLD_KEYS }, (_, i) => Buffer.from(`${COLD_PREFIX}${i}`));
  const micro = (rate) => {
    const det = rate === 0 ? null : new HotKeyDetector({ enabled: true, sampleRate: rate, windowMs: 1e9, topK: 10 });
    const n = 3_000_000;
    let sink = 0;
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < n; i++) {
      const k = keyBufs[i % COLD_KEYS];
      if (det !== null && det.shouldSample()) det.record(k.toString('latin1'), i & 16383);
      sink += k.length;
    }
    const ns = Number(process.hrtime.bigint() - t0) / n;
    return sink > 0 ? ns : ns;
  };
  micro(0.01); micro(1); // warm up
  const base = median([1, 2, 3].map(() => micro(0)));
  const microNs = { sampled1pct: median([1, 2, 3].map(() => micro(0.01))) - base, sampled100pct: median([1, 2, 3].map(() => micro(1))) - base };
  log(`detector cost per request: ${fmt(microNs.sampled1pct)} ns at 1%, ${fmt(microNs.sampled100pct)} ns at 100%`);

  // ---------------------------------------------------------------- report
  const nodeKeys = primaries.map(nodeName);
  const byCond = (name) => runs.filter((r) => r.condition === name);
  const med = (xs) => median(xs);
  const summary = conditions.map((c) => {
    const rs = byCond(c.name);
    return {
      condition: c.name,
      opsPerSec: med(rs.map((r) => r.opsPerSec)),
      p50: med(rs.map((r) => r.p50)),
      p99: med(rs.map((r) => r.p99)),
      shares: nodeKeys.map((_, i) => med(rs.map((r) => r.shares[i]))),
      cpu: Object.fromEntries(Object.keys(rs[0].cpu).map((k) => [k, med(rs.map((r) => r.cpu[k]))])),
    };
  });
  // Ratios per round (same round = side by side), then the median.
  const ratio = (name) => med([...Array(RUNS).keys()].map((i) => byCond(name)[i].opsPerSec / byCond('no split')[i].opsPerSec));
  const ratio3 = ratio('split N=3');
  const ratio6 = ratio('split N=6');
  const split3 = summary[1];
  const maxDev3 = Math.max(...split3.shares.map((s) => Math.abs(s - 1 / 3)));
  const detSummary = modes.map((m) => {
    const rs = detRuns.filter((r) => r.mode === m.name);
    return { mode: m.name, opsPerSec: med(rs.map((r) => r.opsPerSec)), p50: med(rs.map((r) => r.p50)), p99: med(rs.map((r) => r.p99)), respoolCpu: med(rs.map((r) => r.cpu.respool)), cpuUsPerOp: med(rs.map((r) => (r.cpu.respool / 100) * 1e6 / r.opsPerSec)) };
  });
  // Cost per round (on vs off in the same round), then the median over rounds.
  const detCost = (i) => 1 - med([...Array(DET_ROUNDS).keys()].map((k) => {
    const rs = detRuns.filter((r) => r.round === k + 1);
    return rs.find((r) => r.mode === modes[i].name).opsPerSec / rs.find((r) => r.mode === modes[0].name).opsPerSec;
  }));
  const genNames = Array.from({ length: GENS }, (_, i) => `loadgen${i + 1}`);

  const cmdLine = `npm run bench:hotkeys${QUICK ? ' (BENCH_QUICK=1)' : ''}  # = npm run build && node bench/hotkeys.mjs`;
  const md = [
    '## Hot keys: split copies spread a hot key over the primaries',
    '',
    `Run ${new Date().toISOString().slice(0, 16)}Z, ${((Date.now() - tStart) / 1000).toFixed(0)} s, on this 2-core machine shared with other work. Command: \`${cmdLine}\`;`,
    `respool: \`${main.cmd}\`. Setup: 3 primaries, no replicas; ${capNote}. ${GENS} load-generator processes`,
    `(bench/lib/hotkeys-loadgen.mjs, raw RESP) × ${CONNS} connections × ${DEPTH} pipelined GETs; ${HOT_SHARE * 100}% of GETs on one key,`,
    `the rest uniform over ${fmtInt(COLD_KEYS)} keys; ${VALUE_BYTES}-byte values; ${RUN_S} s per run, ${RUNS} round(s), conditions interleaved in each round.`,
    'Medians over rounds. CPU is % of one core (utime+stime from /proc/<pid>/stat over the run). GET shares from INFO commandstats.',
    '',
    mdTable(
      ['condition', 'GET/s', 'p50 ms', 'p99 ms', ...nodeKeys.map((n) => `${n} GETs`), ...nodeKeys.map((n) => `${n} CPU`), 'respool CPU', ...genNames.map((g) => `${g} CPU`)],
      summary.map((s) => [s.condition, fmtInt(s.opsPerSec), fmt(s.p50), fmt(s.p99), ...s.shares.map((x) => `${fmt(x * 100, 1)}%`),
        ...nodeKeys.map((n) => `${fmt(s.cpu[n], 0)}%`), `${fmt(s.cpu.respool, 0)}%`, ...genNames.map((g) => `${fmt(s.cpu[g], 0)}%`)]),
    ),
    '',
    writeChart('hotkeys-shares', barChart({
      title: `Each primary's share of the GETs, per condition (median of ${RUNS} round(s)); GET/s above each group`,
      yLabel: 'share of GETs',
      yMax: 1,
      yFormat: (v) => `${(v * 100).toFixed(0)}%`,
      groups: summary.map((c) => ({ label: `${c.condition}: ${fmtInt(c.opsPerSec)} GET/s`, bars: nodeKeys.map((n, i) => ({ name: n, value: c.shares[i] })) })),
    }), 'each primary\'s share of GETs: no split, split N=3, split N=6'),
    '',
    `- **split N=3 / no split: ${fmt(ratio3)}×** throughput (per round: ${[...Array(RUNS).keys()].map((i) => fmt(byCond('split N=3')[i].opsPerSec / byCond('no split')[i].opsPerSec)).join(', ')}); split N=6 / no split: ${fmt(ratio6)}×.`,
    `- split N=3 GET shares per node: ${split3.shares.map((x) => `${fmt(x * 100, 1)}%`).join(' / ')} (largest deviation from 33.3%: ${fmt(maxDev3 * 100, 1)} points).`,
    `- Copies are placed by slot: N=3 → one per primary, N=6 → two per primary (placement of the last run: ${runs.filter((r) => r.placement).slice(-2).map((r) => `${r.condition}: ${r.placement.join(', ')}`).join('; ')}).`,
    '',
    '### Detection cost (nodes uncapped, uniform keys: every sample is a new key for the top-k summary)',
    '',
    `${DET_ROUNDS} rounds of ${DET_S} s per mode, order alternating per round; same load generators; three respool processes (one per mode, idle when not measured).`,
    'The "vs off" column is the median over rounds of the throughput ratio within a round.',
    '',
    mdTable(['respool', 'GET/s', 'p50 ms', 'p99 ms', 'respool CPU', 'respool CPU µs/GET', 'throughput vs off'],
      detSummary.map((d, i) => [d.mode, fmtInt(d.opsPerSec), fmt(d.p50), fmt(d.p99), `${fmt(d.respoolCpu, 0)}%`, fmt(d.cpuUsPerOp), i === 0 ? '—' : `${detCost(i) > 0 ? '-' : '+'}${fmt(Math.abs(detCost(i)) * 100, 1)}%`])),
    '',
    `- The detector itself, timed in-process over uniform keys (bench part 3): **${fmt(microNs.sampled1pct)} ns per request at the default 1% sample rate**, ${fmt(microNs.sampled100pct)} ns at 100%; respool spent ${fmt(detSummary[0].cpuUsPerOp)} µs of CPU per GET with detection off, so the default costs ${fmt(microNs.sampled1pct / (detSummary[0].cpuUsPerOp * 1000) * 100, 2)}% of respool's CPU per request (100%: ${fmt(microNs.sampled100pct / (detSummary[0].cpuUsPerOp * 1000) * 100, 1)}%).`,
    `- Detection found the hot key: ${detectionLatency ? `ranked first in a closed window ${fmtInt(detectionLatency.ms)} ms after the load started (window ${detectionLatency.windowMs} ms; a window that closes after the load began always contains it), share ${fmt(detectionLatency.share * 100, 1)}%` : 'NOT within the first run'}.`,
    '',
    `Raw numbers: bench/out/hotkeys.json.`,
  ].join('\n');
  writeOutputs('hotkeys', { capNote, runs, summary, ratio3, ratio6, detRuns, detSummary, detectionCost: { sampled1pct: detCost(1), sampled100pct: detCost(2) }, detectorNsPerRequest: microNs, detectionLatency }, md);
  writeSection('hotkeys', md);
  console.log(md);
} finally {
  for (const r of respools) await stop(r.child);
  removeCaps();
  await cluster.stop();
}
