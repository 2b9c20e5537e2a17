// The near cache (issue 32, docs/near-cache.md): what answering a hot key from respool's memory
// gains, and what having the cache configured costs the keys it does not hold.
//
//   npm run bench:near-cache     (= npm run build && npm run build:harness && node bench/near-cache.mjs)
//
// A 3-primary cluster (no replicas) and respool processes from dist/ in front of it, each idle
// but when measured: "on" (config file `nearCache: { keys: ['hot:*'] }`) and "off" (no
// nearCache), then "burst" (as on, started fresh for part 3) and "off-2" (as off, for part 4).
// All on 127.0.0.1; 1 KiB values.
//
// Part 1 (nodes capped at BENCH_NC_QUOTA of CFS period 100000 µs, cgroup v1, as bench/hotkeys.mjs;
//   skipped, and said so, when not writable): one hot key `hot:bench`, every GET on it, from
//   BENCH_NC_GENS load-generator processes (bench/lib/hotkeys-loadgen.mjs) × BENCH_NC_CONNS
//   connections (45 clients) × pipeline BENCH_NC_DEPTH (16). Cache on vs off vs the same load
//   straight to the capped node, BENCH_NC_ROUNDS interleaved rounds (order rotated) of
//   BENCH_NC_RUN_S seconds. GET/s, p50/p99, the GETs the hot key's node served (INFO
//   commandstats), CPU of respool, the node and the generators. Targets: cache on ≥ 10× cache off,
//   and a cached GET's p50 ≤ a direct GET's p50 (medians of the per-round ratios).
// Part 2 (nodes uncapped from here on): one client, no pipelining (valkey-benchmark -c 1 -P 1
//   GET hot:bench): a cached GET through respool vs the same GET direct to the node that owns the
//   key (and through respool without the cache, for reference). p50 per run, BENCH_NC_LAT_ROUNDS
//   rounds of BENCH_NC_LAT_N GETs in a rotated order, medians.
// Part 3: BENCH_NC_CLIENTS (1,000) clients (connected first, in this process) send GET of one
//   cold key (never read through respool) at once, to a fresh respool with the cache on. The GETs the key's node served
//   for it (INFO commandstats cmdstat_get before/after; nothing else reads that node meanwhile)
//   and respool's RESPOOL CACHE STATS (fills, coalesced, hits, passed_on). Target: 1 node read.
//   The first burst meets a respool with no tracking connection to the node yet (the start of an
//   instance); the next BENCH_NC_BURSTS bursts find it open (a read of another key on that node
//   before each).
// Part 4: GETs of 10,000 keys `bench:cold:N` that do NOT match nearCache.keys, same load shape as
//   part 1, nodes uncapped: respool's CPU time per GET with the cache configured vs not configured
//   at all. Two processes of each (configured: on and burst; not configured: off and off-2), so
//   that the difference between two processes of the same config (A/A) shows how far the
//   configured/not-configured figure can be trusted. The generators switch between the
//   four every BENCH_NC_SLOT_MS (bench/lib/loadgen-run.mjs runAlternating) in cycles of four slots,
//   the order reversed every other cycle; a warm-up cycle, then BENCH_NC_CYCLES cycles. CPU per
//   GET of a slot: the process's CPU time (/proc/<pid>/task/*/schedstat, ns) from the slot's start
//   to its next slot's ÷ the GETs sent in the slot. Per cycle: mean of the configured pair ÷ mean
//   of the not-configured pair, and the two A/A ratios; medians over cycles. Target: ≤ 2% more per
//   request. Also the two calls a GET makes into the cache (handlers/near-cache.ts cachedRead and
//   markWrite, from dist/) timed in-process with the cache configured vs not: what the
//   configuration adds to a GET of a key it does not hold, free of the processes' noise.
//
// Env: BENCH_QUICK=1 (short smoke run), BENCH_PIN=1 (every respool on core 0, the valkey-servers,
// the load generators and valkey-benchmark on core 1, taskset; the section is then
// near-cache-pinned), and the BENCH_NC_* knobs above. Unpinned by default: what a user gets.
// Only the processes it started are stopped, by pid (bench/lib/common.mjs).
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import {
  HOST, OUT_DIR, ReplyError, RespConn, ROOT_DIR, encodeCommand, envFlag, envInt, fmt, fmtInt, log, mdTable, median, parseInfo,
  run, sleep, spawn, stop, uniquePort, waitForPing, writeOutputs,
} from './lib/common.mjs';
import { parseBenchmarkText } from './lib/measure.mjs';
import { CFS_PERIOD_US, capCount, capProcess, removeCaps, runAlternating, runLoadgens, setCapQuota } from './lib/loadgen-run.mjs';
import { RESPOOL_BIN, respoolBuildLabel } from './lib/respool-build.mjs';
import { writeSection } from './lib/results-file.mjs';

const QUICK = envFlag('BENCH_QUICK');
const PIN = envFlag('BENCH_PIN');
const QUOTA = envInt('BENCH_NC_QUOTA', 2_000); // 2% of one core
const GENS = envInt('BENCH_NC_GENS', 3);
const CONNS = envInt('BENCH_NC_CONNS', 15); // GENS × CONNS = 45 clients
const DEPTH = envInt('BENCH_NC_DEPTH', 16);
const ROUNDS = envInt('BENCH_NC_ROUNDS', QUICK ? 1 : 5);
const RUN_S = envInt('BENCH_NC_RUN_S', QUICK ? 2 : 7);
const LAT_ROUNDS = envInt('BENCH_NC_LAT_ROUNDS', QUICK ? 1 : 5);
const LAT_N = envInt('BENCH_NC_LAT_N', QUICK ? 2_000 : 20_000);
const CLIENTS = envInt('BENCH_NC_CLIENTS', QUICK ? 100 : 1_000);
const BURSTS = envInt('BENCH_NC_BURSTS', QUICK ? 1 : 5);
const CYCLES = envInt('BENCH_NC_CYCLES', QUICK ? 1 : 9);
const SLOT_MS = envInt('BENCH_NC_SLOT_MS', QUICK ? 1000 : 2000);
const VALUE_BYTES = 1024;
const CACHE_KEYS = ['hot:*'];
const HOT_KEY = 'hot:bench';
const BURST_TAG = '{nc-burst}'; // the burst keys and their warm-up key share one slot, so one node
const COLD_PREFIX = 'bench:cold:'; // not matched by CACHE_KEYS
const COLD_KEYS = 10_000;
const SECTION = PIN ? 'near-cache-pinned' : 'near-cache';
const VALUE = 'v'.repeat(VALUE_BYTES);

const { startCluster } = await import(path.join(ROOT_DIR, 'build/harness/valkey-processes.js'));
const { NearCache } = await import(path.join(ROOT_DIR, 'dist/nearcache/near-cache.js'));
const { cachedRead, markWrite } = await import(path.join(ROOT_DIR, 'dist/handlers/near-cache.js'));
const { CommandFlag } = await import(path.join(ROOT_DIR, 'dist/commands/command-flags.js'));

// ---------------------------------------------------------------- processes

/** Every thread of `pid` onto `cpus` (taskset), when pinning. */
const pinTo = async (pid, cpus) => {
  if (PIN) await run('taskset', ['-a', '-p', '-c', String(cpus), String(pid)]);
};

async function startRespool(seed, name, config) {
  const port = await uniquePort();
  fs.mkdirSync(OUT_DIR, { recursive: true });
  const configFile = path.join(OUT_DIR, `near-cache-${name}.yaml`);
  fs.writeFileSync(configFile, config);
  const args = [RESPOOL_BIN, '--config', configFile, '--listen', `${HOST}:${port}`, '--upstream', `${HOST}:${seed.port}`, '--mode', 'cluster', '--log-level', 'warn'];
  const logFile = path.join(OUT_DIR, `near-cache-${name}.log`);
  fs.writeFileSync(logFile, '');
  const child = spawn(process.execPath, args, { logFile });
  await waitForPing(port, { child, what: `respool (${name})`, timeoutMs: 15_000 });
  await pinTo(child.pid, 0);
  return { name, port, child, cmd: `node ${args.join(' ')}   # ${JSON.stringify(config)}` };
}

/** RESPOOL CACHE STATS as { field: number } (a flat array in RESP2). */
async function cacheStats(port) {
  const c = await RespConn.connect(port);
  try {
    const r = await c.callT(3000, 'RESPOOL', 'CACHE', 'STATS');
    if (r instanceof ReplyError) throw new Error(`RESPOOL CACHE STATS: ${r.message}`);
    const pairs = r instanceof Map ? [...r.entries()] : Array.from({ length: r.length / 2 }, (_, i) => [r[2 * i], r[2 * i + 1]]);
    return Object.fromEntries(pairs.map(([k, v]) => [String(k), Number(v)]));
  } finally {
    c.close();
  }
}
const statsDelta = (a, b) => Object.fromEntries(Object.keys(b).map((k) => [k, b[k] - (a[k] ?? 0)]));

/** GETs the node has served since its start (INFO commandstats cmdstat_get calls). */
async function nodeGets(node) {
  const info = parseInfo(String(await node.call('INFO', 'commandstats')));
  return Number(/calls=(\d+)/.exec(String(info.cmdstat_get ?? ''))?.[1] ?? 0);
}

async function ownerOf(cluster, key) {
  const slot = Number(await cluster.call(cluster.nodes[0], 'CLUSTER', 'KEYSLOT', key));
  return cluster.primaryForSlot(slot);
}

// ---------------------------------------------------------------- part 3: the burst

/** `n` raw connections to `port`, each answering PING before the burst. */
async function openClients(port, n) {
  const clients = [];
  for (let i = 0; i < n; i += 100) { // in batches: the listen backlog is finite
    clients.push(...await Promise.all(Array.from({ length: Math.min(100, n - i) }, () => new Promise((resolve, reject) => {
      const socket = net.connect({ host: HOST, port }, () => resolve(client));
      const client = { socket, got: [], gotBytes: 0, want: 0, done: null };
      socket.setNoDelay(true);
      socket.on('data', (chunk) => {
        client.got.push(chunk);
        client.gotBytes += chunk.length;
        if (client.done && client.gotBytes >= client.want) client.done();
      });
      socket.once('error', reject);
    }))));
  }
  await exchange(clients, encodeCommand(['PING']), Buffer.from('+PONG\r\n'), 10_000);
  return clients;
}

/**
 * Write `request` to every client in one synchronous loop, wait for `expected` from each.
 * Returns { ok, writeMs (first write → last write), lastReplyMs (first write → last reply) }.
 */
async function exchange(clients, request, expected, timeoutMs) {
  const waits = clients.map((c) => {
    c.got = [];
    c.gotBytes = 0;
    c.want = expected.length;
    return new Promise((resolve) => (c.done = resolve));
  });
  const t0 = performance.now();
  for (const c of clients) c.socket.write(request);
  const writeMs = performance.now() - t0;
  let timer;
  await Promise.race([Promise.all(waits), new Promise((r) => (timer = setTimeout(r, timeoutMs)))]);
  clearTimeout(timer);
  const lastReplyMs = performance.now() - t0;
  let ok = 0;
  for (const c of clients) {
    c.done = null;
    if (Buffer.concat(c.got).equals(expected)) ok++;
  }
  return { ok, writeMs, lastReplyMs };
}

// ---------------------------------------------------------------- part 4: the calls in-process

/**
 * ns per GET of the calls a GET makes into the near cache (cachedRead, markWrite) on `keys`, with
 * a cache of nearCache.keys `patterns` ([]: not configured, as respool without nearCache), over a
 * stand-in session that has what those calls read. Median of 5 timings of 2,000,000 GETs.
 */
function cacheCallsNs(keys, patterns) {
  const cache = new NearCache({ keys: patterns, maxBytes: 64 * 2 ** 20, maxEntryBytes: 2 ** 20, maxAgeMs: 10_000 },
    { dedicated: null, topology: () => null, commandMs: () => 1000, log: null });
  const session = { ctx: { nearCache: cache }, state: { db: 0, protocol: 2, transaction: null, lane: null, cacheWrites: null, cacheMarks: null } };
  const spec = { flags: CommandFlag.READONLY };
  const reqs = keys.map((k) => ({ command: 'get', args: [Buffer.from('GET'), k], raw: Buffer.alloc(0), spec }));
  const time = () => {
    const n = 2_000_000;
    let taken = 0;
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < n; i++) {
      const req = reqs[i % reqs.length];
      markWrite(session, req, 'keyed');
      if (cachedRead(session, req, null, null)) taken++;
    }
    const ns = Number(process.hrtime.bigint() - t0) / n;
    if (taken !== 0) throw new Error('the cache took a read of a key it does not hold');
    return ns;
  };
  time(); // warm up
  return median([1, 2, 3, 4, 5].map(time));
}

// ---------------------------------------------------------------- main

const started = new Date();
const loadStart = fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
log(`near cache bench${QUICK ? ' (quick)' : ''}${PIN ? ' (pinned)' : ''}: part 1 ${ROUNDS} round(s) × 3 × ${RUN_S}s; part 4 ${CYCLES + 1} cycle(s) × 4 × ${SLOT_MS} ms; quota ${QUOTA}/${CFS_PERIOD_US}`);
const cluster = await startCluster({ primaries: 3, replicasPerPrimary: 0 });
const respools = [];
let burstClients = [];
try {
  const primaries = await cluster.primaries();
  for (const p of primaries) await pinTo(p.pid, 1);
  const seed = primaries[0];
  const on = await startRespool(seed, 'on', `nearCache:\n  keys: [${CACHE_KEYS.map((k) => `'${k}'`).join(', ')}]\n`);
  const off = await startRespool(seed, 'off', '');
  respools.push(on, off);
  const genCpus = PIN ? 1 : undefined;

  // Data, written through the respool without the cache.
  const conn = await RespConn.connect(off.port);
  if ((await conn.call('SET', HOT_KEY, VALUE)) !== 'OK') throw new Error('SET failed');
  for (let i = 0; i < COLD_KEYS; i += 500) {
    await Promise.all(Array.from({ length: Math.min(500, COLD_KEYS - i) }, (_, j) => conn.call('SET', `${COLD_PREFIX}${i + j}`, VALUE)));
  }
  conn.close();
  const hotNode = await ownerOf(cluster, HOT_KEY);
  const check = await RespConn.connect(on.port);
  for (let i = 0; i < 3; i++) if ((await check.call('GET', HOT_KEY)) !== VALUE) throw new Error('GET through the cache gave another value');
  check.close();
  const primed = await cacheStats(on.port);
  if (primed.entries < 1) throw new Error(`the cache holds nothing after reading ${HOT_KEY}: ${JSON.stringify(primed)}`);

  // ---- part 1: one hot key, nodes capped
  let capNote;
  try {
    for (const p of primaries) capProcess(p.pid, QUOTA);
    capNote = `each valkey-server in its own cgroup v1 with cpu.cfs_quota_us=${QUOTA} per cpu.cfs_period_us=${CFS_PERIOD_US} (${(QUOTA / CFS_PERIOD_US) * 100}% of one core)`;
  } catch (e) {
    removeCaps();
    capNote = `**not capped**: cgroup v1 cpu controller not writable here (${e.message}); the nodes ran uncapped`;
  }
  log(capNote);
  // The same load straight to the capped node, no respool: what a direct GET's p50 is there.
  const direct = { name: 'direct', port: hotNode.port, child: null };
  const hotLoad = (rp, seconds) => runLoadgens({
    port: rp.port, seconds, gens: GENS, conns: CONNS, depth: DEPTH, hotKey: HOT_KEY, hotShare: 1, coldPrefix: 'unused:', coldKeys: 1,
    pids: rp.child === null ? { node: hotNode.pid } : { respool: rp.child.pid, node: hotNode.pid }, cpus: genCpus,
  });
  if (!QUICK) for (const rp of [on, off, direct]) await hotLoad(rp, 2); // warm-up (JIT), not counted
  const hotRuns = [];
  const hotOrders = [[on, off, direct], [direct, off, on], [off, direct, on]];
  for (let round = 1; round <= ROUNDS; round++) {
    for (const rp of hotOrders[(round - 1) % hotOrders.length]) {
      const g0 = await nodeGets(hotNode);
      const s0 = rp === on ? await cacheStats(on.port) : null;
      const r = await hotLoad(rp, RUN_S);
      const nodeServed = (await nodeGets(hotNode)) - g0;
      const cache = s0 ? statsDelta(s0, await cacheStats(on.port)) : null;
      hotRuns.push({ round, condition: rp.name, ...r, nodeGets: nodeServed, cache });
      log(`round ${round} ${rp.name}: ${fmtInt(r.opsPerSec)} GET/s p50 ${fmt(r.p50)} ms p99 ${fmt(r.p99)} ms, node served ${fmtInt(nodeServed)} GETs, ` +
        `errors ${r.errors}, cpu ${Object.entries(r.cpu).map(([k, v]) => `${k}=${fmt(v, 0)}%`).join(' ')}`);
    }
  }

  // ---- part 2: one client's latency, nodes uncapped
  if (capCount()) setCapQuota(-1);
  const latTargets = [
    { name: 'direct to the node', port: hotNode.port },
    { name: 'respool, cached', port: on.port, rp: on },
    { name: 'respool, cache off', port: off.port },
  ];
  const benchmark = (args) => (PIN ? run('taskset', ['-c', '1', 'valkey-benchmark', ...args], { timeoutMs: 120_000 }) : run('valkey-benchmark', args, { timeoutMs: 120_000 }));
  const latArgs = (port, n) => ['-h', HOST, '-p', String(port), '-c', '1', '-P', '1', '-n', String(n), 'GET', HOT_KEY];
  for (const t of latTargets) await benchmark(latArgs(t.port, QUICK ? 500 : 3_000)); // warm-up
  const latRuns = [];
  for (let round = 1; round <= LAT_ROUNDS; round++) {
    for (let k = 0; k < latTargets.length; k++) {
      const t = latTargets[(k + round) % latTargets.length];
      const s0 = t.rp ? await cacheStats(t.port) : null;
      const res = await benchmark(latArgs(t.port, LAT_N));
      const parsed = parseBenchmarkText(res.out)[`GET ${HOT_KEY}`];
      if (!parsed?.p50Ms) throw new Error(`valkey-benchmark against ${t.name}: no result (${res.err.trim().slice(0, 300)})`);
      const hits = s0 ? (await cacheStats(t.port)).hits - s0.hits : null;
      latRuns.push({ round, target: t.name, p50Ms: parsed.p50Ms, p99Ms: parsed.p99Ms, avgMs: parsed.avgMs, rps: parsed.rps, cacheHits: hits });
      log(`latency round ${round} ${t.name}: p50 ${fmt(parsed.p50Ms, 3)} ms p99 ${fmt(parsed.p99Ms, 3)} ms${hits === null ? '' : ` (${fmtInt(hits)} cache hits of ${fmtInt(LAT_N)})`}`);
    }
  }

  // ---- part 3: many clients, one cold key, nodes uncapped
  const burst = await startRespool(seed, 'burst', `nearCache:\n  keys: [${CACHE_KEYS.map((k) => `'${k}'`).join(', ')}]\n`);
  respools.push(burst);
  const burstNode = await ownerOf(cluster, `hot:${BURST_TAG}:warm`);
  await burstNode.call('SET', `hot:${BURST_TAG}:warm`, VALUE);
  burstClients = await openClients(burst.port, CLIENTS);
  const expected = Buffer.from(`$${VALUE_BYTES}\r\n${VALUE}\r\n`);
  const burstRuns = [];
  for (let b = 0; b <= BURSTS; b++) {
    const key = `hot:${BURST_TAG}:cold:${b}`;
    await burstNode.call('SET', key, VALUE); // on the node directly: respool has never seen it
    if (b > 0) { // the tracking connection to the node open, as on an instance that has been running
      const c = await RespConn.connect(burst.port);
      await c.call('GET', `hot:${BURST_TAG}:warm`);
      c.close();
      await sleep(100);
    }
    const g0 = await nodeGets(burstNode);
    const s0 = await cacheStats(burst.port);
    const r = await exchange(burstClients, encodeCommand(['GET', key]), expected, 15_000);
    await sleep(50);
    const served = (await nodeGets(burstNode)) - g0;
    const d = statsDelta(s0, await cacheStats(burst.port));
    burstRuns.push({ burst: b, trackingOpen: b > 0, key, clients: CLIENTS, ...r, nodeGets: served, fills: d.fills, misses: d.misses, coalesced: d.coalesced, hits: d.hits, passedOn: d.passed_on });
    log(`burst ${b}${b === 0 ? ' (no tracking connection yet)' : ''}: ${r.ok}/${CLIENTS} right replies, written in ${fmt(r.writeMs)} ms, last reply ${fmt(r.lastReplyMs)} ms; ` +
      `node served ${served} GET(s); fills ${d.fills} coalesced ${d.coalesced} hits ${d.hits} passed on ${d.passed_on}`);
  }
  for (const c of burstClients.splice(0)) c.socket.destroy();

  // ---- part 4: keys the cache does not hold, configured vs not configured, nodes uncapped
  const off2 = await startRespool(seed, 'off-2', '');
  respools.push(off2);
  const cpuProcs = [
    { ...on, configured: true }, { ...off, configured: false }, { ...burst, configured: true }, { ...off2, configured: false },
  ];
  const schedule = [];
  for (let c = 0; c <= CYCLES; c++) schedule.push(...(c % 2 === 0 ? [0, 1, 2, 3] : [3, 2, 1, 0])); // cycle 0: warm-up
  const cacheBefore = await Promise.all([on, burst].map((r) => cacheStats(r.port)));
  log(`part 4: ${schedule.length} slots of ${SLOT_MS} ms over ${cpuProcs.map((p) => p.name).join(', ')}`);
  const alt = await runAlternating({
    ports: cpuProcs.map((p) => p.port), pids: cpuProcs.map((p) => p.child.pid), schedule, slotMs: SLOT_MS,
    gens: GENS, conns: CONNS, depth: DEPTH, hotShare: 0, coldPrefix: COLD_PREFIX, coldKeys: COLD_KEYS, cpus: genCpus,
  });
  const cacheAfter = await Promise.all([on, burst].map((r) => cacheStats(r.port)));
  const cacheDuringCpu = cacheAfter.map((a, i) => statsDelta(cacheBefore[i], a));
  const cycles = [];
  for (let c = 1; c <= CYCLES; c++) {
    const slots = alt.slots.slice(c * 4, c * 4 + 4);
    const us = (i) => slots.find((x) => x.port === i).cpuUsPerOp;
    const ops = (i) => slots.find((x) => x.port === i).ops;
    const cycle = {
      cycle: c, usPerGet: [0, 1, 2, 3].map(us), getsPerSec: [0, 1, 2, 3].map((i) => ops(i) / (SLOT_MS / 1000)),
      ratio: (us(0) + us(2)) / (us(1) + us(3)), aaConfigured: us(0) / us(2), aaNotConfigured: us(1) / us(3),
    };
    cycles.push(cycle);
    log(`cycle ${c}: µs CPU/GET ${cpuProcs.map((p, i) => `${p.name}=${fmt(cycle.usPerGet[i], 3)}`).join(' ')}; configured ÷ not ${fmt(cycle.ratio, 3)}, ` +
      `A/A ${on.name}÷${burst.name} ${fmt(cycle.aaConfigured, 3)} ${off.name}÷${off2.name} ${fmt(cycle.aaNotConfigured, 3)}`);
  }
  const keyBufs = Array.from({ length: COLD_KEYS }, (_, i) => Buffer.from(`${COLD_PREFIX}${i}`));
  let calls;
  try {
    const ns = [];
    for (let k = 0; k < 3; k++) ns.push({ configured: cacheCallsNs(keyBufs, CACHE_KEYS), notConfigured: cacheCallsNs(keyBufs, []) });
    calls = { configuredNs: median(ns.map((x) => x.configured)), notConfiguredNs: median(ns.map((x) => x.notConfigured)) };
    calls.addedNs = calls.configuredNs - calls.notConfiguredNs;
    log(`cachedRead + markWrite per GET of a key not held: ${fmt(calls.configuredNs)} ns configured, ${fmt(calls.notConfiguredNs)} ns not configured`);
  } catch (e) {
    calls = { error: e.message };
    log(`could not time the cache's calls in-process: ${e.message}`);
  }

  // ---------------------------------------------------------------- report
  const mm = (xs, f) => `${f(median(xs))} (${f(Math.min(...xs))}–${f(Math.max(...xs))})`;
  const f0 = (x) => fmtInt(x);
  const f2 = (x) => fmt(x);
  const f3 = (x) => fmt(x, 3);
  const byRound = (runs, cond, round) => runs.find((r) => r.condition === cond && r.round === round);
  const rounds = (n) => [...Array(n).keys()].map((i) => i + 1);

  const hotOf = (c) => hotRuns.filter((r) => r.condition === c);
  const hotRatios = rounds(ROUNDS).map((i) => byRound(hotRuns, 'on', i).opsPerSec / byRound(hotRuns, 'off', i).opsPerSec);
  const hotRatio = median(hotRatios);
  const genNames = Array.from({ length: GENS }, (_, i) => `loadgen${i + 1}`);
  const hotP50Ratios = rounds(ROUNDS).map((i) => byRound(hotRuns, 'on', i).p50 / byRound(hotRuns, 'direct', i).p50);
  const hotRows = ['on', 'off', 'direct'].map((c) => {
    const rs = hotOf(c);
    return [c === 'direct' ? 'direct to the node (no respool)' : `cache ${c}`, mm(rs.map((r) => r.opsPerSec), f0), mm(rs.map((r) => r.p50), f2), mm(rs.map((r) => r.p99), f2),
      mm(rs.map((r) => r.nodeGets / r.ops), (x) => `${fmt(x * 100, 2)}%`), `${fmt(median(rs.map((r) => r.cpu.node)), 1)}%`,
      c === 'direct' ? '—' : `${fmt(median(rs.map((r) => r.cpu.respool)), 0)}%`, genNames.map((g) => `${fmt(median(rs.map((r) => r.cpu[g])), 0)}%`).join(' / '),
      fmtInt(rs.reduce((s, r) => s + r.errors, 0))];
  });

  const latOf = (t) => latRuns.filter((r) => r.target === t);
  const latRatios = rounds(LAT_ROUNDS).map((i) => latRuns.find((r) => r.round === i && r.target === 'respool, cached').p50Ms / latRuns.find((r) => r.round === i && r.target === 'direct to the node').p50Ms);
  const latRows = latTargets.map((t) => {
    const rs = latOf(t.name);
    return [t.name, mm(rs.map((r) => r.p50Ms * 1000), f0), mm(rs.map((r) => r.p99Ms * 1000), f0), mm(rs.map((r) => r.avgMs * 1000), f0), mm(rs.map((r) => r.rps), f0),
      t.rp ? `${fmtInt(median(rs.map((r) => r.cacheHits)))} of ${fmtInt(LAT_N)}` : '—'];
  });
  const cachedP50 = median(latOf('respool, cached').map((r) => r.p50Ms)) * 1000;
  const directP50 = median(latOf('direct to the node').map((r) => r.p50Ms)) * 1000;
  const uncachedP50 = median(latOf('respool, cache off').map((r) => r.p50Ms)) * 1000;

  const warmBursts = burstRuns.filter((r) => r.trackingOpen);
  const burstRows = burstRuns.map((r) => [r.burst === 0 ? '0 (no tracking connection yet)' : String(r.burst), `${fmtInt(r.ok)} / ${fmtInt(r.clients)}`, fmtInt(r.nodeGets),
    fmtInt(r.fills), fmtInt(r.coalesced), fmtInt(r.hits), fmtInt(r.passedOn), fmt(r.writeMs), fmt(r.lastReplyMs)]);

  const cpuRatio = median(cycles.map((c) => c.ratio));
  const aaCfg = median(cycles.map((c) => c.aaConfigured));
  const aaNot = median(cycles.map((c) => c.aaNotConfigured));
  const cpuRows = cpuProcs.map((p, i) => [p.name, p.configured ? `keys: ${CACHE_KEYS.join(', ')}` : 'not configured',
    mm(cycles.map((c) => c.getsPerSec[i]), f0), mm(cycles.map((c) => c.usPerGet[i]), f3)]);
  const notCfgUs = median(cycles.map((c) => (c.usPerGet[1] + c.usPerGet[3]) / 2));
  const pct = (x) => `${x >= 1 ? '+' : ''}${fmt((x - 1) * 100, 1)}%`;
  const callsLine = calls.error !== undefined
    ? `- The cache's calls could not be timed in-process: ${calls.error}.`
    : `- The two calls a GET makes into the cache (handlers/near-cache.ts cachedRead + markWrite, dist/), timed in-process over the same ${fmtInt(COLD_KEYS)} keys: ` +
      `**${fmt(calls.configuredNs, 1)} ns configured vs ${fmt(calls.notConfiguredNs, 1)} ns not configured: +${fmt(calls.addedNs, 1)} ns per GET, ` +
      `${fmt((calls.addedNs / (notCfgUs * 1000)) * 100, 2)}% of the ${fmt(notCfgUs, 3)} µs** a not-configured respool spent per GET here (median of 3 × 5 timings of 2,000,000 GETs).`;
  const cmdLine = `${PIN ? 'BENCH_PIN=1 ' : ''}${QUICK ? 'BENCH_QUICK=1 ' : ''}npm run bench:near-cache`;
  const md = [
    `## Near cache: a hot key answered from respool's memory (issue 32)${PIN ? ', pinned' : ', unpinned'}`,
    '',
    `**Rerun:** \`${cmdLine}\` (= npm run build && npm run build:harness && node bench/near-cache.mjs; ` +
      `${PIN ? 'pinned: every respool on core 0, the valkey-servers, load generators and valkey-benchmark on core 1' : 'unpinned, as a user runs it; `BENCH_PIN=1` pins every respool to core 0 and the rest to core 1'}` +
      `${QUICK ? '; **BENCH_QUICK=1 smoke run — not for comparison**' : ''}). ` +
      `Measured ${started.toISOString().slice(0, 16)}Z, ${((Date.now() - started.getTime()) / 1000).toFixed(0)} s, on this 2-core machine shared with other work ` +
      `(load average ${loadStart} before, ${fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')} after). respool build: ${respoolBuildLabel()}.`,
    '',
    `Setup: 3 primaries, no replicas, all on 127.0.0.1; ${VALUE_BYTES}-byte values. respool processes (each idle but when measured; on and off in parts 1, 2 and 4, burst in parts 3 and 4, off-2 in part 4):`,
    '',
    ...[on, off, burst, off2].map((r) => `- ${r.name}: \`${r.cmd}\``),
    '',
    `### 1. One hot key, nodes capped: cache on vs off, and straight to the node`,
    '',
    `${capNote}. Every GET on \`${HOT_KEY}\`: ${GENS} load-generator processes (bench/lib/hotkeys-loadgen.mjs, raw RESP) × ${CONNS} connections = ` +
      `${GENS * CONNS} clients × pipeline ${DEPTH}; ${ROUNDS} round(s) of ${RUN_S} s per condition, order alternating per round. ` +
      'Medians over rounds (lowest–highest round). "node GETs ÷ client GETs": GETs the hot key\'s node served (INFO commandstats) ÷ GETs the clients got answered. ' +
      'CPU is % of one core (utime+stime, /proc/<pid>/stat).',
    '',
    mdTable(['respool', 'GET/s', 'p50 ms', 'p99 ms', 'node GETs ÷ client GETs', 'node CPU', 'respool CPU', `${genNames.join(' / ')} CPU`, 'errors'], hotRows),
    '',
    `- **cache on ÷ cache off: ${fmt(hotRatio, 1)}×** GET/s (median of the per-round ratios; per round: ${hotRatios.map((x) => fmt(x, 1)).join(', ')}). Target ≥ 10×.`,
    `- **a cached GET's p50 ÷ a direct GET's p50 to the capped node, same load: ${fmt(median(hotP50Ratios), 2)}×** (median of the per-round ratios; per round: ${hotP50Ratios.map((x) => fmt(x, 2)).join(', ')}). Target ≤ 1.`,
    '',
    `### 2. One client's GET latency (nodes uncapped)`,
    '',
    `valkey-benchmark -c 1 -P 1 -n ${fmtInt(LAT_N)} GET ${HOT_KEY}, ${LAT_ROUNDS} round(s), targets in an order rotated per round; the nodes are **not** capped here. ` +
      'µs; medians over rounds (lowest–highest round).',
    '',
    mdTable(['target', 'p50 µs', 'p99 µs', 'mean µs', 'requests/s', 'cache hits'], latRows),
    '',
    `- **cached GET p50 ${fmt(cachedP50, 0)} µs vs direct GET p50 ${fmt(directP50, 0)} µs** (${fmt(median(latRatios), 2)}× direct, median of the per-round ratios: ${latRatios.map((x) => fmt(x, 2)).join(', ')}); through respool without the cache ${fmt(uncachedP50, 0)} µs. ` +
      'valkey-benchmark\'s p50 has ~1 µs steps at this scale; the client\'s own time per request is in all three.',
    '',
    `### 3. ${fmtInt(CLIENTS)} clients read one cold key at once (nodes uncapped)`,
    '',
    `${fmtInt(CLIENTS)} connections to a fresh respool (cache on), opened and PINGed first, from this process; each burst writes GET of a key never read through respool ` +
      `to every connection in one loop ("written in") and waits for every reply. "node GETs" is the change in the key's node's INFO commandstats cmdstat_get over the burst ` +
      '(nothing else reads that node meanwhile); the other columns are the change in RESPOOL CACHE STATS. Burst 0 meets the instance before it has a tracking connection ' +
      'to that node; before each later burst a GET of another cached key on the same node (same hash tag) has opened it.',
    '',
    mdTable(['burst', 'right replies', 'node GETs', 'fills', 'coalesced', 'hits', 'passed on', 'written in ms', 'last reply ms'], burstRows),
    '',
    `- **node reads per burst with the tracking connection open: ${warmBursts.map((r) => r.nodeGets).join(', ')}** (target 1); ` +
      `on a fresh instance (burst 0): ${burstRuns[0].nodeGets}.`,
    '',
    `### 4. What the cache costs keys it does not hold (nodes uncapped)`,
    '',
    `GETs uniform over ${fmtInt(COLD_KEYS)} keys \`${COLD_PREFIX}N\` (none matches nearCache.keys), the same ${GENS * CONNS} clients × pipeline ${DEPTH}, switched between ` +
      `four respool processes (two configured, two not) every ${fmtInt(SLOT_MS)} ms, cycles of four slots with the order reversed every other cycle; ` +
      `a warm-up cycle, then ${CYCLES} cycle(s). CPU µs per GET of a slot: the process's CPU time (/proc/<pid>/task/*/schedstat) from the slot's start to its next slot's ÷ the GETs sent in the slot. ` +
      'Medians over cycles (lowest–highest cycle).',
    '',
    mdTable(['respool', 'nearCache', 'GET/s while measured', 'respool CPU µs / GET'], cpuRows),
    '',
    `- **configured ÷ not configured: ${fmt(cpuRatio, 3)}× CPU per GET (${pct(cpuRatio)})**, median over cycles of (mean of the two configured ÷ mean of the two not configured); ` +
      `per cycle: ${cycles.map((c) => fmt(c.ratio, 3)).join(', ')}. Target ≤ 2%.`,
    `- Two processes with the same config, same cycles (A/A, the noise floor of the line above): ${on.name} ÷ ${burst.name} ${fmt(aaCfg, 3)}× (per cycle ${cycles.map((c) => fmt(c.aaConfigured, 3)).join(', ')}); ` +
      `${off.name} ÷ ${off2.name} ${fmt(aaNot, 3)}× (per cycle ${cycles.map((c) => fmt(c.aaNotConfigured, 3)).join(', ')}).`,
    callsLine,
    `- The configured processes' caches stayed out of the way over part 4: ${cacheDuringCpu.map((d) => `${fmtInt(d.hits)} hits, ${fmtInt(d.fills)} fills`).join('; ')}.`,
    '',
    `Raw numbers: bench/out/${SECTION}.json.`,
  ].join('\n');
  writeOutputs(SECTION, {
    quick: QUICK, pinned: PIN, capNote, config: { QUOTA, GENS, CONNS, DEPTH, ROUNDS, RUN_S, LAT_ROUNDS, LAT_N, CLIENTS, BURSTS, CYCLES, SLOT_MS, CACHE_KEYS },
    respools: [on, off, burst, off2].map((r) => ({ name: r.name, cmd: r.cmd })),
    hotRuns, hotRatios, hotRatio, hotP50Ratios, latRuns, latRatios, burstRuns, cpuSlots: alt.slots, cpuProcs: cpuProcs.map((p) => p.name), cycles, cpuRatio, aaCfg, aaNot, calls,
  }, md);
  writeSection(SECTION, md);
  console.log(md);
} finally {
  for (const c of burstClients) c.socket.destroy();
  for (const r of respools) await stop(r.child);
  removeCaps();
  await cluster.stop();
}
