// Soak: an hour of chaos (issue 34). A 3 primaries + 3 replicas valkey cluster (one primary behind
// a fault relay), two respool processes as a fleet in front of it (A with --workers 2, B a single
// process), a load process driving every kind of session through both (verified SET/GET, MULTI
// across slots, BLPOP fed by LPUSH, pub/sub, cross-slot MGET, a connection per request; see
// bench/lib/soak-modes.mjs), and every SOAK_FAULT_EVERY_S seconds the next fault of a rotating
// list (bench/lib/soak-faults.mjs): a primary killed (its replica takes over; it comes back as a
// replica), a primary frozen (SIGSTOP, SIGCONT), a reshard, a node added then removed, member B
// restarted, a takeover on member A (SIGUSR2), a slow link. Sampled meanwhile: RSS, descriptors,
// upstream connections, event-loop delay (bench/lib/soak-sampler.mjs). At the end every
// acknowledged write is read back, BLPOP items and pub/sub messages counted, errors placed inside
// a fault's window or outside; a table is printed and written with charts to bench/RESULTS.md.
//
//   npm run bench:soak          (builds, then node bench/soak.mjs with the descriptor limit raised)
//
// Env: SOAK_MINUTES (60), SOAK_FAULT_EVERY_S (240), SOAK_SAMPLE_S (5), SOAK_SETTLE_S (15: a fault's
//      window ends this long after the fault), SOAK_RATE (1: ~2,000 requests/s; the load scales
//      with it), SOAK_NODE_TIMEOUT_MS (15000: cluster-node-timeout, longer than the freeze so a
//      frozen primary is a silent node, not a failover), SOAK_FREEZE_S (10).
// The slow link lasts min(60 s, half the fault interval), the added node holds its slots for
// min(30 s, a quarter of it). Loopback only; bounded in time; every process it started is
// stopped by pid at the end, on an exception and on SIGINT.
import { fork } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { BENCH_DIR, OUT_DIR, envInt, log, sleep } from './lib/common.mjs';
import { writeSection } from './lib/results-file.mjs';
import { SoakCluster } from './lib/soak-cluster.mjs';
import { FAULTS } from './lib/soak-faults.mjs';
import { startFleet } from './lib/soak-fleet.mjs';
import { buildReport } from './lib/soak-report.mjs';
import { Sampler } from './lib/soak-sampler.mjs';

const config = {
  minutes: envInt('SOAK_MINUTES', 60),
  faultEveryS: envInt('SOAK_FAULT_EVERY_S', 240),
  sampleS: envInt('SOAK_SAMPLE_S', 5),
  settleS: envInt('SOAK_SETTLE_S', 15),
  rate: envInt('SOAK_RATE', 1),
  nodeTimeoutMs: envInt('SOAK_NODE_TIMEOUT_MS', 15_000),
  freezeS: envInt('SOAK_FREEZE_S', 10),
};
const durationMs = config.minutes * 60_000;
const everyMs = config.faultEveryS * 1000;

fs.mkdirSync(OUT_DIR, { recursive: true }); // respool's logs go there (a fresh clone has no bench/out)
let cluster = null;
let fleet = null;
let load = null;
let sampler = null;

/** The load process (bench/lib/soak-load.mjs): ready, progress reports, result on stop. */
function startLoad(ports) {
  const outFile = path.join(OUT_DIR, 'soak-load-result.json');
  fs.rmSync(outFile, { force: true });
  const child = fork(path.join(BENCH_DIR, 'lib/soak-load.mjs'), [JSON.stringify({ ports, runId: Date.now().toString(36), rate: config.rate, outFile })], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  process.on('exit', () => child.exitCode === null && child.signalCode === null && child.kill('SIGKILL'));
  const progress = [];
  let onReady;
  let onResult;
  const failed = (e) => {
    onReady?.reject(e);
    onResult?.reject(e);
  };
  const ready = new Promise((resolve, reject) => (onReady = { resolve, reject }));
  const result = new Promise((resolve, reject) => (onResult = { resolve, reject }));
  result.catch(() => undefined);
  child.on('message', (m) => {
    if (m.type === 'ready') onReady.resolve();
    else if (m.type === 'progress') progress.push(m);
    else if (m.type === 'result') onResult.resolve(JSON.parse(fs.readFileSync(outFile, 'utf8')));
    else if (m.type === 'failed') failed(new Error(`load process: ${m.message}`));
  });
  child.on('exit', (code, signal) => failed(new Error(`load process exited (code ${code}, signal ${signal})`)));
  return { child, ready, result, progress, stop: () => child.send({ type: 'stop' }) };
}

async function runFaults(t0) {
  const faults = [];
  const ctx = {
    cluster, fleet, freezeS: config.freezeS, reshardSlots: 128,
    slowS: Math.min(60, Math.round(config.faultEveryS / 2)), holdS: Math.min(30, Math.round(config.faultEveryS / 4)),
  };
  const turns = FAULTS.map(() => 0);
  for (let k = 1; ; k++) {
    const due = t0 + k * everyMs;
    if (due + everyMs / 2 > t0 + durationMs) break;
    const last = faults.at(-1);
    const startAt = Math.max(due, last ? last.end + config.settleS * 1000 : 0);
    if (startAt > t0 + durationMs) break;
    await sleep(startAt - Date.now());
    const i = (k - 1) % FAULTS.length;
    const fault = { name: FAULTS[i].name, start: Date.now() };
    log(`soak: fault ${k} at ${((fault.start - t0) / 1000).toFixed(0)} s: ${fault.name}`);
    try {
      fault.detail = await FAULTS[i].run({ ...ctx, turn: turns[i]++ });
    } catch (e) {
      fault.error = e.message.split('\n')[0].slice(0, 300);
      await cluster.waitStable(60_000).catch((err) => log(`soak: after the failed fault: ${err.message}`));
    }
    fault.end = Date.now();
    faults.push(fault);
    log(`soak: fault ${k} over after ${((fault.end - fault.start) / 1000).toFixed(1)} s: ${fault.error ? `FAILED ${fault.error}` : fault.detail}`);
  }
  return faults;
}

async function main() {
  log(`soak: ${config.minutes} min, a fault every ${config.faultEveryS} s; starting the cluster`);
  cluster = await SoakCluster.start({ nodeTimeoutMs: config.nodeTimeoutMs });
  log(`soak: cluster up (${cluster.nodes.map((n) => n.port).join(', ')}); ${cluster.far.address} behind the relay on ${cluster.relay.port}`);
  fleet = await startFleet(cluster.seeds());
  load = startLoad(fleet.members.map((m) => m.port));
  await load.ready;
  const t0 = Date.now();
  log('soak: load running');
  sampler = new Sampler({ fleet, cluster, t0, everyMs: config.sampleS * 1000 });
  sampler.start();
  const faults = await runFaults(t0);
  const lastEnd = faults.at(-1)?.end ?? t0;
  await sleep(Math.max(t0 + durationMs, lastEnd + config.settleS * 1000) - Date.now());
  const durationS = (Date.now() - t0) / 1000;
  await sampler.stop();
  log('soak: stopping the load, reading back every acknowledged write');
  load.stop();
  const result = await load.result;
  const report = buildReport({
    config, faults, samples: sampler.samples, progress: load.progress, result, t0, durationS,
    fleetNames: fleet.members.map((m) => m.name), commands: fleet.members.map((m) => fleet.command(m)),
  });
  console.log(report.table);
  for (const line of [...report.outsideLines, ...report.examples]) console.log(line);
  fs.mkdirSync(OUT_DIR, { recursive: true });
  fs.writeFileSync(path.join(OUT_DIR, 'soak.md'), `${report.md}\n`);
  fs.writeFileSync(path.join(OUT_DIR, 'soak.json'), JSON.stringify({ config, faults, samples: sampler.samples, progress: load.progress }, null, 1));
  writeSection('soak', report.md);
  log('soak: wrote bench/RESULTS.md (section soak), bench/charts/soak-*.svg, bench/out/soak.{md,json}');
}

async function cleanup() {
  await sampler?.stop().catch(() => undefined);
  if (load && load.child.exitCode === null && load.child.signalCode === null) load.child.kill('SIGKILL');
  for (const m of fleet?.members ?? []) await m.stop().catch(() => undefined);
  await cluster?.stop().catch(() => undefined);
}

try {
  await main();
} catch (e) {
  console.error(e);
  process.exitCode = 1;
} finally {
  await cleanup();
}
