// Load generator for bench/hotkeys.mjs: one process, several pipelined raw-RESP connections
// to one address, GETs with a hot-key mix (share `hotShare` on one key, the rest uniform over
// `coldKeys` keys). Starts at `startAt` (epoch ms), runs `durationMs`, then prints one JSON line:
// { ops, errors, nils, hist } where hist is a latency histogram (see bucketOf).
//
//   node bench/lib/hotkeys-loadgen.mjs '{"port":6380,"conns":8,"depth":16,"hotKey":"hot","coldPrefix":"cold:","coldKeys":10000,"hotShare":0.9,"startAt":0,"durationMs":15000}'
//
// Alternating (`ports` [p0, p1, …], `schedule` [index into ports per slot] and `slotMs` instead
// of `port`): `conns` connections to each port, and in slot k (the k-th `slotMs` after `startAt`)
// only ports[schedule[k]] gets requests; the others' replies drain. The line then also has
// slotOps: replies counted by the slot their request was sent in (so a slot's count is its port's).
import net from 'node:net';
import { performance } from 'node:perf_hooks';

const opts = JSON.parse(process.argv[2]);
const { port, conns, depth, hotKey, coldPrefix, coldKeys, hotShare, startAt, durationMs } = opts;
const ports = opts.ports ?? [port];
const schedule = opts.schedule ?? [0];
const slotMs = opts.slotMs ?? Infinity;
const slots = schedule.length;
const slotOps = new Array(slots).fill(0);

const enc = (args) => {
  let s = `*${args.length}\r\n`;
  for (const a of args) s += `$${Buffer.byteLength(a)}\r\n${a}\r\n`;
  return Buffer.from(s);
};
const HOT = enc(['GET', hotKey]);
const COLD = Array.from({ length: coldKeys }, (_, i) => enc(['GET', `${coldPrefix}${i}`]));
const pick = () => (Math.random() < hotShare ? HOT : COLD[(Math.random() * coldKeys) | 0]);

/** Latency buckets: 10 µs wide below 10 ms, then 1 ms wide up to 10 s. */
const BUCKETS = 1000 + 9990 + 1;
const bucketOf = (us) => (us < 10_000 ? Math.floor(us / 10) : Math.min(BUCKETS - 1, 1000 + Math.floor((us - 10_000) / 1000)));
const hist = new Uint32Array(BUCKETS);

let ops = 0;
let errors = 0;
let nils = 0;
let running = false;
let endAt = Infinity;
let endPerf = Infinity;
let startPerf = 0;
/** The slot now, and so the port taking requests (ports[schedule[slot]]). */
let slot = 0;

class Conn {
  constructor(socket, portIndex) {
    this.socket = socket;
    this.portIndex = portIndex;
    this.sent = new Float64Array(depth * 2);
    this.sentSlot = new Int32Array(depth * 2);
    this.head = 0; // ring of send times
    this.tail = 0;
    this.remaining = 0; // body bytes (+CRLF) still to skip
    this.header = ''; // partial header line
    socket.setNoDelay(true);
    socket.on('data', (chunk) => this.onData(chunk));
    socket.on('error', () => {});
  }
  fill(n) {
    if (n <= 0) return;
    const bufs = new Array(n);
    const now = performance.now();
    for (let i = 0; i < n; i++) {
      bufs[i] = pick();
      this.sent[this.tail] = now;
      this.sentSlot[this.tail] = slot;
      this.tail = (this.tail + 1) % this.sent.length;
    }
    this.socket.write(n === 1 ? bufs[0] : Buffer.concat(bufs));
  }
  done(isError, isNil) {
    const t0 = this.sent[this.head];
    const sentSlot = this.sentSlot[this.head];
    this.head = (this.head + 1) % this.sent.length;
    const now = performance.now();
    if (running && now <= endPerf) {
      ops++;
      slotOps[sentSlot]++;
      if (isError) errors++;
      if (isNil) nils++;
      hist[bucketOf((now - t0) * 1000)]++;
    }
  }
  onData(chunk) {
    let pos = 0;
    let completed = 0;
    const n = chunk.length;
    while (pos < n) {
      if (this.remaining > 0) {
        const take = Math.min(this.remaining, n - pos);
        this.remaining -= take;
        pos += take;
        if (this.remaining === 0) {
          this.done(false, false);
          completed++;
        }
        continue;
      }
      const nl = chunk.indexOf(10, pos);
      if (nl < 0) {
        this.header += chunk.toString('latin1', pos);
        break;
      }
      const line = this.header + chunk.toString('latin1', pos, nl - 1);
      this.header = '';
      pos = nl + 1;
      const type = line.charCodeAt(0);
      if (type === 36 /* $ */) {
        const len = Number(line.slice(1));
        if (len < 0) {
          this.done(false, true);
          completed++;
        } else {
          this.remaining = len + 2;
        }
      } else {
        this.done(type === 45 /* - */, false);
        completed++;
      }
    }
    if (Date.now() < endAt && this.portIndex === schedule[slot]) this.fill(completed);
  }
}

const sockets = await Promise.all(Array.from({ length: conns * ports.length }, (_, i) => new Promise((resolve, reject) => {
  const s = net.connect({ host: '127.0.0.1', port: ports[i % ports.length] }, () => resolve(s));
  s.once('error', reject);
})));
const all = sockets.map((s, i) => new Conn(s, i % ports.length));
const wait = Math.max(0, startAt - Date.now());
setTimeout(() => {
  running = true;
  endAt = Date.now() + durationMs;
  startPerf = performance.now();
  endPerf = startPerf + durationMs;
  for (const c of all) if (c.portIndex === schedule[0]) c.fill(depth);
  if (slots > 1) {
    const next = () => {
      if (slot + 1 >= slots) return;
      slot++;
      for (const c of all) if (c.portIndex === schedule[slot]) c.fill(depth - (c.tail - c.head + c.sent.length) % c.sent.length);
      setTimeout(next, startPerf + (slot + 1) * slotMs - performance.now());
    };
    setTimeout(next, slotMs);
  }
  setTimeout(() => {
    running = false;
    // Drain the replies still in flight briefly, then report.
    setTimeout(() => {
      const sparse = {};
      for (let i = 0; i < BUCKETS; i++) if (hist[i]) sparse[i] = hist[i];
      process.stdout.write(`${JSON.stringify({ ops, errors, nils, hist: sparse, ...(slots > 1 ? { slotOps } : {}) })}\n`);
      for (const s of sockets) s.destroy();
      process.exit(0);
    }, 300);
  }, durationMs);
}, wait);
