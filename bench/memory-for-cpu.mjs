// V8 flags that trade CPU for memory in a sidecar (issue 23): what each saves at idle and after
// traffic, and what it costs per request.
//
//   npm run bench:memory-for-cpu     (= npm run build && node bench/memory-for-cpu.mjs)
//
// Every variant is respool as deploy/kubernetes/sidecar.yaml runs it (config/sidecar.yaml, the
// node flags of the manifest's `command`), in front of one valkey-server, plus one more V8 flag:
//  - none                 : the manifest as it is;
//  - --optimize-for-size  : V8's "favor memory size over execution speed" (smaller heap growth,
//                           less inlining);
//  - --no-opt             : no optimizing compiler (TurboFan): baseline code only;
//  - --lite-mode          : no JIT at all (the bytecode interpreter), lazy feedback vectors.
// Per variant and round (interleaved): RSS after SETTLE_S s idle from start, RSS after a burst
// (valkey-benchmark 10 clients, 20,000 GET + 20,000 SET) and SETTLE_S s idle again, respool's CPU
// per request (utime + stime from /proc) for P=1 and P=16 GET, 50 clients, and Node's own floor
// (an empty server) under the same flags. With 2+ cores valkey-server and respool run on core 0,
// valkey-benchmark on core 1, as in bench/server-cost.mjs (placement otherwise flips results).
// Env: BENCH_ROUNDS (3), BENCH_FOOTPRINT_SETTLE_S (3), BENCH_QUICK=1 (1 round, 1 s, fewer requests).
// Everything on 127.0.0.1, started here and stopped at the end.
import os from 'node:os';
import { HOST, envFlag, envInt, fmt, fmtInt, log, mdTable, median, parseBenchmarkCsv, run, sleep, spawn, startValkey, stop, uniquePort, waitForPing, writeOutputs, makeTmpRoot } from './lib/common.mjs';
import { cpuSeconds, rssBytes } from './lib/measure.mjs';
import { spawnIdleFloor } from './lib/idle-floor.mjs';
import { writeSection } from './lib/results-file.mjs';
import { RESPOOL_BIN, respoolBuildLabel } from './lib/respool-build.mjs';
import { sidecarNodeFlags } from './lib/sidecar-manifest.mjs';

const QUICK = envFlag('BENCH_QUICK');
const ROUNDS = envInt('BENCH_ROUNDS', QUICK ? 1 : 3);
const SETTLE_S = envInt('BENCH_FOOTPRINT_SETTLE_S', QUICK ? 1 : 3);
const N_P1 = QUICK ? 20_000 : 100_000;
const N_P16 = QUICK ? 100_000 : 500_000;
const PIN = os.cpus().length >= 2;
const SIDECAR_FLAGS = sidecarNodeFlags();
const VARIANTS = [
  ['none (the manifest as it is)', []],
  ['--optimize-for-size', ['--optimize-for-size']],
  ['--no-opt', ['--no-opt']],
  ['--lite-mode', ['--lite-mode']],
];

const pinned = (core, cmd, args) => (PIN ? ['taskset', ['-c', String(core), cmd, ...args]] : [cmd, args]);

async function benchmark(port, test, n, clients, pipeline, pid) {
  const args = ['-h', HOST, '-p', String(port), '-t', test, '-n', String(n), '-c', String(clients), '-P', String(pipeline), '-d', '100', '-r', '100000', '--csv'];
  const c0 = cpuSeconds(pid);
  const { out, code } = await run(...pinned(1, 'valkey-benchmark', args), { timeoutMs: 300_000 });
  if (code !== 0) throw new Error(`valkey-benchmark ${args.join(' ')} exited ${code}`);
  const cpuUs = ((cpuSeconds(pid) - c0) / n) * 1e6;
  return { rps: parseBenchmarkCsv(out)[test.toUpperCase()]?.rps ?? NaN, cpuUs };
}

async function measureVariant(upstreamPort, extraFlags) {
  const port = await uniquePort();
  const args = [...SIDECAR_FLAGS, ...extraFlags, RESPOOL_BIN, '--config', 'config/sidecar.yaml', '--listen', `${HOST}:${port}`, '--upstream', `${HOST}:${upstreamPort}`, '--mode', 'standalone', '--log-level', 'warn'];
  const child = spawn(...pinned(0, process.execPath, args), { match: process.execPath });
  try {
    await waitForPing(port, { child, what: 'respool' });
    await sleep(SETTLE_S * 1000);
    const idleRss = rssBytes([child.pid]);
    for (const t of ['get', 'set']) await run(...pinned(1, 'valkey-benchmark', ['-h', HOST, '-p', String(port), '-t', t, '-n', '20000', '-c', '10', '-d', '100', '-r', '1000', '-q']), { timeoutMs: 120_000 });
    await sleep(SETTLE_S * 1000);
    const afterRss = rssBytes([child.pid]);
    const p1 = await benchmark(port, 'get', N_P1, 50, 1, child.pid);
    const p16 = await benchmark(port, 'get', N_P16, 50, 16, child.pid);
    return { idleRss, afterRss, p1, p16 };
  } finally {
    await stop(child);
  }
}

async function measureFloor(extraFlags) {
  const port = await uniquePort();
  const child = spawnIdleFloor(port, { nodeFlags: [...SIDECAR_FLAGS, ...extraFlags] });
  try {
    await waitForPing(port, { child, what: 'floor' });
    await sleep(SETTLE_S * 1000);
    return rssBytes([child.pid]);
  } finally {
    await stop(child);
  }
}

const tmpRoot = makeTmpRoot('memory-for-cpu-');
const valkey = await startValkey({ tmpRoot });
if (PIN) await run('taskset', ['-p', '-c', '0', String(valkey.child.pid)]);
const rounds = [];
try {
  for (let r = 1; r <= ROUNDS; r++) {
    const round = [];
    for (const [label, flags] of VARIANTS) {
      const m = await measureVariant(valkey.port, flags);
      m.floorRss = await measureFloor(flags);
      round.push(m);
      log(`round ${r} ${label}: idle ${fmt(m.idleRss / 2 ** 20, 1)} MiB (floor ${fmt(m.floorRss / 2 ** 20, 1)}), after traffic ${fmt(m.afterRss / 2 ** 20, 1)}; P=1 ${fmt(m.p1.cpuUs, 2)} µs/req, P=16 ${fmt(m.p16.cpuUs, 2)}`);
    }
    rounds.push(round);
  }
} finally {
  await stop(valkey.child);
}

const mib = (b) => fmt(b / 2 ** 20, 1);
const med = (i, pick) => median(rounds.map((round) => pick(round[i])));
const ratio = (i, pick) => median(rounds.map((round) => pick(round[i]) / pick(round[0])));
const rows = VARIANTS.map(([label], i) => [
  i === 0 ? label : `+ \`${label}\``,
  `${mib(med(i, (m) => m.idleRss))} MiB`,
  `${mib(med(i, (m) => m.floorRss))} MiB`,
  `+${mib(med(i, (m) => m.idleRss - m.floorRss))} MiB`,
  `${mib(med(i, (m) => m.afterRss))} MiB`,
  `${fmt(med(i, (m) => m.p1.cpuUs), 2)} µs (${fmt(ratio(i, (m) => m.p1.cpuUs), 2)}×), ${fmtInt(med(i, (m) => m.p1.rps))}/s`,
  `${fmt(med(i, (m) => m.p16.cpuUs), 2)} µs (${fmt(ratio(i, (m) => m.p16.cpuUs), 2)}×), ${fmtInt(med(i, (m) => m.p16.rps))}/s`,
]);
const markdown = [
  '## memory-for-cpu — V8 flags that trade CPU for a sidecar\'s memory (issue 23)',
  '',
  `**Rerun:** \`npm run bench:memory-for-cpu\` (BENCH_ROUNDS, BENCH_FOOTPRINT_SETTLE_S, BENCH_QUICK=1). Build: ${respoolBuildLabel()}. Node ${process.version}. ${new Date().toISOString()}, ${ROUNDS} interleaved rounds, medians.`,
  '',
  `Every row is respool as deploy/kubernetes/sidecar.yaml runs it (\`node ${SIDECAR_FLAGS.join(' ')} bin/respool.js --config config/sidecar.yaml\`, standalone upstream) plus the row's flag; the floor is an empty Node server under the same flags. RSS after ${SETTLE_S} s idle from start, and again after 20,000 GET + 20,000 SET (10 clients) and ${SETTLE_S} s idle. CPU: respool's utime + stime per GET, valkey-benchmark 50 clients, 100-byte values (${fmtInt(N_P1)} requests at P=1, ${fmtInt(N_P16)} at P=16; in brackets ÷ the first row in the same round).${PIN ? ' Pinned: valkey-server and respool on core 0, valkey-benchmark on core 1.' : ''}`,
  '',
  mdTable(['V8 flag added', 'idle RSS', 'Node floor, same flags', 'above the floor', 'RSS after traffic', 'respool CPU per GET, P=1', 'respool CPU per GET, P=16'], rows),
  '',
  "How to read: none of these is the manifest's default. Each saves a few MiB and costs CPU on every request, most at P=16, where respool's own code is most of its work: without the optimizing compiler (`--no-opt`) or any JIT (`--lite-mode`) that code runs in V8's interpreter. `--optimize-for-size` is the mild one. A pod whose traffic is light and whose memory is tight can add one to the manifest's `command`; deploy/kubernetes/sidecar.yaml keeps V8's compilers.",
].join('\n');
writeOutputs('memory-for-cpu', { rounds, variants: VARIANTS }, markdown);
writeSection('memory-for-cpu', markdown);
log('wrote the memory-for-cpu section of bench/RESULTS.md');
