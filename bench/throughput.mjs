// Throughput and latency: valkey-benchmark against one standalone valkey-server, directly,
// through respool, and through twemproxy (nutcracker), side by side in one run.
//
//   node bench/throughput.mjs            (normally via bash bench/run.sh)
//
// Env: BENCH_QUICK=1 (short runs), BENCH_ROUNDS (3), BENCH_N_P1 (200000), BENCH_N_P16 (1500000),
//      BENCH_CLIENTS (50), BENCH_TWEMPROXY_CONNECTIONS (2), BENCH_RUN_TIMEOUT_S (180),
//      RESPOOL_BENCH_SKIP_RESPOOL=1 (leave respool out), RESPOOL_BENCH_EXTRA_ARGS (more CLI flags),
//      RESPOOL_BENCH_BIN (another respool entry script instead of bin/respool.js).
//
// Each round runs every target once per pipeline depth, in the order direct, respool, twemproxy,
// so machine noise lands on all targets alike. Reported: medians over rounds.
import fs from 'node:fs';
import path from 'node:path';
import {
  HOST, OUT_DIR, RESPOOL_CONNECTIONS_PER_NODE, RespConn, checkSetGet, envFlag, envInt, fmt, fmtInt,
  log, makeTmpRoot, mdTable, median, parseBenchmarkCsv, parseInfo, run, sleep, startRespool, startTwemproxy, startValkey,
  respoolArgs, shellLine, stop, upstreamConnsByOwner, writeOutputs,
} from './lib/common.mjs';

const QUICK = envFlag('BENCH_QUICK');
const SKIP_RESPOOL = envFlag('RESPOOL_BENCH_SKIP_RESPOOL');
const ROUNDS = envInt('BENCH_ROUNDS', QUICK ? 1 : 3);
const N = { 1: envInt('BENCH_N_P1', QUICK ? 20_000 : 200_000), 16: envInt('BENCH_N_P16', QUICK ? 200_000 : 1_500_000) };
const CLIENTS = envInt('BENCH_CLIENTS', 50);
const DATA_SIZE = 100;
const PIPELINES = [1, 16];
const TWEMPROXY_CONNS = envInt('BENCH_TWEMPROXY_CONNECTIONS', 2);
const RUN_TIMEOUT_MS = envInt('BENCH_RUN_TIMEOUT_S', 180) * 1000;
const TARGETS = ['direct', 'respool', 'twemproxy'];
const TESTS = ['GET', 'SET'];
const SAMPLE_EVERY_MS = 250;

function benchArgs(port, pipeline) {
  return ['-h', HOST, '-p', String(port), '-c', String(CLIENTS), '-n', String(N[pipeline]), '-d', String(DATA_SIZE),
    '-P', String(pipeline), '-t', 'get,set', '--csv', '-q'];
}

async function main() {
  const tmpRoot = makeTmpRoot();
  fs.mkdirSync(OUT_DIR, { recursive: true });
  const started = new Date();
  const result = {
    bench: 'throughput',
    started: started.toISOString(),
    quick: QUICK,
    config: { rounds: ROUNDS, n: N, clients: CLIENTS, dataSize: DATA_SIZE, pipelines: PIPELINES,
      twemproxyServerConnections: TWEMPROXY_CONNS, respoolConnectionsPerNode: RESPOOL_CONNECTIONS_PER_NODE,
      skipRespool: SKIP_RESPOOL },
    commands: {},
    errors: [],
    runs: [],
  };
  let valkey, twem, respool, info;
  const live = { direct: true, respool: !SKIP_RESPOOL, twemproxy: true };
  try {
    valkey = await startValkey({ tmpRoot });
    result.commands.valkey = valkey.cmd;
    log(`valkey-server on ${valkey.port}`);
    info = await RespConn.connect(valkey.port);
    // Warm the key valkey-benchmark uses (no -r: "key:__rand_int__") so GETs hit from the start.
    await info.call('SET', 'key:__rand_int__', 'x'.repeat(DATA_SIZE));

    twem = await startTwemproxy({ upstreamPort: valkey.port, serverConnections: TWEMPROXY_CONNS, tmpRoot });
    result.commands.twemproxy = twem.cmd;
    result.twemproxyConfig = twem.config;
    await checkSetGet(twem.port, 'twemproxy');
    log(`twemproxy on ${twem.port} (server_connections: ${TWEMPROXY_CONNS})`);

    if (SKIP_RESPOOL) result.commands.respool = `# skipped (RESPOOL_BENCH_SKIP_RESPOOL=1): ${shellLine('node', respoolArgs('PORT', valkey.port))}`;
    else {
      try {
        respool = await startRespool({ upstreamPort: valkey.port, logFile: path.join(OUT_DIR, 'respool-throughput.log') });
        result.commands.respool = respool.cmd;
        await checkSetGet(respool.port, 'respool');
        log(`respool on ${respool.port}`);
      } catch (e) {
        log(`respool unusable: ${e.message}`);
        result.errors.push(`respool: ${e.message}`);
        live.respool = false;
        await stop(respool?.child);
      }
    }
    const ports = { direct: valkey.port, respool: respool?.port, twemproxy: twem.port };
    const owners = () => ({ respool: respool?.child.pid, twemproxy: twem.child.pid });
    result.idleUpstreamConns = await upstreamConnsByOwner(info, owners(), valkey.port);
    log('idle upstream connections by owner:', JSON.stringify(result.idleUpstreamConns));

    result.commands.benchmark = `valkey-benchmark -h ${HOST} -p PORT -c ${CLIENTS} -n {${N[1]}|${N[16]}} -d ${DATA_SIZE} -P {1|16} -t get,set --csv -q`;
    for (let round = 1; round <= ROUNDS; round++) {
      for (const pipeline of PIPELINES) {
        for (const target of TARGETS) {
          if (!live[target]) continue;
          const r = await oneRun({ target, port: ports[target], upstreamPort: valkey.port, pipeline, round, info, owners });
          result.runs.push(r);
          if (r.error) {
            result.errors.push(`${target} P${pipeline} round ${round}: ${r.error}`);
            if (target === 'respool' && (respool.child.exitCode !== null || respool.child.signalCode !== null)) {
              live.respool = false;
              result.errors.push('respool exited; its remaining runs are skipped');
            }
          }
        }
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
  writeOutputs('throughput', result, markdown(result));
  if (result.errors.length) {
    log(`finished with ${result.errors.length} error(s):\n  ${result.errors.join('\n  ')}`);
    process.exitCode = 1;
  }
}

async function oneRun({ target, port, upstreamPort, pipeline, round, info, owners }) {
  const args = benchArgs(port, pipeline);
  const before = parseInfo(await info.call('INFO', 'stats'));
  const samples = [];
  const snapshots = [];
  let benchPid;
  let done = false;
  const t0 = Date.now();
  // INFO clients every 250 ms; every 4th tick (from 500 ms on) also attribute CLIENT LIST to
  // processes; the snapshot nearest the middle of the run is reported.
  const sampler = (async () => {
    for (let tick = 1; !done; tick++) {
      await sleep(SAMPLE_EVERY_MS);
      if (done) break;
      try {
        const c = parseInfo(await info.callT(2000, 'INFO', 'clients'));
        samples.push({ t: Date.now() - t0, connected: c.connected_clients - 1 });
        if (tick % 4 === 2 && benchPid) {
          const m = await upstreamConnsByOwner(info, { ...owners(), 'valkey-benchmark': benchPid }, upstreamPort);
          if (!done) snapshots.push({ atMs: Date.now() - t0, ...m });
        }
      } catch {
        /* a missed sample is fine */
      }
    }
  })();
  log(`round ${round} P${pipeline} ${target}: valkey-benchmark ${args.join(' ')}`);
  const res = await run('valkey-benchmark', args, { timeoutMs: RUN_TIMEOUT_MS, onSpawn: (ch) => (benchPid = ch.pid) });
  done = true;
  await sampler;
  const mid = snapshots.length
    ? snapshots.reduce((best, x) => (Math.abs(x.atMs - res.ms / 2) < Math.abs(best.atMs - res.ms / 2) ? x : best))
    : null;
  const after = parseInfo(await info.call('INFO', 'stats'));
  const tests = parseBenchmarkCsv(res.out);
  const r = {
    round, target, pipeline, n: N[pipeline], ms: Math.round(res.ms), exitCode: res.code,
    tests,
    upstream: {
      connectionsAccepted: after.total_connections_received - before.total_connections_received,
      connectedSamples: samples,
      connectedMin: samples.length ? Math.min(...samples.map((s) => s.connected)) : null,
      connectedMax: samples.length ? Math.max(...samples.map((s) => s.connected)) : null,
      midRunByOwner: mid,
    },
    stderr: res.err.trim().slice(0, 2000),
  };
  if (res.timedOut) r.error = `timed out after ${RUN_TIMEOUT_MS / 1000} s`;
  else if (res.code !== 0) r.error = `valkey-benchmark exited ${res.code}: ${res.err.trim().slice(0, 300)}`;
  else if (!TESTS.every((t) => tests[t])) r.error = `no CSV rows for ${TESTS.filter((t) => !tests[t]).join(',')}`;
  const s = TESTS.map((t) => `${t} ${fmtInt(tests[t]?.rps)} rps p50 ${fmt(tests[t]?.p50_latency_ms, 3)} ms`).join(', ');
  log(`  → ${(res.ms / 1000).toFixed(1)} s: ${s}; upstream connected ${r.upstream.connectedMin}–${r.upstream.connectedMax}${r.error ? ' ERROR ' + r.error : ''}`);
  return r;
}

function summarize(result) {
  const cells = {};
  for (const target of TARGETS) {
    for (const pipeline of PIPELINES) {
      const runs = result.runs.filter((r) => r.target === target && r.pipeline === pipeline && !r.error);
      for (const test of TESTS) {
        const rows = runs.map((r) => r.tests[test]).filter(Boolean);
        if (!rows.length) continue;
        const pick = (k) => median(rows.map((x) => x[k]));
        cells[`${target}/${pipeline}/${test}`] = {
          rounds: rows.length,
          rps: pick('rps'), rpsPerRound: rows.map((x) => x.rps),
          avgMs: pick('avg_latency_ms'), p50Ms: pick('p50_latency_ms'), p95Ms: pick('p95_latency_ms'),
          p99Ms: pick('p99_latency_ms'), maxMs: pick('max_latency_ms'),
        };
      }
      if (runs.length) {
        const mids = runs.map((r) => r.upstream.midRunByOwner).filter(Boolean);
        cells[`${target}/${pipeline}/conns`] = {
          connectedMin: Math.min(...runs.map((r) => r.upstream.connectedMin ?? Infinity)),
          connectedMax: Math.max(...runs.map((r) => r.upstream.connectedMax ?? -Infinity)),
          accepted: runs.map((r) => r.upstream.connectionsAccepted),
          midRunByOwner: mids,
        };
      }
    }
  }
  const ratio = (a, b) => (a && b ? a / b : null);
  const ratios = {};
  for (const pipeline of PIPELINES) {
    for (const test of TESTS) {
      const g = (t) => cells[`${t}/${pipeline}/${test}`]?.rps;
      // Also the median of per-round ratios (each round's runs were side by side).
      const perRound = (one, other) => {
        const xs = [];
        for (let round = 1; round <= result.config.rounds; round++) {
          const find = (t) => result.runs.find((r) => r.round === round && r.target === t && r.pipeline === pipeline && !r.error)?.tests[test]?.rps;
          const a = find(one);
          const b = find(other);
          if (a && b) xs.push(a / b);
        }
        return xs.length ? median(xs) : null;
      };
      ratios[`${pipeline}/${test}`] = {
        respoolOverDirect: ratio(g('respool'), g('direct')),
        respoolOverTwemproxy: ratio(g('respool'), g('twemproxy')),
        twemproxyOverDirect: ratio(g('twemproxy'), g('direct')),
        respoolOverDirectPerRoundMedian: perRound('respool', 'direct'),
        respoolOverTwemproxyPerRoundMedian: perRound('respool', 'twemproxy'),
        twemproxyOverDirectPerRoundMedian: perRound('twemproxy', 'direct'),
      };
    }
  }
  return { cells, ratios };
}

function markdown(result) {
  const { cells, ratios } = result.summary;
  const c = result.config;
  const out = [];
  out.push(`### Throughput (valkey-benchmark, ${c.clients} clients, ${c.dataSize}-byte values)`);
  out.push('');
  out.push(`Median requests/s over ${c.rounds} round(s); each round runs direct, respool, twemproxy back to back, ` +
    'and the ratios are the median of the per-round ratios (each from runs made side by side). ' +
    `N = ${c.n[1].toLocaleString('en-US')} requests per test at pipeline 1, ${c.n[16].toLocaleString('en-US')} at pipeline 16. ` +
    `respool: --connections-per-node ${c.respoolConnectionsPerNode}; twemproxy: server_connections: ${c.twemproxyServerConnections} (same number of upstream links as respool).`);
  out.push('');
  const rows = [];
  for (const pipeline of PIPELINES) {
    for (const test of TESTS) {
      const g = (t) => cells[`${t}/${pipeline}/${test}`]?.rps;
      const r = ratios[`${pipeline}/${test}`];
      rows.push([test, pipeline, fmtInt(g('direct')), fmtInt(g('respool')), fmtInt(g('twemproxy')),
        fmt(r.respoolOverDirectPerRoundMedian), fmt(r.respoolOverTwemproxyPerRoundMedian), fmt(r.twemproxyOverDirectPerRoundMedian)]);
    }
  }
  out.push(mdTable(['test', 'pipeline', 'direct rps', 'respool rps', 'twemproxy rps', 'respool / direct', 'respool / twemproxy', 'twemproxy / direct'], rows));
  out.push('');
  out.push('### Latency (ms, as reported by valkey-benchmark; each column is its own median over rounds)');
  out.push('');
  const lrows = [];
  for (const pipeline of PIPELINES) {
    for (const test of TESTS) {
      for (const target of TARGETS) {
        const x = cells[`${target}/${pipeline}/${test}`];
        if (!x) {
          lrows.push([test, pipeline, target, '—', '—', '—', '—', '—', result.config.skipRespool && target === 'respool' ? 'skipped' : 'no data']);
          continue;
        }
        lrows.push([test, pipeline, target, fmtInt(x.rps), fmt(x.avgMs, 3), fmt(x.p50Ms, 3), fmt(x.p99Ms, 3), fmt(x.maxMs, 3),
          x.rpsPerRound.map(fmtInt).join(' / ')]);
      }
    }
  }
  out.push(mdTable(['test', 'pipeline', 'target', 'rps', 'avg', 'p50', 'p99', 'max', 'rps per round'], lrows,
    ['l', 'r', 'l', 'r', 'r', 'r', 'r', 'r', 'r']));
  out.push('');
  out.push(`### Upstream connections during the ${c.clients}-client benchmark`);
  out.push('');
  out.push('`connected_clients` from `INFO clients` on the upstream, sampled every 250 ms during each run, minus the ' +
    "benchmark's own INFO connection. It counts every client of the server, so it includes the other proxy's idle links " +
    '(twemproxy preconnects; respool keeps its pool). The "mid-run, by owner" column attributes each `CLIENT LIST` entry ' +
    'to a process by its peer port (`ss -tnp`, or /proc when ss is missing), once mid-run. "accepted" is the growth of ' +
    '`total_connections_received` over each run (direct: 50 clients × 2 tests + 1 connection valkey-benchmark opens to read CONFIG).');
  out.push('');
  const idle = result.idleUpstreamConns ?? {};
  out.push(`Idle, before any run (by owner, including this benchmark's INFO connection): ${Object.entries(idle).map(([k, v]) => `${k} ${v}`).join(', ')}.`);
  out.push('');
  const crows = [];
  for (const pipeline of PIPELINES) {
    for (const target of TARGETS) {
      const x = cells[`${target}/${pipeline}/conns`];
      if (!x) continue;
      const each = x.midRunByOwner.map((m) => Object.entries(m).filter(([k]) => k !== 'atMs' && k !== 'bench (INFO)')
        .sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `${k} ${v}`).join(', '));
      const byOwner = !each.length ? '—' : new Set(each).size === 1 ? `${each[0]} (every round)` : each.join(' · ');
      const range = Number.isFinite(x.connectedMin) ? `${x.connectedMin}–${x.connectedMax}` : '—';
      crows.push([target, pipeline, range, byOwner, x.accepted.join(' / ')]);
    }
  }
  out.push(mdTable(['target', 'pipeline', 'connected_clients (min–max)', 'mid-run, by owner (per round)', 'accepted per round'], crows, ['l', 'r', 'r', 'l', 'r']));
  out.push('');
  if (result.errors.length) {
    out.push('**Errors in this run:**');
    out.push('');
    for (const e of result.errors) out.push(`- ${e.replace(/\n/g, ' ')}`);
    out.push('');
  }
  out.push('<details><summary>twemproxy config used</summary>');
  out.push('');
  out.push('```yaml');
  out.push((result.twemproxyConfig ?? '').trim());
  out.push('```');
  out.push('');
  out.push('</details>');
  return out.join('\n');
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
