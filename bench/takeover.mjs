// The takeover's pause (issue 34): what a request that arrives while respool replaces itself
// (SIGUSR2, src/workers/takeover.ts) waits, against one that arrives outside it — for one
// supervised worker (--supervised) and for --workers 2 — and, for contrast, a plain restart of a
// lone respool (SIGTERM, then a new process on the same port): what clients see without takeover.
// CLIENTS iovalkey clients over TCP, each a paced loop of SET k v, GET k (checked); ROUNDS rounds,
// the cases interleaved; in each, LOAD_MS of load with the takeover (or restart) at its start.
//   npm run bench:takeover        env: ROUNDS (5), CLIENTS (20), RATE (per client, req/s: 100), LOAD_MS (6000)
// Loopback only; ends only the processes it started (by PID).
import { spawn } from 'node:child_process';
import path from 'node:path';
import { Valkey } from 'iovalkey';
import { childPids, freePort, pidAlive, ROOT_DIR, sleep } from './lib/common.mjs';
import { writeSection } from './lib/results-file.mjs';

const BIN = path.join(ROOT_DIR, 'bin/respool.js');
const ROUNDS = Number(process.env.ROUNDS ?? 5);
const CLIENTS = Number(process.env.CLIENTS ?? 20);
const RATE = Number(process.env.RATE ?? 100);
const LOAD_MS = Number(process.env.LOAD_MS ?? 6000);

const started = new Set();
function startProcess(cmd, args) {
  const child = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d).length > 4000 && (stderr = stderr.slice(-2000)));
  child.stderrTail = () => stderr.slice(-500);
  started.add(child);
  child.once('exit', () => started.delete(child));
  return child;
}
async function until(what, fn, ms = 30_000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}
async function pings(port) {
  const c = new Valkey({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  c.on('error', () => {});
  try {
    await c.connect();
    return (await c.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    c.disconnect();
  }
}

function startRespool(valkeyPort, port, extra) {
  return startProcess(process.execPath, [BIN, '--listen', `127.0.0.1:${port}`, '--upstream', `127.0.0.1:${valkeyPort}`, '--mode', 'standalone', '--log-level', 'error', ...extra]);
}

/** A case: how respool runs, and how one "upgrade" is done (resolves once it is over). */
function makeCase(name, valkeyPort, port, extra, upgrade) {
  return { name, port, proc: null, start() { this.proc = startRespool(valkeyPort, port, extra); }, upgrade };
}
const takeover = async (c) => {
  const before = childPids(c.proc.pid);
  c.proc.kill('SIGUSR2');
  await until('new workers serving and the old ones gone', () => {
    const now = childPids(c.proc.pid);
    return now.length === before.length && now.every((pid) => !before.includes(pid)) && before.every((pid) => !pidAlive(pid));
  });
};
const restart = async (c) => {
  const old = c.proc;
  const exited = new Promise((r) => old.once('exit', r));
  old.kill('SIGTERM');
  await exited;
  c.start();
  await until('the new process answering', () => pings(c.port));
};

/** CLIENTS paced loops against a case's port: each request's arrival and duration, failures, connection errors. */
function load(port) {
  const clients = Array.from({ length: CLIENTS }, () => new Valkey({ port, host: '127.0.0.1' }));
  const stats = { requests: [], failed: 0, failures: [], connectionErrors: 0, wrong: 0 };
  for (const c of clients) c.on('error', () => stats.connectionErrors++);
  let running = true;
  const gap = 1000 / RATE;
  const loops = clients.map(async (c, n) => {
    for (let i = 0; running; i++) {
      const t0 = performance.now();
      try {
        const key = `takeover:${n}:${i % 1000}`;
        await c.set(key, String(i));
        const t1 = performance.now();
        stats.requests.push([t0, t1 - t0]);
        if ((await c.get(key)) !== String(i)) stats.wrong++;
        stats.requests.push([t1, performance.now() - t1]);
      } catch (err) {
        stats.failed++;
        if (stats.failures.length < 3) stats.failures.push(err.message);
      }
      const rest = 2 * gap - (performance.now() - t0);
      if (rest > 0) await sleep(rest);
    }
  });
  return {
    stats,
    async stop() {
      running = false;
      await Promise.all(loops);
      for (const c of clients) c.disconnect();
    },
  };
}

const pct = (xs, p) => {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(s.length * p))];
};
const median = (xs) => pct(xs, 0.5);

try {
  const valkeyPort = await freePort();
  startProcess('valkey-server', ['--port', String(valkeyPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no']);
  await until('valkey-server', () => pings(valkeyPort));
  const cases = [
    makeCase('takeover, --supervised (1 worker)', valkeyPort, await freePort(), ['--supervised'], takeover),
    makeCase('takeover, --workers 2', valkeyPort, await freePort(), ['--workers', '2'], takeover),
    makeCase('restart (SIGTERM, start again), 1 process', valkeyPort, await freePort(), [], restart),
  ];
  for (const c of cases) c.start();
  for (const c of cases) await until(`${c.name} answering`, () => pings(c.port));
  const results = cases.map(() => ({ during: [], outside: [], windows: [], failed: 0, failures: [], connectionErrors: 0, wrong: 0 }));
  for (let round = 0; round < ROUNDS; round++) {
    for (let j = 0; j < cases.length; j++) {
      const k = (j + round) % cases.length; // the order rotates each round
      const c = cases[k];
      const r = results[k];
      const running = load(c.port);
      await sleep(LOAD_MS / 3);
      const from = performance.now();
      await c.upgrade(c);
      const to = performance.now();
      await sleep(Math.max(0, LOAD_MS - (to - from) - LOAD_MS / 3));
      await running.stop();
      r.windows.push(to - from);
      for (const [at, ms] of running.stats.requests) (at >= from && at <= to ? r.during : r.outside).push(ms);
      r.failed += running.stats.failed;
      r.failures.push(...running.stats.failures.slice(0, 3 - r.failures.length));
      r.connectionErrors += running.stats.connectionErrors;
      r.wrong += running.stats.wrong;
      console.log(`round ${round + 1}, ${c.name}: ${(to - from).toFixed(0)} ms; ${running.stats.requests.length} requests, ${running.stats.failed} failed, ${running.stats.connectionErrors} connection errors`);
    }
  }
  const date = new Date().toISOString().slice(0, 16).replace('T', ' ');
  const row = (c, r) => `| ${c.name} | ${median(r.windows).toFixed(0)} (${r.windows.map((w) => w.toFixed(0)).join(' / ')}) | ${r.during.length} | ${pct(r.during, 0.5).toFixed(2)} | ${pct(r.during, 0.99).toFixed(2)} | ${Math.max(0, ...r.during).toFixed(1)} | ${pct(r.outside, 0.99).toFixed(2)} | ${r.failed}${r.failures.length ? ` (${r.failures[0].slice(0, 60)})` : ''} | ${r.connectionErrors} | ${r.wrong} |`;
  const md = [
    '## takeover',
    '',
    `The takeover's pause (issue 34): ${CLIENTS} iovalkey clients over TCP, each ${RATE} requests/s (SET k v, GET k checked), to one valkey-server through respool, while it replaces itself (SIGUSR2; src/workers/takeover.ts) — and, for contrast, while a lone respool is restarted. ${ROUNDS} rounds, the cases interleaved; a window runs from the signal until the new process(es) serve and the old ones are gone. Latencies in ms. ${date} UTC. Rerun: \`npm run bench:takeover\`.`,
    '',
    '| case | window, ms (median, each round) | requests arriving in it | p50 in it | p99 in it | max in it | p99 outside | failed commands | connection errors | wrong replies |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...cases.map((c, k) => row(c, results[k])),
    '',
    'A takeover hands each plain client connection to the new worker: no connection error, no failed command; the window is mostly the new worker starting (loading the code, connecting upstream) on the same 2 cores. A restart closes every connection: iovalkey reconnects and resends, so its commands wait (or fail) for as long as no process listens.',
  ].join('\n');
  writeSection('takeover', md);
  console.log(md);
} finally {
  // SIGTERM: a supervisor drains and ends its workers; SIGKILL whatever is left after 15 s.
  const exits = [...started].map((child) => new Promise((r) => child.once('exit', r)));
  for (const child of started) child.kill('SIGTERM');
  await Promise.race([Promise.all(exits), sleep(15_000)]);
  for (const child of started) child.kill('SIGKILL');
}
process.exit(0);
