// What rewriting key names costs (issue 30): a namespace (users[].keyPrefix) and colocation rules
// against plain respool, P=1 and P=16, in one run.
//
//   npm run bench:key-names      (= npm run build && npm run build:harness && node bench/key-names.mjs)
//
// A 3-primary cluster and one respool process per variant, all in front of it, idle but when
// measured:
//
//   plain           no users, no rules: nothing to rewrite
//   rule unmatched  colocate: [{ keys: "app:*", tag: app }] — a rule no benchmark key matches
//                   (target: no change; the rule is looked at, nothing is rewritten)
//   every key       colocate: [{ keys: "*", tag: all }] — every key rewritten ({all}key:…)
//   user            users a and default, valkey-benchmark runs as a: what being a user costs
//   namespace       users a (keyPrefix "a:") and default; valkey-benchmark runs as a — every key
//                   rewritten (a:key:…), its commands run as a's mirrored identity on the nodes
//                   (its own pooled links). Target: CPU per request ≤ 1.10× plain.
//   namespace as respool  the same with users[].upstream: none — respool's own links, to tell
//                   the rewriting's cost from the identity's
//
// valkey-benchmark (50 clients, 100-byte values, GET and SET over 100,000 random keys) against
// each variant in turn, the order rotated every round; per run requests/s, p99 and respool's CPU
// µs per request (utime+stime ÷ requests). Medians over rounds, and the median over rounds of
// each variant's CPU per request ÷ plain's in the same round.
//
// Env: BENCH_QUICK=1, BENCH_ROUNDS (7), BENCH_N_P1 (150000), BENCH_N_P16 (1200000),
// BENCH_VARIANTS (comma-separated names; plain always runs), BENCH_PIN=1: every respool on core
// 0, the valkey-servers and valkey-benchmark on core 1 (taskset), so a respool's CPU per request
// does not move with where the scheduler puts the others (the section is then key-names-pinned).
// Loopback only; only the processes it started are stopped, by pid (bench/lib/common.mjs).
import fs from 'node:fs';
import path from 'node:path';
import {
  HOST, OUT_DIR, ROOT_DIR, envFlag, envInt, fmt, fmtInt, log, mdTable, median, run, sleep, spawn, stop, uniquePort, waitForPing, writeOutputs,
} from './lib/common.mjs';
import { cpuSeconds, parseBenchmarkText } from './lib/measure.mjs';
import { writeSection } from './lib/results-file.mjs';
import { respoolBuildLabel } from './lib/respool-build.mjs';

const QUICK = envFlag('BENCH_QUICK');
// Runs long enough that a P=16 run's CPU per request moves less than the effect measured (at
// 400,000 requests and 5 rounds one variant's ratio to plain spread 0.8–1.4× round to round).
const ROUNDS = envInt('BENCH_ROUNDS', QUICK ? 1 : 7);
const N = { 1: envInt('BENCH_N_P1', QUICK ? 20_000 : 150_000), 16: envInt('BENCH_N_P16', QUICK ? 100_000 : 1_200_000) };
const PIPELINES = [1, 16];
const TESTS = ['GET', 'SET'];
const CLIENTS = 50;
const PIN = envFlag('BENCH_PIN');
/** valkey-benchmark, on core 1 when pinned. */
const benchmark = (args, opts) => (PIN ? run('taskset', ['-c', '1', 'valkey-benchmark', ...args], opts) : run('valkey-benchmark', args, opts));

const ALL_VARIANTS = [
  { name: 'plain', config: '' },
  { name: 'rule unmatched', config: 'colocate:\n  - { keys: "app:*", tag: app }\n' },
  { name: 'every key', config: 'colocate:\n  - { keys: "*", tag: all }\n' },
  {
    name: 'user',
    config: 'users:\n  - { name: default, password: adminpw }\n  - { name: a, password: pa }\n',
    auth: ['--user', 'a', '-a', 'pa'],
  },
  {
    name: 'namespace as respool',
    config: 'users:\n  - { name: default, password: adminpw }\n  - { name: a, password: pa, keyPrefix: "a:", upstream: none }\n',
    auth: ['--user', 'a', '-a', 'pa'],
  },
  {
    name: 'namespace',
    config: 'users:\n  - { name: default, password: adminpw }\n  - { name: a, password: pa, keyPrefix: "a:" }\n',
    auth: ['--user', 'a', '-a', 'pa'],
  },
];

const only = process.env.BENCH_VARIANTS ? new Set(process.env.BENCH_VARIANTS.split(',')) : null;
const VARIANTS = ALL_VARIANTS.filter((v) => only === null || v.name === 'plain' || only.has(v.name));

const { startCluster } = await import(path.join(ROOT_DIR, 'build/harness/valkey-processes.js'));

async function startVariant(v, seed) {
  const port = await uniquePort();
  fs.mkdirSync(OUT_DIR, { recursive: true });
  const slug = v.name.replace(/\s+/g, '-');
  const configFile = path.join(OUT_DIR, `key-names-${slug}.yaml`);
  fs.writeFileSync(configFile, v.config);
  const args = ['bin/respool.js', '--config', configFile, '--listen', `${HOST}:${port}`, '--upstream', `${seed.host}:${seed.port}`, '--mode', 'cluster', '--connections-per-node', '2', '--log-level', 'warn'];
  const logFile = path.join(OUT_DIR, `key-names-${slug}.log`);
  fs.writeFileSync(logFile, '');
  const child = spawn(process.execPath, args, { logFile });
  await waitForPing(port, { child, what: `respool (${v.name})`, timeoutMs: 15_000, ...(v.auth ? { auth: ['a', 'pa'] } : {}) });
  if (PIN) await run('taskset', ['-a', '-p', '-c', '0', String(child.pid)]); // every thread of it
  return { ...v, port, child, cmd: `node ${args.join(' ')}   # ${JSON.stringify(v.config)}` };
}

function benchArgs(v, pipeline, test, n) {
  return ['-h', HOST, '-p', String(v.port), ...(v.auth ?? []), '-c', String(CLIENTS), '-n', String(n), '-d', '100', '-r', '100000', '-P', String(pipeline), '-t', test.toLowerCase()];
}

async function oneRun(v, pipeline, test, round) {
  const n = N[pipeline];
  const cpu0 = cpuSeconds(v.child.pid);
  const res = await benchmark(benchArgs(v, pipeline, test, n), { timeoutMs: 180_000 });
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
  if (PIN) for (const node of cluster.nodes) await run('taskset', ['-a', '-p', '-c', '1', String(node.pid)]);
  for (const v of VARIANTS) variants.push(await startVariant(v, seed));
  await sleep(1000);
  for (const v of variants) for (const p of PIPELINES) for (const t of TESTS) await benchmark(benchArgs(v, p, t, QUICK ? 5000 : 20_000));
  const runs = [];
  for (let round = 1; round <= ROUNDS; round++) {
    for (const p of PIPELINES) for (const t of TESTS) {
      for (let k = 0; k < variants.length; k++) runs.push(await oneRun(variants[(k + round) % variants.length], p, t, round));
    }
  }
  // Each variant stored what its clients wrote under the names the nodes hold.
  const stored = {};
  for (const node of cluster.nodes) {
    for (const [label, pattern] of [['a:', 'a:key:*'], ['{all}', '{all}key:*'], ['plain', 'key:*']]) {
      stored[label] = (stored[label] ?? 0) + Number(await node.call('EVAL', `return #redis.call('KEYS', ARGV[1])`, '0', pattern));
    }
  }

  const mm = (xs, f) => `${f(median(xs))} (${f(Math.min(...xs))}–${f(Math.max(...xs))})`;
  const of = (name, p, t) => runs.filter((r) => r.variant === name && r.pipeline === p && r.test === t);
  const vsPlain = (name, p, t, value) => [...Array(ROUNDS).keys()].map((i) => {
    const a = of(name, p, t).find((r) => r.round === i + 1);
    const b = of('plain', p, t).find((r) => r.round === i + 1);
    return value(a) / value(b);
  });
  const cpu = (r) => r.cpuUsPerReq;
  const rps = (r) => r.rps;
  const rows = [];
  for (const p of PIPELINES) for (const t of TESTS) for (const v of variants) {
    const rs = of(v.name, p, t);
    rows.push([t, p, v.name, mm(rs.map(rps), fmtInt), mm(rs.map((r) => r.p99Ms), (x) => fmt(x, 3)), mm(rs.map(cpu), (x) => fmt(x, 2)),
      v.name === 'plain' ? '1' : mm(vsPlain(v.name, p, t, cpu), (x) => fmt(x, 3)),
      v.name === 'plain' ? '1' : mm(vsPlain(v.name, p, t, rps), (x) => fmt(x, 3))]);
  }
  const section = PIN ? 'key-names-pinned' : 'key-names';
  const summary = (name) => PIPELINES.map((p) => `P=${p}: ${TESTS.map((t) => `${t} ${fmt(median(vsPlain(name, p, t, cpu)), 3)}×`).join(', ')}`).join('; ');
  const md = [
    `## What rewriting key names costs: a namespace and colocation rules (issue 30)${PIN ? ', pinned' : ', unpinned'}`,
    '',
    `**Rerun:** \`${PIN ? 'BENCH_PIN=1 ' : ''}${only !== null ? `BENCH_VARIANTS="${[...only].join(',')}" ` : ''}npm run bench:key-names\` (${PIN ? 'pinned: every respool on core 0, the valkey-servers and valkey-benchmark on core 1; ' : 'unpinned; '}${QUICK ? '**BENCH_QUICK=1 smoke run** — ' : ''}${ROUNDS} round(s), variants in an order rotated every round; ` +
      `${fmtInt(N[1])} requests per run at P=1, ${fmtInt(N[16])} at P=16; valkey-benchmark -c ${CLIENTS} -d 100 -r 100000 against respool in front of 3 primaries). ` +
      `respool build: ${respoolBuildLabel()}.`,
    '',
    ...variants.map((v) => `- ${v.name}: \`${v.cmd}\``),
    '',
    mdTable(['test', 'P', 'variant', 'requests/s', 'p99 ms', 'respool CPU µs / request', 'CPU / request ÷ plain (same round)', 'requests/s ÷ plain (same round)'], rows, ['l', 'r', 'l', 'r', 'r', 'r', 'r', 'r']),
    '',
    `respool CPU per request ÷ plain, medians of the per-round ratios — ${variants.filter((v) => v.name !== 'plain').map((v) => `${v.name}: ${summary(v.name)}`).join('; ')}. ` +
      `Target: ≤ 1.10× with a prefix, no change where no rule matches. ` +
      `Keys on the nodes afterwards: ${fmtInt(stored['a:'])} under a:, ${fmtInt(stored['{all}'])} under {all}, ${fmtInt(stored.plain)} plain (the rewriting happened). ` +
      'CPU per request is the steadier figure: requests/s and p99 move with whatever else this shared 2-core machine runs.',
    '',
    `Measured ${started.toISOString()} → ${new Date().toISOString()} on ${fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join('/')} load (1/5/15 min). Raw runs: bench/out/${section}.json.`,
  ].join('\n');
  writeOutputs(section, { config: { rounds: ROUNDS, n: N, clients: CLIENTS }, variants: variants.map((v) => ({ name: v.name, cmd: v.cmd })), runs, stored }, md);
  writeSection(section, md);
  console.log(md);
} finally {
  for (const v of variants) await stop(v.child);
  await cluster.stop();
}
