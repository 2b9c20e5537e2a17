// What a request costs Node.js itself at pipeline 1, next to what respool and twemproxy cost:
// CPU µs per request (user and system, from /proc) of
//   - bare Node servers answering +PONG (bench/lib/pong-server.mjs: data / onread / handle),
//     under valkey-benchmark PING (no upstream at all);
//   - respool and twemproxy in front of one valkey-server, under valkey-benchmark GET.
// Rounds interleaved (order rotated); medians and min–max. 50 clients, pipeline 1.
//
//   npm run bench:floor      (= npm run build && node bench/request-floor.mjs)
//
// Env: BENCH_ROUNDS (5), BENCH_FLOOR_N (100000), BENCH_QUICK=1 (2 rounds, 20,000).
// Everything on 127.0.0.1, started here and stopped (by PID) at the end.
import fs from 'node:fs';
import path from 'node:path';
import {
  HOST, ROOT_DIR, envFlag, envInt, fmt, log, makeTmpRoot, mdTable, median, run, spawn, startRespool, startTwemproxy,
  startValkey, stop, uniquePort, waitForPing,
} from './lib/common.mjs';
import { CLK_TCK, parseBenchmarkText } from './lib/measure.mjs';
import { writeSection } from './lib/results-file.mjs';

const QUICK = envFlag('BENCH_QUICK');
const ROUNDS = envInt('BENCH_ROUNDS', QUICK ? 2 : 5);
const N = envInt('BENCH_FLOOR_N', QUICK ? 20_000 : 100_000);
const CLIENTS = 50;
const MODES = ['data', 'onread', 'handle'];

/** User and system CPU seconds of a process (fields 14 and 15 of /proc/<pid>/stat). */
function cpuSplit(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { user: Number(f[11]) / CLK_TCK, sys: Number(f[12]) / CLK_TCK };
}

async function measure(target, test) {
  const before = cpuSplit(target.pid);
  const { out } = await run('valkey-benchmark', ['-h', HOST, '-p', String(target.port), '-c', String(CLIENTS), '-n', String(N), '-P', '1', '-d', '100', '-t', test], { timeoutMs: 180_000 });
  const after = cpuSplit(target.pid);
  const report = Object.values(parseBenchmarkText(out))[0] ?? {};
  return { rps: report.rps, p99Ms: report.p99Ms, userUs: ((after.user - before.user) * 1e6) / N, sysUs: ((after.sys - before.sys) * 1e6) / N };
}

async function main() {
  const tmpRoot = makeTmpRoot('floor-');
  const targets = [];
  const children = [];
  try {
    const valkey = await startValkey({ tmpRoot });
    children.push(valkey);
    for (const mode of MODES) {
      const port = await uniquePort();
      const child = spawn(process.execPath, [path.join(ROOT_DIR, 'bench/lib/pong-server.mjs'), String(port), mode]);
      children.push({ child });
      await waitForPing(port, { child, what: `pong-server ${mode}` });
      targets.push({ name: `Node, ${mode}`, port, pid: child.pid, test: 'ping_mbulk' });
    }
    const respool = await startRespool({ upstreamPort: valkey.port });
    children.push(respool);
    targets.push({ name: 'respool', port: respool.port, pid: respool.child.pid, test: 'get' });
    const twem = await startTwemproxy({ upstreamPort: valkey.port, serverConnections: 2, tmpRoot });
    children.push(twem);
    targets.push({ name: 'twemproxy', port: twem.port, pid: twem.child.pid, test: 'get' });
    await run('valkey-cli', ['-h', HOST, '-p', String(valkey.port), 'SET', 'key:__rand_int__', 'x'.repeat(100)]);
    for (const t of targets) await measure(t, t.test); // warm-up (JIT, pools)

    const results = new Map(targets.map((t) => [t.name, []]));
    for (let round = 0; round < ROUNDS; round++) {
      for (let k = 0; k < targets.length; k++) {
        const t = targets[(k + round) % targets.length];
        const r = await measure(t, t.test);
        results.get(t.name).push(r);
        log(`round ${round + 1} ${t.name}: ${fmt(r.rps, 0)} rps, user ${fmt(r.userUs)} µs, sys ${fmt(r.sysUs)} µs per request`);
      }
    }
    const span = (xs, d = 2) => `${fmt(median(xs), d)} (${fmt(Math.min(...xs), d)}–${fmt(Math.max(...xs), d)})`;
    const rows = targets.map((t) => {
      const rs = results.get(t.name);
      return [t.name, t.test.toUpperCase(), span(rs.map((r) => r.userUs)), span(rs.map((r) => r.sysUs)), span(rs.map((r) => r.userUs + r.sysUs)), span(rs.map((r) => r.rps), 0), span(rs.map((r) => r.p99Ms), 3)];
    });
    const md = [
      '## What a request costs Node.js itself (issue 11)',
      '',
      `**Rerun:** \`npm run bench:floor\` (\`bench/request-floor.mjs\`; ${new Date().toISOString()}, ${ROUNDS} interleaved rounds of ${N.toLocaleString('en-US')} requests, valkey-benchmark ${CLIENTS} clients, pipeline 1, load average before: ${fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}).`,
      '',
      'CPU µs per request of the process under test, from /proc (utime, stime over the run ÷ requests), median (min–max). The three "Node" rows are bare servers answering +PONG with no upstream (`bench/lib/pong-server.mjs`): `data` = \'data\' events + socket.write; `onread` = one shared read buffer (as respool\'s client sockets) + socket.write; `handle` = onread + writes straight to the libuv handle past the Writable stream (internal API; respool writes this way since bf709a8, util/direct-write.ts). respool and twemproxy do the whole proxy job (client read, upstream write, upstream read, client write) for GETs of a 100-byte value.',
      '',
      mdTable(['process', 'test', 'user µs', 'system µs', 'total µs', 'requests/s', 'p99 ms'], rows, ['l', 'l', 'r', 'r', 'r', 'r', 'r']),
    ].join('\n');
    writeSection('floor', md);
    log('wrote the floor section of bench/RESULTS.md');
  } finally {
    for (const c of children.reverse()) await stop(c.child).catch(() => {});
    fs.rmSync(tmpRoot, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
