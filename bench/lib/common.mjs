// Shared helpers for respool's benchmarks (bench/*.mjs). Not a test helper: nothing here asserts.
//
// - child processes: spawn(), tracked so that every child is killed when this process exits,
//   throws, or gets SIGINT/SIGTERM/SIGHUP; each live child's pid is also written to
//   bench/out/pids/ so bench/run.sh can kill leftovers by id if node itself is killed hard.
// - free loopback ports, waiting for a port, a RESP connection (test/harness/raw-client.ts, built),
// - stats (median, percentile, mean) and Markdown tables.
import { execFileSync, spawn as cpSpawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const BENCH_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const ROOT_DIR = path.resolve(BENCH_DIR, '..');
export const OUT_DIR = path.join(BENCH_DIR, 'out');
const PID_DIR = path.join(OUT_DIR, 'pids');

export const HOST = '127.0.0.1';
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function envInt(name, dflt) {
  const v = process.env[name];
  if (v === undefined || v === '') return dflt;
  const n = Number(v);
  if (!Number.isFinite(n)) throw new Error(`${name}=${v} is not a number`);
  return n;
}
export const envFlag = (name) => ['1', 'true', 'yes'].includes(String(process.env[name] ?? '').toLowerCase());

export function log(...args) {
  const t = new Date().toISOString().slice(11, 19);
  console.error(`[bench ${t}]`, ...args);
}

// ---------------------------------------------------------------- child processes

const children = new Set();

function pidFile(pid) {
  return path.join(PID_DIR, `${pid}`);
}

/** Kill every tracked child now (SIGKILL), synchronously. Safe to call more than once. */
export function killAllChildren() {
  for (const c of children) {
    try {
      if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    } catch {
      /* already gone */
    }
    try {
      fs.rmSync(pidFile(c.pid), { force: true });
    } catch {
      /* ignore */
    }
  }
  children.clear();
}

let handlersInstalled = false;
function installExitHandlers() {
  if (handlersInstalled) return;
  handlersInstalled = true;
  process.on('exit', killAllChildren);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.on(sig, () => {
      log(`got ${sig}, killing children`);
      killAllChildren();
      process.exit(128 + (os.constants.signals[sig] ?? 1));
    });
  }
  process.on('uncaughtException', (err) => {
    console.error(err);
    killAllChildren();
    process.exit(1);
  });
  process.on('unhandledRejection', (err) => {
    console.error(err);
    killAllChildren();
    process.exit(1);
  });
}

/**
 * Spawn a tracked child (`match`: how its /proc cmdline starts, for run.sh's leftover check;
 * `stdin`: 'ignore' (default) or 'pipe' for child.stdin). stdout/stderr go to `logFile` when given (appended), else are
 * collected in memory (child.out / child.err strings). Returns the ChildProcess with an
 * extra `exited` promise resolving to { code, signal }.
 */
export function spawn(cmd, args, { logFile, cwd = ROOT_DIR, env = process.env, match, stdin = 'ignore' } = {}) {
  installExitHandlers();
  fs.mkdirSync(PID_DIR, { recursive: true });
  let stdio = [stdin, 'pipe', 'pipe'];
  let fd;
  if (logFile) {
    fs.mkdirSync(path.dirname(logFile), { recursive: true });
    fd = fs.openSync(logFile, 'a');
    stdio = [stdin, fd, fd];
  }
  const child = cpSpawn(cmd, args, { cwd, env, stdio });
  if (fd !== undefined) fs.closeSync(fd);
  child.out = '';
  child.err = '';
  if (!logFile) {
    child.stdout.setEncoding('utf8').on('data', (d) => (child.out += d));
    child.stderr.setEncoding('utf8').on('data', (d) => (child.err += d));
  }
  children.add(child);
  // run.sh kills a leftover pid only while its /proc cmdline still starts with this line.
  if (child.pid) fs.writeFileSync(pidFile(child.pid), `${match ?? [cmd, args[0]].filter(Boolean).join(' ')}\n`);
  child.exited = new Promise((resolve) => {
    child.on('error', (e) => {
      child.spawnError = e;
    });
    child.on('close', (code, signal) => {
      children.delete(child);
      if (child.pid) fs.rmSync(pidFile(child.pid), { force: true });
      resolve({ code, signal });
    });
  });
  return child;
}

/** SIGTERM, then SIGKILL after `graceMs`. Resolves when the child is gone. */
export async function stop(child, graceMs = 3000) {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  const t = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await child.exited;
  clearTimeout(t);
}

/**
 * Run a command to completion with a timeout; resolves { code, signal, out, err, ms, timedOut }.
 */
export async function run(cmd, args, { timeoutMs = 120_000, cwd, env, onSpawn } = {}) {
  const t0 = performance.now();
  const child = spawn(cmd, args, { cwd, env });
  onSpawn?.(child);
  let timedOut = false;
  const t = setTimeout(() => {
    timedOut = true;
    child.kill('SIGKILL');
  }, timeoutMs);
  const { code, signal } = await child.exited;
  clearTimeout(t);
  if (child.spawnError) throw child.spawnError;
  return { code, signal, out: child.out, err: child.err, ms: performance.now() - t0, timedOut };
}

/** A command line as a POSIX shell would need it typed. */
export function shellLine(cmd, args) {
  const q = (a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${String(a).replace(/'/g, `'\\''`)}'`);
  return [cmd, ...args].map(q).join(' ');
}

// ---------------------------------------------------------------- ports

/** A port that was free on 127.0.0.1 a moment ago (bind to 0, read it back, close). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, HOST, () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

const usedPorts = new Set();
/** freePort(), never returning the same port twice in one process. */
export async function uniquePort() {
  for (;;) {
    const p = await freePort();
    if (!usedPorts.has(p)) {
      usedPorts.add(p);
      return p;
    }
  }
}

// ---------------------------------------------------------------- the RESP client

// The harness's independent RESP client (test/harness/raw-client.ts, compiled to build/harness/ by
// `npm run build:harness`), shared with the tests.
const RAW_CLIENT = path.join(ROOT_DIR, 'build', 'harness', 'raw-client.js');
if (!fs.existsSync(RAW_CLIENT)) {
  console.error('bench: build/harness/ is missing; run `npm run build:harness` first');
  process.exit(1);
}
const { RawClient, RespDecoder, ReplyError, encodeCommand } = await import(RAW_CLIENT);
export { RespDecoder, ReplyError, encodeCommand };

/**
 * One persistent connection; call(...args) resolves to the reply (FIFO), error replies as
 * ReplyError values (`instanceof ReplyError`, `.message`). No reply timeout unless callT().
 */
export class RespConn {
  static async connect(port, host = HOST, timeoutMs = 2000) {
    return new RespConn(await RawClient.connect(port, { host, connectTimeoutMs: timeoutMs, timeoutMs: 0 }));
  }

  constructor(client) {
    this.client = client;
  }

  call(...args) {
    return this.client.call(...args);
  }

  /** call() with a timeout; rejects (and leaves the connection unusable) on expiry. */
  async callT(timeoutMs, ...args) {
    let t;
    const timeout = new Promise((_, rej) => {
      t = setTimeout(() => rej(new Error(`${args[0]} timed out after ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      return await Promise.race([this.call(...args), timeout]);
    } finally {
      clearTimeout(t);
    }
  }

  close() {
    this.client.close();
  }
}

/** Parse an INFO reply into { field: value } (numbers where numeric). */
export function parseInfo(text) {
  const out = {};
  for (const line of String(text).split('\r\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.indexOf(':');
    if (i < 0) continue;
    const k = line.slice(0, i);
    const v = line.slice(i + 1);
    out[k] = /^-?\d+(\.\d+)?$/.test(v) ? Number(v) : v;
  }
  return out;
}

/** Wait until `port` answers PING with PONG (over a fresh connection), or throw. */
export async function waitForPing(port, { timeoutMs = 10_000, child, what = `port ${port}`, auth = null } = {}) {
  const deadline = Date.now() + timeoutMs;
  let lastErr;
  while (Date.now() < deadline) {
    if (child && (child.exitCode !== null || child.signalCode !== null)) {
      throw new Error(`${what} exited (code ${child.exitCode}, signal ${child.signalCode}) before answering PING`);
    }
    try {
      const c = await RespConn.connect(port, HOST, 1000);
      try {
        if (auth) await c.callT(1000, 'AUTH', ...auth);
        const r = await c.callT(1000, 'PING');
        if (r === 'PONG') return;
        lastErr = new Error(`PING answered ${JSON.stringify(r)}`);
      } finally {
        c.close();
      }
    } catch (e) {
      lastErr = e;
    }
    await sleep(100);
  }
  throw new Error(`${what} did not answer PING within ${timeoutMs} ms: ${lastErr?.message}`);
}

// ---------------------------------------------------------------- servers

/** A standalone valkey-server on a free port, no persistence. Returns { port, child, dir }. */
export async function startValkey({ tmpRoot, name = 'valkey' } = {}) {
  const port = await uniquePort();
  const dir = fs.mkdtempSync(path.join(tmpRoot ?? os.tmpdir(), `${name}-`));
  const args = [
    '--port', String(port), '--bind', HOST, '--save', '', '--appendonly', 'no',
    '--dir', dir, '--daemonize', 'no', '--logfile', path.join(dir, 'valkey.log'),
    '--maxclients', '10000',
  ];
  // valkey-server rewrites its process title to "valkey-server HOST:PORT".
  const child = spawn('valkey-server', args, { match: `valkey-server ${HOST}:${port}` });
  await waitForPing(port, { child, what: 'valkey-server' });
  return { port, child, dir, cmd: shellLine('valkey-server', args) };
}

/** Twemproxy (nutcracker) with one pool in front of one server. Returns { port, child, config, cmd }. */
export async function startTwemproxy({ upstreamPort, serverConnections = 2, tmpRoot }) {
  const port = await uniquePort();
  const statsPort = await uniquePort();
  const dir = fs.mkdtempSync(path.join(tmpRoot ?? os.tmpdir(), 'nutcracker-'));
  const config = [
    'respool_bench:',
    `  listen: ${HOST}:${port}`,
    '  redis: true',
    '  preconnect: true',
    `  server_connections: ${serverConnections}`,
    '  auto_eject_hosts: false',
    '  hash: fnv1a_64',
    '  distribution: ketama',
    '  servers:',
    `    - ${HOST}:${upstreamPort}:1`,
    '',
  ].join('\n');
  const confFile = path.join(dir, 'nutcracker.yml');
  fs.writeFileSync(confFile, config);
  const args = ['-c', confFile, '-s', String(statsPort), '-a', HOST, '-o', path.join(dir, 'nutcracker.log'), '-p', path.join(dir, 'nutcracker.pid')];
  const child = spawn('nutcracker', args);
  await waitForPing(port, { child, what: 'nutcracker' });
  return { port, child, config, cmd: shellLine('nutcracker', args) };
}

export const RESPOOL_CONNECTIONS_PER_NODE = 2;

/**
 * respool (node bin/respool.js) in standalone mode in front of one server. `adminPort`: also
 * serve the admin HTTP endpoint (/metrics) on HOST:adminPort.
 */
export function respoolArgs(port, upstreamPort, connectionsPerNode = RESPOOL_CONNECTIONS_PER_NODE, { adminPort } = {}) {
  const extra = (process.env.RESPOOL_BENCH_EXTRA_ARGS ?? '').split(/\s+/).filter(Boolean);
  return [
    process.env.RESPOOL_BENCH_BIN || 'bin/respool.js',
    '--listen', `${HOST}:${port}`,
    '--upstream', `${HOST}:${upstreamPort}`,
    '--mode', 'standalone',
    '--connections-per-node', String(connectionsPerNode),
    ...(adminPort ? ['--admin', `${HOST}:${adminPort}`] : []),
    ...extra,
  ];
}

/**
 * Start respool; resolves { port, adminPort, child, cmd } once it answers PING. `admin`: also
 * serve /metrics on a free port (adminPort); `nodeArgs`: node flags before the script (e.g. a
 * probe to --import); `env`: extra environment variables for it.
 */
export async function startRespool({ upstreamPort, connectionsPerNode = RESPOOL_CONNECTIONS_PER_NODE, logFile, admin = false, nodeArgs = [], env }) {
  const port = await uniquePort();
  const adminPort = admin ? await uniquePort() : undefined;
  const args = [...nodeArgs, ...respoolArgs(port, upstreamPort, connectionsPerNode, { adminPort })];
  const log = logFile ?? path.join(OUT_DIR, 'respool.log');
  fs.mkdirSync(path.dirname(log), { recursive: true });
  fs.writeFileSync(log, ''); // one log per start
  const child = spawn(process.execPath, args, { logFile: log, env: env ? { ...process.env, ...env } : process.env });
  try {
    await waitForPing(port, { child, what: 'respool', timeoutMs: 15_000 });
  } catch (e) {
    const lines = fs.readFileSync(log, 'utf8').split('\n').map((l) => l.trim()).filter(Boolean);
    const errs = lines.filter((l) => /error|fatal/i.test(l));
    const tail = (errs.length ? errs.slice(0, 2) : lines.slice(-3)).join(' ⏎ ').slice(0, 600);
    e.message += ` (bench/out/${path.basename(log)}: ${tail || 'empty'})`;
    throw e;
  }
  const envLine = env ? Object.entries(env).map(([k, v]) => `${k}=${v} `).join('') : '';
  return { port, adminPort, child, cmd: envLine + shellLine('node', args) };
}

/** Sanity check through a target: SET then GET a value, compare. Throws on mismatch. */
export async function checkSetGet(port, what) {
  const c = await RespConn.connect(port);
  try {
    const v = `check-${process.pid}-${Date.now()}`;
    const s = await c.callT(3000, 'SET', 'bench:check', v);
    const g = await c.callT(3000, 'GET', 'bench:check');
    if (s !== 'OK' || g !== v) throw new Error(`${what}: SET/GET check failed (SET → ${JSON.stringify(s)}, GET → ${JSON.stringify(g)})`);
  } finally {
    c.close();
  }
}

// ---------------------------------------------------------------- stats & output

/** valkey-benchmark --csv → { GET: { rps, avg_latency_ms, p50_latency_ms, p99_latency_ms, … }, … }. */
export function parseBenchmarkCsv(text) {
  const lines = text.split('\n').map((l) => l.trim()).filter((l) => l.startsWith('"'));
  if (lines.length < 2) return {};
  const cells = (l) => l.split(',').map((c) => c.replace(/^"|"$/g, ''));
  const header = cells(lines[0]);
  const out = {};
  for (const l of lines.slice(1)) {
    const c = cells(l);
    out[c[0]] = Object.fromEntries(header.slice(1).map((h, i) => [h, Number(c[i + 1])]));
  }
  return out;
}

export function median(xs) {
  const a = xs.filter((x) => Number.isFinite(x)).sort((x, y) => x - y);
  if (!a.length) return NaN;
  const m = a.length >> 1;
  return a.length % 2 ? a[m] : (a[m - 1] + a[m]) / 2;
}
export function mean(xs) {
  return xs.length ? xs.reduce((s, x) => s + x, 0) / xs.length : NaN;
}
/** Nearest-rank percentile of an (unsorted) array, p in [0, 100]. */
export function percentile(xs, p) {
  if (!xs.length) return NaN;
  const a = Float64Array.from(xs).sort();
  const k = Math.min(a.length - 1, Math.max(0, Math.ceil((p / 100) * a.length) - 1));
  return a[k];
}

export function fmt(x, digits = 2) {
  if (x === null || x === undefined || (typeof x === 'number' && !Number.isFinite(x))) return '—';
  if (typeof x !== 'number') return String(x);
  return x.toFixed(digits);
}
export function fmtInt(x) {
  if (x === null || x === undefined || !Number.isFinite(x)) return '—';
  return Math.round(x).toLocaleString('en-US');
}

/** Markdown table from a header row and rows of cells; `align` like ['l','r',...]. */
export function mdTable(header, rows, align) {
  const al = align ?? header.map((_, i) => (i === 0 ? 'l' : 'r'));
  const esc = (c) => String(c ?? '').replace(/\|/g, '\\|');
  const lines = [
    `| ${header.map(esc).join(' | ')} |`,
    `| ${al.map((a) => (a === 'r' ? '---:' : a === 'c' ? ':---:' : ':---')).join(' | ')} |`,
    ...rows.map((r) => `| ${r.map(esc).join(' | ')} |`),
  ];
  return lines.join('\n');
}

export function writeOutputs(name, json, markdown) {
  fs.mkdirSync(OUT_DIR, { recursive: true });
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const text = JSON.stringify(json, null, 2) + '\n';
  fs.writeFileSync(path.join(OUT_DIR, `${name}-${stamp}.json`), text);
  fs.writeFileSync(path.join(OUT_DIR, `${name}.json`), text);
  fs.writeFileSync(path.join(OUT_DIR, `${name}.md`), markdown.endsWith('\n') ? markdown : markdown + '\n');
  log(`wrote bench/out/${name}.json, bench/out/${name}.md`);
}

/** A fresh temp dir under bench/out/tmp/ (run.sh clears that folder before a run). */
export function makeTmpRoot(prefix = 'run-') {
  const base = path.join(OUT_DIR, 'tmp');
  fs.mkdirSync(base, { recursive: true });
  return fs.mkdtempSync(path.join(base, prefix));
}

// ---------------------------------------------------------------- who holds the upstream's connections

/** pid plus all its descendants (Linux /proc). */
/** Child pids of `pid` (Linux: /proc/<pid>/task/<pid>/children: a supervisor's workers); [] when it is gone. */
export function childPids(pid) {
  try {
    return fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** True while a process with this pid exists (signal 0). */
export function pidAlive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export function withDescendants(rootPid) {
  const kids = new Map();
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (!kids.has(ppid)) kids.set(ppid, []);
      kids.get(ppid).push(Number(d));
    } catch {
      /* process gone */
    }
  }
  const out = [rootPid];
  for (let i = 0; i < out.length; i++) out.push(...(kids.get(out[i]) ?? []));
  return out;
}

/** Local TCP ports of the sockets that `pid` (and its descendants) hold open. */
export function localPortsOfProcess(pid) {
  const inodes = new Set();
  for (const p of withDescendants(pid)) {
    let fds = [];
    try {
      fds = fs.readdirSync(`/proc/${p}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        const l = fs.readlinkSync(`/proc/${p}/fd/${fd}`);
        const m = /^socket:\[(\d+)\]$/.exec(l);
        if (m) inodes.add(m[1]);
      } catch {
        /* fd closed meanwhile */
      }
    }
  }
  const ports = new Set();
  for (const f of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = fs.readFileSync(f, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length < 10) continue;
      if (inodes.has(cols[9])) ports.add(parseInt(cols[1].split(':')[1], 16));
    }
  }
  return ports;
}

/**
 * Map local port → pid for established TCP connections to 127.0.0.1:`upstreamPort`, using
 * `ss -tnp` (netlink; a consistent dump). Returns null when ss is not installed.
 */
function peersViaSs(upstreamPort) {
  let text;
  try {
    text = execFileSync('ss', ['-Htnp', 'state', 'established', 'dport', '=', `:${upstreamPort}`], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  } catch {
    return null;
  }
  const out = new Map();
  for (const line of text.split('\n')) {
    // Recv-Q Send-Q Local:Port Peer:Port users:(("node",pid=123,fd=20))
    const cols = line.trim().split(/\s+/);
    if (cols.length < 4) continue;
    const local = cols[2];
    const pid = /pid=(\d+)/.exec(line)?.[1];
    if (pid) out.set(Number(local.slice(local.lastIndexOf(':') + 1)), Number(pid));
  }
  return out;
}

/**
 * Attribute the upstream's client connections (CLIENT LIST) to processes by matching each
 * client's peer port with the sockets of `owners` ({ name: pid }, each with its descendants):
 * via `ss -tnp` when installed, else via /proc/<pid>/fd and /proc/net/tcp (which can miss
 * entries while the socket table churns). `conn` is a RespConn to the upstream on
 * `upstreamPort`; its own connection is reported as "bench (INFO)". Returns { name: count }.
 */
export async function upstreamConnsByOwner(conn, owners, upstreamPort) {
  const list = await conn.callT(3000, 'CLIENT', 'LIST');
  const id = await conn.callT(3000, 'CLIENT', 'ID');
  const named = Object.entries(owners).filter(([, pid]) => pid);
  const ss = upstreamPort ? peersViaSs(upstreamPort) : null;
  let ownerOfPort;
  if (ss) {
    const ownerOfPid = new Map();
    for (const [name, pid] of named) for (const p of withDescendants(pid)) ownerOfPid.set(p, name);
    ownerOfPort = (port) => ownerOfPid.get(ss.get(port));
  } else {
    const portsByOwner = named.map(([name, pid]) => [name, localPortsOfProcess(pid)]);
    ownerOfPort = (port) => portsByOwner.find(([, ports]) => ports.has(port))?.[0];
  }
  const counts = {};
  for (const line of String(list).split('\n')) {
    if (!line.trim()) continue;
    const f = Object.fromEntries(line.trim().split(' ').map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
    let who;
    if (Number(f.id) === id) who = 'bench (INFO)';
    else who = ownerOfPort(Number(String(f.addr).split(':').pop())) ?? 'other';
    counts[who] = (counts[who] ?? 0) + 1;
  }
  return counts;
}
