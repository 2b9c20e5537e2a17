// Connection per request, PHP-style (issue 23), as the seeds measured it: PHP processes (phpredis,
// no persistent connection) each looping connect + AUTH + one GET + close, against
//   direct TLS   : valkey-server's TLS port with requirepass — a TLS handshake and AUTH per request;
//   sidecar      : a respool sidecar over plaintext loopback, holding pooled TLS links to that node
//                  (it answers AUTH itself and sends the GET on a pooled link);
//   node floor   : a bare Node server that answers AUTH and GET itself (bench/lib/node-floor-kv.mjs) —
//                  what any Node.js sidecar pays per connection before it forwards anything, so
//                  "direct TLS ÷ node floor" is the most a Node sidecar can gain here;
//   direct plain : valkey-server's plaintext port with AUTH (reference: no TLS, no proxy).
// Per run: ms per operation (each process's own loop: its total time ÷ its operations, the mean
// over processes), p50/p99 of one operation, operations/s of all processes together, and CPU per
// operation (utime+stime from /proc) of the process answering: respool, the node floor or
// valkey-server. Rounds rotate the targets' order; medians over rounds.
//
//   npm run bench:conn-tls   (= npm run build && npm run build:harness && node bench/conn-per-request-tls.mjs)
//
// Needs php with the redis extension (Debian: php-cli php-redis), which `npm run bench:conn-tls` installs
// (scripts/install-bench-clients.sh).
// Env: BENCH_ROUNDS (3), BENCH_CPR_TLS_OPS (4000 operations per run, split over the processes),
//      BENCH_CPR_TLS_PROCS (8).
import fs from 'node:fs';
import path from 'node:path';
import {
  HOST, OUT_DIR, ROOT_DIR, envInt, fmt, fmtInt, log, mdTable, median, run, shellLine, spawn, stop, uniquePort, waitForPing,
} from './lib/common.mjs';
import { cpuSeconds } from './lib/measure.mjs';
import { writeSection } from './lib/results-file.mjs';
import { RESPOOL_BIN, respoolBuildLabel } from './lib/respool-build.mjs';

const ROUNDS = envInt('BENCH_ROUNDS', 3);
const OPS = envInt('BENCH_CPR_TLS_OPS', 4000);
const PROCS = envInt('BENCH_CPR_TLS_PROCS', 8);
const PASSWORD = 'bench-tls-password';
const KEY = 'bench:cpr:tls';
const PHP_WORKER = path.join(ROOT_DIR, 'bench/lib/php-conn-per-op.php');

const php = await run('php', ['-r', 'echo extension_loaded("redis") ? phpversion("redis") : "";']).catch(() => ({ out: '' }));
const PHPREDIS = php.out.trim();
if (PHPREDIS === '') {
  console.error('bench/conn-per-request-tls.mjs needs php with the redis extension: bash scripts/install-bench-clients.sh');
  process.exit(2);
}
const { makeTestCerts, startTlsStandalone } = await import(path.join(ROOT_DIR, 'build/harness/valkey-tls.js'));

/** `procs` PHP processes, `ops` operations in all, against `port` (TLS when `ca`). */
async function phpRun(port, ops, procs, ca, cpuPid) {
  const each = Math.ceil(ops / procs);
  const cpu0 = cpuPid ? cpuSeconds(cpuPid) : 0;
  const t0 = performance.now();
  const outs = await Promise.all(Array.from({ length: procs }, () =>
    run('php', [PHP_WORKER, HOST, String(port), String(each), PASSWORD, KEY, ...(ca ? [ca] : [])], { timeoutMs: 300_000 })));
  const wallMs = performance.now() - t0;
  const cpu = cpuPid ? cpuSeconds(cpuPid) - cpu0 : NaN;
  const lines = outs.map((o) => {
    if (o.code !== 0) throw new Error(`php worker exited ${o.code}: ${o.err.slice(0, 300)}`);
    const [n, total, p50, p99] = o.out.trim().split(/\s+/).map(Number);
    if (!(n > 0)) throw new Error(`php worker printed ${JSON.stringify(o.out)} ${o.err}`);
    return { n, total, p50, p99 };
  });
  const done = lines.reduce((s, l) => s + l.n, 0);
  return {
    ops: done,
    msPerOp: median(lines.map((l) => l.total / l.n)),
    p50: median(lines.map((l) => l.p50)),
    p99: Math.max(...lines.map((l) => l.p99)),
    opsPerS: done / (wallMs / 1000),
    cpuUsPerOp: (cpu * 1e6) / done,
  };
}

const started = new Date().toISOString();
const certs = makeTestCerts();
const { node, tlsPort } = await startTlsStandalone(certs, { password: PASSWORD, args: ['--maxclients', '10000'] });
const respoolPort = await uniquePort();
const respoolArgs = [RESPOOL_BIN, '--listen', `${HOST}:${respoolPort}`, '--upstream', `${HOST}:${tlsPort}`, '--mode', 'standalone',
  '--connections-per-node', '2', '--upstream-tls-ca', certs.ca, '--log-level', 'warn'];
fs.mkdirSync(OUT_DIR, { recursive: true });
const respool = spawn(process.execPath, respoolArgs, { logFile: path.join(OUT_DIR, 'conn-tls-respool.log'), env: { ...process.env, RESPOOL_UPSTREAM_PASSWORD: PASSWORD } });
const floorPort = await uniquePort();
const floor = spawn(process.execPath, ['bench/lib/node-floor-kv.mjs', String(floorPort)], { match: `${process.execPath} bench/lib/node-floor-kv.mjs` });
const rounds = [];
try {
  await node.call('SET', KEY, 'value');
  await waitForPing(respoolPort, { child: respool, what: 'respool' });
  await waitForPing(floorPort, { child: floor, what: 'node floor' });
  const targets = [
    { name: 'direct TLS + AUTH (valkey-server)', port: tlsPort, ca: certs.ca, pid: node.pid },
    { name: 'respool sidecar (plaintext; pooled TLS links)', port: respoolPort, ca: null, pid: respool.pid },
    { name: 'node floor (bare Node server answering AUTH and GET)', port: floorPort, ca: null, pid: floor.pid },
    { name: 'direct plaintext + AUTH (valkey-server)', port: node.port, ca: null, pid: node.pid },
  ];
  for (const t of targets) await phpRun(t.port, 1000, PROCS, t.ca, null); // warm-up (JIT, TLS session state)
  for (let r = 0; r < ROUNDS; r++) {
    for (const procs of [1, PROCS]) {
      const order = targets.map((_, i) => targets[(i + r) % targets.length]);
      const row = { round: r + 1, procs, results: {} };
      for (const t of order) row.results[t.name] = await phpRun(t.port, procs === 1 ? Math.ceil(OPS / 4) : OPS, procs, t.ca, t.pid);
      rounds.push(row);
      log(`round ${r + 1}, ${procs} process(es): ${targets.map((t) => `${t.name.split(' (')[0]} ${fmt(row.results[t.name].msPerOp, 3)} ms/op`).join('; ')}`);
    }
  }
  report(targets, respoolArgs);
} finally {
  await stop(respool);
  await stop(floor);
  await node.stop();
  certs.remove();
}

function report(targets, args) {
  const [tls, sidecar, floorT] = targets.map((t) => t.name);
  const sections = [];
  const summary = {};
  for (const procs of [1, PROCS]) {
    const rs = rounds.filter((x) => x.procs === procs);
    const med = (name, f) => median(rs.map((x) => f(x.results[name])));
    const vsTls = (name) => median(rs.map((x) => x.results[tls].msPerOp / x.results[name].msPerOp));
    summary[procs] = {
      sidecarGain: vsTls(sidecar), floorGain: vsTls(floorT),
      cpuRatio: median(rs.map((x) => x.results[sidecar].cpuUsPerOp / x.results[floorT].cpuUsPerOp)),
      sidecarCpu: med(sidecar, (v) => v.cpuUsPerOp), floorCpu: med(floorT, (v) => v.cpuUsPerOp),
      sidecarMs: med(sidecar, (v) => v.msPerOp), floorMs: med(floorT, (v) => v.msPerOp), tlsMs: med(tls, (v) => v.msPerOp),
    };
    sections.push(`### ${procs} PHP process${procs === 1 ? '' : 'es'}`, '', mdTable(
      ['target', 'ms per operation (median; per round)', 'p50 (median of the processes) / p99 (the worst process) ms', 'operations/s', 'CPU µs per operation of the process answering', 'direct TLS ÷ this (per-round median)'],
      targets.map((t) => [t.name,
        `${fmt(med(t.name, (v) => v.msPerOp), 3)} (${rs.map((x) => fmt(x.results[t.name].msPerOp, 3)).join(' / ')})`,
        `${fmt(med(t.name, (v) => v.p50), 3)} / ${fmt(med(t.name, (v) => v.p99), 3)}`,
        fmtInt(med(t.name, (v) => v.opsPerS)),
        fmt(med(t.name, (v) => v.cpuUsPerOp), 1),
        t.name === tls ? '1.00×' : `${fmt(vsTls(t.name), 2)}×`]),
    ), '');
  }
  const s = summary[PROCS];
  const md = [
    '## Connection per request, PHP-style: TLS + AUTH direct vs a respool sidecar vs a bare Node server (issue 23)',
    '',
    `**Rerun:** \`npm run bench:conn-tls\` (needs \`bash scripts/install-bench-clients.sh\`: php-cli, php-redis). ${started}, respool ${respoolBuildLabel()}, Node ${process.version}, ` +
      `${ROUNDS} rounds, order rotated. One operation = what a PHP request without persistent connections does: \`new Redis()\`, \`connect\`, \`auth(['default', pw])\`, \`get\`, \`close\` ` +
      `(phpredis ${PHPREDIS}, bench/lib/php-conn-per-op.php), ${fmtInt(OPS)} per run over ${PROCS} processes, ${fmtInt(Math.ceil(OPS / 4))} with one. ` +
      `respool: \`${shellLine('node', args)}\` with RESPOOL_UPSTREAM_PASSWORD; valkey-server 8 with \`--tls-port\`, \`--requirepass\`, EC P-256 certificates.`,
    '',
    ...sections,
    `**The arithmetic (${PROCS} processes).** Through the sidecar a request costs ${fmt(s.sidecarMs, 3)} ms against ${fmt(s.tlsMs, 3)} ms with TLS + AUTH directly: ${fmt(s.sidecarGain, 2)}× faster. ` +
      `A bare Node server that does nothing but answer AUTH and GET costs ${fmt(s.floorMs, 3)} ms: ${fmt(s.floorGain, 2)}× — the most any Node.js sidecar can gain on this machine, so ` +
      (s.floorGain < 13 ? `the issue's 13× (the seeds' 2.82 → 0.21 ms) is out of reach of Node's own accept path here, and respool reaches ${fmt((s.sidecarGain / s.floorGain) * 100, 0)}% of that ceiling. ` : `13× is within Node's reach here; respool reaches ${fmt((s.sidecarGain / s.floorGain) * 100, 0)}% of the ceiling. `) +
      `respool's CPU per operation ${fmt(s.sidecarCpu, 1)} µs against the bare server's ${fmt(s.floorCpu, 1)} µs (${fmt(s.cpuRatio, 2)}×, per-round median): what connect, AUTH, a forwarded GET and close cost above accepting and answering.`,
  ].join('\n');
  fs.writeFileSync(path.join(OUT_DIR, 'conn-tls.json'), JSON.stringify({ started, rounds, summary }, null, 2) + '\n');
  fs.writeFileSync(path.join(OUT_DIR, 'conn-tls.md'), md + '\n');
  writeSection('conn-tls', md);
  log('wrote the conn-tls section of bench/RESULTS.md and bench/out/conn-tls.json');
}
