// Blocked clients parked at respool (issue 36): N clients each in BLPOP <own key> 0 on a
// 3-primary cluster — parked at respool (the default), on a leased connection each
// (dedicated.parkPops: false), and directly on the nodes.
//
//   npm run bench:parking   (= npm run build && npm run build:harness &&
//                              bash -c 'ulimit -n <hard limit>; node bench/parked-pops.mjs')
//
// Env: BENCH_QUICK=1 (500 clients, 1 round, 200 pushes), BENCH_ROUNDS (3), BENCH_PARKED_CLIENTS
//      (3000), BENCH_PARKING_PUSHES (1000 per path per round).
//
// Per round, each path in turn (the order rotates from round to round so drift lands on all):
//  (a) connections the nodes hold while the N clients wait (CLIENT LIST on every primary);
//  (b) push → wake: one LPUSH at a time (one more client; through respool for respool's paths,
//      on the node for direct) to a waiting client's key, timed from writing the LPUSH until that
//      client has its BLPOP reply, then it waits again; p50/p99;
//  (c) respool's memory per waiting client beyond its connection (bench/lib/parked-memory.mjs:
//      respool in a process of its own, collections forced): heap with the N clients connected
//      and idle (after a PING each), then with all N waiting; the difference ÷ N.
// All servers are on 127.0.0.1 on free ports, started here and stopped at the end (by PID).
import fs from 'node:fs';
import path from 'node:path';
import {
  HOST, OUT_DIR, ROOT_DIR, RespConn, envFlag, envInt, fmt, fmtInt, log, mdTable, median, parseInfo,
  percentile, run, shellLine, sleep, spawn, stop, uniquePort, waitForPing, writeOutputs,
} from './lib/common.mjs';
import { clientCensus } from './lib/upstream-census.mjs';
import { writeSection } from './lib/results-file.mjs';
import { RESPOOL_BIN, respoolBuildLabel } from './lib/respool-build.mjs';

const QUICK = envFlag('BENCH_QUICK');
const ROUNDS = envInt('BENCH_ROUNDS', QUICK ? 1 : 3);
const N = envInt('BENCH_PARKED_CLIENTS', QUICK ? 500 : 3000);
const PUSHES = envInt('BENCH_PARKING_PUSHES', QUICK ? 200 : 1000);

const { startCluster } = await import(path.join(ROOT_DIR, 'build/harness/valkey-processes.js'));
const calculateSlot = (await import('cluster-key-slot')).default;
const loadavg = () => fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

async function main() {
  const started = new Date();
  const cluster = await startCluster({ primaries: 3, replicasPerPrimary: 0, args: ['--maxclients', String(N * 2 + 1000)] });
  const respools = [];
  const conns = [];
  const result = { bench: 'parked-pops', started: started.toISOString(), loadavgStart: loadavg(), quick: QUICK, config: { rounds: ROUNDS, clients: N, pushes: PUSHES }, rounds: [] };
  try {
    const primaries = await cluster.primaries();
    const shards = await cluster.shards();
    const nodeOfSlot = new Array(16384);
    for (const s of shards) for (const [a, b] of s.slots) for (let i = a; i <= b; i++) nodeOfSlot[i] = s.primary;
    const nodeOfKey = (k) => nodeOfSlot[calculateSlot(k)];
    const monitors = [];
    for (const n of primaries) {
      const m = await RespConn.connect(n.port);
      await m.callT(3000, 'CLIENT', 'SETNAME', 'bench-monitor');
      monitors.push(m);
      conns.push(m);
    }
    const keys = Array.from({ length: N }, (_, i) => `park:${i}`);

    // A respool per phase, started before it and stopped after it, so the connections a node gains
    // during a phase are that respool's alone: parked (default settings) and leased
    // (dedicated.parkPops false, room for N leases).
    const respoolPath = (name, env, extra) => {
      const p = { name, env, cmd: '', port: 0, adminPort: 0, child: null, pusherConn: null };
      p.start = async () => {
        p.port = await uniquePort();
        p.adminPort = await uniquePort();
        const args = [RESPOOL_BIN, '--listen', `${HOST}:${p.port}`, '--upstream', `${HOST}:${primaries[0].port}`, '--admin', `${HOST}:${p.adminPort}`, '--log-level', 'warn', '--max-clients', String(N + 1000), ...extra];
        p.cmd = shellLine('node', args);
        p.child = spawn(process.execPath, args, { logFile: path.join(OUT_DIR, `respool-parking-${name}.log`), env: { ...process.env, ...env } });
        respools.push(p.child);
        await waitForPing(p.port, { child: p.child, what: `respool (${name})`, timeoutMs: 15_000 });
        p.pusherConn = await RespConn.connect(p.port);
      };
      p.stop = async () => {
        p.pusherConn.close();
        await stop(p.child);
      };
      p.portOf = () => p.port;
      p.pusher = () => p.pusherConn;
      return p;
    };
    const paths = {
      parked: respoolPath('parked', {}, []),
      leased: respoolPath('leased', { RESPOOL_DEDICATED_PARK_POPS: 'false' }, ['--dedicated-max-per-node', String(N + 100), '--dedicated-max-total', String(N + 100)]),
    };
    const direct = new Map();
    for (const n of primaries) {
      const c = await RespConn.connect(n.port);
      direct.set(n.port, c);
      conns.push(c);
    }
    paths.direct = { portOf: (k) => nodeOfKey(k).port, pusher: (k) => direct.get(nodeOfKey(k).port) };
    result.respoolBuild = respoolBuildLabel();

    const order = ['parked', 'leased', 'direct'];
    for (let round = 1; round <= ROUNDS; round++) {
      log(`round ${round}/${ROUNDS} (load ${loadavg()})`);
      const r = { round };
      const rotated = order.map((_, i) => order[(i + round - 1) % order.length]);
      for (const name of rotated) r[name] = await phase(name, paths[name]);
      result.rounds.push(r);
    }
    result.respoolCmd = { parked: paths.parked.cmd, leased: `RESPOOL_DEDICATED_PARK_POPS=false ${paths.leased.cmd}` };
    // Memory per waiting client: respool in a process of its own with collections forced before
    // each reading (bench/lib/parked-memory.mjs), so garbage does not count.
    result.memory = {};
    for (const mode of ['parked', 'leased']) {
      const res = await run(process.execPath, ['--expose-gc', 'bench/lib/parked-memory.mjs', String(N), mode, `${HOST}:${primaries[0].port}`], { timeoutMs: 120_000 });
      if (res.code !== 0) throw new Error(`parked-memory ${mode}: ${res.err.slice(0, 300)}`);
      result.memory[mode] = JSON.parse(res.out.trim().split('\n').pop());
      log(`memory, ${mode}: ${fmtInt(result.memory[mode].heapPerClient)} B of heap per waiting client (${N} clients)`);
    }

    async function nodeConnections() {
      let total = 0;
      const byName = {};
      for (const m of monitors) {
        const c = await clientCensus(m);
        for (const [k, v] of Object.entries(c.byName)) {
          if (k === 'bench-monitor') continue;
          byName[k] = (byName[k] ?? 0) + v;
          total += v;
        }
      }
      return { total, byName };
    }


    async function phase(name, p) {
      log(`${name}: ${N} clients → BLPOP`);
      const before = await nodeConnections();
      if (p.start) await p.start();
      const clients = [];
      for (let i = 0; i < N; i += 100) {
        clients.push(...await Promise.all(keys.slice(i, i + 100).map(async (key) => ({ key, conn: await RespConn.connect(p.portOf(key), HOST, 5000) }))));
      }
      for (let i = 0; i < N; i += 500) await Promise.all(clients.slice(i, i + 500).map((c) => c.conn.callT(10_000, 'PING')));
      for (const c of clients) arm(c);
      await waitWaiting(p, N);
      await sleep(300);
      const census = await nodeConnections();
      const lat = await pushLatency(clients, p.pusher);
      for (const c of clients) c.conn.close();
      await Promise.all(clients.map((c) => c.pending));
      await waitWaiting(p, 0);
      if (p.stop) await p.stop();
      const added = {};
      for (const [k, v] of Object.entries(census.byName)) if (v !== (before.byName[k] ?? 0)) added[k] = v - (before.byName[k] ?? 0);
      const out = {
        nodeConnections: census.total - before.total, byName: added, latency: lat,
      };
      log(`  nodes hold ${out.nodeConnections} more connections (${JSON.stringify(added)}); wake p50 ${fmt(lat.p50, 3)} ms p99 ${fmt(lat.p99, 3)} ms`);
      return out;
    }

    /** Until `want` clients wait: parked at respool (INFO clients through it) or blocked on the nodes. */
    async function waitWaiting(p, want) {
      const t0 = performance.now();
      for (;;) {
        let n = 0;
        if (p.adminPort) n = Number(parseInfo(await p.pusher().callT(5000, 'INFO', 'clients')).blocked_clients);
        else for (const m of monitors) n += Number(parseInfo(await m.callT(5000, 'INFO', 'clients')).blocked_clients);
        if (n === want) return;
        if (performance.now() - t0 > 60_000) throw new Error(`blocked_clients stayed at ${n}, expected ${want}`);
        await sleep(50);
      }
    }
  } finally {
    for (const c of conns) c.close();
    for (const child of respools) await stop(child);
    await cluster.stop();
  }
  result.finished = new Date().toISOString();
  result.loadavgEnd = loadavg();
  report(result);
}

function arm(c) {
  c.wokenAt = null;
  c.pending = c.conn.call('BLPOP', c.key, '0').then((v) => {
    c.wokenAt = performance.now();
    return v;
  }, (e) => e);
}

/** One LPUSH at a time to a waiting client's key; the time until that client has its reply. */
async function pushLatency(clients, pusherOf) {
  const lat = [];
  let wrong = 0;
  for (let i = 0; i < PUSHES; i++) {
    const c = clients[(i * 7919) % clients.length];
    const value = `v${i}`;
    const t0 = performance.now();
    const pushed = pusherOf(c.key).call('LPUSH', c.key, value);
    const got = await c.pending;
    const t1 = c.wokenAt ?? performance.now();
    if (!Array.isArray(got) || got[0] !== c.key || got[1] !== value) wrong++;
    arm(c);
    if (typeof (await pushed) !== 'number') wrong++;
    lat.push(t1 - t0);
  }
  return { p50: percentile(lat, 50), p99: percentile(lat, 99), wrong };
}

function report(result) {
  const R = result.rounds;
  const med = (f) => median(R.map(f));
  const per = (f, d = 3) => R.map(f).map((x) => fmt(x, d)).join(' / ');
  const names = { parked: 'parked at respool (default)', leased: 'a leased connection each (parkPops: false)', direct: 'direct on the nodes' };
  const rows = ['parked', 'leased', 'direct'].map((n) => [
    names[n],
    fmtInt(med((r) => r[n].nodeConnections)),
    fmt(med((r) => r[n].latency.p50), 3), fmt(med((r) => r[n].latency.p99), 3),
    per((r) => r[n].latency.p50), per((r) => r[n].latency.p99),
    R.reduce((a, r) => a + r[n].latency.wrong, 0),
  ]);
  const table = mdTable(['path', `connections the 3 nodes gained for ${N.toLocaleString('en-US')} waiting clients`, 'wake p50 ms', 'wake p99 ms', 'p50 per round', 'p99 per round', 'wrong replies'], rows);
  const ratios = ['p50', 'p99'].map((q) => `${q} ÷ direct's, same round: parked ${R.map((r) => fmt(r.parked.latency[q] / r.direct.latency[q])).join(' / ')} (median ${fmt(median(R.map((r) => r.parked.latency[q] / r.direct.latency[q])))}), leased ${R.map((r) => fmt(r.leased.latency[q] / r.direct.latency[q])).join(' / ')} (median ${fmt(median(R.map((r) => r.leased.latency[q] / r.direct.latency[q])))}).`);
  const M = result.memory;
  const mem = mdTable(['respool heap per waiting client, beyond its connection', 'bytes', 'of which its pending reply entry and request copy'], ['parked', 'leased'].map((n) => [
    names[n], fmtInt(M[n].heapPerClient), `${fmtInt(M[n].entryPerClient)} (any request awaiting its reply holds these)`,
  ]));
  const last = R[R.length - 1];
  const md = [
    `## Parked blocked clients: ${N.toLocaleString('en-US')} workers in BLPOP (issue 36)`,
    '',
    `**Rerun:** \`npm run bench:parking\` (${QUICK ? '**BENCH_QUICK=1 smoke run** — ' : ''}${N.toLocaleString('en-US')} client connections, each \`BLPOP park:<i> 0\` on its own key; a **3-primary cluster** (no replicas); ${R.length} round(s), path order rotating per round). ` +
      `respool (${result.respoolBuild}): parked \`${result.respoolCmd.parked}\`; leased \`${result.respoolCmd.leased}\`.`,
    '',
    `**Noisy machine:** 2 cores shared by every process here (load average ${result.loadavgStart} at the start, ${result.loadavgEnd} at the end); unpinned, as a user runs it. Medians over rounds, each round alongside.`,
    '',
    table,
    '',
    ...ratios,
    '',
    `Connections the nodes gained while the clients waited, last round, by client name (CLIENT LIST on every primary, before the clients connected and while they wait): parked ${JSON.stringify(last.parked.byName)}; leased ${JSON.stringify(last.leased.byName)}; direct ${JSON.stringify(last.direct.byName)}. Each respool is started before its phase and stopped after it, so these are its connections alone: parked, its shared links (one per node at this load, \`connectionsPerNode\` 2 at most) and one watch per node (\`respool-watch\`), whatever the number of waiting clients.`,
    '',
    'Push → wake: from writing `LPUSH <key> <value>` (one more client, through respool for both respool paths) until the waiting client has `[key, value]`. Parked, respool holds the LPUSH reply until the waiting client is served (as Valkey answers a push after serving its blocked clients), so the wake includes that client\'s pop: `TYPE` + `LPOP` inside MULTI on its shared link.',
    '',
    mem,
    '',
    `Memory (\`bench/lib/parked-memory.mjs\`): respool in a process of its own (dist/, in front of the same cluster), ${N.toLocaleString('en-US')} clients connected and answered a PING, the heap read after forced collections; then all ${N.toLocaleString('en-US')} waiting in BLPOP on keys of their own, read again; the difference ÷ ${N.toLocaleString('en-US')}. The leased path's figure leaves out the leased connections' sockets and the nodes' side. The target is ≤ 1 KiB per parked client.`,
    '',
    `Measured ${result.started} – ${result.finished}. Raw numbers: bench/out/parked-pops.json.`,
  ].join('\n');
  writeOutputs('parked-pops', result, md);
  writeSection('parked-pops', md);
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
