// One connection storm, run in its own process so that opening thousands of sockets does not
// slow down the bench process that measures the established clients' latency.
//   node bench/lib/storm-child.mjs '{"port":6380,"count":10000,"mode":"hold"}'
// Opens `count` connections to 127.0.0.1:port as fast as it can (one synchronous loop of
// connects); each sends PING once and waits for +PONG.
//   mode "hold"  : prints one JSON line when every connection got its PONG (or failed), then keeps
//                  the connections open (idle) until SIGTERM.
//   mode "cycle" : each connection is closed as soon as its PONG arrived (connect + PING + close);
//                  prints the JSON line when every connection is done, then idles until SIGTERM.
import net from 'node:net';

const { port, count, mode = 'hold', timeoutMs = 60_000 } = JSON.parse(process.argv[2]);
const PING = Buffer.from('*1\r\n$4\r\nPING\r\n');
const sockets = [];
let ponged = 0;
let failed = 0;
let connected = 0;
let lastConnectAt = 0;
let reported = false;
const errors = {};
const t0 = performance.now();

function finish() {
  if (reported) return;
  reported = true;
  const doneAt = performance.now();
  process.stdout.write(`${JSON.stringify({
    count, mode, ponged, failed, errors, connected,
    connectMs: lastConnectAt - t0,
    acceptMs: doneAt - t0,
  })}\n`);
}

function settle() {
  if (ponged + failed === count) finish();
}

for (let i = 0; i < count; i++) {
  const s = net.connect({ port, host: '127.0.0.1' });
  if (mode === 'hold') sockets.push(s);
  let done = false;
  let buf = '';
  s.setNoDelay(true);
  s.on('connect', () => {
    connected++;
    lastConnectAt = performance.now();
    s.write(PING);
  });
  s.on('data', (d) => {
    if (done) return;
    buf += d.toString('latin1');
    if (buf.includes('\r\n')) {
      done = true;
      if (buf.startsWith('+PONG')) ponged++;
      else {
        failed++;
        const k = buf.split('\r\n')[0].slice(0, 60);
        errors[k] = (errors[k] ?? 0) + 1;
      }
      if (mode === 'cycle') s.destroy();
      settle();
    }
  });
  s.on('error', (e) => {
    if (done) return;
    done = true;
    failed++;
    errors[e.code ?? e.message] = (errors[e.code ?? e.message] ?? 0) + 1;
    settle();
  });
  s.on('close', () => {
    if (done) return;
    done = true;
    failed++;
    errors.closed = (errors.closed ?? 0) + 1;
    settle();
  });
}
setTimeout(() => {
  if (ponged + failed < count) {
    errors.timeout = count - ponged - failed;
    failed += count - ponged - failed;
    finish();
  }
}, timeoutMs).unref();

const end = () => {
  for (const s of sockets) s.destroy();
  process.exit(0);
};
process.on('SIGTERM', end);
setInterval(() => {}, 60_000); // stay alive, idle, until SIGTERM
