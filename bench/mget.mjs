// Cross-slot MGET through respool: MGET of 10 and 100 keys spread over all 16,384 slots, through
// respool in front of a 3-primary cluster, against Valkey answering the same number of keys
// directly on one node that holds every slot.
//
//   npm run bench:mget          (= npm run build && npm run build:harness && node bench/mget.mjs)
//
// Env: BENCH_QUICK=1 (smoke run, ~20 s: 1 round of 2 s per run), BENCH_ROUNDS (3),
//      BENCH_CLIENTS (50 concurrent clients per target, each pipeline 1),
//      BENCH_MGET_SIZES ("10,100": keys per MGET), BENCH_MGET_SECONDS (8 s per measured run),
//      BENCH_MGET_WARMUP_SECONDS (1 s per target and size before round 1, not recorded),
//      BENCH_MGET_KEYS_PER_SLOT (2: the key pool holds this many keys in every one of the 16,384
//      slots), BENCH_MGET_CHECK_EVERY (every 25th MGET of each client is checked),
//      RESPOOL_BENCH_BIN (another checkout's bin/respool.js; the section names the build it ran).
//
// Targets (both driven by the same Node driver, iovalkey `Valkey` clients, one MGET in flight per
// client, K distinct keys drawn at random from the target's pool for every MGET):
//  A "respool":  respool (--mode cluster) in front of 3 primaries (no replicas). The pool's key
//                names are random without hash tags, KEYS_PER_SLOT of them in every slot, so an
//                MGET of K keys touches ~K slots and respool splits it into one part per slot,
//                sends the parts to the 3 nodes and merges the replies in key order.
//  B "direct":   one valkey-server in cluster mode owning all 16,384 slots, sent MGETs straight.
//                Valkey refuses an MGET whose keys are in different slots (CROSSSLOT) even when
//                it owns them all, so this side's pool is the same names behind one hash tag
//                (`{t}…`, all in slot 15,891): the same number of keys per MGET, answered by one
//                node in one call — what a single node can do, not the same MGET.
// Rounds: A then B for each size, ROUNDS times (A, B, A, B, …); medians over rounds plus each
// round's value. Per run: MGET/s, keys/s, p50/p99 latency (timed in the driver per MGET, from the
// call to the parsed reply), MGET calls the nodes executed (INFO commandstats, after CONFIG
// RESETSTAT) per client MGET, CPU (utime+stime from /proc/<pid>/stat) of respool, of the nodes and
// of the driver process per MGET. Correctness: every CHECK_EVERY-th reply of each client (and the
// first) must be exactly the values written, in key order.
// Everything on 127.0.0.1, started here and stopped at the end.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  HOST, OUT_DIR, ROOT_DIR, RespConn, envFlag, envInt, fmt, fmtInt, log, mdTable, median, parseInfo, percentile,
  shellLine, sleep, spawn, stop, uniquePort, waitForPing, writeOutputs,
} from './lib/common.mjs';
import { RESULTS_FILE, writeSection } from './lib/results-file.mjs';
import { RESPOOL_BIN, respoolBuildLabel } from './lib/respool-build.mjs';

const QUICK = envFlag('BENCH_QUICK');
const ROUNDS = envInt('BENCH_ROUNDS', QUICK ? 1 : 3);
const CLIENTS = envInt('BENCH_CLIENTS', 50);
const SIZES = (process.env.BENCH_MGET_SIZES || '10,100').split(',').map((s) => Number(s.trim())).filter((n) => n > 0);
const RUN_S = envInt('BENCH_MGET_SECONDS', QUICK ? 2 : 8);
const WARMUP_S = envInt('BENCH_MGET_WARMUP_SECONDS', QUICK ? 0.3 : 1);
const KEYS_PER_SLOT = envInt('BENCH_MGET_KEYS_PER_SLOT', QUICK ? 1 : 2);
const CHECK_EVERY = envInt('BENCH_MGET_CHECK_EVERY', 25);
const VALUE_BYTES = 100;
const SLOTS = 16384;
const POOL = 2; // respool --connections-per-node (its default)
const HASH_TAG = '{t}';
const MAX_ERRORS_PER_RUN = 1000;

const { startCluster } = await import(path.join(ROOT_DIR, 'build/harness/valkey-processes.js'));
const calculateSlot = (await import('cluster-key-slot')).default;
const { Valkey } = await import('iovalkey');

const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
const loadavg = () => fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

/** utime + stime of a process, in seconds (NaN when it is gone). */
function cpuSeconds(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / CLK_TCK; // fields 14 and 15 of proc(5)
  } catch {
    return NaN;
  }
}
const cpuSum = (pids) => pids.reduce((s, p) => s + cpuSeconds(p), 0);

/** "lo–hi" over rounds (or one value). */
function span(xs, f) {
  const a = xs.filter(Number.isFinite);
  if (!a.length) return '—';
  const lo = Math.min(...a);
  const hi = Math.max(...a);
  return lo === hi ? f(lo) : `${f(lo)}–${f(hi)}`;
}
const fmtK = (x) => (Number.isFinite(x) ? (x >= 100_000 ? `${fmt(x / 1000, 0)}k` : `${fmt(x / 1000, 1)}k`) : '—');

// ---------------------------------------------------------------- the key pool

/**
 * KEYS_PER_SLOT random key names (no hash tag) in every one of the 16,384 slots: random names are
 * drawn and kept while their slot still has room, so every MGET's keys are uniformly spread over
 * all slots. Returns the names and each one's value (VALUE_BYTES, starting with its index).
 */
function makePool() {
  const perSlot = new Uint8Array(SLOTS);
  const names = [];
  const want = SLOTS * KEYS_PER_SLOT;
  let drawn = 0;
  while (names.length < want) {
    const name = `mget:${Math.random().toString(36).slice(2, 10)}${Math.random().toString(36).slice(2, 6)}`;
    drawn++;
    if (name.includes('{')) continue;
    const s = calculateSlot(name);
    if (perSlot[s] >= KEYS_PER_SLOT) continue;
    perSlot[s]++;
    names.push(name);
  }
  // Shuffle, so a run of neighbouring indexes is not a run of slots in order of filling.
  for (let i = names.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [names[i], names[j]] = [names[j], names[i]];
  }
  const values = names.map((_, i) => {
    const head = `v${i}:`;
    return head + 'x'.repeat(VALUE_BYTES - head.length);
  });
  return { names, values, drawn };
}

/** Write key → value with pipelined SETs straight to `connOf(key)` (never through respool). */
async function load(keys, values, connOf) {
  const BATCH = 2000;
  for (let i = 0; i < keys.length; i += BATCH) {
    const calls = [];
    for (let j = i; j < Math.min(keys.length, i + BATCH); j++) calls.push(connOf(keys[j]).call('SET', keys[j], values[j]));
    const replies = await Promise.all(calls);
    const bad = replies.find((r) => r !== 'OK');
    if (bad !== undefined) throw new Error(`loading the key pool: SET answered ${JSON.stringify(bad?.message ?? bad)}`);
  }
}

// ---------------------------------------------------------------- the driver

/** CLIENTS iovalkey clients connected to `port`. */
async function connectClients(port) {
  const clients = [];
  for (let i = 0; i < CLIENTS; i++) {
    const c = new Valkey({
      host: HOST, port, lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0,
      retryStrategy: () => null, commandTimeout: 10_000,
    });
    c.on('error', () => {}); // errors surface on the calls
    await c.connect();
    clients.push(c);
  }
  return clients;
}

/** K distinct random indexes into a pool of `n`. */
function pick(k, n) {
  const out = new Array(k);
  const seen = new Set();
  for (let i = 0; i < k; ) {
    const x = Math.floor(Math.random() * n);
    if (seen.has(x)) continue;
    seen.add(x);
    out[i++] = x;
  }
  return out;
}

/**
 * Every client loops MGET (one in flight) over K random keys of `pool` until `seconds` have
 * passed; the run ends when the last client's last MGET is answered.
 */
async function drive(clients, pool, k, seconds, { check = true } = {}) {
  const n = pool.keys.length;
  const lat = [];
  const st = { mgets: 0, errors: 0, errorSamples: [], checked: 0, checkedKeys: 0, mismatched: 0, mismatchSamples: [] };
  const t0 = performance.now();
  const deadline = t0 + seconds * 1000;
  await Promise.all(clients.map(async (c) => {
    let mine = 0;
    while (performance.now() < deadline && st.errors < MAX_ERRORS_PER_RUN) {
      const idx = pick(k, n);
      const keys = idx.map((i) => pool.keys[i]);
      const a = performance.now();
      let reply;
      try {
        reply = await c.mget(keys);
      } catch (e) {
        st.errors++;
        if (st.errorSamples.length < 5) st.errorSamples.push(String(e.message).slice(0, 200));
        continue;
      }
      lat.push(performance.now() - a);
      st.mgets++;
      if (check && mine++ % CHECK_EVERY === 0) {
        st.checked++;
        st.checkedKeys += k;
        const ok = Array.isArray(reply) && reply.length === k && idx.every((i, j) => reply[j] === pool.values[i]);
        if (!ok) {
          st.mismatched++;
          if (st.mismatchSamples.length < 3) {
            const j = Array.isArray(reply) ? idx.findIndex((i, jj) => reply[jj] !== pool.values[i]) : -1;
            st.mismatchSamples.push(Array.isArray(reply)
              ? `reply of ${reply.length} for ${k} keys; first wrong at position ${j}: key ${keys[j]} → ${JSON.stringify(String(reply[j]).slice(0, 24))}, wrote ${JSON.stringify(pool.values[idx[j]]?.slice(0, 24))}`
              : `reply ${JSON.stringify(reply).slice(0, 80)}`);
          }
        }
      }
    }
  }));
  const seconds_ = (performance.now() - t0) / 1000;
  return {
    ...st, seconds: seconds_, mgetPerS: st.mgets / seconds_, keysPerS: (st.mgets * k) / seconds_,
    p50: percentile(lat, 50), p90: percentile(lat, 90), p99: percentile(lat, 99), max: lat.reduce((m, x) => (x > m ? x : m), -Infinity),
    mean: lat.length ? lat.reduce((s, x) => s + x, 0) / lat.length : NaN,
  };
}

// ---------------------------------------------------------------- the bench

async function main() {
  const started = new Date();
  const result = {
    bench: 'mget', started: started.toISOString(), loadavgStart: loadavg(), quick: QUICK,
    config: { rounds: ROUNDS, clients: CLIENTS, sizes: SIZES, runSeconds: RUN_S, warmupSeconds: WARMUP_S, keysPerSlot: KEYS_PER_SLOT,
      checkEvery: CHECK_EVERY, valueBytes: VALUE_BYTES, respoolConnectionsPerNode: POOL },
    machine: machine(), rounds: [], errors: [],
  };
  const pool = makePool();
  const directPool = { keys: pool.names.map((k) => `${HASH_TAG}${k}`), values: pool.values };
  const respoolPool = { keys: pool.names, values: pool.values };
  result.pool = { keys: pool.names.length, slotsCovered: SLOTS, drawn: pool.drawn, directSlot: calculateSlot(directPool.keys[0]) };
  log(`key pool: ${pool.names.length} keys, ${KEYS_PER_SLOT} in each of the ${SLOTS} slots (${pool.drawn} names drawn)`);

  let cluster;
  let single;
  let respool;
  const conns = [];
  const clients = { respool: [], direct: [] };
  try {
    [cluster, single] = await Promise.all([
      startCluster({ primaries: 3, replicasPerPrimary: 0 }),
      startCluster({ primaries: 1, replicasPerPrimary: 0 }),
    ]);
    const primaries = await cluster.primaries();
    const shards = await cluster.shards();
    const [singleNode] = await single.primaries();
    const singleShards = await single.shards();
    const ownedBySingle = singleShards[0].slots.reduce((s, [a, b]) => s + b - a + 1, 0);
    if (ownedBySingle !== SLOTS) throw new Error(`the one-node cluster owns ${ownedBySingle} slots, not ${SLOTS}`);
    result.layout = {
      cluster: shards.map((s) => ({ port: s.primary.port, slots: s.slots })),
      single: { port: singleNode.port, slots: singleShards[0].slots },
      nodeCmd: `valkey-server --port PORT --bind 127.0.0.1 --cluster-enabled yes --save '' --appendonly no … (bench harness, build/harness/valkey-processes.js)`,
    };

    // respool in front of the 3 primaries.
    const port = await uniquePort();
    const args = [RESPOOL_BIN, '--listen', `${HOST}:${port}`, '--upstream', primaries.map((n) => `${HOST}:${n.port}`).join(','),
      '--mode', 'cluster', '--log-level', 'warn', '--connections-per-node', String(POOL)];
    const logFile = path.join(OUT_DIR, 'respool-mget.log');
    fs.mkdirSync(OUT_DIR, { recursive: true });
    fs.writeFileSync(logFile, '');
    respool = spawn(process.execPath, args, { logFile });
    await waitForPing(port, { child: respool, what: 'respool', timeoutMs: 15_000 });
    result.respool = { cmd: shellLine('node', args), build: respoolBuildLabel(), pid: respool.pid };
    log(`cluster ${primaries.map((n) => n.port).join(',')}; one-node cluster ${singleNode.port}; respool on ${port} (pid ${respool.pid})`);

    // Load both pools straight into the nodes.
    const nodeOfSlot = new Array(SLOTS);
    for (const s of shards) for (const [a, b] of s.slots) for (let i = a; i <= b; i++) nodeOfSlot[i] = s.primary.port;
    const connByPort = new Map();
    for (const n of [...primaries, singleNode]) {
      const c = await RespConn.connect(n.port);
      conns.push(c);
      connByPort.set(n.port, c);
    }
    const t0 = performance.now();
    await load(respoolPool.keys, respoolPool.values, (k) => connByPort.get(nodeOfSlot[calculateSlot(k)]));
    await load(directPool.keys, directPool.values, () => connByPort.get(singleNode.port));
    const dbsize = {};
    for (const n of [...primaries, singleNode]) dbsize[n.port] = await connByPort.get(n.port).callT(5000, 'DBSIZE');
    result.dbsize = dbsize;
    log(`loaded ${pool.names.length} keys into each side in ${fmtInt(performance.now() - t0)} ms; DBSIZE ${JSON.stringify(dbsize)}`);

    // Confirm what each side does with a cross-slot MGET before measuring.
    const crossSlot = respoolPool.keys.slice(0, 10);
    const directCross = await connByPort.get(singleNode.port).callT(5000, 'MGET', ...crossSlot);
    result.directCrossSlotReply = directCross?.message ?? JSON.stringify(directCross).slice(0, 100);
    log(`direct, cross-slot MGET of 10 keys on the node owning every slot → ${result.directCrossSlotReply}`);

    clients.respool = await connectClients(port);
    clients.direct = await connectClients(singleNode.port);
    const targets = {
      respool: { clients: clients.respool, pool: respoolPool, nodes: primaries, respoolPid: respool.pid },
      direct: { clients: clients.direct, pool: directPool, nodes: [singleNode], respoolPid: null },
    };

    // Warm-up (JIT, respool's topology, connection buffers): not recorded.
    for (const k of SIZES) {
      for (const name of ['respool', 'direct']) {
        const w = await drive(targets[name].clients, targets[name].pool, k, WARMUP_S);
        log(`warm-up ${name} K=${k}: ${fmtInt(w.mgetPerS)} MGET/s, errors ${w.errors}, mismatched ${w.mismatched}/${w.checked}`);
        if (w.errors || w.mismatched) result.errors.push(`warm-up ${name} K=${k}: ${w.errors} errors ${w.errorSamples.join('; ')}; ${w.mismatched} mismatched ${w.mismatchSamples.join('; ')}`);
      }
    }

    const measure = async (name, k) => {
      const t = targets[name];
      await Promise.all(t.nodes.map((n) => connByPort.get(n.port).callT(5000, 'CONFIG', 'RESETSTAT')));
      const load0 = loadavg();
      const nodePids = t.nodes.map((n) => n.pid);
      const cpu0 = { nodes: cpuSum(nodePids), respool: t.respoolPid ? cpuSeconds(t.respoolPid) : NaN, driver: process.cpuUsage() };
      const r = await drive(t.clients, t.pool, k, RUN_S);
      const cpu1 = { nodes: cpuSum(nodePids), respool: t.respoolPid ? cpuSeconds(t.respoolPid) : NaN, driver: process.cpuUsage(cpu0.driver) };
      const infos = await Promise.all(t.nodes.map((n) => connByPort.get(n.port).callT(5000, 'INFO', 'commandstats')));
      const mgetCalls = infos.reduce((s, text) => {
        const m = /cmdstat_mget:calls=(\d+)/.exec(text);
        return s + (m ? Number(m[1]) : 0);
      }, 0);
      const failedCalls = infos.reduce((s, text) => {
        const m = /cmdstat_mget:calls=\d+,[^\r\n]*rejected_calls=(\d+),failed_calls=(\d+)/.exec(text);
        return s + (m ? Number(m[1]) + Number(m[2]) : 0);
      }, 0);
      const per = (sec) => (sec * 1e6) / r.mgets;
      const out = {
        target: name, k, ...r, loadavg: load0,
        upstreamMgetCalls: mgetCalls, upstreamFailedCalls: failedCalls, partsPerMget: mgetCalls / r.mgets,
        cpuUsPerMget: {
          respool: per(cpu1.respool - cpu0.respool),
          nodes: per(cpu1.nodes - cpu0.nodes),
          driver: per((cpu1.driver.user + cpu1.driver.system) / 1e6),
        },
        cpuPercent: {
          respool: ((cpu1.respool - cpu0.respool) / r.seconds) * 100,
          nodes: ((cpu1.nodes - cpu0.nodes) / r.seconds) * 100,
          driver: ((cpu1.driver.user + cpu1.driver.system) / 1e6 / r.seconds) * 100,
        },
      };
      log(`  ${name.padEnd(7)} K=${String(k).padStart(3)}: ${fmtInt(out.mgetPerS)} MGET/s (${fmtInt(out.keysPerS)} keys/s), p50 ${fmt(out.p50, 3)} ms, ` +
        `p99 ${fmt(out.p99, 3)} ms; node MGET calls per MGET ${fmt(out.partsPerMget, 2)}; CPU µs/MGET respool ${fmt(out.cpuUsPerMget.respool, 1)} ` +
        `nodes ${fmt(out.cpuUsPerMget.nodes, 1)} driver ${fmt(out.cpuUsPerMget.driver, 1)}; checked ${out.checked}, mismatched ${out.mismatched}, errors ${out.errors}`);
      if (r.errors) result.errors.push(`${name} K=${k}: ${r.errors} errors (${r.errorSamples.join('; ')})`);
      if (r.mismatched) result.errors.push(`${name} K=${k}: ${r.mismatched} mismatched replies (${r.mismatchSamples.join('; ')})`);
      if (respool.exitCode !== null || respool.signalCode !== null) throw new Error('respool exited');
      return out;
    };

    for (let round = 1; round <= ROUNDS; round++) {
      log(`round ${round}/${ROUNDS} (load ${loadavg()})`);
      const runs = [];
      for (const k of SIZES) for (const name of ['respool', 'direct']) runs.push(await measure(name, k));
      result.rounds.push({ round, runs });
    }
  } finally {
    for (const c of [...clients.respool, ...clients.direct]) c.disconnect();
    for (const c of conns) c.close();
    await stop(respool);
    await Promise.all([cluster?.stop(), single?.stop()]);
  }
  result.finished = new Date().toISOString();
  result.loadavgEnd = loadavg();
  report(result);
}

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
  };
}

// ---------------------------------------------------------------- report

function report(result) {
  const R = result.rounds;
  const runsOf = (name, k) => R.map((r) => r.runs.find((x) => x.target === name && x.k === k));
  const med = (xs, f) => median(xs.map(f));
  const perRound = (xs, f, g) => xs.map(f).map(g).join(' / ');
  const total = (f) => R.reduce((s, r) => s + r.runs.reduce((a, x) => a + f(x), 0), 0);
  const m = result.machine;

  const summary = {};
  const rows = [];
  const cpuRows = [];
  const ratioRows = [];
  for (const k of SIZES) {
    const A = runsOf('respool', k);
    const B = runsOf('direct', k);
    for (const [name, xs, what] of [
      ['respool', A, `${k} random keys (~${fmt(SLOTS * (1 - (1 - 1 / SLOTS) ** k), 1)} slots) → respool → 3 primaries`],
      ['direct', B, `${k} keys in one slot (\`${HASH_TAG}\` tag) → the node owning every slot`],
    ]) {
      rows.push([
        k, name, what,
        fmtInt(med(xs, (x) => x.mgetPerS)), perRound(xs, (x) => x.mgetPerS, fmtInt),
        fmtInt(med(xs, (x) => x.keysPerS)),
        fmt(med(xs, (x) => x.p50), 2), perRound(xs, (x) => x.p50, (v) => fmt(v, 2)),
        fmt(med(xs, (x) => x.p99), 2), perRound(xs, (x) => x.p99, (v) => fmt(v, 2)),
      ]);
      const isA = name === 'respool';
      cpuRows.push([
        k, name,
        fmt(med(xs, (x) => x.partsPerMget), 2),
        isA ? fmt(med(xs, (x) => x.cpuUsPerMget.respool), 1) : '—',
        isA ? perRound(xs, (x) => x.cpuUsPerMget.respool, (v) => fmt(v, 0)) : '—',
        isA ? fmt(med(xs, (x) => x.cpuUsPerMget.respool / k), 2) : '—',
        fmt(med(xs, (x) => x.cpuUsPerMget.nodes), 1),
        fmt(med(xs, (x) => x.cpuUsPerMget.driver), 1),
        `${isA ? `${fmt(med(xs, (x) => x.cpuPercent.respool), 0)}%` : '—'} / ${fmt(med(xs, (x) => x.cpuPercent.nodes), 0)}% / ${fmt(med(xs, (x) => x.cpuPercent.driver), 0)}%`,
        `${fmtInt(xs.reduce((s, x) => s + x.checked, 0))} / ${xs.reduce((s, x) => s + x.mismatched, 0)} / ${xs.reduce((s, x) => s + x.errors, 0)}`,
      ]);
    }
    const tput = A.map((a, i) => a.mgetPerS / B[i].mgetPerS);
    const p99 = A.map((a, i) => a.p99 / B[i].p99);
    ratioRows.push([
      k, fmt(median(tput), 2), perRound(tput, (x) => x, (v) => fmt(v, 2)), fmt(median(p99), 1), perRound(p99, (x) => x, (v) => fmt(v, 1)),
    ]);
    summary[k] = {
      respool: { mgetPerS: med(A, (x) => x.mgetPerS), p99: med(A, (x) => x.p99), cpuUs: med(A, (x) => x.cpuUsPerMget.respool), parts: med(A, (x) => x.partsPerMget),
        cpuPercent: med(A, (x) => x.cpuPercent.respool), spread: span(A.map((x) => x.mgetPerS), fmtK) },
      direct: { mgetPerS: med(B, (x) => x.mgetPerS), p99: med(B, (x) => x.p99), spread: span(B.map((x) => x.mgetPerS), fmtK) },
      ratio: median(tput), ratioSpread: span(tput, (v) => fmt(v, 2)),
    };
  }
  result.summary = summary;

  const mainTable = mdTable(
    ['keys per MGET', 'target', 'what one MGET is', 'MGET/s (median)', 'MGET/s per round', 'keys/s (median)', 'p50 ms', 'p50 per round', 'p99 ms', 'p99 per round'],
    rows, ['r', 'l', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
  );
  const cpuTable = mdTable(
    ['keys per MGET', 'target', 'node MGET calls per client MGET', 'respool CPU µs per MGET', 'per round', 'respool CPU µs per key',
      'valkey CPU µs per MGET (all nodes)', 'driver CPU µs per MGET', 'CPU during the run: respool / nodes / driver (% of one core)', 'checked MGETs / mismatched / errors'],
    cpuRows, ['r', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
  );
  const ratioTable = mdTable(
    ['keys per MGET', 'MGET/s respool / direct (median of per-round ratios)', 'per round', 'p99 respool / direct (median)', 'per round'],
    ratioRows,
  );
  const busiest = Math.max(...SIZES.map((k) => summary[k].respool.cpuPercent));
  const checkedKeys = total((x) => x.checkedKeys);
  const mism = total((x) => x.mismatched);
  const errs = total((x) => x.errors);

  const s10 = summary[SIZES[0]];
  const sLast = summary[SIZES[SIZES.length - 1]];
  const md = [
    `## Cross-slot MGET: ${SIZES.join(' and ')} keys over all slots, respool vs one node holding every slot`,
    '',
    `**Rerun:** \`npm run bench:mget\` (= \`npm run build && npm run build:harness && node bench/mget.mjs\`; ${QUICK ? '**BENCH_QUICK=1 smoke run — not for comparison** — ' : ''}` +
      `${CLIENTS} iovalkey \`Valkey\` clients per target in one Node process, each one MGET in flight; ${RUN_S} s per run; ${R.length} round(s), ` +
      `each running respool then direct for every size (A, B, A, B, …) after a ${WARMUP_S} s unrecorded warm-up of each; knobs in the header of bench/mget.mjs). ` +
      `respool (${result.respool.build}): \`${result.respool.cmd}\`. Nodes: the bench harness (build/harness/valkey-processes.js), valkey-server in cluster mode, no persistence.`,
    '',
    `**Machine:** ${m.nproc} cores (${m.cpu}), ${m.memoryGiB} GiB, ${m.kernel}, node ${m.node}, ${m.valkey.replace(/ sha=.*/, '')}; ` +
      `load average ${result.loadavgStart} at the start, ${result.loadavgEnd} at the end (1/5/15 min) — shared with other engineers' work, so noisy; ` +
      'every process (the nodes, respool, the driver) is on the same cores. **Date:** ' + `${result.started} – ${result.finished}.`,
    '',
    '**What each side did.**',
    '',
    `- **respool (A):** a cluster of 3 primaries (no replicas; slots ${result.layout.cluster.map((c) => c.slots.map(([a, b]) => `${a}-${b}`).join(',')).join(' / ')}), ` +
      `respool in \`--mode cluster\` in front. A pool of ${fmtInt(result.pool.keys)} random key names without hash tags, ${KEYS_PER_SLOT} in each of the ${fmtInt(SLOTS)} slots; ` +
      'every MGET asks for K distinct keys drawn at random from it, so its keys sit in ~K different slots on all 3 nodes: respool splits it into one MGET per slot, ' +
      'sends them to the nodes and merges the replies in the client\'s key order. "node MGET calls per MGET" (INFO commandstats on the nodes ÷ client MGETs) shows the split.',
    `- **direct (B):** one valkey-server in cluster mode that owns all ${fmtInt(SLOTS)} slots, the clients connected straight to it. Valkey refuses a cross-slot MGET even when one node holds every slot ` +
      `(here: \`${result.directCrossSlotReply}\`), so B sends MGETs of the same K keys of the same pool with a \`${HASH_TAG}\` prefix — all in slot ${result.pool.directSlot}, answered in one call. ` +
      'B is therefore the best a single node does for K keys, not the same request: it is the baseline for what the split, the fan-out to 3 nodes and the merge cost.',
    '- Both: 100-byte values written straight into the nodes before the runs (never through respool); the same driver, K and pick of random keys; one client MGET in flight per client. ' +
      `Latency is per MGET in the driver, from the call to the parsed reply. CPU from /proc/<pid>/stat (utime+stime) over each run ÷ MGETs; the driver's from process.cpuUsage().`,
    `- Correctness: every ${CHECK_EVERY}th reply of each client (and its first) compared value by value, in key order, with what was written: ` +
      `${fmtInt(total((x) => x.checked))} MGETs (${fmtInt(checkedKeys)} keys) checked over the measured runs, **${mism} mismatched**, ${errs} errors.`,
    '',
    '### Throughput and latency',
    '',
    mainTable,
    '',
    ratioTable,
    '',
    '### Where the CPU went, the split, correctness',
    '',
    cpuTable,
    '',
    '**How to read:** each row is the median over rounds, with every round\'s value alongside (the spread between rounds is this machine\'s noise, not the proxy\'s). ' +
      'respool / direct compares a split-and-merge MGET over 3 nodes with the single-node, single-slot MGET of the same size measured right after it in the same round: ' +
      'it is the price of asking for keys in any slot through one endpoint, not a like-for-like proxy overhead. ' +
      `For ${sLast === s10 ? SIZES[0] : SIZES[SIZES.length - 1]} keys respool sends ${fmt(sLast.respool.parts, 1)} MGETs to the nodes per client MGET (one per slot; respool CPU per MGET grows with the number of slots touched), while the direct node answers one call; ` +
      'respool, the nodes and the driver share the same 2 cores, so CPU spent in respool is taken from the others — the CPU table shows where the time went' +
      (busiest >= 85 ? ` (respool ran at up to ${fmt(busiest, 0)}% of one core: its event loop is one thread, so respool was the likely limit of its runs). ` : '. ') +
      'The driver (iovalkey, one process) also spends CPU per key on building the command and parsing the reply, on both sides.',
    ...(result.errors.length ? ['', `Errors: ${result.errors.join('; ')}`] : []),
    '',
    `Raw numbers: bench/out/mget.json.`,
  ].join('\n');
  writeOutputs('mget', result, md);
  writeSection('mget', md);

  const k0 = SIZES[0];
  const k1 = SIZES[SIZES.length - 1];
  const row = `| cross-slot MGET ${k0} / ${k1} keys | through respool (3 primaries; ~${fmt(s10.respool.parts, 1)} / ~${fmt(sLast.respool.parts, 1)} node MGETs per client MGET): ` +
    `${fmtK(s10.respool.mgetPerS)} / ${fmtK(sLast.respool.mgetPerS)} MGET/s, p99 ${fmt(s10.respool.p99, 1)} / ${fmt(sLast.respool.p99, 1)} ms, ` +
    `${fmt(s10.respool.cpuUs, 0)} / ${fmt(sLast.respool.cpuUs, 0)} µs respool CPU per MGET; direct one-slot MGET on one node holding every slot: ` +
    `${fmtK(s10.direct.mgetPerS)} / ${fmtK(sLast.direct.mgetPerS)} MGET/s, p99 ${fmt(s10.direct.p99, 1)} / ${fmt(sLast.direct.p99, 1)} ms; ` +
    `respool / direct ${fmt(s10.ratio, 2)}× / ${fmt(sLast.ratio, 2)}× (medians of ${R.length}${R.length > 1 ? `, per-round ${s10.ratioSpread} / ${sLast.ratioSpread}` : ''}); ` +
    `${mism} mismatched of ${fmtInt(checkedKeys)} checked keys${QUICK ? ' (**BENCH_QUICK smoke run**)' : ''} |`;
  upsertSummaryRow(`| cross-slot MGET ${k0} / ${k1} keys |`, row);
  log(`wrote the mget section and its Summary row in bench/RESULTS.md`);
}

/** Replace the Summary table's row starting with `prefix`, or add it as the table's last row. */
function upsertSummaryRow(prefix, row) {
  const lines = fs.readFileSync(RESULTS_FILE, 'utf8').split('\n');
  const existing = lines.findIndex((l) => l.startsWith(prefix));
  if (existing >= 0) lines[existing] = row;
  else {
    const h = lines.findIndex((l) => /^## Summary/.test(l));
    if (h < 0) return;
    let i = h + 1;
    while (i < lines.length && !lines[i].startsWith('|')) i++;
    while (i < lines.length && lines[i].startsWith('|')) i++;
    lines.splice(i, 0, row);
  }
  fs.writeFileSync(RESULTS_FILE, lines.join('\n'));
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
