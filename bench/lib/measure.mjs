// Measurement helpers for bench/throughput.mjs: CPU time of a process from /proc, valkey-benchmark's
// full (non-CSV) report, respool's prom-client metrics over /metrics, strace -c syscall counts,
// and the lines bench/lib/respool-probe.mjs writes.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import { HOST, sleep, spawn } from './common.mjs';

export const CLK_TCK = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** utime + stime of a whole process (every thread), in seconds, from /proc/<pid>/stat; NaN when gone. */
export function cpuSeconds(pid) {
  if (!pid) return NaN;
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / CLK_TCK; // fields 14 (utime) and 15 (stime) of proc(5)
  } catch {
    return NaN;
  }
}

/**
 * CPU time of every live thread of a process, in ns, from /proc/<pid>/task/<tid>/schedstat (the
 * scheduler's own count: ns resolution where /proc/<pid>/stat counts clock ticks); NaN when gone.
 * Threads that ended no longer count, so compare readings of a process whose threads last.
 */
export function runTimeNs(pid) {
  let sum = 0;
  try {
    for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
      try {
        sum += Number(fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
      } catch {
        /* thread gone meanwhile */
      }
    }
  } catch {
    return NaN;
  }
  return sum;
}

/** Resident memory of these processes (VmRSS from /proc/<pid>/status), summed, in bytes. */
export function rssBytes(pids) {
  let sum = 0;
  for (const pid of pids) {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    sum += m ? Number(m[1]) * 1024 : NaN;
  }
  return sum;
}

// ---------------------------------------------------------------- valkey-benchmark's report

/**
 * valkey-benchmark's default (not --csv, not -q) output → { GET: { rps, avgMs, minMs, p50Ms, p95Ms,
 * p99Ms, maxMs, p999Ms, p999LowMs, p999Level, requests }, … }.
 *
 * rps and avg/min/p50/p95/p99/max come from its "Summary" block. p99.9 comes from its "Latency by
 * percentile distribution" block (HdrHistogram lines "P% <= V milliseconds (cumulative count C)"):
 * p999Ms is V of the first line whose C reaches ceil(0.999 × total), so the nearest-rank p99.9 is
 * ≤ p999Ms and > p999LowMs (the line before). The lines step in halving distances to 100%
 * (… 99.805%, 99.902% …), so p999Ms is the value at p999Level (usually 99.902%).
 */
export function parseBenchmarkText(text) {
  const out = {};
  const blocks = String(text).split(/\r|\n/).reduce((acc, line) => {
    const m = /^====== (.+) ======$/.exec(line.trim());
    if (m) acc.push({ name: m[1].trim(), lines: [] });
    else if (acc.length) acc[acc.length - 1].lines.push(line);
    return acc;
  }, []);
  for (const { name, lines } of blocks) {
    const r = {};
    const pct = [];
    for (let i = 0; i < lines.length; i++) {
      const l = lines[i].trim();
      let m = /^([\d.]+)% <= ([\d.]+) milliseconds \(cumulative count (\d+)\)$/.exec(l);
      if (m && !r.inCumulative) pct.push({ level: Number(m[1]), ms: Number(m[2]), count: Number(m[3]) });
      if (/^Cumulative distribution of latencies/.test(l)) r.inCumulative = true;
      m = /^throughput summary: ([\d.]+) requests per second/.exec(l);
      if (m) r.rps = Number(m[1]);
      if (/^latency summary/.test(l) && lines[i + 2] !== undefined) {
        const names = lines[i + 1].trim().split(/\s+/);
        const vals = lines[i + 2].trim().split(/\s+/).map(Number);
        names.forEach((n, k) => (r[`${n}Ms`] = vals[k]));
      }
      m = /^(\d+) requests completed in ([\d.]+) seconds/.exec(l);
      if (m) {
        r.requests = Number(m[1]);
        r.seconds = Number(m[2]);
      }
    }
    delete r.inCumulative;
    if (pct.length) {
      const total = pct[pct.length - 1].count;
      const rank = Math.ceil(0.999 * total);
      const k = pct.findIndex((p) => p.count >= rank);
      if (k >= 0) {
        r.p999Ms = pct[k].ms;
        r.p999Level = pct[k].level;
        r.p999LowMs = k > 0 ? pct[k - 1].ms : null;
      }
    }
    out[name] = r;
  }
  return out;
}

// ---------------------------------------------------------------- respool's /metrics

/** GET http://HOST:port/path → body text (rejects on non-200 or timeout). */
export function httpGet(port, urlPath, timeoutMs = 3000) {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: HOST, port, path: urlPath, timeout: timeoutMs }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (body += d));
      res.on('end', () => (res.statusCode === 200 ? resolve(body) : reject(new Error(`GET ${urlPath}: HTTP ${res.statusCode}`))));
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${urlPath} timed out`)));
    req.on('error', reject);
  });
}

/** Prometheus text → Map('name{labels}' → number); labels kept as written. */
export function parsePrometheus(text) {
  const m = new Map();
  for (const line of String(text).split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    m.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return m;
}

export const scrapeMetrics = async (adminPort) => parsePrometheus(await httpGet(adminPort, '/metrics'));

/** prom-client's monitorEventLoopDelay resolution (collectDefaultMetrics' eventLoopMonitoringPrecision default). */
export const PROM_ELD_RESOLUTION_MS = 10;

/**
 * What respool's prom-client default metrics say about the interval between two scrapes.
 * Event loop: prom-client resets its monitorEventLoopDelay histogram at every scrape, so the
 * `after` scrape covers exactly the interval; a value is the interval between two timer callbacks
 * (10 ms nominal), so lateness = value − 10 ms. GC: nodejs_gc_duration_seconds count/sum
 * differences by kind; the longest pause is known only as the upper bound of the highest histogram
 * bucket that grew (buckets 1, 10, 100 ms, 1, 2, 5 s).
 */
export function respoolMetricsDelta(before, after) {
  const s = (k) => after.get(k);
  const lateMs = (k) => (Number.isFinite(s(k)) ? s(k) * 1000 - PROM_ELD_RESOLUTION_MS : null);
  const eld = {
    resolutionMs: PROM_ELD_RESOLUTION_MS,
    p50LateMs: lateMs('nodejs_eventloop_lag_p50_seconds'),
    p90LateMs: lateMs('nodejs_eventloop_lag_p90_seconds'),
    p99LateMs: lateMs('nodejs_eventloop_lag_p99_seconds'),
    maxLateMs: lateMs('nodejs_eventloop_lag_max_seconds'),
    meanLateMs: lateMs('nodejs_eventloop_lag_mean_seconds'),
  };
  const byKind = {};
  let maxBucketLe = 0;
  for (const [k, v] of after) {
    let m = /^nodejs_gc_duration_seconds_(count|sum)\{kind="(\w+)"\}$/.exec(k);
    if (m) {
      const d = v - (before.get(k) ?? 0);
      const g = (byKind[m[2]] ??= { count: 0, ms: 0 });
      if (m[1] === 'count') g.count = d;
      else g.ms = d * 1000;
      continue;
    }
    m = /^nodejs_gc_duration_seconds_bucket\{le="([^"]+)",kind="(\w+)"\}$/.exec(k);
    if (m) {
      const le = m[1] === '+Inf' ? Infinity : Number(m[1]);
      const d = v - (before.get(k) ?? 0);
      // cumulative buckets: the smallest `le` whose count grew by the full count holds every pause
      const total = (after.get(`nodejs_gc_duration_seconds_count{kind="${m[2]}"}`) ?? 0) - (before.get(`nodejs_gc_duration_seconds_count{kind="${m[2]}"}`) ?? 0);
      if (total > 0 && d < total) maxBucketLe = Math.max(maxBucketLe, le); // some pause was above this bucket
    }
  }
  // maxBucketLe is the largest bucket bound some pause exceeded; the next bound up is the upper bound.
  const bounds = [0.001, 0.01, 0.1, 1, 2, 5, Infinity];
  const anyGc = Object.values(byKind).some((g) => g.count > 0);
  const maxPauseAtMostMs = anyGc ? bounds.find((b) => b > maxBucketLe) * 1000 : null;
  const count = Object.values(byKind).reduce((a, g) => a + g.count, 0);
  const ms = Object.values(byKind).reduce((a, g) => a + g.ms, 0);
  // Requests per upstream write and per upstream read (respool_upstream_io_total): how full
  // respool's writes to the node and the node's replies are.
  const io = (op) => (after.get(`respool_upstream_io_total{op="${op}"}`) ?? NaN) - (before.get(`respool_upstream_io_total{op="${op}"}`) ?? 0);
  const [requests, writes, reads] = [io('requests'), io('writes'), io('reads')];
  const upstreamIo = { requests, writes, reads, perWrite: writes > 0 ? requests / writes : null, perRead: reads > 0 ? requests / reads : null };
  return { eld, gc: { count, ms, byKind, maxPauseAtMostMs }, upstreamIo };
}

// ---------------------------------------------------------------- strace -c

/**
 * Attach `strace -c -f` to pid (every thread), run `fn`, detach (SIGINT), and return
 * { calls: { syscall: count }, errors: { syscall: count }, fnResult }.
 */
export async function straceCounts(pid, outFile, fn) {
  fs.rmSync(outFile, { force: true });
  const st = spawn('strace', ['-c', '-f', '-U', 'name,calls,errors', '-o', outFile, '-p', String(pid)]);
  const deadline = Date.now() + 10_000;
  while (!/attached/.test(st.err)) {
    if (st.exitCode !== null || st.signalCode !== null || st.spawnError) throw new Error(`strace exited: ${st.err.trim() || st.spawnError?.message}`);
    if (Date.now() > deadline) {
      st.kill('SIGKILL');
      throw new Error(`strace did not attach to ${pid} within 10 s: ${st.err.trim()}`);
    }
    await sleep(20);
  }
  await sleep(200);
  let fnResult;
  try {
    fnResult = await fn();
  } finally {
    st.kill('SIGINT');
    const t = setTimeout(() => st.kill('SIGKILL'), 10_000);
    await st.exited;
    clearTimeout(t);
  }
  const calls = {};
  const errors = {};
  const text = fs.existsSync(outFile) ? fs.readFileSync(outFile, 'utf8') : '';
  for (const line of text.split('\n')) {
    const m = /^(\w+)\s+(\d+)\s*(\d*)\s*$/.exec(line.trim());
    if (!m || m[1] === 'total' || m[1] === 'syscall') continue;
    calls[m[1]] = Number(m[2]);
    if (m[3]) errors[m[1]] = Number(m[3]);
  }
  if (!Object.keys(calls).length) throw new Error(`strace wrote no counts (${outFile}): ${st.err.trim().slice(0, 300)}`);
  return { calls, errors, fnResult };
}

// ---------------------------------------------------------------- bench/lib/respool-probe.mjs

/** Signal the probe (SIGUSR2) and resolve its next JSON line from `file`. */
export async function probeMark(child, file, timeoutMs = 5000) {
  const count = () => (fs.existsSync(file) ? fs.readFileSync(file, 'utf8').split('\n').filter(Boolean) : []);
  const n = count().length;
  child.kill('SIGUSR2');
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const lines = count();
    if (lines.length > n) return JSON.parse(lines[n]);
    if (Date.now() > deadline) throw new Error(`respool probe wrote no line to ${file} within ${timeoutMs} ms`);
    await sleep(10);
  }
}
