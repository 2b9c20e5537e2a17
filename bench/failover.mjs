// Failover under load: a 3-primary + 3-replica cluster; 12 clients write (SET a fresh key, then
// GET it back) in a closed loop; after KILL_AT seconds one primary is SIGKILLed; the replica is
// promoted by the cluster. Run twice, side by side: through respool, and directly with iovalkey's
// Cluster client (default options). Per second: successful operations and errors; the dead node's
// connection attempts (a plain TCP listener bound on its port right after the kill counts and
// drops them); afterwards every acknowledged write is read back (lost / mismatched counts).
//
//   npm run bench:failover        (= node bench/failover.mjs; needs `npm run build`)
//
// Env: BENCH_QUICK=1 (short phases), BENCH_FAILOVER_SECONDS (20), BENCH_FAILOVER_KILL_AT (5),
//      BENCH_FAILOVER_WORKERS (12), BENCH_FAILOVER_NODE_TIMEOUT_MS (2000: cluster-node-timeout and
//      respool's --dial-window), BENCH_FAILOVER_DIAL_ATTEMPTS (10).
//
// The cluster runs with cluster-require-full-coverage no: with the default, Valkey itself refuses
// every shard while one has no primary, and "other shards unaffected" cannot hold for any client.
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import {
  HOST, OUT_DIR, ROOT_DIR, ReplyError, RespConn, envFlag, envInt, fmt, fmtInt, log, mdTable, sleep, spawn, stop, uniquePort,
  waitForPing, writeOutputs,
} from './lib/common.mjs';
import { writeSection } from './lib/results-file.mjs';

const QUICK = envFlag('BENCH_QUICK');
const SECONDS = envInt('BENCH_FAILOVER_SECONDS', QUICK ? 12 : 20);
const KILL_AT = envInt('BENCH_FAILOVER_KILL_AT', QUICK ? 3 : 5);
const WORKERS = envInt('BENCH_FAILOVER_WORKERS', 12);
const NODE_TIMEOUT_MS = envInt('BENCH_FAILOVER_NODE_TIMEOUT_MS', 2000);
const DIAL_ATTEMPTS = envInt('BENCH_FAILOVER_DIAL_ATTEMPTS', 10);
const OP_TIMEOUT_MS = 10_000;

const { startCluster } = await import(path.join(ROOT_DIR, 'build/harness/valkey-processes.js'));
const Valkey = (await import('iovalkey')).default;
const calculateSlot = (await import('cluster-key-slot')).default;

const withTimeout = (p) => {
  let t;
  return Promise.race([p, new Promise((_, rej) => { t = setTimeout(() => rej(new Error('client-side timeout')), OP_TIMEOUT_MS); })])
    .finally(() => clearTimeout(t));
};

/** A plain listener on the dead node's port: counts and drops every connection attempt. */
async function dialCounter(port) {
  const stamps = [];
  const server = net.createServer((s) => {
    stamps.push(Date.now());
    s.destroy();
  });
  for (let i = 0; ; i++) {
    try {
      await new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, HOST, () => {
          server.off('error', reject);
          resolve();
        });
      });
      return { stamps, close: () => new Promise((r) => server.close(() => r())) };
    } catch (e) {
      if (i > 200) throw e;
      await sleep(10);
    }
  }
}

function maxInWindow(stamps, windowMs) {
  let max = 0;
  for (const s of stamps) max = Math.max(max, stamps.filter((t) => t >= s && t < s + windowMs).length);
  return max;
}

/**
 * Runs the load through `ops` ({ set(worker, key, value), get(worker, key) } → reply, or throws)
 * and kills the first shard's primary at KILL_AT. Returns per-second series and the acknowledged writes.
 */
async function runPhase(name, cluster, ops, tags) {
  const t0 = Date.now();
  const seconds = Array.from({ length: SECONDS }, () => ({ ok: 0, errors: 0, dials: 0 }));
  const bucket = (t) => seconds[Math.min(SECONDS - 1, Math.max(0, Math.floor((t - t0) / 1000)))];
  const acked = [];
  let mismatched = 0;
  const errorKinds = {};
  let running = true;
  const loops = tags.map(async (tag, w) => {
    for (let n = 0; running; n++) {
      const key = `{${tag}}:${name}:${w}:${n}`;
      const value = `${w}-${n}-${Math.random().toString(36).slice(2, 10)}`;
      try {
        const r = await withTimeout(ops.set(w, key, value));
        if (r !== 'OK') throw new Error(String(r));
        acked.push([key, value]);
        const g = await withTimeout(ops.get(w, key));
        if (g !== value) {
          mismatched++;
          throw new Error(`mismatch: GET ${key} → ${g}`);
        }
        bucket(Date.now()).ok += 2;
      } catch (e) {
        bucket(Date.now()).errors++;
        const k = String(e.message ?? e).replace(/\d+/g, 'N').slice(0, 90);
        errorKinds[k] = (errorKinds[k] ?? 0) + 1;
        await sleep(10);
      }
    }
  });
  await sleep(KILL_AT * 1000);
  const firstShard = (await cluster.shards())[0];
  const victim = firstShard.primary;
  const victimSlot = firstShard.slots[0][0];
  const killAt = Date.now();
  log(`${name}: killing primary ${victim.address}`);
  await cluster.killNode(victim);
  const counter = await dialCounter(victim.port);
  let promotedAt = 0;
  while (Date.now() - t0 < SECONDS * 1000) {
    if (!promotedAt) {
      const owner = await cluster.primaryForSlot(victimSlot).catch(() => null);
      if (owner && owner.port !== victim.port) promotedAt = Date.now();
    }
    await sleep(100);
  }
  running = false;
  await Promise.all(loops);
  await counter.close();
  for (const t of counter.stamps) bucket(t).dials++;
  // Read back every acknowledged write.
  let lost = 0;
  let checked = 0;
  for (const [key, value] of acked) {
    let got;
    try {
      got = await withTimeout(ops.get(0, key));
    } catch (e) {
      got = `error: ${e.message}`;
    }
    checked++;
    if (got !== value) {
      lost++;
      if (lost <= 3) log(`${name}: acknowledged write not readable: ${key}=${value} → ${got}`);
    }
  }
  log(`${name}: ${counter.stamps.length} dials to the dead node; ${checked} acknowledged writes checked, ${lost} lost`);
  await cluster.restartNode(victim);
  await cluster.waitForStable({ timeoutMs: 45_000 });
  return {
    name, seconds, killAt: killAt - t0, promotedAt: promotedAt ? promotedAt - t0 : null,
    dials: counter.stamps.map((t) => t - killAt), maxDialsPerWindow: maxInWindow(counter.stamps, NODE_TIMEOUT_MS),
    acked: checked, lost, mismatched, errorKinds, victim: victim.address,
  };
}

async function main() {
  const cluster = await startCluster({
    primaries: 3, replicasPerPrimary: 1, nodeTimeoutMs: NODE_TIMEOUT_MS,
    args: ['--cluster-require-full-coverage', 'no'],
  });
  let respool;
  try {
    // Worker tags spread evenly over the shards; remember one slot of the first primary (the victim).
    const shards = await cluster.shards();
    const tags = [];
    for (let i = 0; tags.length < WORKERS; i++) {
      const tag = `fo${i}`;
      const owner = shards.findIndex((s) => s.slots.some(([a, b]) => calculateSlot(tag) >= a && calculateSlot(tag) <= b));
      if (tags.filter((t) => t.shard === owner).length < Math.ceil(WORKERS / shards.length)) tags.push({ tag, shard: owner });
    }
    const tagNames = tags.map((t) => t.tag);

    // ---- through respool
    const port = await uniquePort();
    const args = ['bin/respool.js', '--listen', `${HOST}:${port}`,
      '--upstream', cluster.nodes.map((n) => `${HOST}:${n.port}`).join(','), '--mode', 'cluster', '--log-level', 'warn',
      '--dial-window', `${NODE_TIMEOUT_MS}ms`, '--dial-attempts-per-window', String(DIAL_ATTEMPTS)];
    const logFile = path.join(OUT_DIR, 'respool-failover.log');
    fs.writeFileSync(logFile, '');
    respool = spawn(process.execPath, args, { logFile });
    await waitForPing(port, { child: respool, what: 'respool', timeoutMs: 15_000 });
    // One connection per client, as an application would hold it (a connection's replies come
    // back in order, so sharing one between workers would make them wait for each other).
    const conns = await Promise.all(tagNames.map(() => RespConn.connect(port)));
    const viaRespool = await runPhase('respool', cluster, {
      set: async (w, k, v) => {
        const r = await conns[w].call('SET', k, v);
        if (r instanceof ReplyError) throw new Error(r.message);
        return r;
      },
      get: async (w, k) => {
        const r = await conns[w].call('GET', k);
        if (r instanceof ReplyError) throw new Error(r.message);
        return r;
      },
    }, tagNames);
    for (const c of conns) c.close();
    await stop(respool);
    respool = null;

    // ---- directly, iovalkey Cluster client with its defaults
    const client = new Valkey.Cluster(cluster.nodes.map((n) => ({ host: HOST, port: n.port })));
    client.on('error', () => {});
    await client.ping();
    const direct = await runPhase('iovalkey Cluster (direct)', cluster, {
      set: (_w, k, v) => client.set(k, v),
      get: (_w, k) => client.get(k),
    }, tagNames);
    client.disconnect();
    report([viaRespool, direct], `node ${args.join(' ')}`);
  } finally {
    if (respool) await stop(respool);
    await cluster.stop();
  }
}

function report(phases, respoolCmd) {
  const [a, b] = phases;
  const rows = [];
  for (let s = 0; s < SECONDS; s++) {
    const label = `${s - KILL_AT >= 0 ? '+' : ''}${s - KILL_AT}`;
    rows.push([label, fmtInt(a.seconds[s].ok), fmtInt(a.seconds[s].errors), fmtInt(a.seconds[s].dials),
      fmtInt(b.seconds[s].ok), fmtInt(b.seconds[s].errors), fmtInt(b.seconds[s].dials)]);
  }
  const timeline = mdTable(
    ['second (0 = kill)', 'respool ops', 'respool errors', 'dials to dead node (respool)', 'iovalkey ops', 'iovalkey errors', 'dials to dead node (iovalkey)'],
    rows,
  );
  const summary = mdTable(
    ['path', 'promoted after kill', 'errors total', 'dials to dead node', 'max dials per ' + `${NODE_TIMEOUT_MS} ms window`, 'acknowledged writes checked', 'lost', 'mismatched replies'],
    phases.map((p) => [p.name, p.promotedAt === null ? '—' : `${fmt((p.promotedAt - p.killAt) / 1000, 1)} s`,
      fmtInt(p.seconds.reduce((n, x) => n + x.errors, 0)), fmtInt(p.dials.length), fmtInt(p.maxDialsPerWindow),
      fmtInt(p.acked), fmtInt(p.lost), fmtInt(p.mismatched)]),
  );
  const kinds = phases.map((p) => `- ${p.name}: ${Object.entries(p.errorKinds).sort((x, y) => y[1] - x[1]).slice(0, 4)
    .map(([k, v]) => `\`${k}\` ×${v}`).join('; ') || 'none'}`).join('\n');
  const md = [
    '## Failover under load (issue 4)',
    '',
    `**Rerun:** \`npm run bench:failover\` (${QUICK ? '**BENCH_QUICK=1 smoke run** — ' : ''}3 primaries + 3 replicas, ` +
      `cluster-node-timeout ${NODE_TIMEOUT_MS} ms, cluster-require-full-coverage no; ${WORKERS} clients each SET a fresh key then GET it, ` +
      `closed loop; one primary SIGKILLed at second 0). respool: \`${respoolCmd}\` (budget: ${DIAL_ATTEMPTS} dials per ${NODE_TIMEOUT_MS} ms ` +
      `window per node). Direct: iovalkey \`Cluster\` with default options. The dead node's connection attempts are counted by a ` +
      'plain TCP listener bound on its port right after the kill.',
    '',
    summary,
    '',
    'Per second (operations = successful SET + GET replies):',
    '',
    timeline,
    '',
    'Most frequent errors:',
    '',
    kinds,
    '',
    `Measured ${new Date().toISOString()}.`,
  ].join('\n');
  writeOutputs('failover', { phases, respoolCmd }, md);
  writeSection('failover', md);
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
