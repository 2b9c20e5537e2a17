// Connection storm: 10,000 client connections opened as fast as possible (each sends one PING)
// while 50 established clients run a steady GET load, through respool and directly against a
// Valkey node, side by side in one run.
//
//   npm run bench:storm                 (= bash -c 'ulimit -n <hard limit>; node bench/storm.mjs')
//
// Env: BENCH_QUICK=1 (2,000 connections, short phases), BENCH_STORM_CONNECTIONS (10000),
//      BENCH_STORM_ESTABLISHED (50), BENCH_STORM_BEFORE_MS (4000), BENCH_STORM_ACCEPT_RATE
//      (respool's --accept-rate; default: respool's own default), BENCH_STORM_POOL (2 links/node).
//
// Reported per target: time until every storm connection got its PONG ("accept time"), storm
// errors, the established clients' p50/p99 before vs during the storm, memory per idle client
// (process RSS delta, and heap / used_memory delta, divided by the storm size), and, through
// respool, every upstream node's connection count sampled during the storm (CLIENT LIST).
//
// Linux limits: every storm connection is a file descriptor in the storm process, in respool
// and in valkey-server; the npm script raises `ulimit -n` to the hard limit, valkey-server gets
// --maxclients above the storm size. All traffic is on 127.0.0.1.
import fs from 'node:fs';
import path from 'node:path';
import {
  HOST, OUT_DIR, ROOT_DIR, RespConn, envFlag, envInt, fmt, fmtInt, log, mdTable, parseInfo, percentile, sleep,
  spawn, stop, uniquePort, waitForPing, writeOutputs,
} from './lib/common.mjs';
import { writeSection } from './lib/results-file.mjs';

const QUICK = envFlag('BENCH_QUICK');
const STORM = envInt('BENCH_STORM_CONNECTIONS', QUICK ? 2000 : 10_000);
const ESTABLISHED = envInt('BENCH_STORM_ESTABLISHED', 50);
const BEFORE_MS = envInt('BENCH_STORM_BEFORE_MS', QUICK ? 2000 : 4000);
const ACCEPT_RATE = process.env.BENCH_STORM_ACCEPT_RATE;
const POOL = envInt('BENCH_STORM_POOL', 2);
const SETTLE_MS = 1500;

const { startCluster } = await import(path.join(ROOT_DIR, 'build/harness/valkey-processes.js'));
const calculateSlot = (await import('cluster-key-slot')).default;

function openFileLimit() {
  const m = /Max open files\s+(\d+)/.exec(fs.readFileSync('/proc/self/limits', 'utf8'));
  return m ? Number(m[1]) : NaN;
}

function rssBytes(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : NaN;
}

async function respoolHeapUsed(adminPort) {
  const text = await (await fetch(`http://${HOST}:${adminPort}/metrics`)).text();
  const m = /^nodejs_heap_size_used_bytes (\S+)/m.exec(text);
  return m ? Number(m[1]) : NaN;
}

/** Closed-loop GETs on `ESTABLISHED` connections; samples [time, latency ms]. */
async function startEstablished(port, keys) {
  const conns = await Promise.all(Array.from({ length: ESTABLISHED }, () => RespConn.connect(port)));
  const samples = [];
  let errors = 0;
  let running = true;
  const loops = conns.map(async (c, i) => {
    const key = keys[i % keys.length];
    while (running) {
      const t = performance.now();
      try {
        const v = await c.callT(5000, 'GET', key);
        if (typeof v !== 'string') errors++;
      } catch {
        errors++;
      }
      samples.push([t, performance.now() - t]);
    }
  });
  return {
    samples,
    errors: () => errors,
    async stop() {
      running = false;
      await Promise.all(loops);
      for (const c of conns) c.close();
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

async function runStorm(port) {
  // At the lowest CPU priority: on this small machine the storm's own CPU use (opening thousands of
  // sockets) would otherwise be measured as the server's latency; on a real fleet the storm comes
  // from other hosts.
  const child = spawn('nice', ['-n', '19', process.execPath, 'bench/lib/storm-child.mjs', JSON.stringify({ port, count: STORM })],
    { match: `${process.execPath} bench/lib/storm-child.mjs` });
  const t0 = Date.now();
  while (!child.out.includes('\n')) {
    if (child.exitCode !== null) throw new Error(`storm child exited: ${child.err}`);
    if (Date.now() - t0 > 120_000) throw new Error('storm did not finish in 120 s');
    await sleep(20);
  }
  return { child, result: JSON.parse(child.out.trim().split('\n')[0]) };
}

async function measure(name, { port, keys, memory, links }) {
  log(`${name}: ${ESTABLISHED} established clients, ${BEFORE_MS} ms before the storm`);
  const load = await startEstablished(port, keys);
  await sleep(BEFORE_MS);
  const mem0 = await memory();
  const sampler = links ? sampleUpstreamLinks(links) : null;
  const stormStart = performance.now();
  log(`${name}: storm of ${STORM} connections`);
  const { child, result } = await runStorm(port);
  const stormEnd = performance.now();
  await sleep(SETTLE_MS);
  const mem1 = await memory();
  await sampler?.stop();
  await load.stop();
  await stop(child);
  const before = load.samples.filter(([t]) => t < stormStart).map(([, l]) => l);
  const during = load.samples.filter(([t]) => t >= stormStart && t <= stormEnd).map(([, l]) => l);
  const row = {
    target: name,
    storm: result,
    established: {
      before: { n: before.length, p50: percentile(before, 50), p99: percentile(before, 99) },
      during: { n: during.length, p50: percentile(during, 50), p99: percentile(during, 99) },
      errors: load.errors(),
    },
    memoryPerIdleClient: {
      rssBytes: (mem1.rss - mem0.rss) / STORM,
      heapBytes: (mem1.heap - mem0.heap) / STORM,
      heapKind: mem0.heapKind,
    },
    upstreamLinksPerNode: sampler
      ? Object.fromEntries(Object.entries(sampler.seen).map(([p, xs]) => [p, { min: Math.min(...xs), max: Math.max(...xs), samples: xs.length }]))
      : null,
  };
  log(`${name}: accept ${fmt(result.acceptMs, 0)} ms, p99 ${fmt(row.established.before.p99)} → ${fmt(row.established.during.p99)} ms, ` +
    `${fmt(row.memoryPerIdleClient.rssBytes / 1024)} KiB RSS per idle client`);
  return row;
}

async function main() {
  const limit = openFileLimit();
  if (limit < STORM + 2000) log(`warning: ulimit -n is ${limit}; a storm of ${STORM} needs more (run via npm run bench:storm)`);
  const cluster = await startCluster({
    primaries: 3, replicasPerPrimary: 0,
    args: ['--maxclients', String(Math.min(limit - 100, STORM + 5000)), '--tcp-backlog', '4096'],
  });
  const rows = [];
  let respool;
  try {
    const nodes = cluster.nodes;
    const node0 = (await cluster.primaries())[0];
    // Established clients read keys owned by node0 on both paths (same upstream work).
    const keys = [];
    for (let i = 0; keys.length < ESTABLISHED; i++) {
      const k = `storm:{${i}}`;
      if ((await cluster.primaryForSlot(calculateSlot(k))).port === node0.port) keys.push(k);
    }
    for (const k of keys) await cluster.call(node0, 'SET', k, 'v'.repeat(100));

    const port = await uniquePort();
    const adminPort = await uniquePort();
    const args = ['bin/respool.js', '--listen', `${HOST}:${port}`, '--upstream', nodes.map((n) => `${HOST}:${n.port}`).join(','),
      '--mode', 'cluster', '--admin', `${HOST}:${adminPort}`, '--log-level', 'warn', '--connections-per-node', String(POOL),
      '--max-clients', String(STORM + 1000), ...(ACCEPT_RATE ? ['--accept-rate', ACCEPT_RATE] : [])];
    const logFile = path.join(OUT_DIR, 'respool-storm.log');
    fs.writeFileSync(logFile, '');
    respool = spawn(process.execPath, args, { logFile });
    await waitForPing(port, { child: respool, what: 'respool', timeoutMs: 15_000 });
    const respoolCmd = `node ${args.join(' ')}`;

    rows.push(await measure('respool', {
      port, keys, links: nodes,
      memory: async () => ({ rss: rssBytes(respool.pid), heap: await respoolHeapUsed(adminPort), heapKind: 'V8 heap used' }),
    }));
    await sleep(1000);
    const info = await RespConn.connect(node0.port);
    rows.push(await measure('direct (valkey-server)', {
      port: node0.port, keys,
      memory: async () => ({
        rss: rssBytes(node0.pid),
        heap: Number(parseInfo(await info.callT(3000, 'INFO', 'memory')).used_memory),
        heapKind: 'INFO used_memory',
      }),
    }));
    info.close();
    report(rows, respoolCmd);
  } finally {
    await stop(respool);
    await cluster.stop();
  }
}

function report(rows, respoolCmd) {
  const table = mdTable(
    ['target', 'storm accept time (all PONG)', 'storm errors', 'established p50 before → during (ms)',
      'established p99 before → during (ms)', 'p99 during / before', 'memory per idle client (RSS)', 'per idle client (heap / used_memory)'],
    rows.map((r) => [
      r.target,
      `${fmtInt(r.storm.acceptMs)} ms`,
      `${r.storm.failed}${Object.keys(r.storm.errors).length ? ` (${Object.entries(r.storm.errors).map(([k, v]) => `${k}: ${v}`).join(', ')})` : ''}`,
      `${fmt(r.established.before.p50, 3)} → ${fmt(r.established.during.p50, 3)}`,
      `${fmt(r.established.before.p99, 3)} → ${fmt(r.established.during.p99, 3)}`,
      `${fmt(r.established.during.p99 / r.established.before.p99)}×`,
      `${fmt(r.memoryPerIdleClient.rssBytes / 1024, 1)} KiB`,
      `${fmt(r.memoryPerIdleClient.heapBytes / 1024, 1)} KiB`,
    ]),
  );
  const rp = rows.find((r) => r.target === 'respool');
  const links = rp?.upstreamLinksPerNode
    ? mdTable(['upstream node', 'respool links during the storm (min–max)', 'samples'],
      Object.entries(rp.upstreamLinksPerNode).map(([p, v]) => [`${HOST}:${p}`, `${v.min}–${v.max}`, v.samples]))
    : '';
  const md = [
    '## Connection storm (issue 4)',
    '',
    `**Rerun:** \`npm run bench:storm\` (${QUICK ? '**BENCH_QUICK=1 smoke run** — ' : ''}${STORM.toLocaleString('en-US')} storm connections, ` +
      `${ESTABLISHED} established clients doing closed-loop GETs on keys of one node; 3-primary cluster, respool with ` +
      `${POOL} links per node). respool command: \`${respoolCmd}\`.`,
    '',
    table,
    '',
    'Upstream connections stay at the pool size while the storm hits respool (none of the storm is passed upstream):',
    '',
    links,
    '',
    '"Accept time" is from the first connect until every storm connection got its +PONG: through respool it includes ' +
      'the accept-rate limit (`--accept-rate`, new clients admitted after the established clients of each event-loop ' +
      'turn). Memory per idle client = (process RSS, or heap, after the storm settled − before) / storm size.',
    `Measured ${new Date().toISOString()} on ${fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join('/')} load (1/5/15 min).`,
  ].join('\n');
  writeOutputs('storm', { rows, storm: STORM, established: ESTABLISHED, respoolCmd }, md);
  writeSection('storm', md);
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
