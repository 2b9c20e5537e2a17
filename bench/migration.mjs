// Live migration (RESPOOL MIGRATE, src/migration, docs/migration.md): what copying a keyspace to
// another server costs, and what the clients see meanwhile and at the cutover.
//
//   npm run bench:migration     (= npm run build && npm run build:harness && node bench/migration.mjs)
//
// Standalone valkey-servers (no persistence) and respool processes (bin/respool.js over dist/, a
// YAML config with the migration settings, --mode standalone) in front of the source, all on
// 127.0.0.1. The client load comes from this same file run as a child process (`--load`, below):
// fixed-rate GET/SET over raw RESP, open loop (a request is sent on time whether or not the ones
// before it were answered), every request's send time and latency recorded, so each window's
// figures are read from one continuous load. It also checks what it reads: a GET of a key it
// wrote (no write of that key sent since) must return the value last acknowledged ("stale reads").
//
// Part 1, copy rate: BENCH_MIG_KEYS (1,000,000) keys seeded in the source with valkey-cli --pipe
//   (85% strings of 100 bytes, 1 in 20 with a TTL; 5% hashes, 4% lists, 3% sets, 3% sorted sets of
//   5 elements of 16 bytes), an empty target; respool with copiesInFlight 100, maxKeysPerSecond 10,000,000 and
//   maxBytesPerSecond 1tb (unpaced). START → synced, no client load: keys/s and MB/s (bytes =
//   STATUS bytes, the DUMP payloads restored; MB = 10^6 bytes), the copy alone (copying →
//   verifying) and START → synced; CPU of respool and both servers. Then DBSIZE on both sides and
//   DUMP/PTTL of BENCH_MIG_CHECK_KEYS random keys compared, and ABORT (the target emptied).
// Part 2, clients' latency during a copy at the default pace (5,000 keys/s, 32 MiB/s, 4 copies in flight): a steady
//   load through respool (BENCH_MIG_CONNS connections, BENCH_MIG_RATE requests/s, 80% GET / 20%
//   SET of 100 bytes over the source's string keys), BENCH_MIG_ROUNDS rounds of two windows of
//   BENCH_MIG_WINDOW_S each, "before" (no migration) and "during" (copying; START 0.5 s before the
//   window, ABORT after it), their order alternating per round. p50/p99 per window; per round
//   p99 during ÷ before; medians over rounds (target ≤ 1.2×). Unpinned, then (BENCH_MIG_PIN, on
//   by default) the same rounds pinned: respool on core 0, the servers and the load on core 1;
//   then (BENCH_MIG_APART, on by default) "apart": unpinned, but the target at nice 19 and the
//   load at nice -10 (every thread), as if each were on a machine of its own — on this 2-core
//   machine four processes share two cores, and the target's RESTOREs and the load's own
//   scheduling otherwise show in the clients' p99 though neither would share a core with respool
//   or the source in a deployment. respool and the source stay at nice 0: their cost is the one
//   a user's clients pay. With BENCH_MIG_WARM (on by default) every mode runs with one busy loop
//   per core at nice 19 beside it: this VM's idle vCPUs halt, and waking one costs the next
//   request tens of µs, so a quiet "before" window paid that more often than a busy "during"
//   (p50 during was 0.41–0.73× before without them) — the loops keep the cores awake in both,
//   and yield to everything else (weight 15 against 1024). BENCH_MIG_COPIER=1 (off by default)
//   makes the clients' respool one member of a fleet of two and adds a "copier" mode: the other
//   member, which has no clients, runs START … ABORT at nice 19 (the target and the load niced as
//   in "apart"), so the scan's copies leave the clients' event loop and yield their cores; the
//   clients' respool still carries its clients' writes (the fleet's members each do).
//   BENCH_MIG_IDLE (on by default) adds an "idle" mode first: unpinned, with no migration in the
//   "during" window either — the ratio two windows of this machine give with nothing changed.
//   BENCH_MIG_FLOOR=1 adds a "floor" mode: no migration; in the "during" window a process of its
//   own (--mirror) copies the load's write rate of keys as a carry does — what mirroring the
//   writes costs the clients at least, whoever sends the copies.
// Part 3, the cutover's write pause: BENCH_MIG_SMALL_KEYS (20,000) keys, the same mix, and a
//   steady load of BENCH_MIG_CUT_RATE requests/s, half of them SETs. BENCH_MIG_CUTOVERS rounds of
//   START → synced → CUTOVER between two servers in turn (the old source, emptied directly, is
//   the next round's target), one respool and one client load all along. Per round the pause
//   respool reports (STATUS cutover_pause_ms), the CUTOVER command's own time, and the longest
//   latency of a client write sent from 50 ms before CUTOVER to its reply; p50/p99 over rounds
//   (target p99 ≤ 100 ms). A CUTOVER that fails is sent again 1 s later (3 tries, then ABORT and
//   the round is left out), and reported with the clients' longest write around it. After each
//   cutover the new upstream's DBSIZE; at the end every written key's value there against the
//   value last acknowledged.
// Part 4, the mirrored writes' CPU: SET only, BENCH_MIG_CPU_RATE writes/s, over the 20,000 keys;
//   BENCH_MIG_CPU_ROUNDS rounds of two windows of BENCH_MIG_CPU_WINDOW_S: "without" (no migration)
//   and "synced" (a migration that reached synced, every write's key copied to the target again),
//   order alternating. respool's CPU (utime+stime, /proc/<pid>/stat) ÷ the writes sent in the
//   window: µs per write, per round synced ÷ without, medians; the servers' CPU per write beside
//   it. Then, load stopped with a migration synced, every string key compared on both sides.
// Part 5, the cutover's write pause with workers and in a fleet: part 3's rounds (the same load,
//   figures and checks; BENCH_MIG_MULTI_CUTOVERS rounds each, 10) through (a) one respool with
//   `workers: 2` in its YAML (the supervisor spreads the load's connections over both workers;
//   RESPOOL MIGRATE sent on one connection, run by worker 0), then (b) a fleet of two respool
//   processes (`cluster: { peers: [both] }`, the fleet's shared state in the standalone upstream),
//   the load's connections alternating between them, START, STATUS and CUTOVER sent to member 0
//   (the coordinator: its STATUS cutover_pause_ms is the pause). Each on two fresh servers. After
//   each cutover, a write through 4 fresh connections to each respool port is read back on the new
//   upstream directly; the new upstream's keys are counted less the fleet's own ({respool-fleet}).
//
// Env: BENCH_QUICK=1 (smoke run: 100,000 keys, fewer and shorter rounds), the BENCH_MIG_* knobs
// above, BENCH_MIG_PARTS (e.g. "3,4": only those parts), BENCH_MIG_BATCH_KEYS (part 2's
// migration.batchKeys instead of the default). Writes bench/out/migration.json (+ .md, + a
// timestamped copy); a full run with the defaults also rewrites the "migration" section of
// bench/RESULTS.md. Only the processes it started are stopped, by pid.
import { once } from 'node:events';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';

// ---------------------------------------------------------------- the load (child process)

if (process.argv[2] === '--load') {
  await loadMain(JSON.parse(process.argv[3]));
}
if (process.argv[2] === '--mirror') {
  await mirrorMain(JSON.parse(process.argv[3]));
}

/**
 * The least that carrying writes can cost the nodes (part 2's "floor" mode): a process with
 * nothing else to do copies `rate` keys a second (`${prefix}N`, N random below `keys`) from the
 * source to the target as respool carries a write — DUMP and PTTL on the source, then RESTORE …
 * REPLACE on the target — gathered every 5 ms as respool gathers them. Prints "ready" once
 * connected; runs until "stop" on stdin, then prints the keys copied.
 */
async function mirrorMain({ sourcePort, targetPort, rate, keys, prefix }) {
  const connect = (port) => new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port }, () => resolve(socket)); // (HOST is not imported yet: this runs first)
    socket.once('error', reject);
    socket.setNoDelay(true);
  });
  const [source, target] = await Promise.all([connect(sourcePort), connect(targetPort)]);
  const { encodeCommand: enc } = await import('./lib/common.mjs');
  // The source's replies, in order: a bulk (DUMP's payload, or null) then an integer (PTTL), per key.
  // Read here rather than by the harness's RespDecoder, which decodes a bulk as UTF-8 text: a
  // DUMP payload is binary.
  let buf = Buffer.alloc(0);
  const replies = [];
  const asked = [];
  source.on('data', (d) => {
    buf = buf.length === 0 ? d : Buffer.concat([buf, d]);
    for (;;) {
      const cr = buf.indexOf(13);
      if (cr < 0) break;
      const head = buf.toString('latin1', 1, cr);
      if (buf[0] === 36 /* $ */) {
        const size = Number(head);
        if (size < 0) {
          replies.push(null);
          buf = buf.subarray(cr + 2);
          continue;
        }
        if (buf.length < cr + 2 + size + 2) break;
        replies.push(Buffer.from(buf.subarray(cr + 2, cr + 2 + size)));
        buf = buf.subarray(cr + 2 + size + 2);
      } else {
        replies.push(Number(head)); // :integer (or an error line: NaN)
        buf = buf.subarray(cr + 2);
      }
    }
    // Each key's two replies in: its RESTOREs go to the target in one write.
    const out = [];
    while (replies.length >= 2) {
      const [payload, pttl] = replies.splice(0, 2);
      const key = asked.shift();
      if (payload !== null) out.push(enc(['RESTORE', key, pttl > 0 ? pttl : 0, payload, 'REPLACE']));
    }
    if (out.length > 0) target.write(Buffer.concat(out));
  });
  target.on('data', () => {}); // +OK each
  let owed = 0;
  let copied = 0;
  const timer = setInterval(() => {
    owed += (rate * 5) / 1000;
    const out = [];
    for (; owed >= 1; owed--) {
      const key = `${prefix}${Math.floor(Math.random() * keys)}`;
      asked.push(key);
      out.push(enc(['DUMP', key]), enc(['PTTL', key]));
      copied++;
    }
    if (out.length > 0) source.write(Buffer.concat(out));
  }, 5);
  process.stdout.write('ready\n');
  process.stdin.setEncoding('utf8');
  for await (const chunk of process.stdin) if (chunk.includes('stop')) break;
  clearInterval(timer);
  await new Promise((resolve) => setTimeout(resolve, 50));
  source.destroy();
  target.destroy();
  process.stdout.write(`${JSON.stringify({ copied })}\n`);
  process.exit(0);
}

/**
 * Fixed-rate GET/SET load over raw RESP (runs until a line "stop" on stdin). Options: port (or
 * ports: connection i goes to ports[i % ports.length]), conns,
 * rate (requests/s in all), writeShare, keys (how many keys `${prefix}N`), valueBytes,
 * recentShare (share of the GETs on a key among the last 256 written), samplesFile (written at the
 * end: Float64 triples [send time ms since start, latency ms, flags 1=write 2=error 4=stale, the
 * connection's index × 8]),
 * valuesFile (optional: JSON { key: last acknowledged value } of every key written).
 * Prints "ready" once connected, then one JSON line at the end.
 */
async function loadMain(o) {
  const { port, ports = [port], conns: nConns, rate, writeShare, keys, prefix, valueBytes, recentShare = 0.3, samplesFile, valuesFile } = o;
  const PAD = randomBytes(valueBytes).toString('base64');
  const keyNames = [];
  const keyName = (k) => (keyNames[k] ??= `${prefix}${k}`);
  const enc = (args) => {
    let s = `*${args.length}\r\n`;
    for (const a of args) s += `$${Buffer.byteLength(a)}\r\n${a}\r\n`;
    return s;
  };
  let samples = new Float64Array(3 * (1 << 20));
  let n = 0;
  const record = (t, lat, flags) => {
    if (3 * n + 3 > samples.length) {
      const bigger = new Float64Array(samples.length * 2);
      bigger.set(samples);
      samples = bigger;
    }
    samples[3 * n] = t;
    samples[3 * n + 1] = lat;
    samples[3 * n + 2] = flags;
    n++;
  };
  const pending = new Set(); // keys with a SET in flight
  const writeGen = new Int32Array(keys); // SETs sent per key
  const acked = new Map(); // key → value last acknowledged (null: unknown, a SET failed)
  const recent = new Int32Array(256);
  let recentN = 0;
  let sent = 0;
  let errors = 0;
  let stale = 0;
  let closedConns = 0;
  const staleExamples = [];
  const errorExamples = [];
  let t0 = 0;

  class Conn {
    constructor(socket, index) {
      this.s = socket;
      this.index = index;
      this.q = [];
      this.qh = 0;
      this.buf = null;
      this.seq = 0;
      this.closed = false;
      socket.setNoDelay(true);
      socket.on('data', (d) => this.onData(d));
      socket.on('error', (e) => {
        if (errorExamples.length < 5) errorExamples.push(`connection ${index}: ${e.message}`);
      });
      socket.on('close', () => {
        if (!this.closed) closedConns++;
        this.closed = true;
      });
    }
    get inFlight() {
      return this.q.length - this.qh;
    }
    reply(val, isErr) {
      const req = this.q[this.qh++];
      if (this.qh > 4096) {
        this.q = this.q.slice(this.qh);
        this.qh = 0;
      }
      const lat = performance.now() - req.t;
      let flags = 0;
      if (req.w) {
        flags |= 1;
        pending.delete(req.k);
        if (!isErr && val === 'OK') {
          acked.set(req.k, req.v);
          recent[recentN++ & 255] = req.k;
        } else {
          acked.set(req.k, null);
          flags |= 2;
          errors++;
          if (errorExamples.length < 5) errorExamples.push(`SET ${keyName(req.k)}: ${val}`);
        }
      } else if (isErr) {
        flags |= 2;
        errors++;
        if (errorExamples.length < 5) errorExamples.push(`GET ${keyName(req.k)}: ${val}`);
      } else if (req.e !== undefined && writeGen[req.k] === req.g && val !== req.e) {
        flags |= 4;
        stale++;
        if (staleExamples.length < 5) staleExamples.push({ key: keyName(req.k), at: req.t - t0, expected: req.e.slice(0, 24), got: val === null ? null : val.slice(0, 24) });
      }
      record(req.t - t0, lat, flags | (this.index << 3));
    }
    onData(d) {
      const buf = this.buf === null ? d : Buffer.concat([this.buf, d]);
      let pos = 0;
      const len = buf.length;
      while (pos < len) {
        const cr = buf.indexOf(13, pos);
        if (cr < 0 || cr + 1 >= len) break;
        const type = buf[pos];
        if (type === 36 /* $ */) {
          const size = Number(buf.toString('latin1', pos + 1, cr));
          if (size < 0) {
            pos = cr + 2;
            this.reply(null, false);
            continue;
          }
          if (cr + 2 + size + 2 > len) break;
          const val = buf.toString('latin1', cr + 2, cr + 2 + size);
          pos = cr + 2 + size + 2;
          this.reply(val, false);
        } else {
          const line = buf.toString('latin1', pos + 1, cr);
          pos = cr + 2;
          this.reply(line, type === 45 /* - */);
        }
      }
      this.buf = pos < len ? buf.subarray(pos) : null;
    }
  }

  const sockets = await Promise.all(Array.from({ length: nConns }, (_, i) => new Promise((resolve, reject) => {
    const s = net.connect({ host: '127.0.0.1', port: ports[i % ports.length] }, () => resolve(s));
    s.once('error', reject);
  })));
  // Which process serves each connection (INFO server's process_id: a worker, a fleet member),
  // asked once before the load starts.
  const connPids = await Promise.all(sockets.map((s) => new Promise((resolve) => {
    let got = Buffer.alloc(0);
    const onData = (d) => {
      got = Buffer.concat([got, d]);
      const cr = got.indexOf(13);
      if (cr < 0) return;
      const size = got[0] === 36 ? Number(got.toString('latin1', 1, cr)) : 0;
      if (got[0] === 36 && got.length < cr + 2 + size + 2) return;
      s.off('data', onData);
      resolve(Number(/process_id:(\d+)/.exec(got.toString('latin1'))?.[1] ?? NaN));
    };
    s.on('data', onData);
    s.write('*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n');
  })));
  const conns = sockets.map((s, i) => new Conn(s, i));
  process.stdout.write('ready\n');

  let stopping = false;
  t0 = performance.now();
  const pickKey = () => (Math.random() * keys) | 0;
  const tick = () => {
    if (stopping) return;
    const now = performance.now();
    let due = Math.floor(((now - t0) * rate) / 1000) - sent;
    if (due > 1000) due = 1000;
    const out = conns.map(() => '');
    for (let i = 0; i < due; i++) {
      const ci = sent % nConns;
      const c = conns[ci];
      sent++;
      if (c.closed) continue;
      let k = -1;
      if (Math.random() < writeShare) {
        for (let tries = 0; tries < 5 && k < 0; tries++) {
          const x = pickKey();
          if (!pending.has(x)) k = x;
        }
      }
      if (k >= 0) {
        const v = `${ci}:${c.seq++}:${PAD}`.slice(0, valueBytes);
        pending.add(k);
        writeGen[k]++;
        c.q.push({ t: now, w: true, k, v });
        out[ci] += enc(['SET', keyName(k), v]);
      } else {
        k = recentN > 0 && Math.random() < recentShare ? recent[(Math.random() * Math.min(recentN, 256)) | 0] : pickKey();
        const e = pending.has(k) ? undefined : acked.get(k) ?? undefined;
        c.q.push({ t: now, w: false, k, e, g: writeGen[k] });
        out[ci] += enc(['GET', keyName(k)]);
      }
    }
    for (let ci = 0; ci < nConns; ci++) if (out[ci] !== '') conns[ci].s.write(out[ci]);
    setTimeout(tick, 1);
  };
  setTimeout(tick, 0);

  let input = '';
  process.stdin.setEncoding('utf8');
  process.stdin.on('data', async (chunk) => {
    input += chunk;
    if (stopping || !input.includes('stop')) return;
    stopping = true;
    const deadline = Date.now() + 3000;
    while (conns.some((c) => !c.closed && c.inFlight > 0) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    const unanswered = conns.reduce((s, c) => s + c.inFlight, 0);
    fs.writeFileSync(samplesFile, Buffer.from(samples.buffer, 0, n * 3 * 8));
    if (valuesFile) {
      const values = {};
      for (const [k, v] of acked) values[keyName(k)] = v;
      fs.writeFileSync(valuesFile, JSON.stringify(values));
    }
    for (const s of sockets) s.destroy();
    process.stdout.write(`${JSON.stringify({ sent, answered: n, unanswered, errors, stale, closedConns, staleExamples, errorExamples, epoch0: performance.timeOrigin + t0, keysWritten: acked.size, connPids })}\n`);
    process.exit(0);
  });
  await new Promise(() => {}); // until "stop"
}

// ---------------------------------------------------------------- the bench (parent)

const {
  HOST, OUT_DIR, ReplyError, RespConn, envFlag, envInt, fmt, fmtInt, log, makeTmpRoot, mdTable, median, percentile,
  run, sleep, spawn, startValkey, stop, uniquePort, waitForPing, writeOutputs,
} = await import('./lib/common.mjs');
const { cpuSeconds } = await import('./lib/measure.mjs');
const { RESPOOL_BIN, respoolBuildLabel } = await import('./lib/respool-build.mjs');
const { writeSection } = await import('./lib/results-file.mjs');

const SELF = fileURLToPath(import.meta.url);
const QUICK = envFlag('BENCH_QUICK');
const KEYS = envInt('BENCH_MIG_KEYS', QUICK ? 100_000 : 1_000_000);
const CHECK_KEYS = envInt('BENCH_MIG_CHECK_KEYS', 2_000);
const COPY_TIMEOUT_S = envInt('BENCH_MIG_COPY_TIMEOUT_S', 300);
const CONNS = envInt('BENCH_MIG_CONNS', 8);
const RATE = envInt('BENCH_MIG_RATE', 4_000);
const WRITE_SHARE = Number(process.env.BENCH_MIG_WRITE_SHARE ?? 0.2);
const ROUNDS = envInt('BENCH_MIG_ROUNDS', QUICK ? 1 : 4);
const WINDOW_S = envInt('BENCH_MIG_WINDOW_S', QUICK ? 3 : 6);
const PIN = process.env.BENCH_MIG_PIN === undefined ? os.cpus().length >= 2 : envFlag('BENCH_MIG_PIN');
const APART = process.env.BENCH_MIG_APART === undefined ? true : envFlag('BENCH_MIG_APART');
const WARM = process.env.BENCH_MIG_WARM === undefined ? true : envFlag('BENCH_MIG_WARM');
const COPIER = envFlag('BENCH_MIG_COPIER');
const IDLE = process.env.BENCH_MIG_IDLE === undefined ? true : envFlag('BENCH_MIG_IDLE');
const FLOOR = envFlag('BENCH_MIG_FLOOR');
const SMALL_KEYS = envInt('BENCH_MIG_SMALL_KEYS', 20_000);
const CUTOVERS = envInt('BENCH_MIG_CUTOVERS', QUICK ? 3 : 15);
const CUT_RATE = envInt('BENCH_MIG_CUT_RATE', 2_000);
const CPU_ROUNDS = envInt('BENCH_MIG_CPU_ROUNDS', QUICK ? 1 : 5);
const CPU_RATE = envInt('BENCH_MIG_CPU_RATE', 4_000);
const CPU_WINDOW_S = envInt('BENCH_MIG_CPU_WINDOW_S', QUICK ? 3 : 6);
const MULTI_CUTOVERS = envInt('BENCH_MIG_MULTI_CUTOVERS', QUICK ? 3 : 10);
const VALUE_BYTES = 100;
const PACED_BATCH = process.env.BENCH_MIG_BATCH_KEYS ? Number(process.env.BENCH_MIG_BATCH_KEYS) : null; // part 2's migration.batchKeys (default: respool's, 100)
const PARTS = new Set((process.env.BENCH_MIG_PARTS ?? '1,2,3,4,5').split(',').map(Number));
const SECTION = 'migration';
const UNPACED = { maxKeysPerSecond: 10_000_000, maxBytesPerSecond: '1tb', copiesInFlight: 100, paceByLatency: false }; // parts 1, 3-5: as fast as it goes
const CPUS = os.cpus().length;

const nowMs = () => performance.timeOrigin + performance.now();
const tmp = makeTmpRoot('migration-');
const started = new Date();
const loadavg = () => fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
const loadStart = loadavg();
const notes = []; // anything unexpected, said in the report
const note = (text) => {
  notes.push(text);
  log(`NOTE: ${text}`);
};

// ---------------------------------------------------------------- keyspace

/** How `total` keys split by type; string keys are s:0 … s:(strings-1). */
function layout(total) {
  const hashes = Math.round(total * 0.05);
  const lists = Math.round(total * 0.04);
  const sets = Math.round(total * 0.03);
  const zsets = Math.round(total * 0.03);
  return { strings: total - hashes - lists - sets - zsets, hashes, lists, sets, zsets };
}

const bulk = (s) => `$${Buffer.byteLength(s)}\r\n${s}\r\n`;
const cmd = (...args) => `*${args.length}\r\n${args.map(bulk).join('')}`;

/** Seeds the keys of layout(total) on 127.0.0.1:port with valkey-cli --pipe; { ms, replies, errors }. */
async function seed(port, total) {
  const l = layout(total);
  const child = spawn('valkey-cli', ['-h', HOST, '-p', String(port), '--pipe'], { stdin: 'pipe' });
  const t0 = performance.now();
  const rnd = { buf: Buffer.alloc(0), pos: 0 };
  const random = (chars) => { // base64 text, `chars` long
    const need = Math.ceil((chars * 3) / 4);
    if (rnd.pos + need > rnd.buf.length) {
      rnd.buf = randomBytes(1 << 20);
      rnd.pos = 0;
    }
    const s = rnd.buf.toString('base64', rnd.pos, rnd.pos + need).slice(0, chars);
    rnd.pos += need;
    return s;
  };
  let text = '';
  const flush = async (force) => {
    if (text.length < (1 << 20) && !force) return;
    const ok = child.stdin.write(text);
    text = '';
    if (!ok) await once(child.stdin, 'drain');
  };
  for (let i = 0; i < l.strings; i++) {
    text += i % 20 === 0 ? cmd('SET', `s:${i}`, random(VALUE_BYTES), 'EX', '86400') : cmd('SET', `s:${i}`, random(VALUE_BYTES));
    await flush(false);
  }
  const five = (f) => Array.from({ length: 5 }, (_, j) => f(j)).flat();
  for (let i = 0; i < l.hashes; i++) {
    text += cmd('HSET', `h:${i}`, ...five((j) => [`f${j}`, random(16)]));
    await flush(false);
  }
  for (let i = 0; i < l.lists; i++) {
    text += cmd('RPUSH', `l:${i}`, ...five(() => [random(16)]));
    await flush(false);
  }
  for (let i = 0; i < l.sets; i++) {
    text += cmd('SADD', `t:${i}`, ...five(() => [random(16)]));
    await flush(false);
  }
  for (let i = 0; i < l.zsets; i++) {
    text += cmd('ZADD', `z:${i}`, ...five((j) => [String(j * 1.5), random(16)]));
    await flush(false);
  }
  await flush(true);
  child.stdin.end();
  const { code } = await child.exited;
  const m = /errors:\s*(\d+),\s*replies:\s*(\d+)/.exec(child.out);
  if (code !== 0 || !m) throw new Error(`valkey-cli --pipe failed (exit ${code}): ${child.out.slice(-300)} ${child.err.slice(-300)}`);
  return { ms: performance.now() - t0, errors: Number(m[1]), replies: Number(m[2]), layout: l };
}

// ---------------------------------------------------------------- processes

/** Every thread of `pid` onto `cpus` (taskset -a -p). */
const pinTo = (pid, cpus) => run('taskset', ['-a', '-p', '-c', String(cpus), String(pid)]);
const allCpus = `0-${CPUS - 1}`;
/** Every thread of `pid` at niceness `n` (renice works per thread on Linux). */
const niceTo = async (pid, n) => {
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) await run('renice', ['-n', String(n), '-p', tid]);
};

/**
 * A respool (bin/respool.js) in front of 127.0.0.1:upstreamPort with `migration` settings in its
 * YAML; the 4th argument: { port (the listen port; default a free one), workers (N > 1: the supervisor and N
 * workers), peers (cluster.peers: a fleet member, every member's host:port) }.
 */
async function startRespool(name, upstreamPort, migration, { port: listenPort, workers, peers } = {}) {
  const port = listenPort ?? await uniquePort();
  const configFile = path.join(OUT_DIR, `migration-${name}.yaml`);
  const stateFile = path.join(tmp, `state-${name}.json`);
  const lines = ['migration:', ...Object.entries({ ...migration, stateFile }).map(([k, v]) => `  ${k}: ${typeof v === 'string' ? JSON.stringify(v) : v}`)];
  const extraConfig = {};
  if (workers !== undefined) {
    lines.push(`workers: ${workers}`);
    extraConfig.workers = workers;
  }
  if (peers !== undefined) {
    lines.push('cluster:', `  peers: [${peers.map((p) => JSON.stringify(p)).join(', ')}]`);
    extraConfig.cluster = { peers };
  }
  fs.mkdirSync(OUT_DIR, { recursive: true });
  fs.writeFileSync(configFile, `${lines.join('\n')}\n`);
  const args = [RESPOOL_BIN, '--config', configFile, '--listen', `${HOST}:${port}`, '--upstream', `${HOST}:${upstreamPort}`, '--mode', 'standalone', '--log-level', 'info'];
  const logFile = path.join(OUT_DIR, `migration-${name}.log`);
  fs.writeFileSync(logFile, '');
  const child = spawn(process.execPath, args, { logFile });
  await waitForPing(port, { child, what: `respool (${name})`, timeoutMs: 15_000 });
  // With workers, PING answers once the first one listens: wait until new connections reach
  // every worker (the supervisor deals them out in turn only among the workers listening).
  const servingPids = workers > 1 ? await untilWorkersServe(port, workers, name) : undefined;
  const ctl = await RespConn.connect(port);
  const r = {
    name, port, child, ctl, logFile, servingPids,
    cmd: `node ${args.join(' ')}   # ${configFile}: ${JSON.stringify({ migration: { ...migration, stateFile: '…' }, ...extraConfig })}`,
    async migrate(...args) {
      const reply = await ctl.callT(120_000, 'RESPOOL', 'MIGRATE', ...args);
      if (reply instanceof ReplyError) throw new Error(`RESPOOL MIGRATE ${args.join(' ')}: ${reply.message}`);
      return reply;
    },
    async status() {
      const reply = await this.migrate('STATUS');
      const pairs = reply instanceof Map ? [...reply.entries()] : Array.from({ length: reply.length / 2 }, (_, i) => [reply[2 * i], reply[2 * i + 1]]);
      return Object.fromEntries(pairs.map(([k, v]) => [String(k), typeof v === 'string' && /^-?\d+(\.\d+)?$/.test(v) ? Number(v) : v]));
    },
    /** Polls STATUS until its state is one of `states`; { st, at (epoch ms), seen: every state passed through with when }. */
    async waitFor(states, { timeoutMs = 60_000, pollMs = 20, onPoll } = {}) {
      const deadline = Date.now() + timeoutMs;
      const seen = [];
      for (;;) {
        const st = await this.status();
        const at = nowMs();
        if (seen.length === 0 || seen[seen.length - 1].state !== st.state) seen.push({ state: st.state, at, reason: st.reason });
        onPoll?.(st, at);
        if (states.includes(st.state)) return { st, at, seen };
        if (st.state === 'aborted' || st.state === 'idle' || st.state === 'cut-over') throw new Error(`${name}: migration is ${st.state} (${st.reason}) while waiting for ${states.join('|')}`);
        if (Date.now() > deadline) {
          const e = new Error(`${name}: migration still ${st.state} (${st.reason ?? ''}) after ${timeoutMs} ms, waiting for ${states.join('|')}`);
          e.status = st;
          throw e;
        }
        await sleep(pollMs);
      }
    },
  };
  return r;
}

/** Connections to `port` until `count` processes (INFO server process_id) answered them; their pids. */
async function untilWorkersServe(port, count, name) {
  const seen = new Set();
  const deadline = Date.now() + 15_000;
  while (seen.size < count) {
    if (Date.now() > deadline) throw new Error(`respool (${name}): new connections reached only ${seen.size} of ${count} workers (${[...seen].join(', ')}) within 15 s`);
    const pid = await direct(port, async (c) => /process_id:(\d+)/.exec(String(await c.callT(5_000, 'INFO', 'server')))?.[1]).catch(() => undefined);
    if (pid !== undefined) seen.add(Number(pid));
    if (seen.size < count) await sleep(50);
  }
  return [...seen];
}

/** The pids of `pid`'s children (/proc/<pid>/task/<tid>/children). */
function childPids(pid) {
  const out = [];
  try {
    for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
      out.push(...fs.readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number));
    }
  } catch {
    /* gone */
  }
  return out;
}
const alive = (pid) => fs.existsSync(`/proc/${pid}`);

async function stopRespool(r) {
  if (!r) return;
  try {
    r.ctl.close();
  } catch {
    /* gone */
  }
  const kids = childPids(r.child.pid); // a supervisor's workers
  await stop(r.child);
  const deadline = Date.now() + 5_000;
  while (kids.some(alive) && Date.now() < deadline) await sleep(50);
  for (const pid of kids.filter(alive)) {
    note(`respool ${r.name}: worker ${pid} still ran 5 s after its supervisor ${r.child.pid} stopped; killed (SIGKILL, by pid)`);
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
}

/** The mirror process (this file, --mirror: mirrorMain); .stop() resolves the keys it copied. */
async function startMirror(opts) {
  const child = spawn(process.execPath, [SELF, '--mirror', JSON.stringify(opts)], { stdin: 'pipe', match: `${process.execPath} ${SELF}` });
  const deadline = Date.now() + 10_000;
  while (!child.out.includes('ready')) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`mirror did not start: ${child.err.slice(-500)}`);
    await sleep(20);
  }
  return {
    async stop() {
      child.stdin.write('stop\n');
      const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await child.exited;
      clearTimeout(t);
      return JSON.parse(child.out.trim().split('\n').pop()).copied;
    },
  };
}

/** A load (this file, --load) against `port`; .stop() resolves { summary, samples, values }. */
async function startLoad(name, opts) {
  const samplesFile = path.join(tmp, `load-${name}.bin`);
  const valuesFile = opts.trackValues ? path.join(tmp, `load-${name}-values.json`) : undefined;
  const o = { ...opts, samplesFile, valuesFile };
  delete o.trackValues;
  const child = spawn(process.execPath, [SELF, '--load', JSON.stringify(o)], { stdin: 'pipe', match: `${process.execPath} ${SELF}` });
  const deadline = Date.now() + 10_000;
  while (!child.out.includes('ready')) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`load ${name} did not start: ${child.err.slice(-500)}`);
    await sleep(20);
  }
  return {
    child,
    pid: child.pid,
    async stop() {
      child.stdin.write('stop\n');
      const t = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await child.exited;
      clearTimeout(t);
      const line = child.out.trim().split('\n').pop();
      if (!line || line === 'ready') throw new Error(`load ${name} ended without its summary: ${child.err.slice(-500)}`);
      const summary = JSON.parse(line);
      const raw = fs.readFileSync(samplesFile);
      const samples = new Float64Array(raw.buffer, raw.byteOffset, raw.length / 8);
      const values = valuesFile ? JSON.parse(fs.readFileSync(valuesFile, 'utf8')) : null;
      return { summary, samples, values };
    },
  };
}

/**
 * The requests of a load sent in [from, to) (epoch ms) that `pick` keeps (flags → bool):
 * { n, p50, p99, max (ms), errors, stale }.
 */
function windowStats(load, from, to, pick = () => true) {
  const { samples, summary } = load;
  const a = from - summary.epoch0;
  const b = to - summary.epoch0;
  const lats = [];
  let errors = 0;
  let stale = 0;
  for (let i = 0; i < samples.length; i += 3) {
    const t = samples[i];
    if (t < a || t >= b) continue;
    const flags = samples[i + 2];
    if (!pick(flags)) continue;
    lats.push(samples[i + 1]);
    if (flags & 2) errors++;
    if (flags & 4) stale++;
  }
  return { n: lats.length, p50: percentile(lats, 50), p99: percentile(lats, 99), max: maxOf(lats), errors, stale };
}
const maxOf = (xs) => xs.reduce((m, x) => (x > m ? x : m), xs.length ? -Infinity : NaN);
/** The `k` slowest requests that `pick` keeps sent in [from, to): [{ t (epoch ms), lat (ms) }]. */
function slowest(load, from, to, pick, k) {
  const { samples, summary } = load;
  const out = [];
  for (let i = 0; i < samples.length; i += 3) {
    const t = summary.epoch0 + samples[i];
    if (t < from || t >= to || !pick(samples[i + 2])) continue;
    out.push({ t, lat: samples[i + 1] });
  }
  return out.sort((x, y) => y.lat - x.lat).slice(0, k);
}
const isWrite = (f) => (f & 1) !== 0;
const isRead = (f) => (f & 1) === 0;

// ---------------------------------------------------------------- direct checks on the servers

async function direct(port, fn) {
  const c = await RespConn.connect(port);
  try {
    return await fn(c);
  } finally {
    c.close();
  }
}
const dbsize = (port) => direct(port, (c) => c.callT(10_000, 'DBSIZE'));
const flushall = (port) => direct(port, (c) => c.callT(60_000, 'FLUSHALL'));

/** DUMP and PTTL of `n` random keys of the source compared with the target's: { compared, different, examples }. */
async function compareSample(srcPort, dstPort, n) {
  const src = await RespConn.connect(srcPort);
  const dst = await RespConn.connect(dstPort);
  try {
    const keys = await Promise.all(Array.from({ length: n }, () => src.call('RANDOMKEY')));
    let different = 0;
    const examples = [];
    for (let i = 0; i < keys.length; i += 200) {
      const batch = keys.slice(i, i + 200).filter((k) => typeof k === 'string');
      const [da, db, ta, tb] = await Promise.all([
        Promise.all(batch.map((k) => src.call('DUMP', k))), Promise.all(batch.map((k) => dst.call('DUMP', k))),
        Promise.all(batch.map((k) => src.call('PTTL', k))), Promise.all(batch.map((k) => dst.call('PTTL', k))),
      ]);
      batch.forEach((k, j) => {
        const sameDump = da[j] === db[j];
        const sameTtl = ta[j] < 0 || tb[j] < 0 ? ta[j] === tb[j] : Math.abs(ta[j] - tb[j]) <= 2_000;
        if (!sameDump || !sameTtl) {
          different++;
          if (examples.length < 5) examples.push({ key: k, sameDump, pttl: [ta[j], tb[j]] });
        }
      });
    }
    return { compared: keys.length, different, examples };
  } finally {
    src.close();
    dst.close();
  }
}

/** Every string key s:0 … s:(count-1) read (MGET) on both servers: { compared, different, examples }. */
async function compareStrings(srcPort, dstPort, count) {
  const src = await RespConn.connect(srcPort);
  const dst = await RespConn.connect(dstPort);
  try {
    let different = 0;
    const examples = [];
    for (let i = 0; i < count; i += 1000) {
      const keys = Array.from({ length: Math.min(1000, count - i) }, (_, j) => `s:${i + j}`);
      const [a, b] = await Promise.all([src.callT(10_000, 'MGET', ...keys), dst.callT(10_000, 'MGET', ...keys)]);
      keys.forEach((k, j) => {
        if (a[j] !== b[j]) {
          different++;
          if (examples.length < 5) examples.push({ key: k, source: a[j]?.slice(0, 24) ?? null, target: b[j]?.slice(0, 24) ?? null });
        }
      });
    }
    return { compared: count, different, examples };
  } finally {
    src.close();
    dst.close();
  }
}

/** Every key of `values` ({ key: value | null }) read on `port`: { compared, different, unknown, examples }. */
async function compareValues(port, values) {
  const c = await RespConn.connect(port);
  try {
    const known = Object.entries(values).filter(([, v]) => v !== null);
    let different = 0;
    const examples = [];
    for (let i = 0; i < known.length; i += 1000) {
      const batch = known.slice(i, i + 1000);
      const got = await c.callT(10_000, 'MGET', ...batch.map(([k]) => k));
      batch.forEach(([k, v], j) => {
        if (got[j] !== v) {
          different++;
          if (examples.length < 5) examples.push({ key: k, expected: v.slice(0, 24), got: got[j]?.slice(0, 24) ?? null });
        }
      });
    }
    return { compared: known.length, different, unknown: Object.keys(values).length - known.length, examples };
  } finally {
    c.close();
  }
}

/** ABORT, then the target's DBSIZE (an aborted migration into an empty target empties it again); emptied here if not. */
async function abortAndCheck(r, targetPort, where) {
  const t0 = nowMs();
  const reply = await r.migrate('ABORT');
  const ms = nowMs() - t0;
  await sleep(100);
  const left = await dbsize(targetPort);
  const st = await r.status();
  if (st.state !== 'aborted') {
    note(`${where}: ABORT answered "${reply}", then STATUS said ${st.state} (${st.reason}); ABORT sent again`);
    await r.migrate('ABORT');
  }
  if (left !== 0) {
    note(`${where}: ABORT answered "${reply}", then the target held ${left} keys; emptied directly (FLUSHALL) before going on`);
    await flushall(targetPort);
  }
  return { reply: String(reply), ms, left, stateAfter: st.state };
}

const cpuOf = (pids) => Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, cpuSeconds(pid)]));
const cpuDelta = (a, b) => Object.fromEntries(Object.keys(a).map((k) => [k, b[k] - a[k]]));

// ---------------------------------------------------------------- the cutover rounds (parts 3 and 5)

/**
 * `rounds` rounds of START → synced → 0.7 s → CUTOVER between the servers `src` and `dst` in turn
 * (the old source, emptied directly, is the next round's target) under one steady load of
 * CUT_RATE requests/s, half SETs, from CONNS connections spread over `loadPorts` in turn.
 * START, STATUS and CUTOVER go to `coord` (the respool, or the fleet member that coordinates).
 * A CUTOVER that fails is sent again 1 s later (3 tries, then ABORT and the round is left out).
 * After each cutover: the new upstream's keys (`dataKeys`, DBSIZE less the fleet's own keys) and,
 * when `probePorts` is given, a write through each of them read back on the new upstream directly.
 * At the end every written key's value on the final upstream against the value last acknowledged.
 * Returns { cutover (the figures), src, dst (the roles after the last round) }.
 */
async function cutoverRounds({ tag, loadName, coord, loadPorts, src, dst, rounds, probePorts = [] }) {
  const load = await startLoad(loadName, { ports: loadPorts, conns: CONNS, rate: CUT_RATE, writeShare: 0.5, keys: layout(SMALL_KEYS).strings, prefix: 's:', valueBytes: VALUE_BYTES, recentShare: 0.5, trackValues: true });
  loads.push(load);
  await sleep(1000);
  const cutRounds = [];
  for (let round = 1; round <= rounds; round++) {
    await flushall(dst.port);
    const s0 = nowMs();
    await coord.migrate('START', `${HOST}:${dst.port}`);
    const synced = await coord.waitFor(['synced'], { timeoutMs: 60_000 });
    const syncMs = synced.at - s0;
    await sleep(700); // writes carried while synced (the reference window)
    const before = await coord.status();
    let reply;
    let c0;
    let c1;
    const failures = [];
    const firstAttemptAt = nowMs();
    for (let attempt = 1; attempt <= 3 && reply === undefined; attempt++) {
      c0 = nowMs();
      try {
        reply = String(await coord.migrate('CUTOVER'));
        c1 = nowMs();
      } catch (err) {
        const ms = nowMs() - c0;
        const st = await coord.status();
        const f = { attempt, c0, ms, error: err.message, state: st.state, copiesInFlight: st.copies_in_flight, dirty: st.dirty, writesSeen: st.writes_seen, mirrored: st.mirrored, reason: st.reason, status: st };
        failures.push(f);
        note(`${tag} round ${round}: CUTOVER attempt ${attempt} failed after ${fmt(ms, 0)} ms: ${err.message} — STATUS then: state ${f.state}, copies_in_flight ${f.copiesInFlight}, dirty ${f.dirty}` +
          `${f.copiesInFlight === 0 && f.dirty === 0 ? ' (so the count of client writes in flight, which STATUS does not show, is what did not drain)' : ''}`);
        await sleep(1000);
      }
    }
    if (reply === undefined) {
      const ab = await abortAndCheck(coord, dst.port, `${tag} round ${round}`);
      cutRounds.push({ round, from: src.port, to: dst.port, syncMs, failed: true, failures, abort: ab });
      log(`${tag} round ${round}: no cutover after ${failures.length} attempts; aborted, the next round migrates to the same target`);
      continue;
    }
    const after = await coord.status();
    const replyMs = Number(/writes held ([\d.]+) ms/.exec(reply)?.[1]);
    // A write through each member (fresh connections: with workers, each lands on one of them) read on the new upstream.
    const probes = await probeWrites(probePorts, dst.port, round);
    await sleep(300);
    const { data: newKeys, fleet: fleetKeys, fleetNames } = await dataKeys(dst.port);
    // A fleet: who listens on the fleet's bus ({respool-fleet}:bus) on each side now.
    const busSubscribers = fleetKeys > 0 ? { old: await busSubs(src.port), new: await busSubs(dst.port) } : undefined;
    if (newKeys !== SMALL_KEYS) note(`${tag} round ${round}: the new upstream holds ${newKeys} keys after the cutover, the old one ${SMALL_KEYS}`);
    if (after.state !== 'cut-over') note(`${tag} round ${round}: STATUS says ${after.state} after CUTOVER answered "${reply}"`);
    if (probes.wrong > 0) note(`${tag} round ${round}: ${probes.wrong} of ${probes.sent} writes sent through the members right after the cutover are not on the new upstream: ${JSON.stringify(probes.examples)}`);
    cutRounds.push({
      round, from: src.port, to: dst.port, syncMs, states: synced.seen.map((s) => s.state), mirroredBefore: before.mirrored, recopied: before.recopied, mismatched: before.mismatched,
      pauseMs: after.cutover_pause_ms, replyPauseMs: replyMs, cutoverCmdMs: c1 - c0, syncedAt: synced.at, firstAttemptAt, c0, c1, newKeys, fleetKeys, fleetNames, busSubscribers, state: after.state, failures,
      ...(probePorts.length ? { probes } : {}),
    });
    log(`${tag} round ${round}: ${src.port} → ${dst.port} synced in ${fmtInt(syncMs)} ms; "${reply}"; CUTOVER answered in ${fmt(c1 - c0, 1)} ms; new upstream ${fmtInt(newKeys)} keys` +
      `${fleetKeys ? ` (+${fleetKeys} of the fleet's); {respool-fleet}:bus subscribers old/new upstream ${busSubscribers.old}/${busSubscribers.new}` : ''}${probePorts.length ? `; probes ${probes.sent - probes.wrong}/${probes.sent} on the new upstream` : ''}`);
    [src, dst] = [dst, src];
    await sleep(200);
  }
  await sleep(500);
  const lout = await load.stop();
  loads.splice(loads.indexOf(load), 1);
  const allRounds = cutRounds.splice(0);
  for (const c of allRounds) {
    for (const f of c.failures ?? []) {
      // The requests around a CUTOVER that failed: the slowest sent from 200 ms before it until its error.
      f.slowestWrites = slowest(lout, f.c0 - 200, f.c0 + f.ms, isWrite, 5).map(({ t, lat }) => ({ sentMsAfterCutover: t - f.c0, ms: lat }));
      f.slowestReads = slowest(lout, f.c0 - 200, f.c0 + f.ms, isRead, 3).map(({ t, lat }) => ({ sentMsAfterCutover: t - f.c0, ms: lat }));
      f.readsSentDuring = windowStats(lout, f.c0 + 5, f.c0 + f.ms - 5, isRead); // reads sent while writes were held
      f.writesSentDuring = windowStats(lout, f.c0 + 5, f.c0 + f.ms - 5, isWrite);
      f.maxWriteMs = windowStats(lout, f.c0 - 50, f.c0 + f.ms, isWrite).max;
      f.maxReadMs = windowStats(lout, f.c0 - 50, f.c0 + f.ms, isRead).max;
      delete f.c0;
    }
  }
  cutRounds.push(...allRounds.filter((c) => !c.failed)); // the rounds that cut over
  const connPids = lout.summary.connPids ?? [];
  const servedBy = [...new Set(connPids)];
  for (const c of cutRounds) {
    // The longest write around the cutover per serving process (a worker, a fleet member): pid → ms.
    if (servedBy.length > 1) c.maxWriteByPid = Object.fromEntries(servedBy.map((pid) => [pid, windowStats(lout, c.c0 - 50, c.c1, (f) => isWrite(f) && connPids[f >> 3] === pid).max]));
    c.writes = windowStats(lout, c.c0 - 50, c.c1, isWrite);
    c.reads = windowStats(lout, c.c0 - 50, c.c1, isRead);
    c.maxWriteMs = c.writes.max;
    c.syncedWrites = windowStats(lout, c.syncedAt + 200, c.firstAttemptAt - 50, isWrite); // synced, writes carried, no cutover yet
    c.slowestWrites = slowest(lout, c.c0 - 50, c.c1, isWrite, 5).map(({ t, lat }) => ({ sentMsAfterCutover: t - c.c0, ms: lat }));
  }
  // Writes while synced, before each CUTOVER (from 0.2 s after synced to 50 ms before CUTOVER), for reference.
  const syncedLats = [];
  const e0 = lout.summary.epoch0;
  for (let i = 0; i < lout.samples.length; i += 3) {
    const t = e0 + lout.samples[i];
    if (isWrite(lout.samples[i + 2]) && cutRounds.some((c) => t >= c.syncedAt + 200 && t < c.firstAttemptAt - 50)) syncedLats.push(lout.samples[i + 1]);
  }
  const finalCheck = await compareValues(src.port, lout.values);
  if (finalCheck.different > 0) note(`${tag}: ${finalCheck.different} of ${finalCheck.compared} written keys hold another value than the last acknowledged on the final upstream: ${JSON.stringify(finalCheck.examples)}`);
  if (lout.summary.stale > 0) note(`${tag}: ${lout.summary.stale} stale reads: ${JSON.stringify(lout.summary.staleExamples)}`);
  if (lout.summary.errors > 0) note(`${tag}: ${lout.summary.errors} error replies: ${JSON.stringify(lout.summary.errorExamples)}`);
  // Every CUTOVER command sent: the clients' longest write around it, whether it cut over or failed.
  const attempts = [];
  for (const c of allRounds) {
    for (const f of c.failures ?? []) attempts.push({ round: c.round, ok: false, maxWriteMs: f.maxWriteMs, maxReadMs: f.maxReadMs, ms: f.ms });
    if (!c.failed) attempts.push({ round: c.round, ok: true, maxWriteMs: c.maxWriteMs, maxReadMs: c.reads.max, ms: c.cutoverCmdMs });
  }
  const pauses = cutRounds.map((c) => c.pauseMs);
  const maxWrites = cutRounds.map((c) => c.maxWriteMs);
  const cmdMs = cutRounds.map((c) => c.cutoverCmdMs);
  const cutover = {
    rounds: cutRounds.map(({ c0, c1, syncedAt, firstAttemptAt, ...rest }) => rest), failedRounds: allRounds.filter((c) => c.failed), load: { ...lout.summary, epoch0: undefined }, finalCheck,
    pauseP50: percentile(pauses, 50), pauseP99: percentile(pauses, 99), pauseMax: maxOf(pauses),
    maxWriteP50: percentile(maxWrites, 50), maxWriteP99: percentile(maxWrites, 99), attempts,
    attemptsFailed: attempts.filter((a) => !a.ok).length, attemptMaxWriteP50: percentile(attempts.map((a) => a.maxWriteMs), 50), attemptMaxWriteP99: percentile(attempts.map((a) => a.maxWriteMs), 99), cmdP50: percentile(cmdMs, 50), cmdP99: percentile(cmdMs, 99),
    syncMsP50: percentile(cutRounds.map((c) => c.syncMs), 50),
    syncedWrites: { n: syncedLats.length, p50: percentile(syncedLats, 50), p99: percentile(syncedLats, 99), max: maxOf(syncedLats) },
    // How the load's connections fell on the serving processes (INFO server process_id): pid → connections.
    connsByPid: connPids.reduce((m, p) => ({ ...m, [p]: (m[p] ?? 0) + 1 }), {}),
  };
  log(`${tag}: pause p50 ${fmt(cutover.pauseP50, 1)} ms p99 ${fmt(cutover.pauseP99, 1)} ms; CUTOVER command p50 ${fmt(cutover.cmdP50, 1)} p99 ${fmt(cutover.cmdP99, 1)} ms; ` +
    `clients' max write latency p50 ${fmt(cutover.maxWriteP50, 1)} p99 ${fmt(cutover.maxWriteP99, 1)} ms; ` +
    `final check ${finalCheck.different} of ${finalCheck.compared} differ; stale reads ${lout.summary.stale}; errors ${lout.summary.errors}; connections per process ${JSON.stringify(cutover.connsByPid)}`);
  return { cutover, src, dst };
}

/** The keys on `port`: { data (DBSIZE less the fleet's own, {respool-fleet}:…), fleet (how many of those), fleetNames }. */
async function dataKeys(port) {
  return direct(port, async (c) => {
    const total = await c.callT(10_000, 'DBSIZE');
    const names = await c.callT(10_000, 'KEYS', '{respool-fleet}*');
    return { data: total - names.length, fleet: names.length, fleetNames: names.map(String).sort() };
  });
}

/** PUBSUB NUMSUB {respool-fleet}:bus on `port`. */
const busSubs = (port) => direct(port, async (c) => Number((await c.callT(5_000, 'PUBSUB', 'NUMSUB', '{respool-fleet}:bus'))[1]));

/**
 * Right after a cutover: 4 fresh connections to each of `ports` SET a key each (mig:probe:…), read
 * back on the new upstream directly, then deleted there: { sent, wrong, examples }.
 */
async function probeWrites(ports, newPort, round) {
  let sent = 0;
  let wrong = 0;
  const examples = [];
  const keys = [];
  for (const port of ports) {
    for (let i = 0; i < 4; i++) {
      const key = `mig:probe:${round}:${port}:${i}`;
      const value = `${nowMs()}`;
      const got = await direct(port, async (c) => {
        const pid = /process_id:(\d+)/.exec(String(await c.callT(5_000, 'INFO', 'server')))?.[1];
        const r = await c.callT(5_000, 'SET', key, value);
        return { pid, r: r instanceof ReplyError ? r.message : String(r) };
      });
      sent++;
      keys.push(key);
      const there = await direct(newPort, (c) => c.callT(5_000, 'GET', key));
      if (got.r !== 'OK' || there !== value) {
        wrong++;
        if (examples.length < 5) examples.push({ port, pid: got.pid, reply: got.r, onNewUpstream: there });
      }
    }
  }
  if (keys.length) await direct(newPort, (c) => c.callT(5_000, 'DEL', ...keys));
  return { sent, wrong, examples };
}

// ---------------------------------------------------------------- main

log(`migration bench${QUICK ? ' (quick)' : ''}: ${fmtInt(KEYS)} keys; part 2 ${ROUNDS} round(s) × 2 × ${WINDOW_S}s, unpinned${PIN ? ' + pinned' : ''}${APART ? ' + apart' : ''}; ` +
  `part 3 ${CUTOVERS} cutovers of ${fmtInt(SMALL_KEYS)} keys; part 4 ${CPU_ROUNDS} round(s) × 2 × ${CPU_WINDOW_S}s; part 5 ${MULTI_CUTOVERS} cutovers with 2 workers and in a fleet of 2; ` +
  `parts ${[...PARTS].join(',')}; load average ${loadStart}`);
const servers = [];
const respools = [];
const loads = [];
const result = {
  quick: QUICK, started: started.toISOString(), build: respoolBuildLabel(), node: process.version, cpus: CPUS, loadavgStart: loadStart,
  config: { PACED_BATCH, KEYS, CHECK_KEYS, CONNS, RATE, WRITE_SHARE, ROUNDS, WINDOW_S, PIN, APART, WARM, COPIER, SMALL_KEYS, CUTOVERS, CUT_RATE, CPU_ROUNDS, CPU_RATE, CPU_WINDOW_S, MULTI_CUTOVERS, VALUE_BYTES, PARTS: [...PARTS] },
  commands: {},
};
let failure = null;
try {
  // ================================================================ the source of parts 1 and 2
  let A, B, seeded, sourceKeys, sourceMemory;
  if (PARTS.has(1) || PARTS.has(2)) {
    A = await startValkey({ tmpRoot: tmp, name: 'source' });
    B = await startValkey({ tmpRoot: tmp, name: 'target' });
    servers.push(A, B);
    result.commands.valkey = A.cmd;
    seeded = await seed(A.port, KEYS);
    sourceKeys = await dbsize(A.port);
    log(`seeded ${fmtInt(sourceKeys)} keys in ${fmt(seeded.ms / 1000, 1)} s (${fmtInt(seeded.replies)} replies, ${seeded.errors} errors)`);
    if (sourceKeys !== KEYS) note(`the source holds ${sourceKeys} keys after seeding, not ${KEYS}`);
    sourceMemory = await direct(A.port, async (c) => /used_memory:(\d+)/.exec(await c.call('INFO', 'memory'))?.[1]);
  }

  // ================================================================ part 1: copy rate
  if (PARTS.has(1)) {
    const r1 = await startRespool('copy', A.port, UNPACED);
    respools.push(r1);
    result.commands.respoolCopy = r1.cmd;
    const pids1 = { respool: r1.child.pid, source: A.child.pid, target: B.child.pid };
    const cpu0 = cpuOf(pids1);
    const t0 = nowMs();
    await r1.migrate('START', `${HOST}:${B.port}`);
    const startReplyMs = nowMs() - t0;
    const timeline = [];
    let lastSample = 0;
    let copyEnd = null;
    let cpuCopyEnd = null;
    const w1 = await r1.waitFor(['synced'], {
      timeoutMs: COPY_TIMEOUT_S * 1000, pollMs: 50,
      onPoll: (st, at) => {
        if (copyEnd === null && st.state !== 'copying' && st.state !== 'paused') {
          copyEnd = { at, copied: st.copied, bytes: st.bytes };
          cpuCopyEnd = cpuOf(pids1);
        }
        if (at - lastSample >= 1000) {
          lastSample = at;
          timeline.push({ s: (at - t0) / 1000, state: st.state, copied: st.copied, bytes: st.bytes, keysPerSecond: st.keys_per_second });
        }
      },
    });
    const cpu1 = cpuOf(pids1);
    const syncedSt = w1.st;
    const copySeconds = (copyEnd.at - t0) / 1000;
    const syncSeconds = (w1.at - t0) / 1000;
    const copy = {
      keys: sourceKeys, seedSeconds: seeded.ms / 1000, sourceUsedMemory: Number(sourceMemory), startReplyMs,
      copySeconds, syncSeconds, copyDone: { copied: copyEnd.copied, bytes: copyEnd.bytes }, copied: syncedSt.copied, bytes: syncedSt.bytes, recopied: syncedSt.recopied, deleted: syncedSt.deleted,
      verified: syncedSt.verified, mismatched: syncedSt.mismatched, paused: w1.seen.filter((s) => s.state === 'paused'),
      keysPerSecondCopy: copyEnd.copied / copySeconds, mbPerSecondCopy: copyEnd.bytes / 1e6 / copySeconds,
      keysPerSecondToSynced: syncedSt.copied / syncSeconds, mbPerSecondToSynced: syncedSt.bytes / 1e6 / syncSeconds,
      cpuPercentCopy: Object.fromEntries(Object.entries(cpuDelta(cpu0, cpuCopyEnd)).map(([k, v]) => [k, (v / copySeconds) * 100])),
      cpuSecondsToSynced: cpuDelta(cpu0, cpu1), states: w1.seen.map((s) => ({ state: s.state, s: (s.at - t0) / 1000, reason: s.reason })), timeline,
    };
    log(`copy: ${fmtInt(copy.copied)} keys, ${fmt(copy.bytes / 1e6, 1)} MB in ${fmt(copySeconds, 2)} s (copying) / ${fmt(syncSeconds, 2)} s (START → synced): ` +
      `${fmtInt(copy.keysPerSecondCopy)} keys/s, ${fmt(copy.mbPerSecondCopy, 1)} MB/s; respool ${fmt(copy.cpuPercentCopy.respool, 0)}% CPU, source ${fmt(copy.cpuPercentCopy.source, 0)}%, target ${fmt(copy.cpuPercentCopy.target, 0)}%`);
    if (copy.copied !== sourceKeys) note(`part 1: STATUS copied ${copy.copied} keys of the source's ${sourceKeys}`);
    copy.targetKeys = await dbsize(B.port);
    if (copy.targetKeys !== sourceKeys) note(`part 1: the target holds ${copy.targetKeys} keys once synced, the source ${sourceKeys}`);
    copy.sample = await compareSample(A.port, B.port, CHECK_KEYS);
    if (copy.sample.different > 0) note(`part 1: ${copy.sample.different} of ${copy.sample.compared} random keys differ between source and target once synced: ${JSON.stringify(copy.sample.examples)}`);
    log(`check: target DBSIZE ${fmtInt(copy.targetKeys)} (source ${fmtInt(sourceKeys)}); ${copy.sample.different} of ${copy.sample.compared} random keys differ (DUMP, PTTL)`);
    copy.abort = await abortAndCheck(r1, B.port, 'part 1');
    log(`ABORT: "${copy.abort.reply}" in ${fmt(copy.abort.ms, 0)} ms; target keys left ${copy.abort.left}`);
    result.copy = copy;
    await stopRespool(r1);
    respools.splice(respools.indexOf(r1), 1);
  }

  // ================================================================ part 2: clients' latency during a copy at the default pace
  if (PARTS.has(2)) {
    const paced = PACED_BATCH === null ? {} : { batchKeys: PACED_BATCH };
    // BENCH_MIG_COPIER: the clients' respool is one member of a fleet of two; the other, with no
    // clients, coordinates the migration (runs the scan's copies) in the "copier" mode.
    const fleetPorts = COPIER ? [await uniquePort(), await uniquePort()] : null;
    const fleetPeers = fleetPorts?.map((p) => `${HOST}:${p}`);
    const r2 = await startRespool('paced', A.port, paced, fleetPorts === null ? {} : { port: fleetPorts[0], peers: fleetPeers });
    respools.push(r2);
    const copier = fleetPorts === null ? null : await startRespool('paced-copier', A.port, paced, { port: fleetPorts[1], peers: fleetPeers });
    if (copier !== null) {
      respools.push(copier);
      result.commands.respoolCopier = copier.cmd;
    }
    result.commands.respoolPaced = r2.cmd;
    const l2 = await startLoad('paced', { port: r2.port, conns: CONNS, rate: RATE, writeShare: WRITE_SHARE, keys: seeded.layout.strings, prefix: 's:', valueBytes: VALUE_BYTES });
    loads.push(l2);
    await sleep(2000); // warm-up
    const windows = [];
    // "idle" (BENCH_MIG_IDLE, on by default): unpinned, and no migration in either window — how far
    // two windows of this machine differ with nothing changed between them.
    // "floor" (BENCH_MIG_FLOOR): unpinned, no migration; in the "during" window a process of its
    // own copies the load's write rate of keys source → target as a carry does (mirrorMain): the
    // least the mirrored writes cost the clients, whoever sends them.
    const modes = [...(IDLE ? ['idle'] : []), ...(FLOOR ? ['floor'] : []), 'unpinned', ...(PIN ? ['pinned'] : []), ...(APART ? ['apart'] : []), ...(COPIER ? ['copier'] : [])];
    // Cores kept awake (BENCH_MIG_WARM): a busy loop per core at the lowest priority.
    const warmers = WARM ? Array.from({ length: CPUS }, () => spawn('nice', ['-n', '19', process.execPath, '-e', 'for (;;) {}'], { match: `${process.execPath} -e` })) : [];
    loads.push(...warmers.map((child) => ({ child })));
    // A window's worth of load before the first one measured: the first window after the load
    // (and the busy loops) began had a p99 of ~1.15 ms in every run, 5× any later one.
    await sleep(WINDOW_S * 1000);
    for (const mode of modes) {
      const pinned = mode === 'pinned';
      // The target and the load as if each had a machine of its own (and, copier, the member that copies).
      const niced = mode === 'apart' || mode === 'copier' ? [B.child.pid, l2.pid, ...(mode === 'copier' ? [copier.child.pid] : [])] : [];
      if (pinned) {
        await pinTo(r2.child.pid, 0);
        for (const p of [A.child.pid, B.child.pid, l2.pid]) await pinTo(p, 1);
        await sleep(1000);
      }
      if (niced.length > 0) {
        for (const pid of niced) await niceTo(pid, pid === l2.pid ? -10 : 19);
        await sleep(1000);
      }
      // Who runs the migration: the clients' respool, or (copier) the other member at nice 19.
      const ctl = mode === 'copier' ? copier : r2;
      for (let round = 1; round <= ROUNDS; round++) {
        for (const cond of round % 2 === 1 ? ['before', 'during'] : ['during', 'before']) {
          let startSt = null;
          const migrating = cond === 'during' && mode !== 'idle' && mode !== 'floor';
          const mirror = cond === 'during' && mode === 'floor' ? await startMirror({ sourcePort: A.port, targetPort: B.port, rate: RATE * WRITE_SHARE, keys: seeded.layout.strings, prefix: 's:' }) : null;
          if (migrating) {
            await ctl.migrate('START', `${HOST}:${B.port}`);
            startSt = (await ctl.waitFor(['copying'], { timeoutMs: 10_000 })).st;
          }
          await sleep(500);
          const cpuA = cpuOf({ respool: r2.child.pid, source: A.child.pid, target: B.child.pid });
          const st0 = migrating ? await ctl.status() : null;
          const from = nowMs();
          await sleep(WINDOW_S * 1000);
          const to = nowMs();
          const st1 = migrating ? await ctl.status() : null;
          const cpuB = cpuOf({ respool: r2.child.pid, source: A.child.pid, target: B.child.pid });
          const w = { mode, round, cond, from, to, cpuPercent: Object.fromEntries(Object.entries(cpuDelta(cpuA, cpuB)).map(([k, v]) => [k, (v / ((to - from) / 1000)) * 100])) };
          if (migrating) {
            w.state = st1.state;
            w.copyKeysPerSecond = (st1.copied - st0.copied) / ((to - from) / 1000);
            w.copyMBPerSecond = (st1.bytes - st0.bytes) / 1e6 / ((to - from) / 1000);
            w.mirrored = st1.mirrored - st0.mirrored;
            // What the pace's latency guard read and did (migration.paceByLatency).
            w.pace = { guard: st1.pace_guard, keysPerSecond: st1.pace_keys_per_second, p99BeforeUs: st1.clients_p99_before_us, p99Us: st1.clients_p99_us };
            if (st1.state !== 'copying') note(`part 2 round ${round} ${mode}: the migration was ${st1.state} (${st1.reason}) at the end of the window`);
            w.abort = await abortAndCheck(ctl, B.port, `part 2 round ${round} ${mode}`);
            w.startState = startSt.state;
          }
          if (mirror !== null) {
            w.mirrorCopied = await mirror.stop();
            await flushall(B.port); // the next mode's ABORT finds the target as a migration left it
          }
          windows.push(w);
          log(`part 2 ${mode} round ${round} ${cond}: respool ${fmt(w.cpuPercent.respool, 0)}% CPU` +
            (w.mirrorCopied !== undefined ? `, ${fmtInt(w.mirrorCopied)} keys copied by the mirror process` : '') +
            (w.pace !== undefined ? `, copy ${fmtInt(w.copyKeysPerSecond)} keys/s (pace ${fmtInt(w.pace.keysPerSecond)}, guard ${w.pace.guard}: respool's p99 ${fmtInt(w.pace.p99BeforeUs)} → ${fmtInt(w.pace.p99Us)} µs), ${fmtInt(w.mirrored)} writes mirrored, ABORT ${fmt(w.abort.ms, 0)} ms` : ''));
          await sleep(500);
        }
      }
      if (pinned) for (const p of [r2.child.pid, A.child.pid, B.child.pid, l2.pid]) await pinTo(p, allCpus);
      for (const pid of niced) await niceTo(pid, 0);
    }
    const l2out = await l2.stop();
    loads.splice(loads.indexOf(l2), 1);
    for (const child of warmers) {
      await stop(child);
      loads.splice(loads.findIndex((l) => l.child === child), 1);
    }
    for (const w of windows) {
      w.all = windowStats(l2out, w.from, w.to);
      w.reads = windowStats(l2out, w.from, w.to, isRead);
      w.writes = windowStats(l2out, w.from, w.to, isWrite);
      log(`part 2 ${w.mode} round ${w.round} ${w.cond}: ${fmtInt(w.all.n)} requests, p50 ${fmt(w.all.p50, 3)} ms, p99 ${fmt(w.all.p99, 3)} ms, max ${fmt(w.all.max, 1)} ms`);
    }
    const latency = { load: l2out.summary, windows, byMode: {} };
    delete latency.load.epoch0;
    for (const mode of modes) {
      const rounds = [];
      for (let round = 1; round <= ROUNDS; round++) {
        const b = windows.find((w) => w.mode === mode && w.round === round && w.cond === 'before');
        const d = windows.find((w) => w.mode === mode && w.round === round && w.cond === 'during');
        rounds.push({ round, p99Ratio: d.all.p99 / b.all.p99, p50Ratio: d.all.p50 / b.all.p50, writeP99Ratio: d.writes.p99 / b.writes.p99 });
      }
      latency.byMode[mode] = { rounds, p99Ratio: median(rounds.map((r) => r.p99Ratio)), p50Ratio: median(rounds.map((r) => r.p50Ratio)), writeP99Ratio: median(rounds.map((r) => r.writeP99Ratio)) };
    }
    if (l2out.summary.stale > 0) note(`part 2: ${l2out.summary.stale} stale reads: ${JSON.stringify(l2out.summary.staleExamples)}`);
    if (l2out.summary.errors > 0) note(`part 2: ${l2out.summary.errors} error replies: ${JSON.stringify(l2out.summary.errorExamples)}`);
    result.latency = latency;
    await stopRespool(r2);
    respools.splice(respools.indexOf(r2), 1);
  }
  if (A) {
    for (const s of [A, B]) {
      await stop(s.child);
      servers.splice(servers.indexOf(s), 1);
    }
  }

  // ================================================================ the servers of parts 3 and 4
  let C, D, smallStrings;
  if (PARTS.has(3) || PARTS.has(4)) {
    C = await startValkey({ tmpRoot: tmp, name: 'cut-a' });
    D = await startValkey({ tmpRoot: tmp, name: 'cut-b' });
    servers.push(C, D);
    const smallSeed = await seed(C.port, SMALL_KEYS);
    smallStrings = smallSeed.layout.strings;
  }
  let [src, dst] = [C, D];

  // ================================================================ part 3: the cutover's write pause
  if (PARTS.has(3)) {
    const r3 = await startRespool('cutover', C.port, UNPACED);
    respools.push(r3);
    result.commands.respoolCutover = r3.cmd;
    const out3 = await cutoverRounds({ tag: 'part 3', loadName: 'cutover', coord: r3, loadPorts: [r3.port], src, dst, rounds: CUTOVERS });
    result.cutover = out3.cutover;
    [src, dst] = [out3.src, out3.dst];
    await stopRespool(r3);
    respools.splice(respools.indexOf(r3), 1);
  }
  // ================================================================ part 4: the mirrored writes' CPU
  if (PARTS.has(4)) {
    const [P, Q] = [src, dst]; // the last round's target is the upstream now
    await flushall(Q.port);
    const r4 = await startRespool('cpu', P.port, UNPACED);
    respools.push(r4);
    result.commands.respoolCpu = r4.cmd;
    const l4 = await startLoad('cpu', { port: r4.port, conns: CONNS, rate: CPU_RATE, writeShare: 1, keys: smallStrings, prefix: 's:', valueBytes: VALUE_BYTES });
    loads.push(l4);
    await sleep(2000);
    const cpuWindows = [];
    for (let round = 1; round <= CPU_ROUNDS; round++) {
      for (const cond of round % 2 === 1 ? ['without', 'synced'] : ['synced', 'without']) {
        if (cond === 'synced') {
          await r4.migrate('START', `${HOST}:${Q.port}`);
          await r4.waitFor(['synced'], { timeoutMs: 60_000 });
        }
        await sleep(1000);
        const st0 = cond === 'synced' ? await r4.status() : null;
        const cpuA = cpuOf({ respool: r4.child.pid, source: P.child.pid, target: Q.child.pid });
        const from = nowMs();
        await sleep(CPU_WINDOW_S * 1000);
        const to = nowMs();
        const cpuB = cpuOf({ respool: r4.child.pid, source: P.child.pid, target: Q.child.pid });
        const st1 = cond === 'synced' ? await r4.status() : null;
        const w = { round, cond, from, to, cpuSeconds: cpuDelta(cpuA, cpuB) };
        if (cond === 'synced') {
          w.mirrored = st1.mirrored - st0.mirrored;
          w.state = st1.state;
          if (st1.state !== 'synced') note(`part 4 round ${round}: the migration was ${st1.state} (${st1.reason}) at the end of the window`);
          w.abort = await abortAndCheck(r4, Q.port, `part 4 round ${round}`);
        }
        cpuWindows.push(w);
        await sleep(500);
      }
    }
    // Mirroring checked: a migration synced under the load, the load stopped, every string key compared.
    await r4.migrate('START', `${HOST}:${Q.port}`);
    await r4.waitFor(['synced'], { timeoutMs: 60_000 });
    await sleep(2000);
    const l4out = await l4.stop();
    loads.splice(loads.indexOf(l4), 1);
    const settle = Date.now() + 10_000;
    let lastSt = await r4.status();
    while ((lastSt.copies_in_flight > 0 || lastSt.dirty > 0) && Date.now() < settle) {
      await sleep(50);
      lastSt = await r4.status();
    }
    await sleep(200);
    const mirrorCheck = await compareStrings(P.port, Q.port, smallStrings);
    mirrorCheck.state = lastSt.state;
    mirrorCheck.mirrored = lastSt.mirrored;
    if (mirrorCheck.different > 0) note(`part 4: with the load stopped and the migration ${lastSt.state}, ${mirrorCheck.different} of ${mirrorCheck.compared} string keys differ between source and target: ${JSON.stringify(mirrorCheck.examples)}`);
    await abortAndCheck(r4, Q.port, 'part 4 (end)');
    if (l4out.summary.errors > 0) note(`part 4: ${l4out.summary.errors} error replies: ${JSON.stringify(l4out.summary.errorExamples)}`);
    for (const w of cpuWindows) {
      w.writes = windowStats(l4out, w.from, w.to, isWrite);
      w.usPerWrite = Object.fromEntries(Object.entries(w.cpuSeconds).map(([k, v]) => [k, (v * 1e6) / w.writes.n]));
      log(`part 4 round ${w.round} ${w.cond}: ${fmtInt(w.writes.n)} writes, respool ${fmt(w.usPerWrite.respool, 1)} µs CPU/write, source ${fmt(w.usPerWrite.source, 1)}, target ${fmt(w.usPerWrite.target, 1)}` +
        (w.cond === 'synced' ? `; ${fmtInt(w.mirrored)} mirrored` : ''));
    }
    const cpuRounds = [];
    for (let round = 1; round <= CPU_ROUNDS; round++) {
      const off = cpuWindows.find((w) => w.round === round && w.cond === 'without');
      const on = cpuWindows.find((w) => w.round === round && w.cond === 'synced');
      cpuRounds.push({ round, ratio: on.usPerWrite.respool / off.usPerWrite.respool, addedUs: on.usPerWrite.respool - off.usPerWrite.respool });
    }
    result.cpu = {
      windows: cpuWindows, rounds: cpuRounds, load: { ...l4out.summary, epoch0: undefined }, mirrorCheck,
      ratio: median(cpuRounds.map((r) => r.ratio)), addedUs: median(cpuRounds.map((r) => r.addedUs)),
    };
    await stopRespool(r4);
    respools.splice(respools.indexOf(r4), 1);
  }

  // ================================================================ part 5: the cutover's write pause with workers, and in a fleet
  if (PARTS.has(5)) {
    result.cutoverMulti = {};
    // (a) one respool, --workers 2 (workers: 2 in its YAML): the load's connections spread over both by the supervisor.
    {
      const [E, F] = [await startValkey({ tmpRoot: tmp, name: 'workers-a' }), await startValkey({ tmpRoot: tmp, name: 'workers-b' })];
      servers.push(E, F);
      await seed(E.port, SMALL_KEYS);
      const rw = await startRespool('cutover-workers', E.port, UNPACED, { workers: 2 });
      respools.push(rw);
      result.commands.respoolCutoverWorkers = rw.cmd;
      const workerPids = childPids(rw.child.pid);
      const ctlPid = Number(/process_id:(\d+)/.exec(String(await rw.ctl.callT(5_000, 'INFO', 'server')))?.[1]);
      log(`part 5 (workers): supervisor ${rw.child.pid}, workers ${workerPids.join(', ')}; RESPOOL MIGRATE sent on a connection served by ${ctlPid}`);
      const out = await cutoverRounds({ tag: 'part 5 (workers)', loadName: 'cutover-workers', coord: rw, loadPorts: [rw.port], src: E, dst: F, rounds: MULTI_CUTOVERS, probePorts: [rw.port] });
      const pids = Object.keys(out.cutover.connsByPid).map(Number);
      if (pids.length < 2) note(`part 5 (workers): the load's ${CONNS} connections were all served by one process (${JSON.stringify(out.cutover.connsByPid)}; workers ${workerPids.join(', ')})`);
      result.cutoverMulti.workers = { ...out.cutover, setup: { supervisor: rw.child.pid, workers: workerPids, ctlServedBy: ctlPid } };
      await stopRespool(rw);
      respools.splice(respools.indexOf(rw), 1);
      for (const s of [E, F]) {
        await stop(s.child);
        servers.splice(servers.indexOf(s), 1);
      }
    }
    // (b) a fleet of two respool processes (cluster.peers: both), the fleet's shared state in the
    // (standalone) upstream; the load split over both; START, STATUS and CUTOVER sent to member 0.
    {
      const [G, H] = [await startValkey({ tmpRoot: tmp, name: 'fleet-a' }), await startValkey({ tmpRoot: tmp, name: 'fleet-b' })];
      servers.push(G, H);
      await seed(G.port, SMALL_KEYS);
      const ports = [await uniquePort(), await uniquePort()];
      const peers = ports.map((p) => `${HOST}:${p}`);
      const members = await Promise.all(ports.map((port, i) => startRespool(`cutover-fleet-${i}`, G.port, UNPACED, { port, peers })));
      respools.push(...members);
      result.commands.respoolCutoverFleet0 = members[0].cmd;
      result.commands.respoolCutoverFleet1 = members[1].cmd;
      // Both members registered in the fleet's shared state on the upstream ({respool-fleet}:members).
      const deadline = Date.now() + 15_000;
      let registered = [];
      for (;;) {
        registered = await direct(G.port, (c) => c.callT(5_000, 'HKEYS', '{respool-fleet}:members'));
        if (Array.isArray(registered) && registered.length >= 2) break;
        if (Date.now() > deadline) throw new Error(`part 5 (fleet): the fleet's members did not both register in the upstream within 15 s (${JSON.stringify(registered)}); see ${members.map((m) => m.logFile).join(', ')}`);
        await sleep(100);
      }
      log(`part 5 (fleet): members ${members.map((m) => `${m.port} (pid ${m.child.pid})`).join(', ')} registered in the upstream's {respool-fleet}:members: ${registered.join(', ')}`);
      const out = await cutoverRounds({ tag: 'part 5 (fleet)', loadName: 'cutover-fleet', coord: members[0], loadPorts: ports, src: G, dst: H, rounds: MULTI_CUTOVERS, probePorts: ports });
      result.cutoverMulti.fleet = { ...out.cutover, setup: { members: members.map((m) => ({ port: m.port, pid: m.child.pid })), registered, coordinator: members[0].port, configuredUpstream: G.port } };
      for (const m of members) {
        await stopRespool(m);
        respools.splice(respools.indexOf(m), 1);
      }
      for (const s of [G, H]) {
        await stop(s.child);
        servers.splice(servers.indexOf(s), 1);
      }
    }
  }
} catch (err) {
  failure = err;
  log(`FAILED: ${err.stack ?? err}`);
  note(`the bench stopped early: ${err.message}`);
} finally {
  for (const l of loads) {
    try {
      l.child.kill('SIGKILL');
    } catch {
      /* gone */
    }
  }
  for (const r of respools) await stopRespool(r);
  for (const s of servers) await stop(s.child);
}

// ---------------------------------------------------------------- report

const f1 = (x) => fmt(x, 1);
const f2 = (x) => fmt(x, 2);
const f3 = (x) => fmt(x, 3);
const mm = (xs, f) => (xs.length ? `${f(median(xs))} (${f(Math.min(...xs))}–${f(Math.max(...xs))})` : '—');
const seconds = ((Date.now() - started.getTime()) / 1000).toFixed(0);
result.loadavgEnd = loadavg();
result.seconds = Number(seconds);
result.notes = notes;
const cmdLine = `${QUICK ? 'BENCH_QUICK=1 ' : ''}npm run bench:migration`;
const md = [];
md.push('## Live migration: copy rate, clients\' latency during the copy, the cutover\'s pause (one process, workers, a fleet), mirrored writes\' CPU');
md.push('');
md.push(`**Rerun:** \`${cmdLine}\` (= npm run build && npm run build:harness && node bench/migration.mjs)${QUICK ? '; **BENCH_QUICK=1 smoke run — not for comparison**' : ''}. ` +
  `Measured ${started.toISOString().slice(0, 16)}Z, ${seconds} s, on this ${CPUS}-core machine shared with other work (load average ${loadStart} before, ${result.loadavgEnd} after). ` +
  `respool build: ${result.build}. Standalone valkey-servers (no persistence), respool in front of the source, everything on 127.0.0.1; the client load is bench/migration.mjs --load ` +
  '(raw RESP, fixed rate, open loop). Raw figures: bench/out/migration.json.');
md.push('');
{
  const rows = [];
  const c = result.copy;
  if (c) rows.push([`copy rate, ${fmtInt(c.keys)} keys, unpaced (START → synced)`, `**${fmtInt(c.keysPerSecondToSynced)} keys/s, ${f1(c.mbPerSecondToSynced)} MB/s** (${f1(c.syncSeconds)} s; the copy alone ${fmtInt(c.keysPerSecondCopy)} keys/s)`, '—']);
  const L = result.latency;
  if (L) {
    for (const [mode, v] of Object.entries(L.byMode)) {
      const ws = (cond) => L.windows.filter((w) => w.mode === mode && w.cond === cond);
      const what = mode === 'idle' ? "clients' p99, two windows with no migration in either (this machine's spread), idle"
        : mode === 'floor' ? "clients' p99 while a process of its own copies the load's writes (DUMP, PTTL, RESTORE) as carries do, no migration, floor"
          : `clients' p99 during a copy at the default pace ÷ before, ${mode}`;
      rows.push([what, `**${f2(v.p99Ratio)}×** (${f3(median(ws('during').map((w) => w.all.p99)))} vs ${f3(median(ws('before').map((w) => w.all.p99)))} ms; rounds ${v.rounds.map((r) => f2(r.p99Ratio)).join(', ')})`, mode === 'idle' || mode === 'floor' ? '—' : '≤ 1.2×']);
    }
  }
  const C = result.cutover;
  if (C) {
    rows.push(["cutover's write pause (STATUS cutover_pause_ms), p50 / p99", `**${f1(C.pauseP50)} / ${f1(C.pauseP99)} ms** over the ${C.rounds.length} cutovers that went through`, '≤ 100 ms']);
    rows.push(["clients' longest write around each CUTOVER, p50 / p99", `${f1(C.attemptMaxWriteP50)} / ${f1(C.attemptMaxWriteP99)} ms over all ${C.attempts.length} CUTOVER commands; **${C.attemptsFailed} failed** after holding writes 2 s`, '≤ 100 ms']);
  }
  for (const [setup, M] of Object.entries(result.cutoverMulti ?? {})) {
    const what = setup === 'workers' ? 'one respool with 2 workers' : 'a fleet of 2 respool processes';
    rows.push([`cutover's write pause, ${what} (coordinator's STATUS cutover_pause_ms), p50 / p99`, `**${f1(M.pauseP50)} / ${f1(M.pauseP99)} ms** over the ${M.rounds.length} cutovers that went through` +
      `${M.attemptsFailed ? `; **${M.attemptsFailed} CUTOVER commands failed**` : ''}; clients' longest write p50 / p99 ${f1(M.maxWriteP50)} / ${f1(M.maxWriteP99)} ms`, '—']);
  }
  const P = result.cpu;
  if (P) {
    const us = (cond) => median(P.windows.filter((w) => w.cond === cond).map((w) => w.usPerWrite.respool));
    rows.push(["respool CPU per write, synced migration vs none", `**${f1(us('synced'))} vs ${f1(us('without'))} µs (${f2(P.ratio)}×, +${f1(P.addedUs)} µs)**`, '—']);
  }
  if (rows.length) {
    md.push('### Summary');
    md.push('');
    md.push(mdTable(['question', 'figure', 'target'], rows));
    md.push('');
  }
}
if (result.copy) {
  const c = result.copy;
  const l = layout(KEYS);
  md.push(`### 1. Copy rate: ${fmtInt(c.keys)} keys, unpaced`);
  md.push('');
  md.push(`Source: ${fmtInt(l.strings)} strings of ${VALUE_BYTES} bytes (1 in 20 with a TTL), ${fmtInt(l.hashes)} hashes, ${fmtInt(l.lists)} lists, ${fmtInt(l.sets)} sets, ${fmtInt(l.zsets)} sorted sets of 5 elements of 16 bytes ` +
    `(used_memory ${fmt(c.sourceUsedMemory / 2 ** 20, 0)} MiB; seeded with valkey-cli --pipe in ${f1(c.seedSeconds)} s); empty target; no client load. ` +
    'respool with `migration: { maxKeysPerSecond: 10000000, maxBytesPerSecond: 1tb, copiesInFlight: 100 }`, the rest default (batchKeys 100, verifySample 1000). ' +
    'Timed from sending START (its reply took ' + `${fmt(c.startReplyMs, 0)} ms) by polling STATUS every 50 ms; MB = 10^6 bytes of DUMP payload (STATUS bytes).`);
  md.push('');
  md.push(mdTable(['span', 'seconds', 'keys', 'keys/s', 'MB', 'MB/s'], [
    ['START → copy done (state leaves copying)', f2(c.copySeconds), fmtInt(c.copyDone.copied), fmtInt(c.keysPerSecondCopy), f1(c.copyDone.bytes / 1e6), f1(c.mbPerSecondCopy)],
    ['START → synced (verifier done)', f2(c.syncSeconds), fmtInt(c.copied), `**${fmtInt(c.keysPerSecondToSynced)}**`, f1(c.bytes / 1e6), `**${f1(c.mbPerSecondToSynced)}**`],
  ]));
  md.push('');
  md.push(`- CPU while copying (% of one core): respool ${fmt(c.cpuPercentCopy.respool, 0)}%, source ${fmt(c.cpuPercentCopy.source, 0)}%, target ${fmt(c.cpuPercentCopy.target, 0)}%; ` +
    `respool ${f2((c.cpuSecondsToSynced.respool * 1e6) / c.copied)} µs CPU per key copied.`);
  md.push(`- Once synced: target DBSIZE ${fmtInt(c.targetKeys)} (source ${fmtInt(c.keys)}); ${c.sample.different} of ${fmtInt(c.sample.compared)} random keys differ (DUMP and PTTL compared directly); ` +
    `verifier: ${fmtInt(c.verified)} compared, ${c.mismatched} mismatched; recopied ${c.recopied}; paused ${c.paused.length} time(s). ABORT ${fmt(c.abort.ms, 0)} ms ("${c.abort.reply}"), ${c.abort.left} keys left on the target.`);
  md.push('');
}
if (result.latency) {
  const L = result.latency;
  md.push(`### 2. Clients' latency before vs during a copy at the default pace`);
  md.push('');
  md.push(`${CONNS} connections, ${fmtInt(RATE)} requests/s in all (${fmt(100 - WRITE_SHARE * 100, 0)}% GET, ${fmt(WRITE_SHARE * 100, 0)}% SET of ${VALUE_BYTES} bytes) over the ${fmtInt(layout(KEYS).strings)} string keys of part 1's source, ` +
    `through a respool with the default migration settings (the pace held to the clients' p99 — paceByLatency, maxP99RisePercent 20 — under a ceiling of 5,000 keys/s and 32 MiB/s; groups of 4 keys, batches of ${PACED_BATCH ?? 100}${PACED_BATCH === null ? '' : ': BENCH_MIG_BATCH_KEYS'}). ${ROUNDS} round(s) per mode of two ${WINDOW_S} s windows, ` +
    '"before" (no migration) and "during" (START 0.5 s before the window, ABORT after it), order alternating per round. ' +
    'Pinned: respool on core 0; both valkey-servers and the load on core 1. Apart: unpinned, the target at nice 19 and the load at nice -10 (every thread), ' +
    'as if each had a machine of its own; respool and the source at 0. ' +
    (IDLE ? 'Idle: unpinned, no migration in the "during" window either — the spread this machine gives two windows with nothing changed (BENCH_MIG_IDLE). ' : '') +
    (FLOOR ? `Floor: unpinned, no migration; in the "during" window a process of its own copies ${fmtInt(RATE * WRITE_SHARE)} random keys/s source → target as a carried write is copied, gathered every 5 ms (BENCH_MIG_FLOOR). ` : '') +
    (WARM ? `Every mode with ${CPUS} busy loops at nice 19 beside it (BENCH_MIG_WARM: the cores kept from halting, so a quiet window does not pay the wake-ups a busy one does not). ` : 'No busy loops (BENCH_MIG_WARM=0): a quiet window pays the cores\' wake-ups more often than a busy one. ') +
    'Latencies in ms, medians over rounds (lowest–highest round).');
  md.push('');
  const rows = [];
  for (const [mode, v] of Object.entries(L.byMode)) {
    for (const cond of ['before', 'during']) {
      const ws = L.windows.filter((w) => w.mode === mode && w.cond === cond);
      rows.push([mode, cond, mm(ws.map((w) => w.all.n / WINDOW_S), fmtInt), mm(ws.map((w) => w.all.p50), f3), mm(ws.map((w) => w.all.p99), f3), mm(ws.map((w) => w.writes.p99), f3), mm(ws.map((w) => w.all.max), f1),
        mm(ws.map((w) => w.cpuPercent.respool), (x) => `${fmt(x, 0)}%`), cond === 'during' && mode !== 'idle' && mode !== 'floor' ? mm(ws.map((w) => w.copyKeysPerSecond), fmtInt) : '—']);
    }
    rows.push([mode, '**during ÷ before**', '', `${f2(v.p50Ratio)}×`, `**${f2(v.p99Ratio)}×**`, `${f2(v.writeP99Ratio)}×`, '', '', '']);
  }
  md.push(mdTable(['mode', 'window', 'requests/s', 'p50', 'p99', 'SET p99', 'max', 'respool CPU', 'copy keys/s'], rows));
  md.push('');
  for (const [mode, v] of Object.entries(L.byMode)) {
    md.push(`- ${mode}: **p99 during ÷ before ${f2(v.p99Ratio)}×** (${mode === 'idle' ? 'no migration: the noise' : mode === 'floor' ? 'no migration: the carries alone, sent by another process' : 'target ≤ 1.2×'}; per round ${v.rounds.map((r) => f2(r.p99Ratio)).join(', ')}); p50 ${f2(v.p50Ratio)}×.`);
  }
  md.push(`- The load: ${fmtInt(L.load.answered)} requests answered, ${L.load.errors} errors, ${L.load.stale} stale reads (a GET of a key this load wrote that did not return the value last acknowledged).`);
  md.push('');
}
if (result.cutover) {
  const C = result.cutover;
  md.push(`### 3. The cutover's write pause (${C.rounds.length} cutovers of ${fmtInt(SMALL_KEYS)} keys under a steady write load)`);
  md.push('');
  md.push(`${CONNS} connections, ${fmtInt(CUT_RATE)} requests/s in all, half SETs, half GETs (half of those of a key just written), over the ${fmtInt(layout(SMALL_KEYS).strings)} string keys; ` +
    'one respool (unpaced) and one load all along; each round: target emptied directly, START, synced, 0.7 s, CUTOVER; the two servers swap roles every round. ' +
    '"pause" is STATUS cutover_pause_ms (respool\'s own time with writes held); "CUTOVER command" what the command took as the bench saw it; ' +
    `"clients' longest write" the highest latency of the load's SETs sent from 50 ms before CUTOVER until its reply. The p99 of ${C.rounds.length} rounds is their highest.`);
  md.push('');
  md.push(mdTable(['', 'p50 ms', 'p99 ms'], [
    ['pause (cutover_pause_ms)', f1(C.pauseP50), `**${f1(C.pauseP99)}**`],
    ['CUTOVER command', f1(C.cmdP50), f1(C.cmdP99)],
    ["clients' longest write around each cutover that went through", f1(C.maxWriteP50), `**${f1(C.maxWriteP99)}**`],
    [`clients' longest write around every CUTOVER sent (${C.attempts.length}, ${C.attemptsFailed} failed)`, f1(C.attemptMaxWriteP50), `**${f1(C.attemptMaxWriteP99)}**`],
    ['(for reference: each write while synced, before CUTOVER; p50, p99 / max)', f3(C.syncedWrites.p50), `${f3(C.syncedWrites.p99)} / ${f1(C.syncedWrites.max)}`],
  ]));
  md.push('');
  md.push(`- **pause p99 ${f1(C.pauseP99)} ms** (target ≤ 100 ms); per round: ${C.rounds.map((r) => f1(r.pauseMs)).join(', ')}.`);
  if (C.failedRounds.length > 0) {
    md.push(`- **${C.failedRounds.length} of ${C.rounds.length + C.failedRounds.length} rounds did not cut over** (3 CUTOVER attempts 1 s apart, then ABORT; left out of the figures above): ` +
      C.failedRounds.map((r) => `round ${r.round}: ${r.failures.map((f) => `"${f.error}" after ${fmt(f.ms, 0)} ms (copies_in_flight ${f.copiesInFlight}, dirty ${f.dirty})`).join('; ')}`).join(' — ') + '.');
  }
  const failedAttempts = [...C.failedRounds, ...C.rounds].flatMap((r) => (r.failures ?? []).map((f) => ({ round: r.round, ...f })));
  if (failedAttempts.length > 0) {
    md.push(`- **${failedAttempts.length} of ${C.attempts.length} CUTOVER commands failed** ("writes in flight did not drain within 2000 ms"; the round went on with another CUTOVER 1 s later, or ABORT after 3): ` +
      `clients' longest write around each ${failedAttempts.map((f) => fmt(f.maxWriteMs, 0)).join(', ')} ms, longest read ${failedAttempts.map((f) => fmt(f.maxReadMs, 0)).join(', ')} ms ` +
      `(reads sent while it ran: p50 ${failedAttempts.map((f) => fmt(f.readsSentDuring.p50, 0)).join(', ')} ms).`);
  }
  md.push(`- clients' longest write per round: ${C.rounds.map((r) => f1(r.maxWriteMs)).join(', ')} ms; each round's slowest write was sent ${C.rounds.map((r) => fmt(r.slowestWrites[0]?.sentMsAfterCutover, 1)).join(', ')} ms after CUTOVER was sent. ` +
    `START → synced per round: median ${fmtInt(C.syncMsP50)} ms.`);
  md.push(`- Checks: new upstream's DBSIZE after each cutover ${[...new Set(C.rounds.map((r) => r.newKeys))].join(', ')} (expected ${fmtInt(SMALL_KEYS)}); at the end, ${C.finalCheck.different} of ${fmtInt(C.finalCheck.compared)} written keys ` +
    `differ from the value last acknowledged; ${C.load.stale} stale reads, ${C.load.errors} errors, ${C.load.unanswered} unanswered of ${fmtInt(C.load.sent)} requests.`);
  md.push('');
}
if (result.cpu) {
  const P = result.cpu;
  const ws = (cond) => P.windows.filter((w) => w.cond === cond);
  md.push(`### 4. The mirrored writes' CPU`);
  md.push('');
  md.push(`SET only, ${fmtInt(CPU_RATE)} writes/s from ${CONNS} connections over ${fmtInt(layout(SMALL_KEYS).strings)} keys; ${CPU_ROUNDS} round(s) of two ${CPU_WINDOW_S} s windows, "without" (no migration) and "synced" ` +
    '(START, synced, 1 s, then the window; ABORT after), order alternating. CPU = utime+stime from /proc/<pid>/stat (10 ms ticks) ÷ the writes sent in the window. Medians over rounds (lowest–highest round).');
  md.push('');
  md.push(mdTable(['window', 'writes/s', 'respool µs CPU / write', 'source µs / write', 'target µs / write', 'writes mirrored'], ['without', 'synced'].map((cond) => [
    cond, mm(ws(cond).map((w) => w.writes.n / CPU_WINDOW_S), fmtInt), mm(ws(cond).map((w) => w.usPerWrite.respool), f2), mm(ws(cond).map((w) => w.usPerWrite.source), f2),
    mm(ws(cond).map((w) => w.usPerWrite.target), f2), cond === 'synced' ? mm(ws(cond).map((w) => w.mirrored / w.writes.n), (x) => `${fmt(x * 100, 1)}% of writes`) : '—',
  ])));
  md.push('');
  md.push(`- **respool CPU per write, synced ÷ without: ${f2(P.ratio)}×** (+${f2(P.addedUs)} µs per write; per round ${P.rounds.map((r) => f2(r.ratio)).join(', ')}).`);
  md.push(`- Mirroring checked with the load stopped and the migration ${P.mirrorCheck.state}: ${P.mirrorCheck.different} of ${fmtInt(P.mirrorCheck.compared)} string keys differ between source and target. ` +
    `${P.load.errors} errors of ${fmtInt(P.load.answered)} writes.`);
  md.push('');
}
if (result.cutoverMulti && Object.keys(result.cutoverMulti).length) {
  const M = result.cutoverMulti;
  const names = { workers: 'one respool, `workers: 2`', fleet: 'a fleet of 2 respool processes' };
  const members = (x) => x.setup?.members?.length ?? 0;
  const n = Object.values(M).map((x) => x.rounds.length + x.failedRounds.length);
  md.push(`### 5. The cutover's write pause with workers and in a fleet (${n.join(' and ')} cutovers of ${fmtInt(SMALL_KEYS)} keys)`);
  md.push('');
  md.push(`Part 3's rounds (START, synced, 0.7 s, CUTOVER; two standalone servers swapping roles; the same load: ${CONNS} connections, ${fmtInt(CUT_RATE)} requests/s, half SETs, ` +
    'one load all along, its values checked at the end) through (a) one respool with `workers: 2` in its YAML (the supervisor spreads the load\'s connections over both workers; ' +
    'RESPOOL MIGRATE sent on one connection, run by worker 0), and (b) a fleet of two respool processes (`cluster: { peers: [both] }`, the fleet\'s shared state in the standalone upstream), ' +
    'the load\'s connections alternating between the two members, START, STATUS and CUTOVER sent to member 0 (the coordinator: "pause" is its STATUS cutover_pause_ms). ' +
    'Each setup on its own two fresh servers. After each cutover a write through 4 fresh connections to each respool port, read back on the new upstream directly. Latencies in ms; the p99 of so few rounds is their highest.');
  md.push('');
  const rows = [];
  for (const [setup, x] of Object.entries(M)) {
    rows.push([names[setup], `${f1(x.pauseP50)}`, `**${f1(x.pauseP99)}**`, `${f1(x.cmdP50)} / ${f1(x.cmdP99)}`, `${f1(x.maxWriteP50)} / **${f1(x.maxWriteP99)}**`,
      `${x.attempts.length} (${x.attemptsFailed} failed)`, `${fmtInt(x.finalCheck.compared)} / ${x.finalCheck.different}`, `${x.load.stale} / ${x.load.errors}`,
      Object.values(x.connsByPid).join(' + ')]);
  }
  if (result.cutover) {
    const C = result.cutover;
    rows.push(['(part 3: one respool, one process)', f1(C.pauseP50), f1(C.pauseP99), `${f1(C.cmdP50)} / ${f1(C.cmdP99)}`, `${f1(C.maxWriteP50)} / ${f1(C.maxWriteP99)}`,
      `${C.attempts.length} (${C.attemptsFailed} failed)`, `${fmtInt(C.finalCheck.compared)} / ${C.finalCheck.different}`, `${C.load.stale} / ${C.load.errors}`, String(CONNS)]);
  }
  md.push(mdTable(['setup', 'pause p50', 'pause p99', 'CUTOVER command p50 / p99', "clients' longest write p50 / p99", 'CUTOVER commands', 'keys checked / mismatched', 'stale reads / errors', 'load connections per process'], rows));
  md.push('');
  for (const [setup, x] of Object.entries(M)) {
    md.push(`- ${names[setup]}: pause per round ${x.rounds.map((r) => f1(r.pauseMs)).join(', ')} ms; CUTOVER command ${x.rounds.map((r) => fmt(r.cutoverCmdMs, 0)).join(', ')} ms; ` +
      `clients' longest write ${x.rounds.map((r) => fmt(r.maxWriteMs, 0)).join(', ')} ms` +
      `${x.rounds.some((r) => r.maxWriteByPid) ? ` (per ${setup === 'workers' ? 'worker' : 'member'}, ${Object.keys(x.rounds[0].maxWriteByPid ?? {}).map((pid) => `pid ${pid}`).join(' / ')}: ` +
        `${x.rounds.map((r) => Object.values(r.maxWriteByPid ?? {}).map((v) => fmt(v, 0)).join('/')).join(', ')} ms)` : ''}. START → synced median ${fmtInt(x.syncMsP50)} ms. ` +
      `New upstream's keys after each cutover ${[...new Set(x.rounds.map((r) => r.newKeys))].join(', ')} (expected ${fmtInt(SMALL_KEYS)})` +
      `${x.rounds.some((r) => r.fleetKeys) ? `, besides the fleet's own {respool-fleet} keys (${[...new Set(x.rounds.map((r) => r.fleetKeys))].join(', ')})` : ''}; ` +
      `writes through the members right after each cutover found on the new upstream: ${x.rounds.reduce((a, r) => a + (r.probes ? r.probes.sent - r.probes.wrong : 0), 0)} of ${x.rounds.reduce((a, r) => a + (r.probes?.sent ?? 0), 0)}; ` +
      `${x.load.unanswered} unanswered of ${fmtInt(x.load.sent)} requests.`);
    const home = x.setup?.configuredUpstream;
    if (home !== undefined) {
      const away = x.rounds.filter((r) => r.to !== home);
      const back = x.rounds.filter((r) => r.to === home);
      const subs = x.rounds.filter((r) => r.busSubscribers);
      md.push(`  By direction: to the other server (away from the members' configured upstream) pause ${mm(away.map((r) => r.pauseMs), f1)} ms, clients' longest write ${mm(away.map((r) => r.maxWriteMs), f1)} ms; ` +
        `back to the configured upstream pause ${mm(back.map((r) => r.pauseMs), f1)} ms, clients' longest write ${mm(back.map((r) => r.maxWriteMs), f1)} ms (medians, lowest–highest). ` +
        `Subscribers of {respool-fleet}:bus after each cutover (PUBSUB NUMSUB, old / new upstream): ${subs.map((r) => `${r.busSubscribers.old}/${r.busSubscribers.new}`).join(', ')}` +
        `${subs.length && subs.every((r) => (r.to === home ? r.busSubscribers.new : r.busSubscribers.old) === members(x)) ? ' — the members\' bus subscriptions stayed on the configured upstream all along' : ''}.`);
    }
    if (x.failedRounds.length > 0) {
      md.push(`  **${x.failedRounds.length} round(s) did not cut over**: ` + x.failedRounds.map((r) => `round ${r.round}: ${r.failures.map((f) => `"${f.error}" after ${fmt(f.ms, 0)} ms (state ${f.state})`).join('; ')}`).join(' — ') + '.');
    }
  }
  md.push('');
}
if (notes.length) {
  md.push('### Notes');
  md.push('');
  for (const n of notes) md.push(`- ${n}`);
  md.push('');
}
md.push('Processes:');
md.push('');
md.push('```');
for (const v of Object.values(result.commands)) md.push(v);
md.push('```');
const text = md.join('\n');
writeOutputs(SECTION, result, text);
if (!QUICK && !failure && [1, 2, 3, 4, 5].every((p) => PARTS.has(p)) && PACED_BATCH === null && !process.env.RESPOOL_BENCH_BIN) writeSection(SECTION, text); // a full run of this build only
console.log(text);
process.exit(failure ? 1 : 0);
