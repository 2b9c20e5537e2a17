// What watching costs (issue 22): respool's slow log, its per-command latency histograms and the
// big-key sampler, on P=1 and P=16 throughput, before / after in one run.
//
//   npm run bench:observe        (= npm run build && npm run build:harness && node bench/observe-overhead.mjs)
//
// A 3-primary cluster (no replicas: the big-key sampler rides the hot-key sampler, which runs in
// cluster mode) and one respool process per variant, all in front of it, idle but when measured:
//
//   before        BENCH_OBS_BASE, another checkout's bin/respool.js (the build before these
//                 features; skipped when unset)
//   all on        this build, defaults (slow log at 10 ms, command logs at 1 MiB, histograms on,
//                 big keys on, hot-key sampling at 1%)
//   all off       slowlog.thresholdUs -1, commandlog.* -1, latency.tracking false, bigKeys.enabled false
//   slowlog off / histograms off / big keys off: one of them off
//
// valkey-benchmark (50 clients, 100-byte values, GET and SET over 100,000 random keys, spread over
// every slot) against each variant in turn, the order rotated every round; per run requests/s,
// p99 and respool's CPU µs per request (utime+stime from /proc/<pid>/stat ÷ requests). Medians
// over rounds, and the median over rounds of each variant's requests/s ÷ "all off"'s in the same
// round.
//
// Env: BENCH_QUICK=1, BENCH_ROUNDS (5), BENCH_N_P1 (100000), BENCH_N_P16 (400000), BENCH_OBS_BASE.
// Loopback only; only the processes it started are stopped, by pid (bench/lib/common.mjs).
import fs from 'node:fs';
import path from 'node:path';
import {
  HOST, OUT_DIR, ROOT_DIR, envFlag, envInt, fmt, fmtInt, log, mdTable, median, run, sleep, spawn, stop, uniquePort, waitForPing, writeOutputs,
} from './lib/common.mjs';
import { cpuSeconds, parseBenchmarkText } from './lib/measure.mjs';
import { writeSection } from './lib/results-file.mjs';
import { respoolBuildLabel } from './lib/respool-build.mjs';
import { barChart, writeChart } from './lib/svg-chart.mjs';

const QUICK = envFlag('BENCH_QUICK');
const ROUNDS = envInt('BENCH_ROUNDS', QUICK ? 1 : 5);
const N = { 1: envInt('BENCH_N_P1', QUICK ? 20_000 : 100_000), 16: envInt('BENCH_N_P16', QUICK ? 100_000 : 400_000) };
const PIPELINES = [1, 16];
const TESTS = ['GET', 'SET'];
const CLIENTS = 50;
const BASE = process.env.BENCH_OBS_BASE ? path.resolve(process.env.BENCH_OBS_BASE) : null;

const OFF = {
  slowlog: { RESPOOL_SLOWLOG_THRESHOLD_US: '-1', RESPOOL_COMMANDLOG_LARGE_REQUEST_BYTES: '-1', RESPOOL_COMMANDLOG_LARGE_REPLY_BYTES: '-1' },
  histograms: { RESPOOL_LATENCY_TRACKING: 'false' },
  bigKeys: { RESPOOL_BIG_KEYS_ENABLED: 'false' },
};
const VARIANTS = [
  ...(BASE ? [{ name: 'before', bin: path.join(BASE, 'bin/respool.js'), env: {} }] : []),
  { name: 'all on', bin: 'bin/respool.js', env: {} },
  { name: 'all off', bin: 'bin/respool.js', env: { ...OFF.slowlog, ...OFF.histograms, ...OFF.bigKeys } },
  { name: 'slowlog off', bin: 'bin/respool.js', env: OFF.slowlog },
  { name: 'histograms off', bin: 'bin/respool.js', env: OFF.histograms },
  { name: 'big keys off', bin: 'bin/respool.js', env: OFF.bigKeys },
];

const { startCluster } = await import(path.join(ROOT_DIR, 'build/harness/valkey-processes.js'));

async function startVariant(v, seed) {
  const port = await uniquePort();
  const args = [v.bin, '--listen', `${HOST}:${port}`, '--upstream', `${seed.host}:${seed.port}`, '--mode', 'cluster', '--connections-per-node', '2', '--log-level', 'warn'];
  const logFile = path.join(OUT_DIR, `observe-${v.name.replace(/\s+/g, '-')}.log`);
  fs.mkdirSync(OUT_DIR, { recursive: true });
  fs.writeFileSync(logFile, '');
  const child = spawn(process.execPath, args, { logFile, env: { ...process.env, ...v.env } });
  await waitForPing(port, { child, what: `respool (${v.name})`, timeoutMs: 15_000 });
  return { ...v, port, child, cmd: `${Object.entries(v.env).map(([k, x]) => `${k}=${x} `).join('')}node ${args.join(' ')}` };
}

async function oneRun(v, pipeline, test, round) {
  const n = N[pipeline];
  const args = ['-h', HOST, '-p', String(v.port), '-c', String(CLIENTS), '-n', String(n), '-d', '100', '-r', '100000', '-P', String(pipeline), '-t', test.toLowerCase()];
  const cpu0 = cpuSeconds(v.child.pid);
  const res = await run('valkey-benchmark', args, { timeoutMs: 180_000 });
  const cpu1 = cpuSeconds(v.child.pid);
  const parsed = parseBenchmarkText(res.out)[test];
  const r = { round, variant: v.name, pipeline, test, n, rps: parsed?.rps ?? NaN, p99Ms: parsed?.p99Ms ?? NaN, cpuUsPerReq: ((cpu1 - cpu0) / n) * 1e6 };
  log(`round ${round} P${pipeline} ${test} ${v.name}: ${fmtInt(r.rps)} rps, p99 ${fmt(r.p99Ms, 3)} ms, ${fmt(r.cpuUsPerReq)} µs CPU/request`);
  return r;
}

const started = new Date();
const cluster = await startCluster({ primaries: 3, replicasPerPrimary: 0 });
const variants = [];
try {
  const seed = cluster.nodes[0];
  for (const v of VARIANTS) variants.push(await startVariant(v, seed));
  await sleep(1000);
  // warm-up: every variant, every pipeline and test, unmeasured
  for (const v of variants) for (const p of PIPELINES) for (const t of TESTS) {
    await run('valkey-benchmark', ['-h', HOST, '-p', String(v.port), '-c', String(CLIENTS), '-n', String(QUICK ? 5000 : 20_000), '-d', '100', '-r', '100000', '-P', String(p), '-t', t.toLowerCase()]);
  }
  const runs = [];
  for (let round = 1; round <= ROUNDS; round++) {
    for (const p of PIPELINES) {
      for (const t of TESTS) {
        for (let k = 0; k < variants.length; k++) runs.push(await oneRun(variants[(k + round) % variants.length], p, t, round));
      }
    }
  }

  // ---- report
  const mm = (xs, f) => `${f(median(xs))} (${f(Math.min(...xs))}–${f(Math.max(...xs))})`;
  const of = (name, p, t) => runs.filter((r) => r.variant === name && r.pipeline === p && r.test === t);
  /** Per round, `value` of variant `name` ÷ that of "all off" in the same round. */
  const vsOff = (name, p, t, value = (r) => r.rps) => [...Array(ROUNDS).keys()].map((i) => {
    const a = of(name, p, t).find((r) => r.round === i + 1);
    const b = of('all off', p, t).find((r) => r.round === i + 1);
    return value(a) / value(b);
  });
  const cpu = (r) => r.cpuUsPerReq;
  const rows = [];
  for (const p of PIPELINES) for (const t of TESTS) for (const v of variants) {
    const rs = of(v.name, p, t);
    rows.push([t, p, v.name, mm(rs.map((r) => r.rps), fmtInt), mm(rs.map((r) => r.p99Ms), (x) => fmt(x, 3)), mm(rs.map((r) => r.cpuUsPerReq), (x) => fmt(x, 2)),
      v.name === 'all off' ? '1' : mm(vsOff(v.name, p, t), (x) => fmt(x, 3)),
      v.name === 'all off' ? '1' : mm(vsOff(v.name, p, t, cpu), (x) => fmt(x, 3))]);
  }
  const chart = writeChart('observe-overhead', barChart({
    title: `respool CPU per request per variant, ÷ "all off" in the same round (median of ${ROUNDS} rounds)`,
    yLabel: 'CPU per request ÷ all off',
    yFormat: (x) => x.toFixed(2),
    groups: PIPELINES.flatMap((p) => TESTS.map((t) => ({ label: `P=${p} ${t}`, bars: variants.map((v) => ({ name: v.name, value: median(vsOff(v.name, p, t, cpu)) })) }))),
  }), 'respool CPU per request per variant relative to all off, P=1 and P=16, GET and SET');
  const cost = (name, value) => PIPELINES.map((p) => `P=${p}: ${TESTS.map((t) => `${t} ${fmt((median(vsOff(name, p, t, value)) - 1) * 100, 1)}%`).join(', ')}`).join('; ');
  const cpuDelta = (name, p, t) => median(of(name, p, t).map((r) => r.cpuUsPerReq)) - median(of('all off', p, t).map((r) => r.cpuUsPerReq));
  const md = [
    '## What watching costs: slow log, latency histograms, big-key sampler (issue 22)',
    '',
    `**Rerun:** \`npm run bench:observe\` (${QUICK ? '**BENCH_QUICK=1 smoke run** — ' : ''}${BASE ? '`BENCH_OBS_BASE=<a checkout of the build before>`, ' : ''}` +
      `${ROUNDS} round(s), variants in an order rotated every round; ${fmtInt(N[1])} requests per run at P=1, ${fmtInt(N[16])} at P=16; ` +
      `valkey-benchmark -c ${CLIENTS} -d 100 -r 100000 against respool in front of 3 primaries). respool build: ${respoolBuildLabel()}` +
      `${BASE ? `; "before": ${BASE}` : ''}.`,
    '',
    ...variants.map((v) => `- ${v.name}: \`${v.cmd}\``),
    '',
    mdTable(['test', 'P', 'variant', 'requests/s', 'p99 ms', 'respool CPU µs / request', 'requests/s ÷ all off (same round)', 'CPU / request ÷ all off (same round)'], rows, ['l', 'r', 'l', 'r', 'r', 'r', 'r', 'r']),
    '',
    chart,
    '',
    `Everything on against everything off, medians of the per-round ratios: respool CPU per request ${cost('all on', cpu)}; ` +
      `requests/s ${cost('all on')} (CPU per request, all on − all off: ${PIPELINES.map((p) => `P=${p} ${TESTS.map((t) => `${t} ${fmt(cpuDelta('all on', p, t), 2)} µs`).join(', ')}`).join('; ')}). ` +
      `${BASE ? `The build before these features against this one with them off (what stays on the hot path whatever the settings: the reply-queue entry's request and node fields, the last-minute windows fed by the two latency histograms): CPU per request ${cost('before', cpu)}. ` : ''}` +
      'Each feature alone is the difference between "all on" and its own "… off" variant. CPU per request is the steadier figure: ' +
      'requests/s and p99 move with whatever else this shared 2-core machine runs, often by more than the differences measured here.',
    '',
    `Measured ${started.toISOString()} → ${new Date().toISOString()} on ${fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join('/')} load (1/5/15 min). Raw runs: bench/out/observe-overhead.json.`,
  ].join('\n');
  writeOutputs('observe-overhead', { config: { rounds: ROUNDS, n: N, clients: CLIENTS, base: BASE }, variants: variants.map((v) => ({ name: v.name, cmd: v.cmd })), runs }, md);
  writeSection('observe-overhead', md);
  console.log(md);
} finally {
  for (const v of variants) await stop(v.child);
  await cluster.stop();
}
