// Connection storm (issues 4, 11, 12): 10,000 client connections opened as fast as possible by a
// separate process at normal priority (each sends one PING), while 50 established clients run a
// steady GET load — through respool and directly against a valkey-server, interleaved in each
// round; medians over rounds, every round listed.
//
//   npm run bench:storm                 (= bash -c 'ulimit -n <hard limit>; node bench/storm.mjs')
//
// Per target and round (targets: respool; direct = a fresh valkey-server; respool --workers N):
//  1. latency phase — ESTABLISHED closed-loop GET clients (one connection each); after BEFORE_MS
//     the storm child (bench/lib/storm-child.mjs, mode "hold", `nice -n BENCH_STORM_NICE`, default 0
//     = the bench's own priority) opens STORM connections, PINGs on each, keeps them open.
//     Reported: accept time (first connect → every PONG), storm errors, the established clients'
//     p50/p99 before vs during the storm (from the first connect until the last PONG), respool's
//     event-loop delay before / during (bench/lib/loop-delay-probe.mjs preloaded into respool with
//     --import: perf_hooks.monitorEventLoopDelay at 1 ms resolution; the worst process of a
//     --workers tree), the bench process's own loop delay during the storm (what the measuring
//     side adds), memory per idle client (RSS after the storm settled − before, / STORM; heap or
//     INFO used_memory likewise), and through respool every upstream node's respool links
//     (CLIENT LIST, sampled every 200 ms).
//  2. cost phase — no other load: a second storm of STORM connections in mode "cycle" (connect,
//     PING, close after the PONG). CPU per connection = (utime + stime of the target's processes,
//     from /proc/<pid>/stat, from the first connect until the target closed every storm socket
//     (its fd count back to where it was) + 300 ms) − (the target's idle CPU rate × that time),
//     / STORM. For a --workers tree: the supervisor and every worker.
//
// Env: BENCH_QUICK=1 (2,000 connections, 1 round, short phases), BENCH_ROUNDS (3),
//      BENCH_STORM_CONNECTIONS (10000), BENCH_STORM_ESTABLISHED (50), BENCH_STORM_BEFORE_MS (4000),
//      BENCH_STORM_ACCEPT_RATE (respool's --accept-rate; default: respool's own default),
//      BENCH_STORM_POOL (2 links/node), BENCH_STORM_WORKERS (2; 0 or 1 = no workers target),
//      BENCH_STORM_SCHED (rr | none: NODE_CLUSTER_SCHED_POLICY for the "workers" target; default:
//      node's, round-robin), BENCH_STORM_NICE (0), BENCH_STORM_TARGETS (comma list, default
//      respool,direct,workers,workers-none,floor: "workers-none" is --workers N with
//      NODE_CLUSTER_SCHED_POLICY=none, each worker accepting from the shared listen socket; "floor"
//      is Node's own floor, bench/lib/node-floor.mjs; "respool-rate:N" is respool with --accept-rate N),
//      RESPOOL_BENCH_BIN (another respool entry script).
//
// Linux limits: every storm connection is a file descriptor in the storm process, in respool
// and in valkey-server; the npm script raises `ulimit -n` to the hard limit, valkey-server gets
// --maxclients above the storm size. All traffic is on 127.0.0.1. Only processes this bench
// started are stopped, by pid (bench/lib/common.mjs).
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import {
  BENCH_DIR, HOST, OUT_DIR, ROOT_DIR, RespConn, encodeCommand, envFlag, envInt, fmt, fmtInt, log, makeTmpRoot, mdTable, median,
  parseInfo, percentile, sleep, spawn, stop, uniquePort, waitForPing, withDescendants, writeOutputs,
} from './lib/common.mjs';
import { writeSection } from './lib/results-file.mjs';
import { lineCharts, writeChart } from './lib/svg-chart.mjs';
import { RESPOOL_BIN, respoolBuildLabel } from './lib/respool-build.mjs';
import { rssBytes } from './lib/measure.mjs';
import { fdCount, heldRssPerConnection, runStormChild, stormCpuPerConnection, waitFdsBack } from './lib/storm-run.mjs';

const QUICK = envFlag('BENCH_QUICK');
const STORM = envInt('BENCH_STORM_CONNECTIONS', QUICK ? 2000 : 10_000);
const ESTABLISHED = envInt('BENCH_STORM_ESTABLISHED', 50);
const BEFORE_MS = envInt('BENCH_STORM_BEFORE_MS', QUICK ? 2000 : 4000);
const ROUNDS = envInt('BENCH_ROUNDS', QUICK ? 1 : 3);
const ACCEPT_RATE = process.env.BENCH_STORM_ACCEPT_RATE;
const POOL = envInt('BENCH_STORM_POOL', 2);
const WORKERS = envInt('BENCH_STORM_WORKERS', 2);
const SCHED = process.env.BENCH_STORM_SCHED;
const NICE = envInt('BENCH_STORM_NICE', 0);
const WARMUP_MS = 1000;
const SETTLE_MS = 1500;
const WORKERS_NAME = `respool --workers ${WORKERS}`;
const WORKERS_NONE_NAME = `respool --workers ${WORKERS}, NODE_CLUSTER_SCHED_POLICY=none`;
const FLOOR_NAME = 'node floor (bare net.Server)';
const TARGETS = (process.env.BENCH_STORM_TARGETS ?? `respool,direct${WORKERS > 1 ? ',workers,workers-none' : ''},floor`)
  .split(',').map((t) => t.trim()).filter(Boolean);

const { startCluster, startStandalone } = await import(path.join(ROOT_DIR, 'build/harness/valkey-processes.js'));
const calculateSlot = (await import('cluster-key-slot')).default;
const PROBE = pathToFileURL(path.join(BENCH_DIR, 'lib', 'loop-delay-probe.mjs')).href;

// ---------------------------------------------------------------- latency timeline

/** Established clients' GET latency in 100 ms steps, from 2 s before the storm to 1 s after its last PONG: [{ t (s from its first connect), p50, p99, n }]. */
function latencyTimeline(samples, stormStart, stormEnd) {
  const step = 100;
  const from = stormStart - 2000;
  const to = stormEnd + 1000;
  const buckets = new Map();
  for (const [t, l] of samples) {
    if (t < from || t > to) continue;
    const k = Math.floor((t - stormStart) / step);
    if (!buckets.has(k)) buckets.set(k, []);
    buckets.get(k).push(l);
  }
  return [...buckets].sort(([a], [b]) => a - b).map(([k, ls]) => ({ t: (k * step) / 1000, p50: percentile(ls, 50), p99: percentile(ls, 99), n: ls.length }));
}

/** The first round's timelines of every target, as one chart (bench/charts/storm-latency.svg). */
function timelineChart(rounds) {
  const first = rounds[0] ?? [];
  const withTimeline = first.filter((r) => Array.isArray(r.timeline) && r.timeline.length > 0);
  if (withTimeline.length === 0) return '';
  const panel = (key, label) => ({
    yLabel: label,
    yFormat: (v) => String(Number(v.toPrecision(3))),
    marks: [{ x: 0, label: 'storm starts' }],
    series: withTimeline.map((r) => ({ name: r.target, points: r.timeline.map((b) => [b.t, b[key]]) })),
  });
  const svg = lineCharts({
    title: `Established clients' GET latency while ${STORM.toLocaleString('en-US')} connections arrive (round 1, 100 ms steps)`,
    xLabel: 'seconds from the storm\'s first connect',
    xFormat: (v) => String(Number(v.toPrecision(3))),
    panels: [panel('p50', 'p50 (ms)'), panel('p99', 'p99 (ms)')],
  });
  return writeChart('storm-latency', svg, 'established clients\' p50 and p99 over time during the storm, per target');
}

// ---------------------------------------------------------------- /proc

function openFileLimit() {
  const m = /Max open files\s+(\d+)/.exec(fs.readFileSync('/proc/self/limits', 'utf8'));
  return m ? Number(m[1]) : NaN;
}

// ---------------------------------------------------------------- event-loop delay

/** The probe in every process of a target: SIGUSR2, then read what each wrote. */
async function probeDump(target) {
  if (!target.probeDir) return null;
  const pids = target.pids();
  for (const pid of pids) {
    target.probeSeq.set(pid, target.probeSeq.get(pid) ?? 0);
    process.kill(pid, 'SIGUSR2');
  }
  const out = [];
  const deadline = performance.now() + 5000;
  for (const pid of pids) {
    const seq = target.probeSeq.get(pid);
    const file = path.join(target.probeDir, `${pid}.${seq}.json`);
    while (!fs.existsSync(file)) {
      if (performance.now() > deadline) throw new Error(`loop-delay probe of pid ${pid} did not answer`);
      await sleep(10);
    }
    target.probeSeq.set(pid, seq + 1);
    out.push(JSON.parse(fs.readFileSync(file, 'utf8')));
  }
  // The worst process of the tree (a lone respool: itself).
  return {
    p99: Math.max(...out.map((o) => o.p99)),
    max: Math.max(...out.map((o) => o.max)),
    perProcess: out,
  };
}

// ---------------------------------------------------------------- load, storm, samplers

/**
 * Closed-loop GETs on `ESTABLISHED` connections; samples [time, latency ms]. A lean client (raw
 * sockets, one pre-encoded request per connection, replies framed by their bulk length, no timer
 * per request), so that the measuring process takes as little of the 2 cores as it can: what it
 * does add shows as "bench loop delay".
 */
async function startEstablished(port, keys) {
  const samples = [];
  let errors = 0;
  let running = true;
  const conns = await Promise.all(Array.from({ length: ESTABLISHED }, (_, i) => new Promise((resolve, reject) => {
    const request = encodeCommand(['GET', keys[i % keys.length]]);
    const socket = net.connect({ host: HOST, port }, () => resolve(conn));
    socket.setNoDelay(true);
    const conn = { socket, sentAt: 0, inflight: false, done: null };
    let buf = Buffer.alloc(0);
    const send = () => {
      conn.inflight = true;
      conn.sentAt = performance.now();
      socket.write(request);
    };
    conn.start = send;
    socket.on('data', (chunk) => {
      buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
      for (;;) {
        const eol = buf.indexOf('\r\n');
        if (eol < 0) return;
        let end = eol + 2;
        if (buf[0] === 0x24) { // $<len>
          const len = Number(buf.toString('latin1', 1, eol));
          if (len >= 0) {
            end += len + 2;
            if (buf.length < end) return;
          } else errors++; // nil: the key is always set
        } else errors++; // an error reply or anything else
        buf = buf.subarray(end);
        conn.inflight = false;
        samples.push([conn.sentAt, performance.now() - conn.sentAt]);
        if (running) send();
        else if (conn.done) conn.done();
      }
    });
    socket.on('error', (e) => {
      errors++;
      reject(e);
    });
  })));
  for (const c of conns) c.start();
  return {
    samples,
    errors: () => errors,
    async stop() {
      running = false;
      // Each connection's request in flight is answered (or given 5 s), then closed.
      await Promise.all(conns.map((c) => new Promise((resolve) => {
        if (!c.inflight) return resolve();
        const t = setTimeout(() => {
          errors++;
          resolve();
        }, 5000);
        c.done = () => {
          clearTimeout(t);
          resolve();
        };
      })));
      for (const c of conns) c.socket.destroy();
    },
  };
}

/** Connections named "respool" per node (CLIENT LIST), sampled until stopped. */
function sampleUpstreamLinks(nodes) {
  const seen = Object.fromEntries(nodes.map((n) => [n.port, []]));
  let running = true;
  const loop = (async () => {
    const conns = await Promise.all(nodes.map((n) => RespConn.connect(n.port)));
    while (running) {
      await Promise.all(nodes.map(async (n, i) => {
        const list = String(await conns[i].callT(3000, 'CLIENT', 'LIST'));
        seen[n.port].push(list.split('\n').filter((l) => / name=respool /.test(l)).length);
      }));
      await sleep(200);
    }
    for (const c of conns) c.close();
  })();
  return { seen, stop: async () => { running = false; await loop; } };
}

/** A storm child (normal priority unless BENCH_STORM_NICE); resolves with its result line. */
const runStorm = (port, mode, count = STORM) => runStormChild(port, mode, count, { nice: NICE });

// ---------------------------------------------------------------- targets

/** Samples of respool's /metrics by exact series text (name plus labels as printed). */
async function adminMetrics(adminPort, series) {
  const text = await (await fetch(`http://${HOST}:${adminPort}/metrics`)).text();
  const out = {};
  for (const line of text.split('\n')) {
    const i = line.lastIndexOf(' ');
    if (i > 0 && series.includes(line.slice(0, i))) out[line.slice(0, i)] = Number(line.slice(i + 1));
  }
  return out;
}

async function waitReady(adminPort, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      if ((await fetch(`http://${HOST}:${adminPort}/readyz`)).status === 200) return;
    } catch {
      /* not yet */
    }
    await sleep(100);
  }
  throw new Error(`respool admin /readyz not 200 within ${timeoutMs} ms`);
}

async function startRespoolTarget(name, nodes, workers, sched = SCHED, acceptRate = ACCEPT_RATE) {
  const port = await uniquePort();
  const adminPort = await uniquePort();
  const probeDir = makeTmpRoot('loop-probe-');
  const args = [RESPOOL_BIN, '--listen', `${HOST}:${port}`, '--upstream', nodes.map((n) => `${HOST}:${n.port}`).join(','),
    '--mode', 'cluster', '--admin', `${HOST}:${adminPort}`, '--log-level', 'warn', '--connections-per-node', String(POOL),
    '--max-clients', String(STORM + 1000), ...(acceptRate ? ['--accept-rate', acceptRate] : []),
    ...(workers > 1 ? ['--workers', String(workers)] : [])];
  const logFile = path.join(OUT_DIR, `respool-storm${workers > 1 ? '-workers' : ''}.log`);
  fs.writeFileSync(logFile, '');
  const env = { ...process.env, RESPOOL_BENCH_LOOP_PROBE_DIR: probeDir, ...(workers > 1 && sched ? { NODE_CLUSTER_SCHED_POLICY: sched } : {}) };
  const child = spawn(process.execPath, [`--import=${PROBE}`, ...args], { logFile, env, match: `${process.execPath} --import=${PROBE}` });
  await waitForPing(port, { child, what: 'respool', timeoutMs: 20_000 });
  await waitReady(adminPort);
  if (workers > 1) {
    while (withDescendants(child.pid).length < workers + 1) await sleep(50);
  }
  await sleep(300);
  return {
    name, port, probeDir, probeSeq: new Map(), links: nodes,
    cmd: `${workers > 1 && sched ? `NODE_CLUSTER_SCHED_POLICY=${sched} ` : ''}node ${args.join(' ')}`,
    pids: () => withDescendants(child.pid),
    // V8's young generation (new space) grows during a storm (its survivors are the new sessions)
    // up to 2 × --max-semi-space-size (16 MiB by default) and stays grown while respool allocates:
    // memory the process holds, but a fixed amount, not per client; reported on its own.
    memory: async function () {
      const HEAP = 'nodejs_heap_size_used_bytes';
      const NEW = 'nodejs_heap_space_size_total_bytes{space="new"}';
      const m = await adminMetrics(adminPort, [HEAP, NEW]);
      return { rss: rssBytes(this.pids()), heap: m[HEAP], newSpace: m[NEW], heapKind: 'V8 heap used' };
    },
    stop: () => stop(child),
  };
}

async function startFloorTarget(name) {
  const port = await uniquePort();
  const child = spawn(process.execPath, ['bench/lib/node-floor.mjs', String(port)], { match: `${process.execPath} bench/lib/node-floor.mjs` });
  await waitForPing(port, { child, what: 'node floor' });
  return { name, port, probeDir: null, links: null, cmd: `node bench/lib/node-floor.mjs ${port}`, pids: () => [child.pid], stop: () => stop(child) };
}

async function startDirectTarget(name, keys, limit) {
  const node = await startStandalone({ args: ['--maxclients', String(Math.min(limit - 100, STORM + 5000)), '--tcp-backlog', '4096'] });
  for (const k of keys) await node.call('SET', k, 'v'.repeat(100));
  const info = await RespConn.connect(node.port);
  return {
    name, port: node.port, probeDir: null, links: null, cmd: `valkey-server (pid ${node.pid}, --maxclients ${Math.min(limit - 100, STORM + 5000)} --tcp-backlog 4096)`,
    pids: () => [node.pid],
    memory: async () => ({ rss: rssBytes([node.pid]), heap: Number(parseInfo(await info.callT(3000, 'INFO', 'memory')).used_memory), heapKind: 'INFO used_memory' }),
    stop: async () => {
      info.close();
      await node.stop();
    },
  };
}

// ---------------------------------------------------------------- one target, one round

/** CPU per connection (bench/lib/storm-run.mjs), at BENCH_STORM_NICE. */
const costPhase = (target) => stormCpuPerConnection(target, STORM, { nice: NICE });

/**
 * Node's own floor (bench/lib/node-floor.mjs): the cost phase, and the RSS a bare Node server
 * holds per idle client (the same storm held open, after a warm-up as respool and valkey-server
 * get from the latency phase; no GC forced).
 */
async function measureFloor(target) {
  const rssPerIdleClient = await heldRssPerConnection(target, STORM, SETTLE_MS, { nice: NICE });
  const { cycle, cpu } = await costPhase(target);
  log(`${target.name}: ${fmt(cpu.perConnUs, 1)} µs CPU per connect+PING+close, ${fmt(rssPerIdleClient / 1024)} KiB RSS per idle client`);
  return { target: target.name, floor: true, cycle: cycle.result, cpu, rssPerIdleClient };
}

async function measure(target, keys) {
  const { name, port } = target;
  const benchLoop = monitorEventLoopDelay({ resolution: 1 });
  benchLoop.enable();

  // 1. latency phase
  log(`${name}: ${ESTABLISHED} established clients, ${BEFORE_MS} ms before the storm`);
  const fdIdle = fdCount(target.pids());
  const load = await startEstablished(port, keys);
  await sleep(WARMUP_MS);
  const warm = performance.now();
  await probeDump(target); // resets
  await sleep(Math.max(500, BEFORE_MS - WARMUP_MS));
  const loopBefore = await probeDump(target);
  const mem0 = await target.memory();
  const fdsBefore = new Map(target.pids().map((pid) => [pid, fdCount([pid])]));
  const sampler = target.links ? sampleUpstreamLinks(target.links) : null;
  benchLoop.reset();
  const stormStart = performance.now();
  log(`${name}: storm of ${STORM} connections (held open)`);
  const { child, result } = await runStorm(port, 'hold');
  const stormEnd = performance.now();
  const loopDuring = await probeDump(target);
  const benchDuring = { p99: benchLoop.percentile(99) / 1e6, max: benchLoop.max / 1e6 };
  benchLoop.disable();
  await sleep(SETTLE_MS);
  const mem1 = await target.memory();
  // How the storm spread over a --workers tree: storm connections held by each process.
  const spread = target.pids().length > 1 ? target.pids().map((pid) => fdCount([pid]) - (fdsBefore.get(pid) ?? 0)) : null;
  await sampler?.stop();
  await load.stop();
  await stop(child);
  await waitFdsBack(target, fdIdle);
  const before = load.samples.filter(([t]) => t >= warm && t < stormStart).map(([, l]) => l);
  const during = load.samples.filter(([t]) => t >= stormStart && t <= stormEnd).map(([, l]) => l);
  const timeline = latencyTimeline(load.samples, stormStart, stormEnd);

  // 2. cost phase: connect + PING + close, nothing else running
  const { cycle, cpu } = await costPhase(target);
  const cpuPerConnUs = cpu.perConnUs;

  const row = {
    target: name,
    storm: result,
    cycle: cycle.result,
    established: {
      before: { n: before.length, p50: percentile(before, 50), p99: percentile(before, 99) },
      during: { n: during.length, p50: percentile(during, 50), p99: percentile(during, 99) },
      errors: load.errors(),
    },
    loopDelay: loopBefore ? { before: { p99: loopBefore.p99, max: loopBefore.max }, during: { p99: loopDuring.p99, max: loopDuring.max }, perProcess: loopDuring.perProcess } : null,
    benchLoopDelayDuring: benchDuring,
    memoryPerIdleClient: {
      rssBytes: (mem1.rss - mem0.rss) / STORM,
      heapBytes: (mem1.heap - mem0.heap) / STORM,
      heapKind: mem0.heapKind,
      // respool: RSS growth less V8's new-space growth (a fixed amount, see memory() above)
      rssWithoutNewSpaceBytes: mem0.newSpace === undefined ? null : (mem1.rss - mem0.rss - (mem1.newSpace - mem0.newSpace)) / STORM,
      newSpaceGrowthBytes: mem0.newSpace === undefined ? null : mem1.newSpace - mem0.newSpace,
    },
    spread,
    cpu,
    timeline,
    upstreamLinksPerNode: sampler
      ? Object.fromEntries(Object.entries(sampler.seen).map(([p, xs]) => [p, { min: Math.min(...xs), max: Math.max(...xs), samples: xs.length }]))
      : null,
  };
  log(`${name}: accept ${fmt(result.acceptMs, 0)} ms (${result.ponged}/${STORM} PONG), p99 ${fmt(row.established.before.p99)} → ${fmt(row.established.during.p99)} ms, ` +
    (row.loopDelay ? `loop delay p99/max during ${fmt(row.loopDelay.during.p99)}/${fmt(row.loopDelay.during.max)} ms, ` : '') +
    `${fmt(cpuPerConnUs, 1)} µs CPU per connect+PING+close, ${fmt(row.memoryPerIdleClient.rssBytes / 1024)} KiB RSS per idle client`);
  return row;
}

// ---------------------------------------------------------------- main

async function main() {
  const limit = openFileLimit();
  if (limit < STORM + 2000) log(`warning: ulimit -n is ${limit}; a storm of ${STORM} needs more (run via npm run bench:storm)`);
  const cluster = await startCluster({
    primaries: 3, replicasPerPrimary: 0,
    args: ['--maxclients', String(Math.min(limit - 100, STORM + 5000)), '--tcp-backlog', '4096'],
  });
  const rounds = [];
  const cmds = {};
  const startedAt = new Date().toISOString();
  try {
    const nodes = cluster.nodes;
    const node0 = (await cluster.primaries())[0];
    // Established clients read keys owned by node0 (through respool) or a standalone node (direct).
    const keys = [];
    for (let i = 0; keys.length < ESTABLISHED; i++) {
      const k = `storm:{${i}}`;
      if ((await cluster.primaryForSlot(calculateSlot(k))).port === node0.port) keys.push(k);
    }
    for (const k of keys) await cluster.call(node0, 'SET', k, 'v'.repeat(100));

    for (let r = 0; r < ROUNDS; r++) {
      // Interleaved: each round starts with the next target in turn.
      const order = TARGETS.map((_, i) => TARGETS[(i + r) % TARGETS.length]);
      const rows = [];
      for (const kind of order) {
        log(`round ${r + 1}/${ROUNDS}: ${kind}`);
        const target = kind === 'direct'
          ? await startDirectTarget('direct (valkey-server)', keys, limit)
          : kind === 'floor'
            ? await startFloorTarget(FLOOR_NAME)
            : kind.startsWith('respool-rate:')
              ? await startRespoolTarget(`respool --accept-rate ${kind.slice(13)}`, nodes, 1, SCHED, kind.slice(13))
              : kind === 'workers-none'
                ? await startRespoolTarget(WORKERS_NONE_NAME, nodes, WORKERS, 'none')
                : await startRespoolTarget(kind === 'workers' ? WORKERS_NAME : 'respool', nodes, kind === 'workers' ? WORKERS : 1);
        cmds[target.name] = target.cmd;
        try {
          rows.push({ ...(kind === 'floor' ? await measureFloor(target) : await measure(target, keys)), round: r + 1 });
        } finally {
          await target.stop();
        }
        await sleep(1000);
      }
      rounds.push(rows);
    }
    report(rounds, cmds, startedAt);
  } finally {
    await cluster.stop();
  }
}

const med = (xs) => median(xs);
/** "median (r1 / r2 / r3)". */
function withRounds(xs, f) {
  return xs.length > 1 ? `${f(med(xs))} (${xs.map(f).join(' / ')})` : f(xs[0]);
}

function report(rounds, cmds, startedAt) {
  const names = [...new Set(rounds.flat().map((r) => r.target))];
  const by = (name) => rounds.map((rows) => rows.find((r) => r.target === name)).filter(Boolean);
  const direct = 'direct (valkey-server)';
  const ms = (d) => (x) => fmt(x, d);
  const summary = mdTable(
    ['target', 'CPU µs per connect + PING + close', 'storm: all PONG after (ms)', 'answered', 'established p99 before (ms)',
      'established p99 during (ms)', 'p99 during / before', 'p99 during / direct\'s in the same round', 'event-loop delay during: p99 / max (ms)',
      'RSS per idle client (KiB)', 'RSS per idle client without V8 new-space growth (KiB)', 'heap / used_memory per idle client (KiB)'],
    names.map((name) => {
      const rs = by(name);
      if (rs[0].floor) return [name, withRounds(rs.map((r) => r.cpu.perConnUs), ms(1)), ...Array(8).fill('—'), withRounds(rs.map((r) => r.rssPerIdleClient / 1024), ms(2)), '—'];
      const ds = rs.map((r) => by(direct).find((d) => d.round === r.round));
      return [
        name,
        withRounds(rs.map((r) => r.cpu.perConnUs), ms(1)),
        withRounds(rs.map((r) => r.storm.acceptMs), fmtInt),
        rs.map((r) => `${r.storm.ponged}/${r.storm.count}`).join(', ') +
          (rs.some((r) => r.storm.failed) ? ` (${rs.map((r) => Object.entries(r.storm.errors).map(([k, v]) => `${k}: ${v}`).join(', ')).join('; ')})` : ''),
        withRounds(rs.map((r) => r.established.before.p99), ms(2)),
        withRounds(rs.map((r) => r.established.during.p99), ms(2)),
        withRounds(rs.map((r) => r.established.during.p99 / r.established.before.p99), (x) => `${fmt(x, 2)}×`),
        name === direct ? '1×' : withRounds(rs.map((r, i) => (ds[i] ? r.established.during.p99 / ds[i].established.during.p99 : NaN)), (x) => `${fmt(x, 2)}×`),
        rs[0].loopDelay
          ? `${withRounds(rs.map((r) => r.loopDelay.during.p99), ms(1))} / ${withRounds(rs.map((r) => r.loopDelay.during.max), ms(1))}`
          : '—',
        withRounds(rs.map((r) => r.memoryPerIdleClient.rssBytes / 1024), ms(2)),
        rs[0].memoryPerIdleClient.rssWithoutNewSpaceBytes === null ? '— (no GC heap)' : withRounds(rs.map((r) => r.memoryPerIdleClient.rssWithoutNewSpaceBytes / 1024), ms(2)),
        withRounds(rs.map((r) => r.memoryPerIdleClient.heapBytes / 1024), ms(2)),
      ];
    }),
  );
  const perRound = mdTable(
    ['round', 'target', 'CPU µs / conn (CPU ms, idle %)', 'all PONG (ms)', 'connect+PING+close storm (ms)', 'p50 before → during (ms)', 'p99 before → during (ms)',
      'loop delay p99 / max before → during (ms)', 'bench loop delay during p99 / max (ms)', 'RSS / heap per idle client (KiB)', 'V8 new-space growth (MiB)', 'GET errors'],
    rounds.flat().map((r) => (r.floor ? [r.round, r.target, `${fmt(r.cpu.perConnUs, 1)} (${fmtInt(r.cpu.totalMs)}, ${fmt(r.cpu.idleRatePct, 1)}%)`, '—', fmtInt(r.cycle.acceptMs), ...Array(4).fill('—'), `${fmt(r.rssPerIdleClient / 1024, 2)} / —`, '—', '—'] : [
      r.round, r.target,
      `${fmt(r.cpu.perConnUs, 1)} (${fmtInt(r.cpu.totalMs)}, ${fmt(r.cpu.idleRatePct, 1)}%)`,
      fmtInt(r.storm.acceptMs), fmtInt(r.cycle.acceptMs),
      `${fmt(r.established.before.p50, 2)} → ${fmt(r.established.during.p50, 2)}`,
      `${fmt(r.established.before.p99, 2)} → ${fmt(r.established.during.p99, 2)}`,
      r.loopDelay ? `${fmt(r.loopDelay.before.p99, 1)} / ${fmt(r.loopDelay.before.max, 1)} → ${fmt(r.loopDelay.during.p99, 1)} / ${fmt(r.loopDelay.during.max, 1)}` : '—',
      `${fmt(r.benchLoopDelayDuring.p99, 1)} / ${fmt(r.benchLoopDelayDuring.max, 1)}`,
      `${fmt(r.memoryPerIdleClient.rssBytes / 1024, 2)} / ${fmt(r.memoryPerIdleClient.heapBytes / 1024, 2)}`,
      r.memoryPerIdleClient.newSpaceGrowthBytes === null ? '—' : fmt(r.memoryPerIdleClient.newSpaceGrowthBytes / 1048576, 1),
      r.established.errors,
    ])),
  );
  const linkRows = [];
  for (const r of rounds.flat()) {
    if (!r.upstreamLinksPerNode) continue;
    const v = Object.values(r.upstreamLinksPerNode);
    linkRows.push([r.round, r.target, `${Math.min(...v.map((x) => x.min))}–${Math.max(...v.map((x) => x.max))}`, v.map((x) => x.samples).reduce((a, b) => a + b, 0)]);
  }
  const links = mdTable(['round', 'target', 'respool links per upstream node during the storm (min–max over the 3 nodes)', 'samples'], linkRows);
  const spreadRows = rounds.flat().filter((r) => r.spread).map((r) => [r.round, r.target, r.spread.join(' / ')]);
  const spread = spreadRows.length
    ? mdTable(['round', 'target', 'storm connections held per process (supervisor first, then workers)'], spreadRows)
    : '';
  const md = [
    '## Connection storm (issues 4, 11, 12)',
    '',
    `**Rerun:** \`npm run bench:storm\` (${QUICK ? '**BENCH_QUICK=1 smoke run** — ' : ''}${STORM.toLocaleString('en-US')} storm connections opened as fast as ` +
      `a separate Node process can, at ${NICE === 0 ? 'normal priority' : `nice ${NICE}`}, each sending one PING; ${ESTABLISHED} established ` +
      `clients doing closed-loop GETs; ${ROUNDS} interleaved round(s), medians with each round's value in brackets). ` +
      `respool build: ${respoolBuildLabel()}.`,
    '',
    ...Object.entries(cmds).map(([n, c]) => `- ${n}: \`${c}\``),
    '',
    summary,
    '',
    timelineChart(rounds),
    '',
    'Every round:',
    '',
    perRound,
    '',
    'Upstream connections stay at the pool size while the storm hits respool (none of the storm is passed upstream):',
    '',
    links,
    '',
    ...(spread ? ['How the storm spread over the workers (file descriptors each process gained while the storm was held):', '', spread, ''] : []),
    `"${FLOOR_NAME}" is bench/lib/node-floor.mjs: a net.Server that answers PONG and closes when the client does — what ` +
      'a connect + PING + close costs any Node.js server here before a proxy does anything (its CPU phase), and the RSS it holds ' +
      'per idle client (the same storm held open, after its warm-up storm: its young generation has grown already, so the figure ' +
      'is in the column without V8 new-space growth and compares with respool\'s figure there).',
    '',
    'How it is measured (bench/storm.mjs): **CPU per connection** — a second storm with nothing else running, each ' +
      'connection closed after its PONG; utime + stime of the target\'s processes (/proc/<pid>/stat) from the first connect ' +
      'until the target closed every storm socket, + 300 ms, minus its idle rate, / storm size. **Established p99 during** — ' +
      'latencies of GETs sent between the storm\'s first connect and its last PONG. **Event-loop delay** — ' +
      '`perf_hooks.monitorEventLoopDelay({ resolution: 1 })` preloaded into respool by the bench (bench/lib/loop-delay-probe.mjs, ' +
      'not part of respool): the time between ticks of a 1 ms timer (an idle loop reads ~1.1 ms), over the storm window; ' +
      'the worst process of a workers tree. The bench\'s own loop delay shows what the measuring side adds to the latencies. ' +
      '**Memory per idle client** — (RSS, or heap / used_memory, after the storm settled − before) / storm size, with the storm\'s ' +
      'connections open and idle. For respool also without the growth of V8\'s young generation (`nodejs_heap_space_size_total_bytes{space="new"}`): ' +
      'a storm\'s new sessions are what survive its scavenges, so V8 grows new space up to 2 × 16 MiB (`--max-semi-space-size`), ' +
      'a fixed amount held while respool keeps allocating, not a cost per client.',
    `Measured ${startedAt} → ${new Date().toISOString()} on ${fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join('/')} load (1/5/15 min).`,
  ].join('\n');
  writeOutputs('storm', { rounds, storm: STORM, established: ESTABLISHED, cmds }, md);
  writeSection('storm', md);
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
