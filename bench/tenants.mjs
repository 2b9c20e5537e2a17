// What tenants cost and give (issue 31), in one run against a 3-primary cluster:
//
//   npm run bench:tenants      (= npm run build && npm run build:harness && node bench/tenants.mjs)
//
// 1. Accounting: respool CPU per request of a tenant whose limits are never reached (every check
//    runs: ops and bytes buckets, replies owed, clients) against the same user in no tenant,
//    valkey-benchmark GET/SET, 50 clients, P=1 and P=16, rounds interleaved (target ≤ 1.05×).
// 2. Paced: a tenant held to PACED_OPS ops/s against valkey-benchmark at full speed, P=1 and
//    P=16: requests/s ÷ the limit (target within ±10%).
// 3. Probe and flood: tenant `probe` (4 clients, P=1 GET) alone, then while tenant `flood` runs
//    200 clients P=32 1 KB SETs — the fair share between tenants always on; flood unlimited,
//    held to FLOOD_OPS ops/s, and held to FLOOD_INFLIGHT replies owed —
//    probe's p99 ÷ its p99 alone (target ≤ 2× with the limit), flood's requests/s.
// 4. Shedding: tenants `shop` (priority 10) and `batch` (priority 0) each flood (50 clients, P=16
//    SETs) with a saturation rule their load meets (saturation.cpuPercent SHED_CPU): each second,
//    each tenant's requests/s and the rate batch is slowed to — batch is slowed first, shop not.
//
// Env: BENCH_ROUNDS (5), BENCH_N_P1 (150000), BENCH_N_P16 (1200000), PACED_OPS (5000), FLOOD_OPS (20000), FLOOD_INFLIGHT (256), SHED_CPU (10), SHED_SECONDS (10),
// BENCH_PIN=1 (respool on core 0, servers and load on core 1). Loopback only; only the processes
// it started are stopped, by pid.
import fs from 'node:fs';
import path from 'node:path';
import {
  HOST, OUT_DIR, ROOT_DIR, envFlag, envInt, fmt, fmtInt, log, mdTable, median, run, sleep, spawn, stop, uniquePort, waitForPing, writeOutputs,
} from './lib/common.mjs';
import { cpuSeconds, parseBenchmarkText } from './lib/measure.mjs';
import { writeSection } from './lib/results-file.mjs';
import { respoolBuildLabel } from './lib/respool-build.mjs';

const ROUNDS = envInt('BENCH_ROUNDS', 5);
const N = { 1: envInt('BENCH_N_P1', 150_000), 16: envInt('BENCH_N_P16', 1_200_000) };
const FLOOD_OPS = envInt('FLOOD_OPS', 20_000);
const FLOOD_INFLIGHT = envInt('FLOOD_INFLIGHT', 256);
const PACED_OPS = envInt('PACED_OPS', 5000);
const SHED_CPU = envInt('SHED_CPU', 10);
const SHED_SECONDS = envInt('SHED_SECONDS', 10);
const PIN = envFlag('BENCH_PIN');
const benchmark = (args, opts) => (PIN ? run('taskset', ['-c', '1', 'valkey-benchmark', ...args], opts) : run('valkey-benchmark', args, opts));

const HUGE = '{ opsPerSecond: 1000000000, bytesPerSecond: 1000000000000, maxClients: 1000000, maxInflight: 1000000000 }';
const ACCOUNTING = [
  { name: 'no tenant', config: 'users:\n  - { name: default, password: adminpw }\n  - { name: a, password: pa }\n' },
  { name: 'tenant', config: `tenants:\n  - { name: t, limits: ${HUGE} }\nusers:\n  - { name: default, password: adminpw }\n  - { name: a, password: pa, tenant: t }\n` },
];
const FLOOD_LIMITS = {
  unlimited: null,
  [`held to ${FLOOD_OPS} ops/s`]: `{ opsPerSecond: ${FLOOD_OPS} }`,
  [`held to ${FLOOD_INFLIGHT} replies owed`]: `{ maxInflight: ${FLOOD_INFLIGHT} }`,
};
const floodConfig = (limits) => `tenants:\n  - { name: probe }\n  - { name: flood${limits ? `, limits: ${limits}` : ''} }\n`
  + 'users:\n  - { name: default, password: adminpw }\n  - { name: p, password: pp, tenant: probe }\n  - { name: f, password: pf, tenant: flood }\n';

const shedConfig = 'tenants:\n  - { name: shop, keyPrefix: "shop:", priority: 10 }\n  - { name: batch, keyPrefix: "batch:", priority: 0 }\n'
  + 'users:\n  - { name: default, rules: "on >adminpw +@all ~* &* +@respool-admin" }\n  - { name: s, password: ps, tenant: shop }\n  - { name: b, password: pb, tenant: batch }\n'
  + `saturation: { cpuPercent: ${SHED_CPU}, cpuSampleMs: 250, p99Ms: 1h }\n`;

/** RESPOOL TENANTS through valkey-cli --raw: per tenant name, its fields (a flat list of name, value, …). */
async function tenantFields(port) {
  const { out } = await run('valkey-cli', ['-h', HOST, '-p', String(port), '--user', 'default', '-a', 'adminpw', '--no-auth-warning', '--raw', 'RESPOOL', 'TENANTS']);
  const lines = out.split('\n');
  const byName = {};
  let current = null;
  for (let i = 0; i + 1 < lines.length; i += 2) {
    if (lines[i] === 'name') byName[(current = lines[i + 1])] = {};
    if (current !== null) byName[current][lines[i]] = lines[i + 1];
  }
  return byName;
}

const { startCluster } = await import(path.join(ROOT_DIR, 'build/harness/valkey-processes.js'));

async function startRespool(name, config, seed) {
  const port = await uniquePort();
  fs.mkdirSync(OUT_DIR, { recursive: true });
  const slug = name.replace(/[^A-Za-z0-9]+/g, '-');
  const configFile = path.join(OUT_DIR, `tenants-${slug}.yaml`);
  fs.writeFileSync(configFile, config);
  const args = ['bin/respool.js', '--config', configFile, '--listen', `${HOST}:${port}`, '--upstream', `${seed.host}:${seed.port}`, '--mode', 'cluster', '--connections-per-node', '2', '--log-level', 'warn'];
  const logFile = path.join(OUT_DIR, `tenants-${slug}.log`);
  fs.writeFileSync(logFile, '');
  const child = spawn(process.execPath, args, { logFile });
  await waitForPing(port, { child, what: `respool (${name})`, timeoutMs: 15_000, auth: ['default', 'adminpw'] });
  if (PIN) await run('taskset', ['-a', '-p', '-c', '0', String(child.pid)]);
  return { name, port, child, cmd: `node ${args.join(' ')}   # ${JSON.stringify(config)}` };
}

const started = new Date();
const cluster = await startCluster({ primaries: 3, replicasPerPrimary: 0 });
const procs = [];
try {
  const seed = cluster.nodes[0];
  if (PIN) for (const node of cluster.nodes) await run('taskset', ['-a', '-p', '-c', '1', String(node.pid)]);

  // 1. Accounting cost.
  const variants = [];
  for (const v of ACCOUNTING) variants.push(await startRespool(v.name, v.config, seed));
  procs.push(...variants);
  const args = (v, p, t, n) => ['-h', HOST, '-p', String(v.port), '--user', 'a', '-a', 'pa', '-c', '50', '-n', String(n), '-d', '100', '-r', '100000', '-P', String(p), '-t', t.toLowerCase()];
  for (const v of variants) for (const p of [1, 16]) for (const t of ['GET', 'SET']) await benchmark(args(v, p, t, 20_000));
  const runs = [];
  for (let round = 1; round <= ROUNDS; round++) {
    for (const p of [1, 16]) for (const t of ['GET', 'SET']) for (let k = 0; k < variants.length; k++) {
      const v = variants[(k + round) % variants.length];
      const cpu0 = cpuSeconds(v.child.pid);
      const res = await benchmark(args(v, p, t, N[p]), { timeoutMs: 300_000 });
      const cpu1 = cpuSeconds(v.child.pid);
      const r = { round, variant: v.name, pipeline: p, test: t, rps: parseBenchmarkText(res.out)[t]?.rps ?? NaN, cpuUsPerReq: ((cpu1 - cpu0) / N[p]) * 1e6 };
      log(`accounting round ${round} P${p} ${t} ${v.name}: ${fmtInt(r.rps)} rps, ${fmt(r.cpuUsPerReq)} µs CPU/request`);
      runs.push(r);
    }
  }
  for (const v of variants) await stop(v.child);

  // 2. How near its limit a tenant runs: valkey-benchmark at full speed against PACED_OPS ops/s.
  const pacedProxy = await startRespool('paced', `tenants:\n  - { name: paced, limits: { opsPerSecond: ${PACED_OPS} } }\nusers:\n  - { name: default, password: adminpw }\n  - { name: a, password: pa, tenant: paced }\n`, seed);
  procs.push(pacedProxy);
  const pacedRuns = [];
  for (let round = 1; round <= ROUNDS; round++) {
    for (const p of [1, 16]) {
      const res = await benchmark(['-h', HOST, '-p', String(pacedProxy.port), '--user', 'a', '-a', 'pa', '-c', '50', '-n', String(PACED_OPS * 5), '-P', String(p), '-t', 'get'], { timeoutMs: 120_000 });
      const rps = parseBenchmarkText(res.out).GET?.rps ?? NaN;
      log(`paced round ${round} P${p}: ${fmtInt(rps)} rps against ${fmtInt(PACED_OPS)}`);
      pacedRuns.push({ round, pipeline: p, rps });
    }
  }
  await stop(pacedProxy.child);

  // 3. Probe and flood.
  const floodRuns = [];
  for (const [limited, limits] of Object.entries(FLOOD_LIMITS)) {
    const proxy = await startRespool(`flood ${limited}`, floodConfig(limits), seed);
    procs.push(proxy);
    const probe = (n) => ['-h', HOST, '-p', String(proxy.port), '--user', 'p', '-a', 'pp', '-c', '4', '-n', String(n), '-P', '1', '-t', 'get'];
    await benchmark(probe(3000)); // warm-up: connections, links, the JIT
    const floodArgs = ['-h', HOST, '-p', String(proxy.port), '--user', 'f', '-a', 'pf', '-c', '200', '-n', '100000000', '-d', '1024', '-r', '100000', '-P', '32', '-t', 'set'];
    for (let round = 1; round <= ROUNDS; round++) {
      const alone = parseBenchmarkText((await benchmark(probe(10_000))).out).GET;
      // The flood runs until the probe is done, then is stopped (by its pid).
      let floodChild = null;
      const flood = benchmark(floodArgs, { timeoutMs: 300_000, onSpawn: (c) => { floodChild = c; } }).catch(() => ({ out: '' }));
      await sleep(1000);
      const f0 = cpuSeconds(proxy.child.pid);
      const t0 = Date.now();
      const during = parseBenchmarkText((await benchmark(probe(10_000))).out).GET;
      const seconds = (Date.now() - t0) / 1000;
      const f1 = cpuSeconds(proxy.child.pid);
      floodChild?.kill('SIGINT');
      await flood;
      const r = { round, limited, aloneP99: alone?.p99Ms ?? NaN, duringP99: during?.p99Ms ?? NaN, respoolCpu: (f1 - f0) / seconds };
      log(`probe/flood ${limited} round ${round}: probe p99 alone ${fmt(r.aloneP99, 3)} ms, during ${fmt(r.duringP99, 3)} ms`);
      floodRuns.push(r);
      await sleep(500);
    }
    await stop(proxy.child);
  }

  // 4. Shedding: both tenants flood; the node rule is met; once a second, who runs at what rate.
  const shedProxy = await startRespool('shedding', shedConfig, seed);
  procs.push(shedProxy);
  const shedFlood = (user, password) => ['-h', HOST, '-p', String(shedProxy.port), '--user', user, '-a', password, '-c', '50', '-n', '100000000', '-d', '100', '-r', '100000', '-P', '16', '-t', 'set'];
  const shedChildren = [];
  const floods = [['s', 'ps'], ['b', 'pb']].map(([u, pw]) => benchmark(shedFlood(u, pw), { timeoutMs: 300_000, onSpawn: (c) => shedChildren.push(c) }).catch(() => ({ out: '' })));
  const shedRuns = [];
  let last = await tenantFields(shedProxy.port);
  let lastAt = Date.now();
  for (let second = 1; second <= SHED_SECONDS; second++) {
    await sleep(1000);
    const now = await tenantFields(shedProxy.port);
    // per second of the time between the two readings (RESPOOL TENANTS itself waits its turn on a busy respool)
    const seconds = (Date.now() - lastAt) / 1000;
    lastAt = Date.now();
    const rate = (t) => (Number(now[t].requests) - Number(last[t].requests)) / seconds;
    const r = { second, shop: rate('shop'), batch: rate('batch'), batchSlowedTo: now.batch['shed-ops-per-second'] || null, shopSlowedTo: now.shop['shed-ops-per-second'] || null, reason: now.batch['shed-reason'] || '' };
    log(`shedding second ${second}: shop ${fmtInt(r.shop)}/s, batch ${fmtInt(r.batch)}/s, batch slowed to ${r.batchSlowedTo ?? '—'}`);
    shedRuns.push(r);
    last = now;
  }
  for (const c of shedChildren) c.kill('SIGINT');
  await Promise.all(floods);
  await stop(shedProxy.child);

  const mm = (xs, f) => `${f(median(xs))} (${f(Math.min(...xs))}–${f(Math.max(...xs))})`;
  const of = (name, p, t) => runs.filter((r) => r.variant === name && r.pipeline === p && r.test === t);
  const ratio = (p, t) => [...Array(ROUNDS).keys()].map((i) => of('tenant', p, t).find((r) => r.round === i + 1).cpuUsPerReq / of('no tenant', p, t).find((r) => r.round === i + 1).cpuUsPerReq);
  const rows = [];
  for (const p of [1, 16]) for (const t of ['GET', 'SET']) {
    rows.push([t, p, mm(of('no tenant', p, t).map((r) => r.cpuUsPerReq), (x) => fmt(x, 2)), mm(of('tenant', p, t).map((r) => r.cpuUsPerReq), (x) => fmt(x, 2)), mm(ratio(p, t), (x) => fmt(x, 3))]);
  }
  const floodRows = Object.keys(FLOOD_LIMITS).map((limited) => {
    const rs = floodRuns.filter((r) => r.limited === limited);
    return [`flood ${limited}`, mm(rs.map((r) => r.aloneP99), (x) => fmt(x, 3)), mm(rs.map((r) => r.duringP99), (x) => fmt(x, 3)), mm(rs.map((r) => r.duringP99 / r.aloneP99), (x) => fmt(x, 2))];
  });
  const md = [
    `## Tenants: what a tenant's accounting costs, and a probing tenant beside a flooding one (issue 31)${PIN ? ', pinned' : ', unpinned'}`,
    '',
    `**Rerun:** \`${PIN ? 'BENCH_PIN=1 ' : ''}npm run bench:tenants\` (${ROUNDS} rounds, interleaved; ${fmtInt(N[1])} requests per run at P=1, ${fmtInt(N[16])} at P=16; valkey-benchmark -c 50 -d 100 -r 100000 as a user in a tenant whose limits are never reached, against the same user in no tenant; 3 primaries). respool build: ${respoolBuildLabel()}.`,
    '',
    mdTable(['test', 'P', 'no tenant: CPU µs / request', 'tenant: CPU µs / request', 'tenant ÷ no tenant (same round)'], rows, ['l', 'r', 'r', 'r', 'r']),
    '',
    `Accounting, medians of the per-round ratios: ${[1, 16].map((p) => `P=${p} GET ${fmt(median(ratio(p, 'GET')), 3)}×, SET ${fmt(median(ratio(p, 'SET')), 3)}×`).join('; ')} (target ≤ 1.05×).`,
    '',
    `A tenant limited to ${fmtInt(PACED_OPS)} ops/s, valkey-benchmark at full speed (50 clients, ${fmtInt(PACED_OPS * 5)} GETs): ${[1, 16].map((p) => `P=${p} ${mm(pacedRuns.filter((r) => r.pipeline === p).map((r) => r.rps / PACED_OPS), (x) => fmt(x, 3))}× the limit`).join('; ')} (target: within ±10%).`,
    '',
    'Probe and flood: tenant probe (4 clients, P=1 GET, 10,000 requests, after a warm-up) alone, then while tenant flood runs 200 clients P=32 1 KB SETs, on one respool. Every row has the fair share (docs/tenants.md); the flood is unlimited, held to an ops/s limit, or to a maxInflight:',
    '',
    mdTable(['flood', 'probe p99 alone, ms', 'probe p99 during the flood, ms', 'during ÷ alone'], floodRows, ['l', 'r', 'r', 'r']),
    '',
    `Shedding: tenants shop (priority 10) and batch (priority 0) each flood with 50 clients, P=16 100-byte SETs, with a node rule their load meets (saturation.cpuPercent ${SHED_CPU}); each second, each tenant's requests/s and the rate respool slowed it to (RESPOOL TENANTS):`,
    '',
    mdTable(['second', 'shop (priority 10) requests/s', 'shop slowed to', 'batch (priority 0) requests/s', 'batch slowed to'], shedRuns.map((r) => [r.second, fmtInt(r.shop), r.shopSlowedTo ?? '—', fmtInt(r.batch), r.batchSlowedTo ?? '—']), ['r', 'r', 'r', 'r', 'r']),
    '',
    `Why batch was slowed (its last shed-reason): ${shedRuns.map((r) => r.reason).filter(Boolean).at(-1) ?? 'never slowed'}.`,
    '',
    `Measured ${started.toISOString()} → ${new Date().toISOString()} on ${fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join('/')} load (1/5/15 min). Raw runs: bench/out/tenants${PIN ? '-pinned' : ''}.json.`,
  ].join('\n');
  const section = PIN ? 'tenants-pinned' : 'tenants';
  writeOutputs(section, { rounds: ROUNDS, n: N, floodOps: FLOOD_OPS, pacedOps: PACED_OPS, shedCpu: SHED_CPU, runs, pacedRuns, floodRuns, shedRuns, commands: procs.map((p) => p.cmd) }, md);
  writeSection(section, md);
  console.log(md);
} finally {
  for (const p of procs) await stop(p.child);
  await cluster.stop();
}
