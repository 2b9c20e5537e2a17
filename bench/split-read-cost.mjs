// What a read of a split hot key costs respool, against a plain read: respool's CPU per GET at
// pipeline 16, nodes uncapped, for (1) GETs of one hot key that is not split (one node), (2) the
// same GETs with the key split into 3 copies on the 3 primaries, (3) GETs of 10,000 random keys
// (every node). Optionally a second build side by side (A/B in the same run, rounds interleaved).
//
//   npm run bench:split-reads      (= npm run build && npm run build:harness && node bench/split-read-cost.mjs)
//
// Env: BENCH_QUICK=1 (1 round of 3 s), BENCH_SR_ROUNDS (3), BENCH_SR_SECONDS (6),
//      RESPOOL_BENCH_BIN (the build measured; default this checkout's bin/respool.js),
//      RESPOOL_BENCH_BIN_B (a second build, e.g. the commit before, measured in the same rounds).
// Load: 2 load-generator processes (bench/lib/hotkeys-loadgen.mjs, raw RESP) × 16 connections ×
// 16 pipelined GETs, 1 KiB values. CPU: utime+stime of the respool process (/proc/<pid>/stat) ÷ GETs.
// Everything on 127.0.0.1, started here and stopped at the end.
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { HOST, OUT_DIR, ROOT_DIR, RespConn, envFlag, envInt, fmt, fmtInt, log, mdTable, median, sleep, spawn, stop, uniquePort, waitForPing, writeOutputs } from './lib/common.mjs';
import { writeSection } from './lib/results-file.mjs';
import { RESPOOL_BIN, respoolBuildLabel } from './lib/respool-build.mjs';

const QUICK = envFlag('BENCH_QUICK');
const ROUNDS = envInt('BENCH_SR_ROUNDS', QUICK ? 1 : 3);
const SECONDS = envInt('BENCH_SR_SECONDS', QUICK ? 3 : 6);
const HOT_KEY = 'bench:hot';
const COLD_PREFIX = 'bench:cold:';
const COLD_KEYS = 10_000;
const VALUE_BYTES = 1024;
const CONNS = 16;
const DEPTH = 16;
const GENS = 2;
const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;

const { startCluster } = await import(path.join(ROOT_DIR, 'build/harness/valkey-processes.js'));

function cpuSeconds(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / CLK_TCK;
}

/** A build's label: this checkout's commit, or the other checkout's. */
function labelOf(bin) {
  if (bin === RESPOOL_BIN) return respoolBuildLabel();
  const dir = path.resolve(path.dirname(bin), '..');
  try {
    return `commit ${execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: dir, encoding: 'utf8' }).trim()} (${dir})`;
  } catch {
    return bin;
  }
}

async function runLoad(port, pid, hotShare) {
  const startAt = Date.now() + 800;
  const gens = Array.from({ length: GENS }, () => spawn(process.execPath, ['bench/lib/hotkeys-loadgen.mjs',
    JSON.stringify({ port, conns: CONNS, depth: DEPTH, hotKey: HOT_KEY, coldPrefix: COLD_PREFIX, coldKeys: COLD_KEYS, hotShare, startAt, durationMs: SECONDS * 1000 })]));
  await sleep(Math.max(0, startAt - Date.now()));
  const a = cpuSeconds(pid);
  await sleep(SECONDS * 1000);
  const b = cpuSeconds(pid);
  let ops = 0;
  let errors = 0;
  let nils = 0;
  for (const g of gens) {
    await g.exited;
    const r = JSON.parse(g.out.trim().split('\n').pop());
    ops += r.ops;
    errors += r.errors;
    nils += r.nils;
  }
  return { getsPerS: ops / SECONDS, cpuUsPerGet: ((b - a) * 1e6) / ops, errors, nils };
}

async function setSplit(port, on) {
  const c = await RespConn.connect(port);
  try {
    if (!on) return void (await c.call('RESPOOL', 'SPLIT', 'DEL', HOT_KEY));
    await c.call('RESPOOL', 'SPLIT', 'ADD', HOT_KEY, '3');
    for (let i = 0; i < 200; i++) {
      const list = await c.call('RESPOOL', 'SPLIT', 'LIST');
      if (list.find((e) => e[0] === HOT_KEY)?.[1].length === 3) return;
      await sleep(50);
    }
    throw new Error('split copies not placed in time');
  } finally {
    c.close();
    await sleep(300);
  }
}

const conditions = [
  { name: 'hot key, not split (one node)', hotShare: 1, split: false },
  { name: 'hot key split into 3 copies (3 nodes)', hotShare: 1, split: true },
  { name: 'random keys (3 nodes)', hotShare: 0, split: false },
];

const started = new Date();
fs.mkdirSync(OUT_DIR, { recursive: true });
const bins = [RESPOOL_BIN, ...(process.env.RESPOOL_BENCH_BIN_B ? [process.env.RESPOOL_BENCH_BIN_B] : [])];
const cluster = await startCluster({ primaries: 3, replicasPerPrimary: 0 });
const builds = [];
const runs = [];
try {
  const primaries = await cluster.primaries();
  for (const [i, bin] of bins.entries()) {
    const port = await uniquePort();
    const args = [bin, '--listen', `${HOST}:${port}`, '--upstream', `${HOST}:${primaries[0].port}`, '--mode', 'cluster', '--log-level', 'warn'];
    const child = spawn(process.execPath, args, { logFile: path.join(OUT_DIR, `respool-split-reads-${i}.log`) });
    await waitForPing(port, { child, what: `respool ${bin}`, timeoutMs: 15_000 });
    builds.push({ name: i === 0 ? 'A' : 'B', label: labelOf(bin), cmd: `node ${args.join(' ')}`, port, child });
  }
  const conn = await RespConn.connect(builds[0].port);
  const value = 'x'.repeat(VALUE_BYTES);
  await conn.call('SET', HOT_KEY, value);
  for (let i = 0; i < COLD_KEYS; i += 500) await Promise.all(Array.from({ length: Math.min(500, COLD_KEYS - i) }, (_, j) => conn.call('SET', `${COLD_PREFIX}${i + j}`, value)));
  conn.close();
  for (let round = 1; round <= ROUNDS; round++) {
    // Builds alternate first per round; within a build, the three conditions back to back.
    for (const b of round % 2 === 1 ? builds : [...builds].reverse()) {
      for (const c of conditions) {
        if (c.split) await setSplit(b.port, true);
        const r = await runLoad(b.port, b.child.pid, c.hotShare);
        if (c.split) await setSplit(b.port, false);
        runs.push({ round, build: b.name, condition: c.name, ...r });
        log(`round ${round} ${b.name} ${c.name}: ${fmtInt(r.getsPerS)} GET/s, ${fmt(r.cpuUsPerGet)} µs respool CPU per GET, errors ${r.errors}, nils ${r.nils}`);
      }
    }
  }
} finally {
  for (const b of builds) await stop(b.child);
  await cluster.stop();
}

const of = (build, condition) => runs.filter((r) => r.build === build && r.condition === condition);
const rows = [];
const summary = {};
for (const b of builds) {
  const plain = of(b.name, conditions[0].name);
  for (const c of conditions) {
    const xs = of(b.name, c.name);
    // Per round against the plain read measured in the same round, then the median.
    const vsPlain = xs.map((x, i) => x.cpuUsPerGet / plain[i].cpuUsPerGet);
    rows.push([b.name, c.name, fmtInt(median(xs.map((x) => x.getsPerS))), fmt(median(xs.map((x) => x.cpuUsPerGet))), xs.map((x) => fmt(x.cpuUsPerGet)).join(' / '),
      `${fmt(median(vsPlain))}×`, `${xs.reduce((s, x) => s + x.errors, 0)} / ${xs.reduce((s, x) => s + x.nils, 0)}`]);
    summary[`${b.name}: ${c.name}`] = { getsPerS: median(xs.map((x) => x.getsPerS)), cpuUsPerGet: median(xs.map((x) => x.cpuUsPerGet)), vsPlain: median(vsPlain) };
  }
}
const md = [
  '## Split-key reads: respool CPU per GET against a plain read (pipeline 16)',
  '',
  `**Rerun:** \`npm run bench:split-reads\`${QUICK ? ' (**BENCH_QUICK=1 smoke run**)' : ''} (= \`npm run build && npm run build:harness && node bench/split-read-cost.mjs\`; ` +
    `RESPOOL_BENCH_BIN_B=<other checkout>/bin/respool.js adds a second build to the same rounds). ${GENS} load-generator processes (bench/lib/hotkeys-loadgen.mjs) × ${CONNS} connections × ${DEPTH} pipelined GETs, ` +
    `${VALUE_BYTES}-byte values, nodes uncapped, 3 primaries (no replicas); ${SECONDS} s per run, ${ROUNDS} round(s); respool CPU = utime+stime of its process ÷ GETs. **Date:** ${started.toISOString()}; 2-core machine shared with other work.`,
  '',
  ...builds.map((b) => `- build ${b.name}: ${b.label} — \`${b.cmd}\``),
  '',
  mdTable(['build', 'GETs of', 'GET/s (median)', 'respool CPU µs per GET (median)', 'per round', 'CPU vs the unsplit hot key (median of per-round ratios)', 'errors / nils'], rows,
    ['l', 'l', 'r', 'r', 'r', 'r', 'r']),
  '',
  'The split key\'s GETs go to 3 nodes, so a client\'s 16 pipelined replies come back from 3 links; "random keys" is a plain read over 3 nodes for comparison.',
  '',
  'Raw numbers: bench/out/split-reads.json.',
].join('\n');
writeOutputs('split-reads', { started: started.toISOString(), builds: builds.map(({ name, label, cmd }) => ({ name, label, cmd })), runs, summary }, md);
writeSection('split-reads', md);
console.log(md);
