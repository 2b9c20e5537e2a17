// Many pub/sub subscribers in one process, for bench/pubsub-fanout.mjs (so that receiving
// millions of messages does not run on the measuring process's event loop).
//   node bench/lib/pubsub-subscribers.mjs '{"port":6380,"channel":"c","count":5000,"marker":"@@M@@"}'
// Opens `count` connections to 127.0.0.1:port, each sends SUBSCRIBE <channel> and waits for the
// confirmation; then prints {"type":"ready",…}. Messages are not parsed: each socket counts the
// occurrences of `marker` in its byte stream (every published payload carries it once), which
// works for RESP2 and RESP3 framing alike.
// Commands on stdin, one JSON line each:
//   {"cmd":"expect","n":N,"timeoutMs":T}  reset the counters; prints {"type":"armed"}, then
//       {"type":"done",…} once every socket has seen N markers since (or at the timeout), with
//       wall-clock times (performance.timeOrigin + performance.now(), ms) of the first marker and
//       of the moment the last socket completed.
//   {"cmd":"exit"}                         close every socket and exit (so does SIGTERM).
import net from 'node:net';
import readline from 'node:readline';

const { port, channel, count, marker, connectBatch = 200 } = JSON.parse(process.argv[2]);
const MARK = Buffer.from(marker, 'latin1');
const wall = () => performance.timeOrigin + performance.now();
const send = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);

const subs = [];
let expectN = Infinity;
let complete = 0;
let deliveries = 0;
let firstAt = null;
let lastAt = null;
let onComplete = null;
let want = 0; // healthy sockets when the expect came

function makeSub() {
  return new Promise((resolve) => {
    const s = net.connect({ port, host: '127.0.0.1' });
    s.setNoDelay(true);
    const sub = { s, confirmed: false, seen: 0, tail: Buffer.alloc(0), error: null };
    let settled = false;
    const settle = () => {
      if (!settled) {
        settled = true;
        resolve(sub);
      }
    };
    s.on('connect', () => s.write(`*2\r\n$9\r\nSUBSCRIBE\r\n$${Buffer.byteLength(channel)}\r\n${channel}\r\n`));
    s.on('data', (d) => {
      if (!sub.confirmed) {
        const text = d.toString('latin1');
        if (text.startsWith('-')) {
          sub.error = text.split('\r\n')[0].slice(0, 120);
          settle();
          return;
        }
        sub.confirmed = true;
        settle();
      }
      // Count markers, carrying the last bytes over chunk boundaries.
      const buf = sub.tail.length ? Buffer.concat([sub.tail, d]) : d;
      let n = 0;
      for (let i = buf.indexOf(MARK); i >= 0; i = buf.indexOf(MARK, i + MARK.length)) n++;
      sub.tail = buf.subarray(Math.max(0, buf.length - (MARK.length - 1)));
      if (n > 0) {
        // The tail can only hold a partial marker, never a whole one, so no double count.
        const now = wall();
        if (firstAt === null) firstAt = now;
        deliveries += n;
        const before = sub.seen;
        sub.seen += n;
        if (before < expectN && sub.seen >= expectN) {
          complete++;
          lastAt = now;
          if (complete === want) onComplete?.();
        }
      }
    });
    s.on('error', (e) => {
      sub.error ??= e.code ?? e.message;
      settle();
    });
    s.on('close', () => {
      sub.error ??= 'closed';
      settle();
    });
  });
}

const t0 = performance.now();
for (let i = 0; i < count; i += connectBatch) {
  subs.push(...await Promise.all(Array.from({ length: Math.min(connectBatch, count - i) }, makeSub)));
}
const errors = {};
for (const s of subs) if (s.error) errors[s.error] = (errors[s.error] ?? 0) + 1;
send({ type: 'ready', subscribed: subs.filter((s) => s.confirmed && !s.error).length, failed: subs.filter((s) => s.error).length, errors, ms: performance.now() - t0 });

let timer = null;
function finish(timedOut) {
  clearTimeout(timer);
  onComplete = null;
  const closed = subs.filter((s) => s.error).length;
  send({ type: 'done', timedOut, expect: expectN, sockets: subs.length, healthy: want, complete, deliveries, firstAt, lastAt, closed });
}

readline.createInterface({ input: process.stdin }).on('line', (line) => {
  const m = JSON.parse(line);
  if (m.cmd === 'expect') {
    expectN = m.n;
    complete = 0;
    deliveries = 0;
    firstAt = null;
    lastAt = null;
    for (const s of subs) s.seen = 0;
    want = subs.filter((s) => !s.error).length;
    onComplete = () => finish(false);
    timer = setTimeout(() => finish(true), m.timeoutMs ?? 120_000);
    send({ type: 'armed' });
  } else if (m.cmd === 'exit') {
    end();
  }
});

function end() {
  for (const s of subs) s.s.destroy();
  process.exit(0);
}
process.on('SIGTERM', end);
