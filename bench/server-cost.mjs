// What a proxy costs the server behind it (issue 23): valkey-server's own CPU per request when
// clients reach it directly, through twemproxy and through respool; requests/s when the server is
// the bottleneck (its CPU capped at 25% of a core with a cgroup v1 quota); and the same at P=1
// over Unix domain sockets (respool and twemproxy each listening on a socket). Also the requests
// each upstream write and read carries (respool's respool_upstream_io_total).
//
//   npm run bench:server-cost   (= npm run build && node bench/server-cost.mjs)
//
// Env: BENCH_QUICK=1, BENCH_ROUNDS (5), BENCH_N (100,000 requests per run), BENCH_BUILDS
//      (extra respool checkouts to compare, comma-separated directories with bin/respool.js: an
//      A/B of builds in the same rounds), BENCH_TWEMPROXY_CONNECTIONS (2), BENCH_QUOTA_US (25000
//      of a 100000 µs period), BENCH_SKIP_CAPPED=1, BENCH_SKIP_UNIX=1, BENCH_PIN (1 on a machine
//      of 2+ cores; 0: no pinning).
//
// Pinning: valkey-server and the proxies run on core 0, valkey-benchmark on core 1 (taskset).
// Unpinned on this 2-core machine, the scheduler places the three busy processes one of two ways
// at random, run to run, and requests/s follow the placement more than the proxy: with the proxy
// and valkey-server sharing a core (each runs while the other waits) every upstream write carries
// ~12 requests and GET P=1 through respool reads ~110k/s; with the proxy alone on a core ~7 and
// ~60k/s (`taskset` by hand, 4 runs each, 2026-12-01 16:27); twemproxy flips the same way.
//
// Every run is valkey-benchmark -t get|set -d 100 -r 100000 against one target; targets run back
// to back in an order rotated every round. Per run: requests/s, and CPU (utime+stime,
// /proc/PID/stat) of valkey-server and of the proxy ÷ requests. Medians over rounds; ratios are
// per round, then their median.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  HOST, OUT_DIR, RespConn, envFlag, envInt, fmt, fmtInt, log, makeTmpRoot, mdTable, median, run, shellLine, sleep, spawn,
  startValkey, stop, uniquePort, waitForPing, writeOutputs,
} from './lib/common.mjs';
import { cpuSeconds, httpGet, parseBenchmarkText, parsePrometheus } from './lib/measure.mjs';
import { writeSection } from './lib/results-file.mjs';
import { respoolBuildLabel } from './lib/respool-build.mjs';

const QUICK = envFlag('BENCH_QUICK');
const ROUNDS = envInt('BENCH_ROUNDS', QUICK ? 1 : 5);
const N = envInt('BENCH_N', QUICK ? 20_000 : 100_000);
const TW_CONNS = envInt('BENCH_TWEMPROXY_CONNECTIONS', 2);
const QUOTA = envInt('BENCH_QUOTA_US', 25_000);
const PERIOD = 100_000;
const BUILDS = (process.env.BENCH_BUILDS ?? '').split(',').map((s) => s.trim()).filter(Boolean);
const CGROUP = '/sys/fs/cgroup/cpu';
const PIN = (process.env.BENCH_PIN ?? (os.cpus().length >= 2 ? '1' : '0')) === '1';
/** Every thread of `pid` onto core 0 (valkey-server and the proxies), when pinning. */
async function pinToServerCore(pid) {
  if (PIN) await run('taskset', ['-a', '-p', '-c', '0', String(pid)]);
}

const tmp = makeTmpRoot('server-cost-');
const valkey = await startValkey({ tmpRoot: tmp });
const vpid = valkey.child.pid;
await pinToServerCore(vpid);

/** A cgroup v1 cpu group holding valkey-server, quota set per phase; null when not writable. */
let group = null;
try {
  group = path.join(CGROUP, `respool-bench-${process.pid}`);
  fs.mkdirSync(group);
  fs.writeFileSync(path.join(group, 'cpu.cfs_period_us'), String(PERIOD));
  fs.writeFileSync(path.join(group, 'cgroup.procs'), String(vpid));
} catch (e) {
  log(`no cgroup v1 cpu controller to cap valkey-server (${e.message}): the capped runs are skipped`);
  group = null;
}
const setQuota = (q) => group && fs.writeFileSync(path.join(group, 'cpu.cfs_quota_us'), String(q));
setQuota(-1);

async function startTwemproxy(listen) {
  const dir = fs.mkdtempSync(path.join(tmp, 'tw-'));
  const conf = path.join(dir, 'nutcracker.yml');
  fs.writeFileSync(conf, ['b:', `  listen: ${listen}`, '  redis: true', '  preconnect: true', `  server_connections: ${TW_CONNS}`,
    '  auto_eject_hosts: false', '  hash: fnv1a_64', '  distribution: ketama', '  servers:', `    - ${HOST}:${valkey.port}:1`, ''].join('\n'));
  const child = spawn('nutcracker', ['-c', conf, '-o', path.join(dir, 'nutcracker.log'), '-s', String(await uniquePort())]);
  await pinToServerCore(child.pid);
  return child;
}

async function startRespool(bin, listenArg, admin) {
  const args = [bin, '--listen', listenArg, '--upstream', `${HOST}:${valkey.port}`, '--mode', 'standalone', '--log-level', 'warn', '--admin', `${HOST}:${admin}`];
  const child = spawn(process.execPath, args, { logFile: path.join(OUT_DIR, `server-cost-respool-${admin}.log`) });
  await sleep(200); // its threads started, so that every one is pinned
  await pinToServerCore(child.pid);
  return { child, cmd: shellLine('node', args) };
}

const respoolBins = ['bin/respool.js', ...BUILDS.map((d) => path.join(d, 'bin/respool.js'))];
const targets = [];
targets.push({ name: 'direct', port: valkey.port, socket: null, pid: null });
{
  const port = await uniquePort();
  const child = await startTwemproxy(`${HOST}:${port}`);
  await waitForPing(port, { child, what: 'twemproxy' });
  targets.push({ name: 'twemproxy', port, pid: child.pid, child });
}
for (const [i, bin] of respoolBins.entries()) {
  const port = await uniquePort();
  const admin = await uniquePort();
  const r = await startRespool(bin, `${HOST}:${port}`, admin);
  await waitForPing(port, { child: r.child, what: bin });
  targets.push({ name: i === 0 ? 'respool' : `respool ${BUILDS[i - 1]}`, port, pid: r.child.pid, child: r.child, admin });
}
const unixTargets = [];
if (!envFlag('BENCH_SKIP_UNIX')) {
  const twSock = path.join(tmp, 'tw.sock');
  const child = await startTwemproxy(`${twSock} 0666`);
  await sleep(500);
  unixTargets.push({ name: 'twemproxy (unix)', socket: twSock, pid: child.pid, child });
  for (const [i, bin] of respoolBins.entries()) {
    const sock = path.join(tmp, `respool-${i}.sock`);
    const admin = await uniquePort();
    const r = await startRespool(bin, `unix:${sock}`, admin);
    for (let t = 0; t < 100 && !fs.existsSync(sock); t++) await sleep(100);
    unixTargets.push({ name: i === 0 ? 'respool (unix)' : `respool ${BUILDS[i - 1]} (unix)`, socket: sock, pid: r.child.pid, child: r.child, admin });
  }
}

const ioCounts = async (t) => {
  if (!t.admin) return null;
  const m = parsePrometheus(await httpGet(t.admin, '/metrics'));
  const get = (op) => m.get(`respool_upstream_io_total{op="${op}"}`) ?? NaN;
  return { requests: get('requests'), writes: get('writes'), reads: get('reads') };
};

async function runOne(t, test, clients, pipeline) {
  const args = [...(t.socket ? ['-s', t.socket] : ['-h', HOST, '-p', String(t.port)]), '-t', test, '-n', String(N), '-c', String(clients), '-P', String(pipeline), '-d', '100', '-r', '100000'];
  const s0 = cpuSeconds(vpid);
  const p0 = t.pid ? cpuSeconds(t.pid) : 0;
  const io0 = await ioCounts(t);
  const { out } = PIN ? await run('taskset', ['-c', '1', 'valkey-benchmark', ...args], { timeoutMs: 600_000 }) : await run('valkey-benchmark', args, { timeoutMs: 600_000 });
  const s1 = cpuSeconds(vpid);
  const p1 = t.pid ? cpuSeconds(t.pid) : 0;
  const io1 = await ioCounts(t);
  const r = parseBenchmarkText(out)[test.toUpperCase()] ?? {};
  const io = io0 && io1 ? { perWrite: (io1.requests - io0.requests) / (io1.writes - io0.writes), perRead: (io1.requests - io0.requests) / (io1.reads - io0.reads) } : null;
  return { rps: r.rps, p99Ms: r.p99Ms, serverUs: ((s1 - s0) / N) * 1e6, proxyUs: t.pid ? ((p1 - p0) / N) * 1e6 : null, io, cmd: shellLine('valkey-benchmark', args) };
}

// Warm-up.
for (const t of [...targets, ...unixTargets]) await runOne(t, 'set', 20, 16);

const phases = [
  { name: 'P=1, 50 clients', clients: 50, pipeline: 1, quota: -1, targets },
  { name: 'P=1, 500 clients', clients: 500, pipeline: 1, quota: -1, targets },
  ...(group && !envFlag('BENCH_SKIP_CAPPED') ? [{ name: 'P=1, 100 clients, server capped at 25% of a core', clients: 100, pipeline: 1, quota: QUOTA, targets }] : []),
  { name: 'P=16, 50 clients', clients: 50, pipeline: 16, quota: -1, targets },
  ...(unixTargets.length ? [{ name: 'P=1, 50 clients, Unix sockets', clients: 50, pipeline: 1, quota: -1, targets: [targets[0], ...unixTargets] }] : []),
  ...(unixTargets.length ? [{ name: 'P=16, 50 clients, Unix sockets', clients: 50, pipeline: 16, quota: -1, targets: [targets[0], ...unixTargets] }] : []),
];
log(`server-cost: ${ROUNDS} rounds × ${phases.length} phases, ${N} requests per run; respool ${respoolBuildLabel()}${BUILDS.length ? `; builds ${BUILDS.join(', ')}` : ''}`);
const results = {};
for (const phase of phases) {
  setQuota(phase.quota);
  for (let r = 0; r < ROUNDS; r++) {
    const ts = phase.targets;
    const order = ts.map((_, i) => ts[(i + r) % ts.length]);
    for (const test of ['get', 'set']) {
      for (const t of order) {
        const res = await runOne(t, test, phase.clients, phase.pipeline);
        ((results[phase.name] ??= {})[`${t.name}|${test}`] ??= []).push(res);
      }
    }
    log(`${phase.name} round ${r + 1}: ${Object.entries(results[phase.name]).map(([k, v]) => `${k} ${fmtInt(v.at(-1).rps)}/s srv ${fmt(v.at(-1).serverUs, 2)}µs`).join('; ')}`);
  }
}
setQuota(-1);

for (const t of [...targets, ...unixTargets]) if (t.child) await stop(t.child);
await stop(valkey.child);
if (group) {
  try {
    fs.rmdirSync(group);
  } catch { /* valkey is gone; the kernel removes it once empty */ }
}

// Report.
const sections = [];
for (const phase of phases) {
  const rows = [];
  const res = results[phase.name];
  const ref = (name, test) => res[`${name}|${test}`];
  const tw = phase.targets.find((t) => t.name.startsWith('twemproxy'));
  for (const test of ['get', 'set']) {
    for (const t of phase.targets) {
      const runs = ref(t.name, test);
      const ratio = (f, other) => {
        const o = ref(other.name, test);
        return median(runs.map((x, i) => x[f] / o[i][f]));
      };
      rows.push([test.toUpperCase(), t.name, fmtInt(median(runs.map((x) => x.rps))), fmt(median(runs.map((x) => x.serverUs)), 2),
        t.pid ? fmt(median(runs.map((x) => x.proxyUs)), 2) : '—',
        t === tw ? '1.00×' : `${fmt(ratio('rps', tw), 2)}× / ${fmt(ratio('serverUs', tw), 2)}×`,
        t.name === 'direct' ? '1.00×' : `${fmt(ratio('rps', phase.targets[0]), 2)}×`,
        runs[0].io ? `${fmt(median(runs.map((x) => x.io.perWrite)), 1)} / ${fmt(median(runs.map((x) => x.io.perRead)), 1)}` : '—']);
    }
  }
  sections.push(`### ${phase.name}\n\n${mdTable(['test', 'target', 'requests/s', 'valkey-server CPU µs/req', 'proxy CPU µs/req', 'vs twemproxy: requests/s / server CPU', 'requests/s vs direct (TCP)', 'respool: requests per upstream write / read'], rows)}`);
}
const md = [
  '## server-cost — what a proxy costs the server behind it',
  '',
  `${new Date().toISOString().slice(0, 16)}Z, respool ${respoolBuildLabel()}${BUILDS.length ? ` and ${BUILDS.join(', ')}` : ''}, ${ROUNDS} rounds of ${fmtInt(N)} requests per run, medians (ratios: median of per-round ratios). \`npm run bench:server-cost\`.`,
  `valkey-benchmark -d 100 -r 100000 against one valkey-server: directly, through twemproxy (server_connections ${TW_CONNS}) and through respool (connectionsPerNode 2). The capped phase puts valkey-server in a cgroup with cpu.cfs_quota_us ${QUOTA} of ${PERIOD}. ${PIN ? 'Pinned: valkey-server and the proxies on core 0, valkey-benchmark on core 1 (taskset; unpinned, the scheduler\'s placement of the three flips the results run to run: see the script\'s header).' : 'Not pinned (BENCH_PIN=0).'}`,
  '',
  ...sections,
].join('\n');
writeOutputs('server-cost', results, md);
writeSection('server-cost', md);
log('wrote bench/RESULTS.md (server-cost)');
