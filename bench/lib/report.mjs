import { writeSection } from './results-file.mjs';
// Assembles bench/RESULTS.md from this run's fragments in bench/out/ (written by
// bench/throughput.mjs and bench/conn-per-request.mjs) plus machine facts and the commands run.
// Called by bench/run.sh as: node bench/lib/report.mjs <started-iso> <commands-file>
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BENCH_DIR, OUT_DIR } from './common.mjs';

const [startedIso = new Date().toISOString(), commandsFile = path.join(OUT_DIR, 'commands.txt')] = process.argv.slice(2);

function sh(cmd, args) {
  try {
    return execFileSync('sh', ['-c', '"$0" "$@" 2>&1', cmd, ...args], { encoding: 'utf8' }).trim();
  } catch (e) {
    return `${(e.stdout ?? '').trim()} ${(e.stderr ?? '').trim()}`.trim() || `(${cmd} failed)`;
  }
}
function readIf(f) {
  try {
    return fs.readFileSync(f, 'utf8');
  } catch {
    return null;
  }
}
function jsonIf(f) {
  const t = readIf(f);
  return t ? JSON.parse(t) : null;
}

const cpuModel = (readIf('/proc/cpuinfo') ?? '').match(/model name\s*:\s*(.*)/)?.[1] ?? os.cpus()[0]?.model ?? '?';
const machine = [
  ['nproc', sh('nproc', [])],
  ['cpu', cpuModel],
  ['memory', `${Math.round(os.totalmem() / 2 ** 30)} GiB`],
  ['kernel', `${os.type()} ${os.release()}`],
  ['node -v', process.version],
  ['valkey-server --version', sh('valkey-server', ['--version'])],
  ['nutcracker --version', sh('nutcracker', ['--version']).split('\n')[0]],
  ['load average (1/5/15 min) before the run', (readIf(path.join(OUT_DIR, 'loadavg-start.txt')) ?? '?').trim()],
  ['load average after the run', os.loadavg().map((x) => x.toFixed(2)).join(' ')],
];

const tp = jsonIf(path.join(OUT_DIR, 'throughput.json'));
const cpr = jsonIf(path.join(OUT_DIR, 'conn-per-request.json'));
const tpMd = readIf(path.join(OUT_DIR, 'throughput.md'));
const cprMd = readIf(path.join(OUT_DIR, 'conn-per-request.md'));
const commands = (readIf(commandsFile) ?? '').trim();
const envKnobs = Object.entries(process.env)
  .filter(([k]) => /^(BENCH_|RESPOOL_BENCH_)/.test(k))
  .map(([k, v]) => `${k}=${v}`)
  .sort();

const skipped = envKnobs.some((k) => /^RESPOOL_BENCH_SKIP_RESPOOL=(1|true|yes)$/i.test(k));
const out = [];
out.push('## Core proxy: throughput, pooling, connection per request (issue 2)');
out.push('');
out.push('**Rerun:** `npm run bench` (that is `bash bench/run.sh`, from the repository root). It installs valkey-server, ' +
  'valkey-benchmark and twemproxy when missing (`scripts/install-valkey.sh --with-twemproxy`), runs `npm ci` if ' +
  '`node_modules/` is missing, builds respool, runs `bench/throughput.mjs` and `bench/conn-per-request.mjs`, and rewrites ' +
  'this section of RESULTS.md. Raw results (JSON per run, with every round) go to `bench/out/` (gitignored). All traffic is on 127.0.0.1.');
out.push('');
out.push('Knobs: `BENCH_QUICK=1` (short smoke run), `RESPOOL_BENCH_SKIP_RESPOOL=1` (direct and twemproxy only), ' +
  '`BENCH_ROUNDS` (5), `BENCH_N_P1`, `BENCH_N_P16`, `BENCH_WARMUP_N`, `BENCH_PROBE_N_P1`, `BENCH_PROBE_N_P16`, `BENCH_SKIP_PROBE=1` (no instrumented respool), ' +
  '`BENCH_STRACE_N_P1`, `BENCH_STRACE_N_P16`, `BENCH_SKIP_STRACE=1` (no syscall counts; they need `strace`), `BENCH_CLIENTS`, `BENCH_TWEMPROXY_CONNECTIONS`, `BENCH_CPR_OPS`, ' +
  '`BENCH_CPR_WORKERS`, `BENCH_CPR_ROUNDS`, `RESPOOL_BENCH_EXTRA_ARGS` (extra respool flags), `RESPOOL_BENCH_BIN` (another respool entry script).');
out.push('');
out.push('How to read: the machine is small (2 cores) and shared, so absolute numbers move from run to run; the ' +
  'ratios between targets measured side by side in the same round are what to compare. The load generator ' +
  '(valkey-benchmark or the Node driver), the proxy and valkey-server all share the same 2 cores, so a proxy ' +
  'competes with the server and the load generator for CPU — a proxy hop here costs more than it would on separate hosts. ' +
  'The costs per request (CPU µs, heap bytes allocated, system calls) depend less on what else runs on the machine than requests/s and tail latency do, ' +
  'so they are the figures to track from change to change; every figure is given as the median over rounds with the lowest and highest round, so the spread shows how far to trust it.');
out.push('');
out.push(`## This run`);
out.push('');
out.push(`- date: ${startedIso} → ${new Date().toISOString()}`);
out.push(`- mode: ${tp?.quick || cpr?.quick ? '**quick (BENCH_QUICK=1) — smoke numbers, not for comparison**' : 'full'}` +
  `${skipped ? '; **respool skipped (RESPOOL_BENCH_SKIP_RESPOOL=1)**' : ''}`);
out.push(`- env: ${envKnobs.length ? envKnobs.map((k) => `\`${k}\``).join(', ') : '(defaults)'}`);
out.push('');
out.push('Machine:');
out.push('');
for (const [k, v] of machine) out.push(`- ${k}: \`${v}\``);
out.push('');
out.push('Commands run (by bench/run.sh, in order):');
out.push('');
out.push('```');
out.push(commands || '(none recorded)');
out.push('```');
out.push('');
const procCmds = { ...(tp?.commands ?? {}) };
if (Object.keys(procCmds).length) {
  out.push('Processes started by bench/throughput.mjs (ports are picked free per run; bench/conn-per-request.mjs starts valkey-server, twemproxy and respool the same way, respool without --admin):');
  out.push('');
  out.push('```');
  for (const k of ['valkey', 'twemproxy', 'respool', 'respoolProbe', 'benchmark', 'strace']) if (procCmds[k]) out.push(procCmds[k]);
  out.push('```');
  out.push('');
}
out.push('## Throughput and latency');
out.push('');
out.push(tpMd ? tpMd.trim() : '_bench/throughput.mjs produced no results in this run (see its output)._');
out.push('');
out.push('## Connection per request');
out.push('');
out.push(cprMd ? cprMd.trim() : '_bench/conn-per-request.mjs produced no results in this run (see its output)._');
out.push('');
writeSection('throughput', out.join('\n'));
console.error('[bench] wrote bench/RESULTS.md');
