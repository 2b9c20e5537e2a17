// TLS and pooling: what a TLS handshake per connection costs a connection-per-request client, and
// what TLS costs respool's own throughput.
//
//   npm run bench:tls          (= npm run build && npm run build:harness && node bench/tls-pooling.mjs)
//
// (a) connection per operation: a client that connects, AUTHs (AUTH default <pw>) and runs one
//     GET per connection, then closes, one operation at a time (sequential) and with
//     BENCH_TLS_WORKERS concurrent loops:
//       direct-tls : over TLS straight to valkey-server (requirepass, tls-port)
//       sidecar    : over plaintext TCP to a respool sidecar that keeps its pooled TLS links to
//                    the same valkey-server (--upstream-tls-*, --connections-per-node 2)
//     ms per operation and the ratio; the node's connected_clients at the end of the sidecar run
//     shows respool's pool instead of one TLS connection per operation.
// (b) respool's listener, plaintext vs TLS: valkey-benchmark GET at P=1 and P=16 through the same
//     respool (its --listen and --listen-tls), upstream links over TLS in both.
//
// Env: BENCH_TLS_OPS (1500 operations per (a) run), BENCH_TLS_WORKERS (8), BENCH_TLS_REQUESTS
//      (P=1: 40000, P=16: 200000 requests per valkey-benchmark run), BENCH_TLS_CLIENTS (50),
//      BENCH_ROUNDS (2: runs alternate A, B, A, B).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  HOST, OUT_DIR, ROOT_DIR, envInt, fmt, fmtInt, log, mdTable, median, parseBenchmarkCsv, parseInfo,
  percentile, run, shellLine, sleep, spawn, stop, uniquePort,
} from './lib/common.mjs';
import { writeSection } from './lib/results-file.mjs';
import { RESPOOL_BIN, respoolBuildLabel } from './lib/respool-build.mjs';

const OPS = envInt('BENCH_TLS_OPS', 1500);
const WORKERS = envInt('BENCH_TLS_WORKERS', 8);
const REQ_P1 = envInt('BENCH_TLS_REQUESTS', 40_000);
const REQ_P16 = REQ_P1 * 5;
const CLIENTS = envInt('BENCH_TLS_CLIENTS', 50);
const ROUNDS = envInt('BENCH_ROUNDS', 2);
const PASSWORD = 'bench-tls-password';

const { makeTestCerts, startTlsStandalone } = await import(path.join(ROOT_DIR, 'build/harness/valkey-tls.js'));
const { RawClient } = await import(path.join(ROOT_DIR, 'build/harness/raw-client.js'));

/** One operation: connect (TLS or TCP), AUTH default <pw>, GET, close. Resolves with its ms. */
async function oneOp(port, tlsOptions) {
  const t0 = performance.now();
  const c = await RawClient.connect(port, { username: 'default', password: PASSWORD, timeoutMs: 5000, ...(tlsOptions ? { tls: tlsOptions } : {}) });
  const v = await c.call('GET', 'bench:tls:key');
  c.close();
  if (v !== 'value') throw new Error(`GET answered ${JSON.stringify(v)}`);
  return performance.now() - t0;
}

/** `ops` operations over `workers` concurrent loops; per-op latencies and wall time. */
async function connPerOp(port, tlsOptions, ops, workers) {
  const lat = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: workers }, async () => {
    while (next++ < ops) lat.push(await oneOp(port, tlsOptions));
  }));
  const wallMs = performance.now() - t0;
  return { ops: lat.length, wallMs, msPerOp: wallMs / lat.length, p50: percentile(lat, 50), p99: percentile(lat, 99), opsPerS: lat.length / (wallMs / 1000) };
}

async function main() {
  const started = new Date().toISOString();
  const certs = makeTestCerts();
  const tlsOptions = { ca: fs.readFileSync(certs.ca), servername: 'localhost' };
  const { node, tlsPort } = await startTlsStandalone(certs, { password: PASSWORD, args: ['--maxclients', '10000'] });
  const respoolPort = await uniquePort();
  const respoolTlsPort = await uniquePort();
  const respoolArgs = [RESPOOL_BIN, '--listen', `${HOST}:${respoolPort}`, '--listen-tls', `${HOST}:${respoolTlsPort}`,
    '--tls-cert', certs.serverCert, '--tls-key', certs.serverKey,
    '--upstream', `${HOST}:${tlsPort}`, '--mode', 'standalone', '--connections-per-node', '2',
    '--upstream-tls-ca', certs.ca, '--log-level', 'warn'];
  const logFile = path.join(OUT_DIR, 'respool-tls.log');
  fs.mkdirSync(OUT_DIR, { recursive: true });
  fs.writeFileSync(logFile, '');
  const respool = spawn(process.execPath, respoolArgs, { logFile, env: { ...process.env, RESPOOL_UPSTREAM_PASSWORD: PASSWORD } });
  const result = { started, ops: OPS, workers: WORKERS, rounds: ROUNDS, a: [], b: [], errors: [] };
  try {
    await node.call('SET', 'bench:tls:key', 'value');
    for (let i = 0; ; i++) {
      try {
        await oneOp(respoolPort, null);
        break;
      } catch (e) {
        if (i > 100) throw new Error(`respool not ready: ${e.message} (${fs.readFileSync(logFile, 'utf8').slice(-500)})`);
        await sleep(100);
      }
    }
    // warm-up, not recorded
    await connPerOp(tlsPort, tlsOptions, 100, WORKERS);
    await connPerOp(respoolPort, null, 100, WORKERS);

    // (a) connection per operation
    for (let r = 0; r < ROUNDS; r++) {
      for (const workers of [1, WORKERS]) {
        const direct = await connPerOp(tlsPort, tlsOptions, workers === 1 ? Math.ceil(OPS / 3) : OPS, workers);
        const sidecar = await connPerOp(respoolPort, null, workers === 1 ? Math.ceil(OPS / 3) : OPS, workers);
        const clients = parseInfo(await node.call('INFO', 'clients')).connected_clients;
        result.a.push({ round: r + 1, workers, direct, sidecar, nodeClientsAfterSidecar: clients });
        log(`(a) round ${r + 1}, ${workers} worker(s): direct TLS ${fmt(direct.msPerOp, 3)} ms/op, sidecar ${fmt(sidecar.msPerOp, 3)} ms/op`);
      }
    }

    // (b) respool plaintext vs TLS listener, valkey-benchmark GET
    const bench = async (tls, pipeline) => {
      const args = ['-h', HOST, '-p', String(tls ? respoolTlsPort : respoolPort), '-t', 'get', '-n', String(pipeline === 1 ? REQ_P1 : REQ_P16),
        '-c', String(CLIENTS), '-P', String(pipeline), '-r', '1000', '--csv', '-q',
        ...(tls ? ['--tls', '--cacert', certs.ca, '--sni', 'localhost'] : [])];
      const out = await run('valkey-benchmark', args, { timeoutMs: 60_000 });
      const get = parseBenchmarkCsv(out.out).GET;
      if (!get) throw new Error(`valkey-benchmark gave no GET line: ${out.out.slice(0, 300)} ${out.err.slice(0, 300)}`);
      return { rps: get.rps, p50: get.p50_latency_ms, p99: get.p99_latency_ms, cmd: shellLine('valkey-benchmark', args) };
    };
    for (let r = 0; r < ROUNDS; r++) {
      for (const pipeline of [1, 16]) {
        const plain = await bench(false, pipeline);
        const tls = await bench(true, pipeline);
        result.b.push({ round: r + 1, pipeline, plain, tls });
        log(`(b) round ${r + 1}, P=${pipeline}: plaintext ${fmtInt(plain.rps)} rps, TLS ${fmtInt(tls.rps)} rps`);
      }
    }
  } catch (e) {
    result.errors.push(e.message);
    throw e;
  } finally {
    await stop(respool);
    await node.stop();
    certs.remove();
    result.finished = new Date().toISOString();
    if (result.a.length || result.b.length) report(result, respoolArgs);
  }
}

function report(result, respoolArgs) {
  const med = (xs, f) => median(xs.map(f));
  const aRows = [];
  const summary = {};
  for (const workers of [1, WORKERS]) {
    const xs = result.a.filter((x) => x.workers === workers);
    if (!xs.length) continue;
    const d = med(xs, (x) => x.direct.msPerOp);
    const s = med(xs, (x) => x.sidecar.msPerOp);
    const ratio = med(xs, (x) => x.direct.msPerOp / x.sidecar.msPerOp);
    summary[workers] = { direct: d, sidecar: s, ratio };
    aRows.push([
      workers,
      `${fmt(d, 3)} (${xs.map((x) => fmt(x.direct.msPerOp, 3)).join(' / ')})`,
      `${fmt(med(xs, (x) => x.direct.p50), 3)} / ${fmt(med(xs, (x) => x.direct.p99), 3)}`,
      `${fmt(s, 3)} (${xs.map((x) => fmt(x.sidecar.msPerOp, 3)).join(' / ')})`,
      `${fmt(med(xs, (x) => x.sidecar.p50), 3)} / ${fmt(med(xs, (x) => x.sidecar.p99), 3)}`,
      `${fmt(ratio, 2)}×`,
      fmtInt(med(xs, (x) => x.direct.opsPerS)) + ' / ' + fmtInt(med(xs, (x) => x.sidecar.opsPerS)),
      xs.map((x) => x.nodeClientsAfterSidecar).join(' / '),
    ]);
  }
  const bRows = [];
  for (const pipeline of [1, 16]) {
    const xs = result.b.filter((x) => x.pipeline === pipeline);
    if (!xs.length) continue;
    const ratio = med(xs, (x) => x.tls.rps / x.plain.rps);
    summary[`P${pipeline}`] = { plain: med(xs, (x) => x.plain.rps), tls: med(xs, (x) => x.tls.rps), ratio };
    bRows.push([
      pipeline,
      `${fmtInt(med(xs, (x) => x.plain.rps))} (${xs.map((x) => fmtInt(x.plain.rps)).join(' / ')})`,
      `${fmt(med(xs, (x) => x.plain.p50), 3)} / ${fmt(med(xs, (x) => x.plain.p99), 3)}`,
      `${fmtInt(med(xs, (x) => x.tls.rps))} (${xs.map((x) => fmtInt(x.tls.rps)).join(' / ')})`,
      `${fmt(med(xs, (x) => x.tls.p50), 3)} / ${fmt(med(xs, (x) => x.tls.p99), 3)}`,
      `${fmt(ratio, 2)}`,
    ]);
  }
  result.summary = summary;
  const w = summary[WORKERS];
  const one = summary[1];
  const md = [
    '## TLS: connection-per-operation clients vs a respool sidecar with pooled TLS links; TLS vs plaintext through respool',
    '',
    `**Rerun:** \`npm run bench:tls\` (= \`npm run build && npm run build:harness && node bench/tls-pooling.mjs\`; knobs in its header). ` +
      `respool (${respoolBuildLabel()}): \`${shellLine('node', respoolArgs)}\` with RESPOOL_UPSTREAM_PASSWORD. ` +
      'Valkey: valkey-server 8.0.1 standalone with `--tls-port` and `--requirepass` (test/harness/valkey-tls.ts), EC P-256 certificates made by openssl at the start.',
    '',
    `**Machine:** ${os.cpus().length} cores, node ${process.version}; load average at the end ${fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')} ` +
      `(shared with other engineers' work: noisy). Everything on 127.0.0.1. **Date:** ${result.started} – ${result.finished}. ${result.rounds} round(s), runs alternating.`,
    '',
    '### (a) connect + AUTH + one GET per connection',
    '',
    'One operation = open a connection, `AUTH default <password>`, `GET` (a 5-byte value), close; the client is the harness\'s RawClient (Node). ' +
      '**direct TLS**: the connection is a TLS connection to valkey-server (a full TLS 1.3 handshake each time). ' +
      '**sidecar**: a plaintext connection to respool, which answers AUTH itself and sends the GET on one of its 2 pooled TLS links to the node.',
    '',
    mdTable(['concurrent loops', 'direct TLS ms/op (median; per round)', 'direct p50 / p99 ms', 'sidecar ms/op (median; per round)', 'sidecar p50 / p99 ms',
      'direct / sidecar', 'ops/s direct / sidecar', 'node connected_clients after the sidecar run (respool\'s 2 links + the connection asking)'], aRows),
    '',
    '### (b) respool\'s listener: plaintext vs TLS (valkey-benchmark GET)',
    '',
    `\`valkey-benchmark -t get -c ${CLIENTS} -r 1000\` through the same respool: its plaintext \`--listen\` vs its \`--listen-tls\` (\`--tls --cacert\`), ` +
      `${fmtInt(REQ_P1)} requests at P=1, ${fmtInt(REQ_P16)} at P=16; respool's links to the node are TLS in both.`,
    '',
    mdTable(['pipeline', 'plaintext rps (median; per round)', 'plaintext p50 / p99 ms', 'TLS rps (median; per round)', 'TLS p50 / p99 ms', 'TLS / plaintext'], bRows),
    '',
    '**How to read:** ' +
      (one && w ? `a client that opens a connection per operation pays a TLS handshake each time when it talks to Valkey over TLS: ${fmt(one.direct, 2)} ms per operation one at a time, ` +
        `vs ${fmt(one.sidecar, 2)} ms over plaintext loopback to a respool sidecar that keeps the TLS connections open (${fmt(one.ratio, 1)}× faster; ${fmt(w.ratio, 1)}× with ${WORKERS} concurrent loops, ` +
        'where the handshakes\' CPU on both sides of this 2-core machine is the limit). The node sees respool\'s few pooled connections instead of one per operation. ' : '') +
      (summary.P1 && summary.P16 ? `Through respool, TLS on the client side keeps ${fmt(summary.P1.ratio * 100, 0)}% of plaintext throughput at P=1 and ${fmt(summary.P16.ratio * 100, 0)}% at P=16 ` +
        '(encryption in respool\'s single event loop and in the client; both share the same cores).' : ''),
    ...(result.errors.length ? ['', `Errors: ${result.errors.join('; ')}`] : []),
    '',
    'Raw numbers: bench/out/tls.json.',
  ].join('\n');
  fs.mkdirSync(OUT_DIR, { recursive: true });
  fs.writeFileSync(path.join(OUT_DIR, 'tls.json'), JSON.stringify(result, null, 2) + '\n');
  fs.writeFileSync(path.join(OUT_DIR, 'tls.md'), md + '\n');
  writeSection('tls', md);
  log('wrote the tls section of bench/RESULTS.md and bench/out/tls.json');
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
