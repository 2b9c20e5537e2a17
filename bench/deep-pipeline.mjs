// Deep pipelines beside quiet clients (issue 37, "one client's deep pipeline delays every other
// client"): a bulk loader — valkey-benchmark with 2 clients sending pipelines of 5,000 GETs —
// runs while 4 ordinary clients (one GET at a time each) time their requests, directly on one
// valkey-server and through respool with its default settings in front of that same server.
//
//   npm run bench:deep-pipeline   (= npm run build && npm run build:harness && node bench/deep-pipeline.mjs)
//   BENCH_COMPARE_BIN=/path/to/other/checkout/bin/respool.js npm run bench:deep-pipeline   (A/B)
//
// Env: BENCH_QUICK=1 (smoke run, under a minute: 1 round, 2 s windows, shorter throughput runs),
//      BENCH_ROUNDS (5), BENCH_SECONDS (6: the window measured during the loader),
//      BENCH_ALONE_SECONDS (2: the window measured without it), BENCH_QUIET_CLIENTS (4),
//      BENCH_P1_N (200000), BENCH_P16_N (1000000): GETs per no-loader valkey-benchmark run,
//      BENCH_COMPARE_BIN (another build's bin/respool.js, e.g. the build before the change: a
//      third target "compare", run with RESPOOL_BENCH_BIN set to it in that child's environment
//      only), RESPOOL_BENCH_BIN (the build measured as "respool"; default this checkout's
//      bin/respool.js), RESPOOL_BENCH_EXTRA_ARGS (more respool flags, for both builds).
//
// Method. One valkey-server (no persistence, keys never written: every GET answers a null bulk)
// serves every target; respool (and the compare build) are started once, before round 1, with
// startRespool's defaults (--mode standalone, --connections-per-node 2) and stay up. Each round
// runs the targets in turn — direct, respool, compare — and for each:
//  1. alone: the ordinary clients for BENCH_ALONE_SECONDS, no loader;
//  2. during: the loader `valkey-benchmark -c 2 -P 5000 -t get -r 100000 -n 1000000000 -q` is
//     started in the background, 500 ms later the window
//     opens (INFO stats on the node) and the ordinary clients run for BENCH_SECONDS; when they are
//     done the window closes (INFO stats again), the loader is stopped (SIGINT, SIGKILL after 1 s)
//     and the bench waits 300 ms. The loader's GETs/s = (total_commands_processed difference −
//     the ordinary clients' requests) ÷ the window's length. Its stdout/stderr lines matching
//     /ERR|error/i are counted (valkey-benchmark 8 prints "Error from server: …" for an error
//     reply and then exits at once; also lost connections), and a loader that exited before the
//     window ended is reported as an error;
//  3. no-loader throughput: `valkey-benchmark -c 50 -P 1 -t get -n BENCH_P1_N --csv`, then
//     `-P 16 -n BENCH_P16_N`, requests per second.
// The ordinary clients run in a child process (bench/lib/quiet-clients.mjs: 4 raw sockets, each
// `GET key:NNNN` for a random NNNN < 100,000, waiting for its one reply; latency per request with
// performance.now()), so this process's event loop does not distort them; it prints
// { count, p50, p99, max, errors, unanswered }. Reported: medians over rounds with each round's
// value, and medians of the per-round ratios (respool p99 during ÷ direct's: the issue's target
// is ≤ 2; this build's loader throughput ÷ the compare build's: target ≥ 0.8).
// Everything on 127.0.0.1, started here and stopped at the end.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  BENCH_DIR, HOST, OUT_DIR, RespConn, envFlag, envInt, fmt, fmtInt, log, makeTmpRoot, mdTable, median, parseBenchmarkCsv,
  parseInfo, respoolArgs, run, shellLine, sleep, spawn, startRespool, startValkey, stop, uniquePort, waitForPing, writeOutputs,
} from './lib/common.mjs';
import { writeSection } from './lib/results-file.mjs';
import { RESPOOL_BIN, respoolBuildLabel } from './lib/respool-build.mjs';

const QUICK = envFlag('BENCH_QUICK');
const ROUNDS = envInt('BENCH_ROUNDS', QUICK ? 1 : 5);
const DURING_S = envInt('BENCH_SECONDS', QUICK ? 2 : 6);
const ALONE_S = envInt('BENCH_ALONE_SECONDS', 2);
const QUIET = envInt('BENCH_QUIET_CLIENTS', 4);
const P1_N = envInt('BENCH_P1_N', QUICK ? 50_000 : 200_000);
const P16_N = envInt('BENCH_P16_N', QUICK ? 250_000 : 1_000_000);
const COMPARE_BIN = process.env.BENCH_COMPARE_BIN ? path.resolve(process.env.BENCH_COMPARE_BIN) : '';
const LOADER_CLIENTS = 2;
const LOADER_PIPELINE = 5000;
const LOADER_N = 1_000_000_000; // never reached: the loader is stopped after the window
const LOADER_LEAD_MS = 500;
const LOADER_TAIL_MS = 300;
const TPUT_CLIENTS = 50;
const RUN_TIMEOUT_MS = 180_000;
const QUIET_SCRIPT = path.join(BENCH_DIR, 'lib', 'quiet-clients.mjs');

const loadavg = () => fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

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
    valkeyBenchmark: sh('valkey-benchmark', ['--version']),
  };
}

/** respoolBuildLabel() as it reads for another bin: asked of a child with RESPOOL_BENCH_BIN set. */
function buildLabelOf(bin) {
  const code = `import(${JSON.stringify(path.join(BENCH_DIR, 'lib', 'respool-build.mjs'))}).then((m) => console.log(m.respoolBuildLabel()))`;
  try {
    return execFileSync(process.execPath, ['--input-type=module', '-e', code], {
      encoding: 'utf8', env: { ...process.env, RESPOOL_BENCH_BIN: bin }, stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
  } catch {
    return `${bin} (no build label)`;
  }
}

/**
 * The compare build: respoolArgs() takes the bin from RESPOOL_BENCH_BIN in *this* process, so the
 * argument list is built here with `bin` in its place, and the child gets RESPOOL_BENCH_BIN=bin in
 * its own environment only. Otherwise as startRespool().
 */
async function startRespoolBin(bin, upstreamPort, logFile) {
  const port = await uniquePort();
  const args = respoolArgs(port, upstreamPort);
  args[0] = bin;
  fs.mkdirSync(path.dirname(logFile), { recursive: true });
  fs.writeFileSync(logFile, '');
  const child = spawn(process.execPath, args, { logFile, env: { ...process.env, RESPOOL_BENCH_BIN: bin } });
  try {
    await waitForPing(port, { child, what: `respool (${bin})`, timeoutMs: 15_000 });
  } catch (e) {
    const tail = fs.readFileSync(logFile, 'utf8').trim().split('\n').slice(-3).join(' ⏎ ').slice(0, 600);
    e.message += ` (${path.relative(BENCH_DIR, logFile)}: ${tail || 'empty'})`;
    throw e;
  }
  return { port, child, cmd: `RESPOOL_BENCH_BIN=${bin} ${shellLine('node', args)}` };
}

/** The ordinary clients, in a child: { count, p50, p99, max, errors, unanswered }. */
async function quietClients(port, seconds) {
  const ms = Math.round(seconds * 1000);
  const res = await run(process.execPath, [QUIET_SCRIPT, String(port), String(QUIET), String(ms)], { timeoutMs: ms + 30_000 });
  const line = res.out.trim().split('\n').pop();
  if (res.code !== 0 || !line) throw new Error(`quiet-clients on ${port} failed: code ${res.code} signal ${res.signal} ${res.err.slice(0, 300)}`);
  return JSON.parse(line);
}

async function commandsProcessed(info) {
  return parseInfo(await info.callT(5000, 'INFO', 'stats')).total_commands_processed;
}

function loaderArgs(port) {
  return ['-h', HOST, '-p', String(port), '-c', String(LOADER_CLIENTS), '-P', String(LOADER_PIPELINE), '-t', 'get', '-r', '100000',
    '-n', String(LOADER_N), '-q'];
}

/** Lines of the loader's output that report an error ("Error from server: …", lost connections). */
function errorLines(text) {
  return text.split(/[\r\n]+/).map((l) => l.trim()).filter((l) => /ERR|error/i.test(l));
}

/** Ordinary clients while the loader runs against `port`; loader GETs/s from the node's counters. */
async function during(port, info) {
  const loader = spawn('valkey-benchmark', loaderArgs(port));
  await sleep(LOADER_LEAD_MS);
  const alive0 = loader.exitCode === null && loader.signalCode === null;
  const c0 = await commandsProcessed(info);
  const t0 = performance.now();
  const q = await quietClients(port, DURING_S);
  const c1 = await commandsProcessed(info);
  const windowS = (performance.now() - t0) / 1000;
  const aliveAtEnd = loader.exitCode === null && loader.signalCode === null;
  loader.kill('SIGINT');
  const k = setTimeout(() => loader.kill('SIGKILL'), 1000);
  const { code, signal } = await loader.exited;
  clearTimeout(k);
  await sleep(LOADER_TAIL_MS);
  const errs = errorLines(`${loader.out}\n${loader.err}`);
  const loaderGets = c1 - c0 - q.count - 1; // − 1: the first INFO, counted in the second one's figure
  return {
    quiet: q,
    loader: {
      getsPerS: loaderGets / windowS, gets: loaderGets, windowS, ranWholeWindow: alive0 && aliveAtEnd,
      exit: { code, signal }, errorLines: errs.length, errorSamples: errs.slice(0, 5).map((l) => l.slice(0, 200)),
    },
  };
}

async function throughput(port, pipeline, n) {
  const args = ['-h', HOST, '-p', String(port), '-c', String(TPUT_CLIENTS), '-P', String(pipeline), '-t', 'get', '-n', String(n), '--csv'];
  const res = await run('valkey-benchmark', args, { timeoutMs: RUN_TIMEOUT_MS });
  const row = parseBenchmarkCsv(res.out).GET;
  if (res.code !== 0 || !row) return { rps: NaN, error: `valkey-benchmark -P ${pipeline} exited ${res.code}${res.timedOut ? ' (timed out)' : ''}: ${res.err.slice(0, 200)}` };
  return { rps: row.rps, p50: row.p50_latency_ms, p99: row.p99_latency_ms };
}

async function measureTarget(name, port, info, result) {
  const alone = await quietClients(port, ALONE_S);
  const d = await during(port, info);
  const p1 = await throughput(port, 1, P1_N);
  const p16 = await throughput(port, 16, P16_N);
  const r = { alone, during: d.quiet, loader: d.loader, p1, p16 };
  for (const [what, q] of [['alone', alone], ['during', d.quiet]]) {
    if (q.errors || q.unanswered) result.errors.push(`${name} ${what}: ordinary clients had ${q.errors} errors, ${q.unanswered} unanswered`);
  }
  if (!d.loader.ranWholeWindow) result.errors.push(`${name}: the loader exited before the window ended (${JSON.stringify(d.loader.exit)})`);
  if (d.loader.errorLines) result.errors.push(`${name}: ${d.loader.errorLines} error line(s) from the loader, e.g. ${d.loader.errorSamples[0]}`);
  for (const [p, t] of [['P=1', p1], ['P=16', p16]]) if (t.error) result.errors.push(`${name} ${p}: ${t.error}`);
  log(`  ${name.padEnd(7)} alone p50 ${fmt(alone.p50, 3)} p99 ${fmt(alone.p99, 3)} ms; during the loader p50 ${fmt(d.quiet.p50, 3)} ` +
    `p99 ${fmt(d.quiet.p99, 3)} max ${fmt(d.quiet.max, 1)} ms (${fmtInt(d.quiet.count)} requests); loader ${fmtInt(d.loader.getsPerS)} GETs/s` +
    `${d.loader.errorLines ? `, ${d.loader.errorLines} ERROR lines` : ''}; P=1 ${fmtInt(p1.rps)} P=16 ${fmtInt(p16.rps)} GET/s`);
  return r;
}

async function main() {
  const started = new Date();
  const result = {
    bench: 'deep-pipeline', started: started.toISOString(), loadavgStart: loadavg(), quick: QUICK,
    config: {
      rounds: ROUNDS, duringSeconds: DURING_S, aloneSeconds: ALONE_S, quietClients: QUIET, loaderClients: LOADER_CLIENTS,
      loaderPipeline: LOADER_PIPELINE, loaderLeadMs: LOADER_LEAD_MS, loaderTailMs: LOADER_TAIL_MS, p1N: P1_N, p16N: P16_N, throughputClients: TPUT_CLIENTS,
    },
    machine: machine(), commands: {}, builds: {}, rounds: [], errors: [],
  };
  const tmpRoot = makeTmpRoot('deep-pipeline-');
  let valkey, info;
  const proxies = {};
  try {
    valkey = await startValkey({ tmpRoot });
    info = await RespConn.connect(valkey.port);
    result.commands.valkey = valkey.cmd;
    result.commands.loader = shellLine('valkey-benchmark', loaderArgs('PORT'));
    result.commands.quiet = `node bench/lib/quiet-clients.mjs PORT ${QUIET} {${ALONE_S * 1000}|${DURING_S * 1000}}`;
    result.commands.throughput = `valkey-benchmark -h ${HOST} -p PORT -c ${TPUT_CLIENTS} -P {1|16} -t get -n {${P1_N}|${P16_N}} --csv`;

    proxies.respool = await startRespool({ upstreamPort: valkey.port, logFile: path.join(OUT_DIR, 'respool-deep-pipeline.log') });
    result.commands.respool = proxies.respool.cmd;
    result.builds.respool = respoolBuildLabel();
    if (COMPARE_BIN) {
      if (!fs.existsSync(COMPARE_BIN)) throw new Error(`BENCH_COMPARE_BIN=${COMPARE_BIN} does not exist`);
      proxies.compare = await startRespoolBin(COMPARE_BIN, valkey.port, path.join(OUT_DIR, 'respool-deep-pipeline-compare.log'));
      result.commands.compare = proxies.compare.cmd;
      result.builds.compare = buildLabelOf(COMPARE_BIN);
    }
    const ports = { direct: valkey.port, respool: proxies.respool.port, ...(proxies.compare ? { compare: proxies.compare.port } : {}) };
    result.targets = Object.keys(ports);
    log(`valkey-server on ${valkey.port}; respool (${result.builds.respool}) on ${ports.respool}` +
      `${ports.compare ? `; compare (${result.builds.compare}) on ${ports.compare}` : ''}`);

    // Warm-up, not recorded: a short pipelined run through each proxy (JIT, buffers).
    for (const name of Object.keys(proxies)) await throughput(ports[name], 16, Math.min(P16_N, 100_000));

    for (let round = 1; round <= ROUNDS; round++) {
      log(`round ${round}/${ROUNDS} (load ${loadavg()})`);
      const runs = {};
      for (const name of result.targets) {
        runs[name] = await measureTarget(name, ports[name], info, result);
        for (const [n, p] of Object.entries(proxies)) {
          if (p.child.exitCode !== null || p.child.signalCode !== null) throw new Error(`${n} exited (code ${p.child.exitCode}, signal ${p.child.signalCode})`);
        }
      }
      result.rounds.push({ round, loadavg: loadavg(), runs });
    }
  } finally {
    info?.close();
    for (const p of Object.values(proxies)) await stop(p.child);
    await stop(valkey?.child);
    fs.rmSync(tmpRoot, { recursive: true, force: true });
  }
  result.finished = new Date().toISOString();
  result.loadavgEnd = loadavg();
  report(result);
}

// ---------------------------------------------------------------- report

function report(result) {
  const R = result.rounds;
  const T = result.targets;
  const of = (name, f) => R.map((r) => f(r.runs[name]));
  const med = (name, f) => median(of(name, f));
  const perRound = (xs, g) => xs.map(g).join(' / ');
  const ms = (x) => fmt(x, 2);
  const label = { direct: 'direct (valkey-server)', respool: 'respool (this build)', compare: 'respool (compare build)' };

  const rows = T.map((name) => [
    label[name],
    ms(med(name, (x) => x.during.p99)), perRound(of(name, (x) => x.during.p99), ms),
    ms(med(name, (x) => x.during.p50)), ms(med(name, (x) => x.during.max)),
    ms(med(name, (x) => x.alone.p50)), ms(med(name, (x) => x.alone.p99)),
    fmtInt(med(name, (x) => x.loader.getsPerS)), perRound(of(name, (x) => x.loader.getsPerS), fmtInt),
    String(R.reduce((s, r) => s + r.runs[name].loader.errorLines, 0)),
    fmtInt(med(name, (x) => x.p1.rps)), fmtInt(med(name, (x) => x.p16.rps)),
  ]);
  const mainTable = mdTable(
    ['target', 'p99 during loader, ms (median)', 'p99 during, per round', 'p50 during', 'max during', 'p50 alone', 'p99 alone',
      'loader GETs/s (median)', 'loader GETs/s per round', 'loader error lines', 'P=1 GET/s, no loader', 'P=16 GET/s, no loader'],
    rows,
  );

  const ratio = (a, b, f) => R.map((r) => f(r.runs[a]) / f(r.runs[b]));
  const ratios = [
    ['respool p99 during ÷ direct p99 during', ratio('respool', 'direct', (x) => x.during.p99), '≤ 2'],
    ['respool loader GETs/s ÷ direct', ratio('respool', 'direct', (x) => x.loader.getsPerS), ''],
  ];
  if (T.includes('compare')) {
    ratios.push(
      ['compare build p99 during ÷ direct p99 during', ratio('compare', 'direct', (x) => x.during.p99), ''],
      ['this build loader GETs/s ÷ compare build', ratio('respool', 'compare', (x) => x.loader.getsPerS), '≥ 0.8'],
      ['this build P=1 GET/s ÷ compare build', ratio('respool', 'compare', (x) => x.p1.rps), ''],
      ['this build P=16 GET/s ÷ compare build', ratio('respool', 'compare', (x) => x.p16.rps), ''],
    );
  }
  const ratioTable = mdTable(['ratio', 'median of per-round ratios', 'per round', 'issue 37 target'],
    ratios.map(([what, xs, target]) => [what, fmt(median(xs), 2), perRound(xs, (x) => fmt(x, 2)), target]));
  result.summary = Object.fromEntries(ratios.map(([what, xs]) => [what, median(xs)]));

  const m = result.machine;
  const md = [
    '## Deep pipelines beside quiet clients (issue 37)',
    '',
    `${QUICK ? '**BENCH_QUICK=1 smoke run — not for comparison.** ' : ''}` +
      `A bulk loader (\`${result.commands.loader}\`: ${LOADER_CLIENTS} clients, pipelines of ${fmtInt(LOADER_PIPELINE)} GETs; its output is searched for error lines — valkey-benchmark exits at its first error reply, which would show as a loader that did not run the whole window) ` +
      `runs while ${QUIET} ordinary clients (a child process, bench/lib/quiet-clients.mjs: raw sockets, pipeline 1, \`GET key:NNNN\` of a random key < 100,000, one request at a time each) ` +
      `time every request: ${DURING_S} s during the loader (the window opens ${LOADER_LEAD_MS} ms after the loader starts; it is stopped after the window, then ${LOADER_TAIL_MS} ms pause) and ${ALONE_S} s alone before it. ` +
      `Loader GETs/s = the node's \`INFO stats\` total_commands_processed over the window minus the ordinary clients' requests; the same valkey-server (no persistence, keys never written, so every GET answers a null bulk) serves every target. ` +
      `Then, with no loader, \`valkey-benchmark -c ${TPUT_CLIENTS} -P 1 -t get -n ${P1_N}\` and \`-P 16 -n ${P16_N}\`. ` +
      `Targets: direct on valkey-server, respool with default settings (\`${result.commands.respool}\`, ${result.builds.respool})` +
      `${T.includes('compare') ? `, and the compare build (\`${result.commands.compare}\`, ${result.builds.compare})` : ''}; ` +
      `each started once and kept up, warmed with one unrecorded P=16 run. ${R.length} round(s), interleaved: each round runs ${T.join(', then ')}, each target alone → during → P=1 → P=16. ` +
      `Medians over rounds (each round's value alongside); ratios are medians of the per-round ratios. ` +
      `**Rerun:** \`npm run bench:deep-pipeline\`; A/B against another build: \`BENCH_COMPARE_BIN=/path/to/other/bin/respool.js npm run bench:deep-pipeline\` (knobs in the header of bench/deep-pipeline.mjs). ` +
      `**Date:** ${result.started} – ${result.finished}; build: ${respoolBuildLabel()}. ` +
      `**Machine:** ${m.nproc} cores (${m.cpu}), node ${m.node}, ${m.valkey.replace(/ sha=.*/, '')}, ${m.valkeyBenchmark}; load average ${result.loadavgStart} at the start, ${result.loadavgEnd} at the end — every process on the same cores.`,
    '',
    mainTable,
    '',
    ratioTable,
    ...(result.errors.length ? ['', `**Errors:** ${result.errors.join('; ')}`] : []),
    '',
    'Raw numbers: bench/out/deep-pipeline.json.',
  ].join('\n');
  console.log(`\n${md}\n`);
  writeOutputs('deep-pipeline', result, md);
  writeSection('deep-pipeline', md);
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
