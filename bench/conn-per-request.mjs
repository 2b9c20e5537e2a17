// Connection per request: the sidecar's case. Concurrent workers in this one Node process each
// loop: open a TCP connection, send `GET key` (raw RESP), read the reply, close. Directly to
// valkey-server, through respool and through twemproxy. Reference rows: the same GETs over one
// persistent connection per worker (what a client-side pool gives).
//
//   node bench/conn-per-request.mjs      (normally via bash bench/run.sh)
//
// Env: BENCH_QUICK=1, BENCH_CPR_OPS (20000 per run), BENCH_CPR_WORKERS (20), BENCH_CPR_ROUNDS (3),
//      BENCH_CPR_MAX_S (30: a run stops early past this), BENCH_TWEMPROXY_CONNECTIONS (2),
//      RESPOOL_BENCH_SKIP_RESPOOL=1, RESPOOL_BENCH_EXTRA_ARGS, RESPOOL_BENCH_BIN.
//
// Reported per configuration: the median over rounds of each run's ms/op (mean, p50, p99), its
// ops/s, and how many connections the upstream accepted during the run (growth of
// total_connections_received in INFO stats).
import fs from 'node:fs';
import path from 'node:path';
import net from 'node:net';
import {
  HOST, OUT_DIR, RESPOOL_CONNECTIONS_PER_NODE, RespConn, checkSetGet, encodeCommand, envFlag, envInt, fmt,
  fmtInt, log, makeTmpRoot, mdTable, mean, median, parseInfo, percentile, RespDecoder, sleep, startRespool,
  respoolArgs, shellLine, startTwemproxy, startValkey, stop, writeOutputs,
} from './lib/common.mjs';

const QUICK = envFlag('BENCH_QUICK');
const SKIP_RESPOOL = envFlag('RESPOOL_BENCH_SKIP_RESPOOL');
const OPS = envInt('BENCH_CPR_OPS', QUICK ? 2_000 : 20_000);
const WORKERS = envInt('BENCH_CPR_WORKERS', 20);
const ROUNDS = envInt('BENCH_CPR_ROUNDS', QUICK ? 1 : 3);
const MAX_MS = envInt('BENCH_CPR_MAX_S', 30) * 1000;
const TWEMPROXY_CONNS = envInt('BENCH_TWEMPROXY_CONNECTIONS', 2);
const OP_TIMEOUT_MS = 5000;
const KEY = 'bench:cpr:key';
const VALUE = 'v'.repeat(100);
const GET = encodeCommand(['GET', KEY]);

const CONFIGS = [
  { target: 'direct', mode: 'per-request' },
  { target: 'respool', mode: 'per-request' },
  { target: 'twemproxy', mode: 'per-request' },
  { target: 'direct', mode: 'persistent' },
  { target: 'respool', mode: 'persistent' },
];
const label = (c) => `${c.target} / ${c.mode}`;

/** Connect, send GET, read one reply, close. Resolves the reply value. */
function getOverNewConnection(port) {
  return new Promise((resolve, reject) => {
    let settled = false;
    const finish = (err, v) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock.destroy();
      if (err) reject(err);
      else resolve(v);
    };
    const sock = net.createConnection({ port, host: HOST });
    const timer = setTimeout(() => finish(new Error('timeout')), OP_TIMEOUT_MS);
    sock.setNoDelay(true);
    const decoder = new RespDecoder();
    sock.on('connect', () => sock.write(GET));
    sock.on('data', (d) => {
      decoder.push(d);
      const r = decoder.next();
      if (r !== undefined) finish(null, r);
    });
    sock.on('error', (e) => finish(e));
    sock.on('close', () => finish(new Error('closed before the reply')));
  });
}

async function oneRun(cfg, port, round, info) {
  const lat = new Float64Array(OPS);
  let next = 0;
  let done = 0;
  let errors = 0;
  let firstError = null;
  const before = parseInfo(await info.call('INFO', 'stats'));
  const tStart = performance.now();
  const deadline = tStart + MAX_MS;
  const check = (v) => {
    if (v !== VALUE) throw new Error(`unexpected reply ${(v instanceof Error ? `-${v.message}` : JSON.stringify(v)).slice(0, 80)}`);
  };
  const worker = async () => {
    let conn = null;
    if (cfg.mode === 'persistent') conn = await RespConn.connect(port);
    try {
      while (next < OPS && performance.now() < deadline) {
        next++;
        const t0 = performance.now();
        try {
          check(cfg.mode === 'persistent' ? await conn.callT(OP_TIMEOUT_MS, 'GET', KEY) : await getOverNewConnection(port));
          lat[done++] = performance.now() - t0;
        } catch (e) {
          errors++;
          firstError ??= e.message;
          if (cfg.mode === 'persistent') {
            conn.close();
            conn = await RespConn.connect(port);
          }
        }
      }
    } finally {
      conn?.close();
    }
  };
  await Promise.all(Array.from({ length: WORKERS }, worker));
  const wallMs = performance.now() - tStart;
  await sleep(200); // let the server notice the last closes before reading counters
  const after = parseInfo(await info.call('INFO', 'stats'));
  const xs = lat.subarray(0, done);
  const r = {
    round, target: cfg.target, mode: cfg.mode, ops: done, errors, firstError,
    wallMs: Math.round(wallMs), opsPerSec: (done / wallMs) * 1000,
    meanMs: mean(Array.from(xs)), p50Ms: percentile(xs, 50), p99Ms: percentile(xs, 99), maxMs: percentile(xs, 100),
    upstreamConnectionsAccepted: after.total_connections_received - before.total_connections_received,
    upstreamRejected: after.rejected_connections - before.rejected_connections,
  };
  log(`round ${round} ${label(cfg)}: ${done} ops in ${(wallMs / 1000).toFixed(1)} s, ` +
    `mean ${fmt(r.meanMs, 3)} ms p50 ${fmt(r.p50Ms, 3)} p99 ${fmt(r.p99Ms, 3)}, ` +
    `upstream accepted ${r.upstreamConnectionsAccepted}${errors ? `, ${errors} errors (${firstError})` : ''}`);
  return r;
}

async function main() {
  const tmpRoot = makeTmpRoot();
  fs.mkdirSync(OUT_DIR, { recursive: true });
  const result = {
    bench: 'conn-per-request',
    started: new Date().toISOString(),
    quick: QUICK,
    config: { opsPerRun: OPS, workers: WORKERS, rounds: ROUNDS, maxSecondsPerRun: MAX_MS / 1000,
      valueBytes: VALUE.length, respoolConnectionsPerNode: RESPOOL_CONNECTIONS_PER_NODE,
      twemproxyServerConnections: TWEMPROXY_CONNS, skipRespool: SKIP_RESPOOL },
    commands: {},
    errors: [],
    runs: [],
  };
  let valkey, twem, respool, info;
  const live = { direct: true, respool: !SKIP_RESPOOL, twemproxy: true };
  try {
    valkey = await startValkey({ tmpRoot });
    result.commands.valkey = valkey.cmd;
    info = await RespConn.connect(valkey.port);
    await info.call('SET', KEY, VALUE);
    twem = await startTwemproxy({ upstreamPort: valkey.port, serverConnections: TWEMPROXY_CONNS, tmpRoot });
    result.commands.twemproxy = twem.cmd;
    await checkSetGet(twem.port, 'twemproxy');
    if (SKIP_RESPOOL) result.commands.respool = `# skipped (RESPOOL_BENCH_SKIP_RESPOOL=1): ${shellLine('node', respoolArgs('PORT', valkey.port))}`;
    else {
      try {
        respool = await startRespool({ upstreamPort: valkey.port, logFile: path.join(OUT_DIR, 'respool-conn-per-request.log') });
        result.commands.respool = respool.cmd;
        await checkSetGet(respool.port, 'respool');
      } catch (e) {
        log(`respool unusable: ${e.message}`);
        result.errors.push(`respool: ${e.message}`);
        live.respool = false;
        await stop(respool?.child);
      }
    }
    const ports = { direct: valkey.port, respool: respool?.port, twemproxy: twem.port };
    log(`valkey ${valkey.port}, twemproxy ${twem.port}, respool ${respool?.port ?? '(skipped)'}; ` +
      `${WORKERS} workers × ${OPS} ops per run, ${ROUNDS} round(s)`);
    for (let round = 1; round <= ROUNDS; round++) {
      for (const cfg of CONFIGS) {
        if (!live[cfg.target]) continue;
        if (cfg.target === 'respool' && (respool.child.exitCode !== null || respool.child.signalCode !== null)) {
          live.respool = false;
          result.errors.push('respool exited; its remaining runs are skipped');
          continue;
        }
        const r = await oneRun(cfg, ports[cfg.target], round, info);
        result.runs.push(r);
        if (r.errors) result.errors.push(`${label(cfg)} round ${round}: ${r.errors} failed ops (first: ${r.firstError})`);
      }
    }
  } finally {
    info?.close();
    await stop(respool?.child);
    await stop(twem?.child);
    await stop(valkey?.child);
    fs.rmSync(tmpRoot, { recursive: true, force: true });
  }
  result.finished = new Date().toISOString();
  result.summary = summarize(result);
  writeOutputs('conn-per-request', result, markdown(result));
  if (result.errors.length) {
    log(`finished with ${result.errors.length} error(s):\n  ${result.errors.join('\n  ')}`);
    process.exitCode = 1;
  }
}

function summarize(result) {
  const rows = {};
  for (const cfg of CONFIGS) {
    const runs = result.runs.filter((r) => r.target === cfg.target && r.mode === cfg.mode && r.ops > 0);
    if (!runs.length) continue;
    const m = (k) => median(runs.map((r) => r[k]));
    rows[label(cfg)] = {
      ...cfg, rounds: runs.length, meanMs: m('meanMs'), p50Ms: m('p50Ms'), p99Ms: m('p99Ms'), opsPerSec: m('opsPerSec'),
      ops: runs.map((r) => r.ops), errors: runs.reduce((s, r) => s + r.errors, 0),
      upstreamConnectionsAccepted: runs.map((r) => r.upstreamConnectionsAccepted),
    };
  }
  const g = (l) => rows[l]?.meanMs;
  return {
    rows,
    directPerRequestOverRespoolPerRequest: g('respool / per-request') ? g('direct / per-request') / g('respool / per-request') : null,
    respoolPerRequestOverDirectPersistent: g('direct / persistent') ? g('respool / per-request') / g('direct / persistent') : null,
  };
}

function markdown(result) {
  const c = result.config;
  const { rows } = result.summary;
  const out = [];
  out.push(`### Connection per request (${c.workers} concurrent workers, ${c.opsPerRun.toLocaleString('en-US')} GETs per run, ${c.valueBytes}-byte value)`);
  out.push('');
  out.push(`"per-request": each GET opens a new TCP connection, sends \`GET\`, reads the reply, closes. ` +
    `"persistent": each worker keeps one connection (the client-side-pool reference). ` +
    `Latency is measured per GET in the driving Node process, from connect() to the whole reply. ` +
    `Medians over ${c.rounds} round(s), configurations interleaved in each round. ` +
    '"upstream conns accepted" is the growth of `total_connections_received` on the valkey-server over each run.');
  out.push('');
  const trows = [];
  for (const cfg of CONFIGS) {
    const x = rows[label(cfg)];
    if (!x) {
      trows.push([cfg.target, cfg.mode, '—', '—', '—', '—', '—', c.skipRespool && cfg.target === 'respool' ? 'skipped' : 'no data']);
      continue;
    }
    trows.push([cfg.target, cfg.mode, fmt(x.meanMs, 3), fmt(x.p50Ms, 3), fmt(x.p99Ms, 3), fmtInt(x.opsPerSec),
      x.ops.map(fmtInt).join(' / '), x.upstreamConnectionsAccepted.map(fmtInt).join(' / ')]);
  }
  out.push(mdTable(['target', 'mode', 'ms/op mean', 'p50', 'p99', 'ops/s', 'ops per round', 'upstream conns accepted per round'], trows,
    ['l', 'l', 'r', 'r', 'r', 'r', 'r', 'r']));
  out.push('');
  const s = result.summary;
  if (s.directPerRequestOverRespoolPerRequest) {
    out.push(`Per-request connections through respool: mean ms/op is ${fmt(1 / s.directPerRequestOverRespoolPerRequest)}× that of per-request connections straight to valkey-server ` +
      `(${fmt(s.respoolPerRequestOverDirectPersistent)}× that of a persistent direct connection).`);
    out.push('');
  }
  if (result.errors.length) {
    out.push('**Errors in this run:**');
    out.push('');
    for (const e of result.errors) out.push(`- ${e.replace(/\n/g, ' ')}`);
    out.push('');
  }
  return out.join('\n');
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
