// AZ-affinity reads: the same GET load through respool under each read strategy, against a
// cluster of 3 primaries × 2 replicas spread over three zones, with an artificial delay on
// every cross-zone link.
//
//   npm run bench:az            (= node bench/az-reads.mjs; run `npm run build` first)
//
// How zones and latency are simulated (all on 127.0.0.1):
// - Zones: shard i gets its primary in zone i and its replicas in the two other zones
//   (az-a, az-b, az-c; CONFIG SET availability-zone), respool runs in az-a (--zone az-a).
// - Latency: every node sits behind a forwarding shim in this process (a Node TCP proxy). A
//   shim in front of a node outside az-a holds each chunk respool sends it for
//   BENCH_CROSS_ZONE_DELAY_MS (setTimeout, batched per connection; Node timers round up to
//   whole milliseconds, so the delay is ≥ 1 ms); shims in front of az-a nodes forward at once,
//   so every node pays the same shim overhead and only the cross-zone delay differs.
// - Addressing: each node announces its shim's port (CONFIG SET cluster-announce-port), so
//   CLUSTER SHARDS, MOVED and replication all go through the shims; respool needs no mapping.
// - Load: valkey-benchmark GET on random keys (preloaded), BENCH_CLIENTS connections, no
//   pipelining, so latency per request is what it measures. Reported per strategy (median over
//   BENCH_ROUNDS): p50/p99 from valkey-benchmark, and the share of reads served by a node
//   outside respool's zone, from the nodes' own INFO commandstats (and respool's reads_total).
//
// Env: BENCH_QUICK=1 (short smoke run), BENCH_ROUNDS (3), BENCH_REQUESTS (60000),
//      BENCH_CLIENTS (10), BENCH_KEYS (10000), BENCH_CROSS_ZONE_DELAY_MS (1).
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import {
  HOST, OUT_DIR, ROOT_DIR, RespConn, envFlag, envInt, fmt, fmtInt, log, mdTable, median, parseBenchmarkCsv, parseInfo, run,
  shellLine, spawn, stop, uniquePort, waitForPing, writeOutputs,
} from './lib/common.mjs';
import { writeSection } from './lib/results-file.mjs';

const QUICK = envFlag('BENCH_QUICK');
const ROUNDS = envInt('BENCH_ROUNDS', QUICK ? 1 : 3);
const REQUESTS = envInt('BENCH_REQUESTS', QUICK ? 8_000 : 60_000);
// Few enough clients that the 2-core machine is not saturated: latency then shows the zones,
// not queueing (at 50 clients p50 is mostly queueing).
const CLIENTS = envInt('BENCH_CLIENTS', 10);
const KEYS = envInt('BENCH_KEYS', 10_000);
const DELAY_MS = envInt('BENCH_CROSS_ZONE_DELAY_MS', 1);
const ZONES = ['az-a', 'az-b', 'az-c'];
const OWN_ZONE = 'az-a';
const STRATEGIES = ['primary', 'preferReplica', 'azAffinity', 'azAffinityReplicasAndPrimary'];

const harness = path.join(ROOT_DIR, 'build', 'harness', 'valkey-processes.js');
if (!fs.existsSync(harness)) {
  console.error('bench/az-reads.mjs: build/harness/ is missing; run `npm run build:harness` first');
  process.exit(1);
}
const { startCluster } = await import(harness);

// ---------------------------------------------------------------- the forwarding shims

/** A TCP forwarder to 127.0.0.1:targetPort; data towards the node waits `delayMs` when > 0. */
async function startShim(targetPort, delayMs) {
  const sockets = new Set();
  const server = net.createServer((client) => {
    const upstream = net.connect({ host: HOST, port: targetPort, noDelay: true });
    client.setNoDelay(true);
    sockets.add(client).add(upstream);
    const close = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', close).on('close', close);
    upstream.on('error', close).on('close', close);
    upstream.on('data', (d) => client.write(d));
    if (delayMs <= 0) {
      client.on('data', (d) => upstream.write(d));
      return;
    }
    // Delayed direction: chunks queue with their due time; one timer per connection drains
    // everything due, then re-arms for the next chunk.
    const queue = [];
    let timer = null;
    const drain = () => {
      timer = null;
      const now = performance.now();
      while (queue.length && queue[0].due <= now + 0.05) upstream.write(queue.shift().data);
      if (queue.length) timer = setTimeout(drain, Math.max(0, queue[0].due - performance.now()));
    };
    client.on('data', (d) => {
      queue.push({ due: performance.now() + delayMs, data: d });
      if (timer === null) timer = setTimeout(drain, delayMs);
    });
  });
  await new Promise((resolve) => server.listen(0, HOST, resolve));
  return {
    port: server.address().port,
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

// ---------------------------------------------------------------- helpers

async function nodeCall(port, ...args) {
  const c = await RespConn.connect(port);
  try {
    return await c.callT(5000, ...args);
  } finally {
    c.close();
  }
}

/** cmdstat_get calls per real node port. */
async function getCalls(nodes) {
  const out = new Map();
  for (const n of nodes) {
    const info = String(await nodeCall(n.port, 'INFO', 'commandstats'));
    out.set(n.port, Number(/^cmdstat_get:calls=(\d+)/m.exec(info)?.[1] ?? 0));
  }
  return out;
}

async function metricsText(adminPort) {
  const res = await fetch(`http://${HOST}:${adminPort}/metrics`);
  return res.text();
}

/** reads_total summed by outcome. */
function readsByOutcome(text) {
  const out = {};
  for (const m of text.matchAll(/^respool_reads_total\{[^}]*outcome="([a-z_]+)"[^}]*\} (\d+(?:\.\d+)?)/gm)) {
    out[m[1]] = (out[m[1]] ?? 0) + Number(m[2]);
  }
  return out;
}

async function startRespool(seedPort, strategy, tag) {
  const port = await uniquePort();
  const adminPort = await uniquePort();
  const args = [
    'bin/respool.js', '--listen', `${HOST}:${port}`, '--upstream', `${HOST}:${seedPort}`, '--mode', 'cluster',
    '--admin', `${HOST}:${adminPort}`, '--connections-per-node', '2', '--read-strategy', strategy, '--zone', OWN_ZONE,
    '--log-level', 'warn',
  ];
  const logFile = path.join(OUT_DIR, `respool-az-reads-${tag}.log`);
  fs.writeFileSync(logFile, '');
  const child = spawn(process.execPath, args, { logFile });
  await waitForPing(port, { child, what: `respool (${strategy})`, timeoutMs: 15_000 });
  return { port, adminPort, child, cmd: shellLine('node', args) };
}

// ---------------------------------------------------------------- main

async function main() {
  fs.mkdirSync(OUT_DIR, { recursive: true });
  const started = new Date();
  const result = {
    bench: 'az-reads', started: started.toISOString(), quick: QUICK,
    config: { rounds: ROUNDS, requests: REQUESTS, clients: CLIENTS, keys: KEYS, crossZoneDelayMs: DELAY_MS, ownZone: OWN_ZONE },
    layout: [], commands: {}, runs: [],
  };
  const shims = [];
  let cluster;
  try {
    log('starting a cluster of 3 primaries × 2 replicas');
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 2, nodeTimeoutMs: 3000 });
    const shards = await cluster.shards();
    const zoneOf = new Map();
    for (const [i, shard] of shards.entries()) {
      const place = [[shard.primary, ZONES[i % 3]], [shard.replicas[0], ZONES[(i + 1) % 3]], [shard.replicas[1], ZONES[(i + 2) % 3]]];
      for (const [node, zone] of place) {
        await node.setZone(zone);
        zoneOf.set(node.port, zone);
      }
      result.layout.push({
        slots: shard.slots, primary: `${shard.primary.port} (${zoneOf.get(shard.primary.port)})`,
        replicas: shard.replicas.map((r) => `${r.port} (${zoneOf.get(r.port)})`),
      });
    }
    // A shim per node, then every node announces its shim's port.
    const shimOf = new Map();
    for (const n of cluster.nodes) {
      const shim = await startShim(n.port, zoneOf.get(n.port) === OWN_ZONE ? 0 : DELAY_MS);
      shims.push(shim);
      shimOf.set(n.port, shim.port);
      const r = await nodeCall(n.port, 'CONFIG', 'SET', 'cluster-announce-port', String(shim.port));
      if (r !== 'OK') throw new Error(`CONFIG SET cluster-announce-port on ${n.port}: ${JSON.stringify(r)}`);
    }
    const deadline = Date.now() + 30_000;
    for (;;) {
      let converged = true;
      for (const n of cluster.nodes) {
        const text = String(await nodeCall(n.port, 'CLUSTER', 'NODES'));
        const repl = parseInfo(await nodeCall(n.port, 'INFO', 'replication'));
        for (const shimPort of shimOf.values()) if (!text.includes(`:${shimPort}@`)) converged = false;
        if (repl.role === 'slave' && (repl.master_link_status !== 'up' || ![...shimOf.values()].includes(repl.master_port))) converged = false;
      }
      if (converged) break;
      if (Date.now() > deadline) throw new Error('nodes did not converge on their shim ports in 30 s');
      await new Promise((r) => setTimeout(r, 100));
    }
    log(`cluster announces the shims; cross-zone delay ${DELAY_MS} ms on requests to nodes outside ${OWN_ZONE}`);

    // Preload the keys valkey-benchmark will read (key:000000000000 … key:<KEYS-1>).
    const loader = await startRespool(shimOf.get(cluster.nodes[0].port), 'primary', 'load');
    const conn = await RespConn.connect(loader.port);
    for (let i = 0; i < KEYS; i += 500) {
      const batch = [];
      for (let j = i; j < Math.min(KEYS, i + 500); j++) batch.push(conn.call('SET', `key:${String(j).padStart(12, '0')}`, 'x'.repeat(100)));
      await Promise.all(batch);
    }
    conn.close();
    await stop(loader.child);
    await new Promise((r) => setTimeout(r, 500)); // replication catches up

    const allNodes = cluster.nodes;
    for (let round = 1; round <= ROUNDS; round++) {
      // Rotate the order each round so machine noise does not always land on the same strategy.
      const order = STRATEGIES.map((_, i) => STRATEGIES[(i + round - 1) % STRATEGIES.length]);
      for (const strategy of order) {
        const respool = await startRespool(shimOf.get(allNodes[0].port), strategy, strategy);
        result.commands[strategy] = respool.cmd;
        try {
          // Warm-up: open every link.
          await run('valkey-benchmark', ['-h', HOST, '-p', String(respool.port), '-c', String(CLIENTS), '-n', '2000', '-r', String(KEYS), '-t', 'get', '-q'], { timeoutMs: 60_000 });
          const before = await getCalls(allNodes);
          const metricsBefore = readsByOutcome(await metricsText(respool.adminPort));
          const args = ['-h', HOST, '-p', String(respool.port), '-c', String(CLIENTS), '-n', String(REQUESTS), '-r', String(KEYS), '-d', '100', '-t', 'get', '--csv'];
          result.commands.load = shellLine('valkey-benchmark', args);
          const r = await run('valkey-benchmark', args, { timeoutMs: 300_000 });
          if (r.code !== 0) throw new Error(`valkey-benchmark exited ${r.code}: ${r.err.slice(-400)}`);
          const get = parseBenchmarkCsv(r.out).GET ?? {};
          const after = await getCalls(allNodes);
          const metricsAfter = readsByOutcome(await metricsText(respool.adminPort));
          let total = 0;
          let crossZone = 0;
          let onPrimaries = 0;
          const primaryPorts = new Set(shards.map((s) => s.primary.port));
          for (const n of allNodes) {
            const d = after.get(n.port) - before.get(n.port);
            total += d;
            if (zoneOf.get(n.port) !== OWN_ZONE) crossZone += d;
            if (primaryPorts.has(n.port)) onPrimaries += d;
          }
          const outcomes = Object.fromEntries(Object.entries(metricsAfter).map(([k, v]) => [k, v - (metricsBefore[k] ?? 0)]));
          const entry = {
            round, strategy, rps: get.rps, p50: get.p50_latency_ms, p99: get.p99_latency_ms, avg: get.avg_latency_ms,
            gets: total, crossZoneShare: total ? crossZone / total : NaN, primaryShare: total ? onPrimaries / total : NaN, outcomes,
          };
          result.runs.push(entry);
          log(`round ${round} ${strategy}: p50 ${fmt(entry.p50, 3)} ms, p99 ${fmt(entry.p99, 3)} ms, ${fmtInt(entry.rps)} GET/s, cross-zone ${fmt(100 * entry.crossZoneShare, 1)}%`);
        } finally {
          await stop(respool.child);
        }
      }
    }
  } finally {
    for (const s of shims) s.close();
    await cluster?.stop();
  }

  // ---- report
  const rows = STRATEGIES.map((strategy) => {
    const runs = result.runs.filter((r) => r.strategy === strategy);
    const m = (f) => median(runs.map(f));
    const sameZone = (r) => {
      const o = r.outcomes;
      const counted = Object.values(o).reduce((a, b) => a + b, 0);
      return counted ? ((o.same_zone_replica ?? 0) + (o.same_zone_primary ?? 0)) / counted : NaN;
    };
    return [
      strategy, fmt(m((r) => r.p50), 3), fmt(m((r) => r.p99), 3), fmtInt(m((r) => r.rps)),
      `${fmt(100 * m((r) => r.crossZoneShare), 1)}%`, `${fmt(100 * m((r) => r.primaryShare), 1)}%`,
      strategy === 'primary' ? '(not counted)' : `${fmt(100 * (1 - m(sameZone)), 1)}%`,
    ];
  });
  const table = mdTable(
    ['strategy', 'p50 ms', 'p99 ms', 'GET/s', 'cross-zone reads (node counts)', 'reads on primaries', 'cross-zone reads (reads_total)'],
    rows,
  );
  const layout = result.layout.map((s) => `slots ${s.slots.map((r) => r.join('-')).join(',')}: primary ${s.primary}, replicas ${s.replicas.join(', ')}`);
  const md = [
    '## AZ-affinity reads (`bench/az-reads.mjs`)',
    '',
    `Same GET load through respool (in ${OWN_ZONE}) under each read strategy; a cluster of 3 primaries × 2 replicas, each shard spread over az-a/az-b/az-c; requests to nodes outside ${OWN_ZONE} are held ${DELAY_MS} ms by the bench's forwarding shim (≥ 1 ms: Node timers). valkey-benchmark, ${CLIENTS} clients, no pipelining, ${fmtInt(REQUESTS)} GETs over ${fmtInt(KEYS)} keys per run; medians over ${ROUNDS} round(s)${QUICK ? ' (BENCH_QUICK: smoke run, not a measurement)' : ''}. Cross-zone share from the nodes' own INFO commandstats (and respool's reads_total).`,
    '',
    table,
    '',
    'Layout:',
    ...layout.map((l) => `- ${l}`),
    '',
    `Expected cross-zone shares for this layout: primary 2/3 (two of three primaries are elsewhere), preferReplica 2/3, azAffinity 1/3 (the shard whose primary is in ${OWN_ZONE} has no replica there, so it reads from other zones' replicas), azAffinityReplicasAndPrimary 0 (that shard reads from its primary in ${OWN_ZONE}).`,
    '',
    `How to rerun: \`npm run build && npm run bench:az\` (knobs: BENCH_QUICK, BENCH_ROUNDS, BENCH_REQUESTS, BENCH_CLIENTS, BENCH_KEYS, BENCH_CROSS_ZONE_DELAY_MS). Run ${started.toISOString()}; load command: \`${result.commands.load ?? ''}\`.`,
  ].join('\n');
  writeOutputs('az-reads', result, md);
  writeSection('az-reads', md);
  log('wrote the az-reads section of bench/RESULTS.md');
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
