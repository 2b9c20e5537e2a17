// Quiet clients for bench/deep-pipeline.mjs, run as a child process so that the bench's own event
// loop (the loader's bookkeeping, INFO polling) does not delay them:
//
//   node bench/lib/quiet-clients.mjs <port> <clients> <ms>
//
// Opens <clients> raw TCP connections to 127.0.0.1:<port>; once all are connected, each sends
// `GET key:NNNN` (NNNN random below 100,000; RESP array, pipeline 1), waits for its one reply, and
// sends the next, until <ms> have passed. Latency per request from writing the request to having
// the whole reply (performance.now()). Prints one JSON line:
//   { count, p50, p99, max, errors, unanswered }   (latencies in ms)
// `errors`: error replies (-ERR …) or connections that closed; `unanswered`: requests still without
// a reply GRACE_MS after the window ended (left out of the percentiles; `max` is then at least the
// time they waited). Nothing else is written to stdout.
import net from 'node:net';

const HOST = '127.0.0.1';
const KEYS = 100_000;
const GRACE_MS = 10_000;

const [port, clients, ms] = process.argv.slice(2).map(Number);
if (!(port > 0) || !(clients > 0) || !(ms > 0)) {
  console.error('usage: node bench/lib/quiet-clients.mjs <port> <clients> <ms>');
  process.exit(2);
}

function request() {
  const key = `key:${Math.floor(Math.random() * KEYS)}`;
  return `*2\r\n$3\r\nGET\r\n$${Buffer.byteLength(key)}\r\n${key}\r\n`;
}

/**
 * { len, error } of the one reply at the start of `buf` (a bulk string incl. the null bulk `$-1`,
 * a simple string, an error or an integer: what GET can answer); len -1 while it is incomplete.
 */
function replyLength(buf) {
  const nl = buf.indexOf('\r\n');
  if (nl < 0) return { len: -1 };
  const type = String.fromCharCode(buf[0]);
  if (type === '$') {
    const n = Number(buf.toString('latin1', 1, nl));
    if (n < 0) return { len: nl + 2 }; // null bulk: $-1\r\n
    const len = nl + 2 + n + 2;
    return { len: buf.length >= len ? len : -1 };
  }
  if (type === '+' || type === ':' || type === '-' || type === '_') return { len: nl + 2, error: type === '-' };
  throw new Error(`unexpected reply type ${JSON.stringify(type)}: ${JSON.stringify(buf.toString('latin1', 0, 60))}`);
}

function connect() {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: HOST, port });
    s.setNoDelay(true);
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
}

const lat = [];
let errors = 0;
let unanswered = 0;
let waitedMax = 0;

function runClient(sock, deadline) {
  return new Promise((resolve) => {
    let buf = Buffer.alloc(0);
    let sentAt = 0;
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(grace);
      sock.destroy();
      resolve();
    };
    const grace = setTimeout(() => {
      unanswered++;
      waitedMax = Math.max(waitedMax, performance.now() - sentAt);
      finish();
    }, deadline - performance.now() + GRACE_MS);
    const send = () => {
      if (performance.now() >= deadline) return finish();
      sentAt = performance.now();
      sock.write(request());
    };
    sock.on('data', (d) => {
      buf = buf.length ? Buffer.concat([buf, d]) : d;
      const r = replyLength(buf);
      if (r.len < 0) return;
      lat.push(performance.now() - sentAt);
      if (r.error) errors++;
      buf = buf.subarray(r.len);
      send();
    });
    sock.on('error', () => {});
    sock.on('close', () => {
      if (!done) errors++;
      finish();
    });
    send();
  });
}

function percentile(xs, p) {
  if (!xs.length) return null;
  const a = Float64Array.from(xs).sort();
  return a[Math.min(a.length - 1, Math.max(0, Math.ceil((p / 100) * a.length) - 1))];
}

const socks = [];
for (let i = 0; i < clients; i++) socks.push(await connect());
const deadline = performance.now() + ms;
await Promise.all(socks.map((s) => runClient(s, deadline)));
const max = lat.reduce((m, x) => (x > m ? x : m), waitedMax);
process.stdout.write(`${JSON.stringify({ count: lat.length, p50: percentile(lat, 50), p99: percentile(lat, 99), max, errors, unanswered })}\n`);
