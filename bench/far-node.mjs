// A node far away (issue 34): pipelined GETs through a fault relay that delays each direction by
// half the round trip (build/harness/fault-relay.js), straight to the relay and through respool
// in front of it — with respool's defaults, and with admission.maxInflightPerClient raised to
// 10000 (the per-client window, in requests, is what bounds a deep pipeline at a distance:
// window ÷ round trip). valkey-benchmark, 100-byte values; ROUNDS interleaved rounds, medians.
//   npm run bench:far-node        env: ROUNDS (3), N (200000)
// Loopback only; ends only the processes it started (by PID).
import { spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeSection } from './lib/results-file.mjs';

const ROOT = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const { FaultRelay } = await import(path.join(ROOT, 'build/harness/fault-relay.js'));
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const N = Number(process.env.N ?? 200000); // long enough that a new connection's first round trips (its window opens once it has seen two blocks of replies) weigh little
const CASES = [
  { rttMs: 2, clients: 50, pipeline: 16 },
  { rttMs: 50, clients: 50, pipeline: 16 },
  { rttMs: 50, clients: 5, pipeline: 256 },
];

const freePort = () => new Promise((resolve) => {
  const s = net.createServer();
  s.listen(0, '127.0.0.1', () => {
    const { port } = s.address();
    s.close(() => resolve(port));
  });
});
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const started = [];

function run(cmd, args) {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (out += d));
    p.on('error', reject);
    p.on('close', () => resolve(out));
  });
}

/** requests/s of one valkey-benchmark run (async: the relay runs in this process). */
async function bench(port, c, p, n) {
  const out = await run('valkey-benchmark', ['-p', String(port), '-c', String(c), '-P', String(p), '-n', String(n), '-d', '100', '-t', 'get', '-q']);
  const m = /GET: ([\d.]+) requests per second/.exec(out);
  if (m === null) throw new Error(`valkey-benchmark: ${out.slice(-300)}`);
  return Number(m[1]);
}

async function startRespool(upstreamPort, extra) {
  const port = await freePort();
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/respool.js'), '--listen', `127.0.0.1:${port}`, '--upstream', `127.0.0.1:${upstreamPort}`, '--mode', 'standalone', '--log-level', 'error', ...extra], { stdio: 'ignore' });
  started.push(child);
  for (let i = 0; i < 100; i++) {
    if ((await run('valkey-cli', ['-p', String(port), 'PING'])).includes('PONG')) return port;
    await sleep(100);
  }
  throw new Error('respool did not start');
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

try {
  const valkeyPort = await freePort();
  const valkey = spawn('valkey-server', ['--port', String(valkeyPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  started.push(valkey);
  await sleep(500);
  const relay = await FaultRelay.start({ host: '127.0.0.1', port: valkeyPort });
  await run('valkey-cli', ['-p', String(valkeyPort), 'SET', 'key:__rand_int__', 'x'.repeat(100)]);
  const defaults = await startRespool(relay.port, []);
  const wide = await startRespool(relay.port, ['--max-inflight-per-client', '10000']);
  const targets = [['direct to the node', relay.port], ['respool, defaults', defaults], ['respool, max-inflight-per-client 10000', wide]];
  const rows = [];
  for (const k of CASES) {
    relay.set({ delayMs: { toNode: k.rttMs / 2, toClient: k.rttMs / 2 } });
    for (const [, port] of targets) await bench(port, k.clients, k.pipeline, Math.min(N, 5000)); // warm-up
    const rps = targets.map(() => []);
    for (let round = 0; round < ROUNDS; round++) {
      for (let j = 0; j < targets.length; j++) {
        const t = (j + round) % targets.length; // order rotates each round
        rps[t].push(await bench(targets[t][1], k.clients, k.pipeline, N));
      }
    }
    const med = rps.map(median);
    rows.push({ ...k, med, all: rps });
    console.log(`${k.rttMs} ms, ${k.clients} clients × pipeline ${k.pipeline}: ${targets.map(([name], i) => `${name} ${med[i].toFixed(0)}/s`).join(', ')}`);
  }
  await relay.close();
  const date = new Date().toISOString().slice(0, 16).replace('T', ' ');
  const md = [
    '## far-node',
    '',
    `A node far away (issue 34): GETs through the fault relay (build/harness/fault-relay.js), half the round trip each way, straight to it and through respool in front of it; valkey-benchmark, 100-byte values, ${ROUNDS} interleaved rounds of ${N} requests, medians (requests/s, each round's figures after). ${date} UTC. Rerun: \`npm run bench:far-node\`.`,
    '',
    '| round trip | clients × pipeline | direct | respool (defaults) | ratio | respool, max-inflight-per-client 10000 | ratio |',
    '| ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...rows.map((r) => `| ${r.rttMs} ms | ${r.clients} × ${r.pipeline} | ${r.med[0].toFixed(0)} (${r.all[0].map((x) => x.toFixed(0)).join(' / ')}) | ${r.med[1].toFixed(0)} (${r.all[1].map((x) => x.toFixed(0)).join(' / ')}) | ${(r.med[1] / r.med[0]).toFixed(2)} | ${r.med[2].toFixed(0)} (${r.all[2].map((x) => x.toFixed(0)).join(' / ')}) | ${(r.med[2] / r.med[0]).toFixed(2)} |`),
    '',
    'A client may owe admission.maxInflightPerClient replies (128) at once: at a distance that window, not the node, bounds a deep pipeline (128 ÷ 50 ms ≈ 2,560 requests/s per client). respool stretches it by the client\'s distance (src/client/fair-admission.ts), known once the connection has seen two blocks of 128 replies: a new connection runs its first few round trips at the narrow window, which is why runs of 40,000 requests (the earlier default) gave 0.87× at 50 ms and runs of 200,000 give the steady state a pooled connection sees.',
  ].join('\n');
  writeSection('far-node', md);
  console.log(md);
} finally {
  for (const child of started) child.kill();
}
process.exit(0);
