// Blocking commands through respool (issue 8): 1,000 clients each parked in BLPOP on their own key
// (timeout 0), on a 3-primary cluster, through respool and directly against the nodes.
//
//   npm run bench:blocking      (= npm run build && npm run build:harness &&
//                                  bash -c 'ulimit -n <hard limit>; node bench/blocking.mjs')
//
// Env: BENCH_QUICK=1 (200 clients, 1 round, short GET runs), BENCH_ROUNDS (5),
//      BENCH_BLOCKED_CLIENTS (1000), BENCH_BLOCKING_PUSHES (1000 per measurement),
//      BENCH_BLOCKING_GET_N (100000 GETs per valkey-benchmark run), BENCH_BLOCKING_GET_CLIENTS (50),
//      RESPOOL_BENCH_BIN (another checkout's bin/respool.js, e.g. a clean export of a commit; the
//      section names the build it ran).
//
// Measured, per round (rounds alternate the order of the phases so drift lands on all of them;
// the two GET runs of (c) are always back to back):
//  (a) upstream connections while the clients are blocked: CLIENT LIST on every node, by client
//      name (respool's links are "respool", its leased connections "respool-lease"), and respool's
//      own /metrics (respool_leased_connections, respool_upstream_links); also after the clients
//      disconnect (the leases must be unblocked and handed back, not left blocked on the nodes);
//  (b) push → wake latency: one LPUSH at a time (from one more client) to a blocked client's key,
//      timed from writing the LPUSH until that client has its BLPOP reply, then the client blocks
//      again; p50/p99 over BENCH_BLOCKING_PUSHES pushes. Paths: through respool (push and BLPOP
//      through respool), respool-blocked clients woken by an LPUSH sent straight to the node, and
//      direct (both on the node);
//  (c) GET throughput of other clients through respool (valkey-benchmark -t get -c 50 -P 1) with
//      no blocked clients vs with the 1,000 blocked clients parked.
// All servers are on 127.0.0.1 on free ports, started by this script and stopped at its end.
import fs from 'node:fs';
import path from 'node:path';
import {
  HOST, OUT_DIR, ROOT_DIR, RespConn, envFlag, envInt, fmt, fmtInt, log, mdTable, median, parseBenchmarkCsv, parseInfo,
  percentile, run, shellLine, sleep, spawn, stop, uniquePort, waitForPing, writeOutputs,
} from './lib/common.mjs';
import { clientCensus, respoolMetrics, sumMetric } from './lib/upstream-census.mjs';
import { writeSection } from './lib/results-file.mjs';
import { RESPOOL_BIN, respoolBuildLabel } from './lib/respool-build.mjs';

const QUICK = envFlag('BENCH_QUICK');
const ROUNDS = envInt('BENCH_ROUNDS', QUICK ? 1 : 5);
const BLOCKED = envInt('BENCH_BLOCKED_CLIENTS', QUICK ? 200 : 1000);
const PUSHES = envInt('BENCH_BLOCKING_PUSHES', QUICK ? 200 : 1000);
const GET_N = envInt('BENCH_BLOCKING_GET_N', QUICK ? 30_000 : 100_000);
const GET_CLIENTS = envInt('BENCH_BLOCKING_GET_CLIENTS', 50);
const POOL = 2; // respool --connections-per-node
const DEDICATED_DEFAULT_MAX_PER_NODE = 1000; // respool's dedicated.maxPerNode default

const { startCluster } = await import(path.join(ROOT_DIR, 'build/harness/valkey-processes.js'));
const calculateSlot = (await import('cluster-key-slot')).default;

function openFileLimit() {
  const m = /Max open files\s+(\d+)/.exec(fs.readFileSync('/proc/self/limits', 'utf8'));
  return m ? Number(m[1]) : NaN;
}
const loadavg = () => fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

/** min–max over rounds, "a–b" or "a" when equal. */
function span(xs, f = fmtInt) {
  const a = xs.filter(Number.isFinite);
  if (!a.length) return '—';
  const lo = Math.min(...a);
  const hi = Math.max(...a);
  return lo === hi ? f(lo) : `${f(lo)}–${f(hi)}`;
}

async function main() {
  const limit = openFileLimit();
  // The bench holds BLOCKED client sockets at a time (one path at a time); respool holds BLOCKED clients + BLOCKED leases.
  if (limit < 2 * BLOCKED + 500) log(`warning: ulimit -n is ${limit}; ${BLOCKED} blocked clients need about ${2 * BLOCKED + 500} (run via npm run bench:blocking)`);
  const started = new Date();
  const cluster = await startCluster({ primaries: 3, replicasPerPrimary: 0, args: ['--maxclients', String(BLOCKED * 2 + 1000)] });
  let respool;
  const relays = []; // bench/lib/node-relay.mjs, one per primary: the floor of a Node hop
  const monitors = [];
  let keys; // blk:<i>, one per blocked client
  let nodeOfKey; // key → the primary serving its slot
  let pusher; // { respool: () => conn, node: (key) => conn, relay: (key) => conn }
  let relayPortOf; // key → the port of the relay in front of its primary
  const result = { bench: 'blocking', started: started.toISOString(), loadavgStart: loadavg(), quick: QUICK,
    config: { rounds: ROUNDS, blocked: BLOCKED, pushes: PUSHES, getN: GET_N, getClients: GET_CLIENTS, pool: POOL },
    rounds: [], errors: [] };
  try {
    const primaries = await cluster.primaries();
    const shards = await cluster.shards();
    const nodeOfSlot = new Array(16384);
    for (const s of shards) for (const [a, b] of s.slots) for (let i = a; i <= b; i++) nodeOfSlot[i] = s.primary;
    nodeOfKey = (k) => nodeOfSlot[calculateSlot(k)];
    for (const n of primaries) {
      const m = await RespConn.connect(n.port);
      await m.callT(3000, 'CLIENT', 'SETNAME', 'bench-monitor');
      monitors.push({ node: n, conn: m });
    }

    // Keys: blk:<i>, each client its own key; how many land on each node.
    keys = Array.from({ length: BLOCKED }, (_, i) => `blk:${i}`);
    const perNode = {};
    for (const k of keys) perNode[nodeOfKey(k).port] = (perNode[nodeOfKey(k).port] ?? 0) + 1;
    result.keysPerNode = perNode;
    const maxOnOneNode = Math.max(...Object.values(perNode));

    const port = await uniquePort();
    const adminPort = await uniquePort();
    const args = [RESPOOL_BIN, '--listen', `${HOST}:${port}`, '--upstream', primaries.map((n) => `${HOST}:${n.port}`).join(','),
      '--mode', 'cluster', '--admin', `${HOST}:${adminPort}`, '--log-level', 'warn', '--connections-per-node', String(POOL),
      '--max-clients', String(BLOCKED + 1000),
      ...(maxOnOneNode > DEDICATED_DEFAULT_MAX_PER_NODE ? ['--dedicated-max-per-node', String(maxOnOneNode + 100)] : [])];
    const logFile = path.join(OUT_DIR, 'respool-blocking.log');
    fs.mkdirSync(OUT_DIR, { recursive: true });
    fs.writeFileSync(logFile, '');
    respool = spawn(process.execPath, args, { logFile });
    await waitForPing(port, { child: respool, what: 'respool', timeoutMs: 15_000 });
    result.respoolCmd = shellLine('node', args);
    result.respoolBuild = respoolBuildLabel();
    log(`cluster ${primaries.map((n) => n.port).join(',')}; respool on ${port} (admin ${adminPort}); keys per node ${JSON.stringify(perNode)}`);

    // Pushers: one through respool, one straight to each node.
    const viaRespool = await RespConn.connect(port);
    const direct = new Map();
    for (const n of primaries) direct.set(n.port, await RespConn.connect(n.port));
    // A bare Node relay in front of each primary, and a pusher through each.
    const relayOf = new Map();
    for (const n of primaries) {
      const rport = await uniquePort();
      const child = spawn(process.execPath, ['bench/lib/node-relay.mjs', String(rport), String(n.port)], { match: `${process.execPath} bench/lib/node-relay.mjs` });
      relays.push(child);
      await waitForPing(rport, { child, what: `node relay to ${n.port}` });
      relayOf.set(n.port, { port: rport, conn: await RespConn.connect(rport) });
    }
    relayPortOf = (k) => relayOf.get(nodeOfKey(k).port).port;
    pusher = { respool: () => viaRespool, node: (k) => direct.get(nodeOfKey(k).port), relay: (k) => relayOf.get(nodeOfKey(k).port).conn };
    // valkey-benchmark's key (no -r: the literal "key:__rand_int__") holds a 100-byte value.
    await viaRespool.callT(3000, 'SET', 'key:__rand_int__', 'x'.repeat(100));

    const ctx = { port, adminPort };
    const getBench = shellLine('valkey-benchmark', benchArgs(port));
    result.getBenchCmd = getBench;
    for (let round = 1; round <= ROUNDS; round++) {
      log(`round ${round}/${ROUNDS} (load ${loadavg()})`);
      const r = { round };
      // The GET run without blocked clients sits right before the blocking (odd rounds) or right
      // after the clients leave (even rounds), so each with/without pair is measured back to back.
      const phases = [
        async () => { Object.assign(r, await respoolPhase(ctx, round % 2 === 1)); },
        async () => { r.direct = await pathPhase('direct, on their key\'s node', (k) => nodeOfKey(k).port, pusher.node, 'direct (LPUSH to the node)'); },
        async () => { r.relay = await pathPhase('bare Node relay in front of their key\'s node', relayPortOf, pusher.relay, 'bare Node relay (LPUSH through it too)'); },
      ];
      for (const p of round % 2 ? phases : phases.reverse()) {
        await p();
        if (respool.exitCode !== null || respool.signalCode !== null) throw new Error('respool exited');
      }
      result.rounds.push(r);
    }
    viaRespool.close();
    for (const c of direct.values()) c.close();
    for (const r of relayOf.values()) r.conn.close();
  } finally {
    for (const m of monitors) m.conn.close();
    for (const child of relays) await stop(child);
    await stop(respool);
    await cluster.stop();
  }
  result.finished = new Date().toISOString();
  result.loadavgEnd = loadavg();
  report(result);

  async function sumBlocked() {
    const infos = await Promise.all(monitors.map((m) => m.conn.callT(5000, 'INFO', 'clients')));
    return infos.reduce((a, t) => a + Number(parseInfo(t).blocked_clients), 0);
  }

  async function waitBlocked(want, timeoutMs = 60_000) {
    const t0 = performance.now();
    for (;;) {
      const n = await sumBlocked();
      if (n === want) return performance.now() - t0;
      if (performance.now() - t0 > timeoutMs) throw new Error(`blocked_clients stayed at ${n}, expected ${want}, for ${timeoutMs} ms`);
      await sleep(20);
    }
  }

  async function census(adminPort) {
    const perNode = {};
    for (const m of monitors) perNode[m.node.port] = await clientCensus(m.conn);
    const metrics = adminPort ? await respoolMetrics(adminPort, ['respool_leased_connections', 'respool_upstream_links', 'respool_lease_refusals_total']) : null;
    const sum = (f) => Object.values(perNode).reduce((a, c) => a + f(c), 0);
    return {
      perNode,
      respoolLinks: sum((c) => c.byName.respool ?? 0),
      leases: sum((c) => c.byName['respool-lease'] ?? 0),
      blockedOnNodes: sum((c) => c.blocked),
      otherClients: sum((c) => c.total - (c.byName.respool ?? 0) - (c.byName['respool-lease'] ?? 0) - (c.byName['bench-monitor'] ?? 0)),
      metrics: metrics && {
        leasedInUse: sumMetric(metrics, 'respool_leased_connections', { state: 'in_use' }),
        leasedIdle: sumMetric(metrics, 'respool_leased_connections', { state: 'idle' }),
        leasedWaiting: sumMetric(metrics, 'respool_leased_connections', { state: 'waiting' }),
        linksShared: sumMetric(metrics, 'respool_upstream_links', { role: 'primary' }),
        linksDedicated: sumMetric(metrics, 'respool_upstream_links', { role: 'dedicated' }),
        leaseRefusals: sumMetric(metrics, 'respool_lease_refusals_total'),
      },
    };
  }

  /** BLOCKED clients, each BLPOP <own key> 0, connected to `portOfKey(key)`. */
  async function blockClients(portOfKey) {
    const t0 = performance.now();
    const clients = [];
    for (let i = 0; i < keys.length; i += 100) {
      const batch = keys.slice(i, i + 100);
      clients.push(...await Promise.all(batch.map(async (key) => ({ key, conn: await RespConn.connect(portOfKey(key), HOST, 5000) }))));
    }
    const connectMs = performance.now() - t0;
    for (const c of clients) arm(c);
    const blockMs = await waitBlocked(BLOCKED);
    return { clients, connectMs, allBlockedMs: connectMs + blockMs };
  }

  function arm(c) {
    c.woken = false;
    c.pending = c.conn.call('BLPOP', c.key, '0').then((v) => {
      c.woken = true;
      c.wokenAt = performance.now();
      return v;
    }, (e) => {
      c.woken = true;
      return e;
    });
  }

  /** One LPUSH at a time to a blocked client's key; latency until that client has its reply. */
  async function pushLatency(clients, pushVia, label) {
    const lat = [];
    let wrong = 0;
    for (let i = 0; i < PUSHES; i++) {
      const c = clients[i % clients.length];
      const value = `v${i}`;
      const conn = pushVia(c.key);
      const t0 = performance.now();
      const pushed = conn.call('LPUSH', c.key, value);
      const got = await c.pending;
      const t1 = c.wokenAt ?? performance.now();
      if (!Array.isArray(got) || got[0] !== c.key || got[1] !== value) wrong++;
      arm(c);
      const pr = await pushed;
      if (typeof pr !== 'number') wrong++;
      lat.push(t1 - t0);
    }
    const out = { n: lat.length, p50: percentile(lat, 50), p90: percentile(lat, 90), p99: percentile(lat, 99), max: Math.max(...lat), wrong };
    log(`  ${label}: p50 ${fmt(out.p50, 3)} ms, p99 ${fmt(out.p99, 3)} ms over ${out.n} pushes${wrong ? `, ${wrong} WRONG replies` : ''}`);
    return out;
  }

  async function closeClients(clients) {
    for (const c of clients) c.conn.close();
    await Promise.all(clients.map((c) => c.pending));
  }

  async function respoolPhase({ port: rp, adminPort: ap }, noBlockedFirst) {
    const out = {};
    if (noBlockedFirst) out.getNoBlocked = await getThroughput(rp, 'no blocked clients');
    out.beforeBlocking = await census(ap);
    log(`respool: ${BLOCKED} clients → BLPOP through respool`);
    const { clients, connectMs, allBlockedMs } = await blockClients(() => rp);
    out.respoolBlockMs = { connectMs, allBlockedMs };
    await sleep(200);
    out.whileBlocked = await census(ap);
    log(`  all blocked after ${fmtInt(allBlockedMs)} ms; nodes: ${out.whileBlocked.leases} respool-lease + ${out.whileBlocked.respoolLinks} respool links; ` +
      `metrics in_use ${out.whileBlocked.metrics?.leasedInUse} idle ${out.whileBlocked.metrics?.leasedIdle}`);
    out.getWithBlocked = await getThroughput(rp, `${BLOCKED} blocked clients`);
    out.spuriousWakeups = clients.filter((c) => c.woken).length;
    out.latencyRespool = await pushLatency(clients, pusher.respool, 'through respool (LPUSH via respool)');
    out.latencyRespoolPushDirect = await pushLatency(clients, pusher.node, 'through respool (LPUSH to the node)');
    const tClose = performance.now();
    await closeClients(clients);
    try {
      await waitBlocked(0, 30_000);
    } catch (e) {
      result.errors.push(`after close: ${e.message}`);
    }
    out.unblockAfterCloseMs = performance.now() - tClose;
    await sleep(300);
    out.afterClose = await census(ap);
    if (!noBlockedFirst) out.getNoBlocked = await getThroughput(rp, 'no blocked clients');
    log(`  clients closed: node-side blocked 0 after ${fmtInt(out.unblockAfterCloseMs)} ms; leases on nodes ${out.afterClose.leases} ` +
      `(metrics in_use ${out.afterClose.metrics?.leasedInUse}, idle ${out.afterClose.metrics?.leasedIdle})`);
    return out;
  }

  /**
   * BLOCKED clients blocked through `portOfKey`, then pushes through `pushVia` one at a time:
   * directly on the nodes, or through a bare Node relay per node (the hops respool's path has,
   * with nothing but Node doing them).
   */
  async function pathPhase(what, portOfKey, pushVia, pushLabel) {
    log(`${what}: ${BLOCKED} clients → BLPOP`);
    const { clients, connectMs, allBlockedMs } = await blockClients(portOfKey);
    await sleep(200);
    const whileBlocked = await census(null);
    const latency = await pushLatency(clients, pushVia, pushLabel);
    await closeClients(clients);
    await waitBlocked(0, 30_000);
    return { connectMs, allBlockedMs, whileBlocked, latency };
  }
}

function benchArgs(port) {
  return ['-h', HOST, '-p', String(port), '-c', String(GET_CLIENTS), '-n', String(GET_N), '-d', '100', '-P', '1', '-t', 'get', '--csv'];
}

async function getThroughput(port, label) {
  const res = await run('valkey-benchmark', benchArgs(port), { timeoutMs: 120_000 });
  const row = parseBenchmarkCsv(res.out).GET;
  if (res.code !== 0 || !row) throw new Error(`valkey-benchmark (${label}) failed: code ${res.code} ${res.err.slice(0, 300)}`);
  const out = { rps: row.rps, p50: row.p50_latency_ms, p99: row.p99_latency_ms, seconds: res.ms / 1000 };
  log(`  GET through respool, ${label}: ${fmtInt(out.rps)} rps, p50 ${out.p50} ms, p99 ${out.p99} ms`);
  return out;
}

function report(result) {
  const R = result.rounds;
  const med = (f) => median(R.map(f));
  const per = (f, d = 3) => R.map(f).map((x) => fmt(x, d)).join(' / ');
  const perInt = (f) => R.map(f).map(fmtInt).join(' / ');
  const nodes = Object.keys(result.keysPerNode);

  const latRows = [
    ['respool: BLPOP and LPUSH through respool', (r) => r.latencyRespool],
    ['respool: BLPOP through respool, LPUSH to the node', (r) => r.latencyRespoolPushDirect],
    ['direct: BLPOP and LPUSH on the node', (r) => r.direct.latency],
    ['bare Node relay per node (bench/lib/node-relay.mjs): BLPOP and LPUSH through it', (r) => r.relay.latency],
  ].map(([name, f]) => [
    name,
    fmt(med((r) => f(r).p50), 3), fmt(med((r) => f(r).p99), 3), fmt(med((r) => f(r).max), 3),
    per((r) => f(r).p50), per((r) => f(r).p99),
    R.reduce((a, r) => a + f(r).wrong, 0),
  ]);
  const latTable = mdTable(['path', 'p50 ms', 'p99 ms', 'max ms', 'p50 per round', 'p99 per round', 'wrong replies'], latRows);

  const w = (r) => r.whileBlocked;
  const connRows = [
    ['respool-lease connections (CLIENT LIST, all nodes)', perInt((r) => w(r).leases)],
    ['respool shared links (name=respool)', perInt((r) => w(r).respoolLinks)],
    ['blocked on the nodes (CLIENT LIST flags=b)', perInt((r) => w(r).blockedOnNodes)],
    ['other connections on the nodes (the bench\'s 3 direct LPUSH clients)', perInt((r) => w(r).otherClients)],
    ['/metrics respool_leased_connections in_use', perInt((r) => w(r).metrics?.leasedInUse)],
    ['/metrics respool_leased_connections idle', perInt((r) => w(r).metrics?.leasedIdle)],
    ['/metrics respool_leased_connections waiting', perInt((r) => w(r).metrics?.leasedWaiting)],
    ['/metrics respool_upstream_links role=primary / role=dedicated', R.map((r) => `${w(r).metrics?.linksShared} / ${w(r).metrics?.linksDedicated}`).join(' ; ')],
    ['/metrics respool_lease_refusals_total (cumulative)', perInt((r) => w(r).metrics?.leaseRefusals)],
    ['direct path: client connections on the nodes (blocked clients + 3 LPUSH clients)', perInt((r) => r.direct.whileBlocked.otherClients)],
  ];
  const connTable = mdTable([`while ${BLOCKED.toLocaleString('en-US')} clients are blocked (respool path)`, 'per round'], connRows);
  const perNodeTable = mdTable(
    ['node', 'keys (blocked clients)', 'respool-lease (last round)', 'respool links (last round)', 'direct clients (last round)'],
    nodes.map((p) => {
      const last = R[R.length - 1];
      return [`${HOST}:${p}`, result.keysPerNode[p], last.whileBlocked.perNode[p]?.byName['respool-lease'] ?? 0,
        last.whileBlocked.perNode[p]?.byName.respool ?? 0, last.direct.whileBlocked.perNode[p]?.byName['(unnamed)'] ?? 0];
    }),
  );
  const a = (r) => r.afterClose;
  const afterRows = [
    ['time until no lease is blocked on the nodes (ms)', perInt((r) => r.unblockAfterCloseMs)],
    ['respool-lease connections on the nodes', perInt((r) => a(r).leases)],
    ['blocked on the nodes', perInt((r) => a(r).blockedOnNodes)],
    ['/metrics leased in_use / idle', R.map((r) => `${a(r).metrics?.leasedInUse} / ${a(r).metrics?.leasedIdle}`).join(' ; ')],
  ];
  const afterTable = mdTable(['after the blocked clients disconnect', 'per round'], afterRows);

  const ratio = (r) => r.getWithBlocked.rps / r.getNoBlocked.rps;
  const tputTable = mdTable(
    ['condition', 'GET rps (median)', 'rps per round', 'p50 ms', 'p99 ms'],
    [
      ['no blocked clients', fmtInt(med((r) => r.getNoBlocked.rps)), perInt((r) => r.getNoBlocked.rps), fmt(med((r) => r.getNoBlocked.p50), 3), fmt(med((r) => r.getNoBlocked.p99), 3)],
      [`${BLOCKED.toLocaleString('en-US')} clients blocked in BLPOP`, fmtInt(med((r) => r.getWithBlocked.rps)), perInt((r) => r.getWithBlocked.rps), fmt(med((r) => r.getWithBlocked.p50), 3), fmt(med((r) => r.getWithBlocked.p99), 3)],
    ],
  );
  const blockTable = mdTable(['path', `connect ${BLOCKED.toLocaleString('en-US')} clients (ms)`, 'until all blocked on the nodes (ms)'], [
    ['respool', perInt((r) => r.respoolBlockMs.connectMs), perInt((r) => r.respoolBlockMs.allBlockedMs)],
    ['direct', perInt((r) => r.direct.connectMs), perInt((r) => r.direct.allBlockedMs)],
  ]);
  const spurious = R.reduce((s, r) => s + r.spuriousWakeups, 0);

  const md = [
    '## Blocking commands: 1,000 clients parked in BLPOP (issue 8)'.replace('1,000', BLOCKED.toLocaleString('en-US')),
    '',
    `**Rerun:** \`npm run bench:blocking\` (${QUICK ? '**BENCH_QUICK=1 smoke run** — ' : ''}${BLOCKED.toLocaleString('en-US')} client connections, each \`BLPOP blk:<i> 0\` on its own key; ` +
      `a **3-primary cluster** (no replicas); keys per node ${nodes.map((p) => result.keysPerNode[p]).join(' / ')}; ${R.length} round(s), phase order alternating per round). ` +
      `respool (${result.respoolBuild}): \`${result.respoolCmd}\` (dedicated.maxPerNode left at its default of 1,000 per node: at most ${Math.max(...Object.values(result.keysPerNode))} blocked clients on one node).`,
    '',
    `**Noisy machine:** 2 cores shared with other engineers' test runs (load average ${result.loadavgStart} at the start, ${result.loadavgEnd} at the end; 1/5/15 min); ` +
      'every process (nodes, respool, the clients, valkey-benchmark) is on the same 2 cores. Medians over rounds, with each round\'s value alongside to show the spread.',
    '',
    '### Upstream connections',
    '',
    'Each blocked client holds one leased upstream connection ("respool-lease") for as long as it is blocked; the shared links stay at ' +
      `${POOL} per node. Counted on the nodes (CLIENT LIST, all 3 primaries) and in respool's \`/metrics\`:`,
    '',
    connTable,
    '',
    perNodeTable,
    '',
    afterTable,
    '',
    'After the clients close, respool unblocks each lease (CLIENT UNBLOCK) and keeps it idle for reuse (dedicated.idleMs, 30 s): the next round\'s clients reuse them.',
    '',
    blockTable,
    '',
    'Round 1 through respool dials a new leased connection per blocked client; later rounds reuse the idle leases the previous round handed back.',
    '',
    `### Push → wake latency (${PUSHES.toLocaleString('en-US')} pushes per path per round, one at a time)`,
    '',
    'From writing `LPUSH <key> <value>` (one more client) until the blocked client has `[key, value]`; the client then blocks again. Timed in the bench process, which holds both ends.',
    '',
    latTable,
    '',
    ...['p50', 'p99'].map((q) => `${q} ÷ direct's in the same round, per round: through respool ${R.map((r) => fmt(r.latencyRespool[q] / r.direct.latency[q])).join(' / ')} (median ${fmt(median(R.map((r) => r.latencyRespool[q] / r.direct.latency[q])))}); ` +
      `through the bare Node relay ${R.map((r) => fmt(r.relay.latency[q] / r.direct.latency[q])).join(' / ')} (median ${fmt(median(R.map((r) => r.relay.latency[q] / r.direct.latency[q])))}).`),
    '',
    'The relay has the hops respool\'s path has (client → a Node process → the node, and the wake back through it) and does nothing else (`socket.pipe` both ways, a connection to the node per client): what it adds above direct is what putting any Node process on the path costs; what respool adds above the relay is its own work. Its tail (p99) is a naive relay\'s, Node streams with a connection per client; its median is the hops\' cost.',
    '',
    `### GET throughput of other clients through respool (\`${result.getBenchCmd}\`)`,
    '',
    tputTable,
    '',
    `With blocked clients / without, each pair measured back to back, per round: ${R.map((r) => fmt(ratio(r))).join(' / ')} (median ${fmt(median(R.map(ratio)))}; ` +
      `the rounds' own spread of GET rps without blocked clients is ${fmt(Math.min(...R.map((r) => r.getNoBlocked.rps)) / Math.max(...R.map((r) => r.getNoBlocked.rps)))}× min/max, which is the noise floor here). ` +
      `BLPOPs answered during the GET runs (should be 0): ${spurious}.`,
    ...(result.errors.length ? ['', `Errors: ${result.errors.join('; ')}`] : []),
    '',
    `Measured ${result.started} – ${result.finished}. Raw numbers: bench/out/blocking.json.`,
  ].join('\n');
  writeOutputs('blocking', result, md);
  writeSection('blocking', md);
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
