// Child process of bench/slow-readers.mjs (issue 35): the load, in a process of its own so that
// its event loop (200 slow sockets, 4 timed clients) neither distorts the bench's timing nor is
// distorted by it. The load code is the tests' (test/harness/slow-readers.ts, built to
// build/harness/slow-readers.js by `npm run build:harness`).
//
//   node bench/lib/slow-readers-load.mjs slow <port> <count> <seconds>
//     `count` SlowReaders, each pipelining GETs of big:0 … big:19 in one write and then reading at
//     most 65,536 bytes/s (one socket read per tick). Prints {"ready":count,"ms":…} once every
//     connection is made and its pipeline written (`failed`: connections that could not be made), keeps them for `seconds` (or until SIGTERM /
//     SIGINT), then prints {"ended":…,"count":…,"receivedBytes":…} — `ended`: how many saw their
//     connection end (closed by the server or proxy) before the end — and exits.
//
//   node bench/lib/slow-readers-load.mjs normal <port> <clients> <ms> <prefix>
//     verifiedClients(port, clients, ms, prefix): each client SETs its own key and GETs it back in
//     one pipeline, every reply checked, each round trip timed. Prints
//     {"ok":…,"errors":…,"firstErrors":[…],"p50":…,"p99":…,"max":…,"n":…} (latencies in ms).
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const { SlowReader, verifiedClients, quantile } = await import(path.join(ROOT, 'build', 'harness', 'slow-readers.js'));

const KEYS = Array.from({ length: 20 }, (_, i) => `big:${i}`);
const BYTES_PER_SECOND = 65536;

const [role, ...rest] = process.argv.slice(2);
const say = (obj) => new Promise((resolve) => process.stdout.write(`${JSON.stringify(obj)}\n`, resolve));

if (role === 'slow') {
  const [port, count, seconds] = rest.map(Number);
  const t0 = performance.now();
  const readers = [];
  let finished = false;
  let failed = 0;
  let firstError;
  const finish = async () => {
    if (finished) return;
    finished = true;
    const ended = readers.filter((r) => r.ended).length;
    const receivedBytes = readers.reduce((s, r) => s + r.received, 0);
    for (const r of readers) r.stop();
    await say({ ended, count: readers.length, failed, firstError, receivedBytes });
    process.exit(0);
  };
  process.on('SIGTERM', finish);
  process.on('SIGINT', finish);
  setTimeout(finish, seconds * 1000);
  for (let i = 0; i < count && !finished; i++) {
    try {
      readers.push(await SlowReader.start({ port, keys: KEYS, bytesPerSecond: BYTES_PER_SECOND }));
    } catch (e) {
      failed++;
      firstError ??= String(e?.message ?? e);
    }
  }
  if (!finished) await say({ ready: readers.length, failed, firstError, ms: performance.now() - t0 });
} else if (role === 'normal') {
  const [port, clients, ms] = rest.slice(0, 3).map(Number);
  const prefix = rest[3] ?? 'normal';
  const run = await verifiedClients(port, clients, ms, prefix);
  const max = run.latencies.reduce((m, x) => Math.max(m, x), 0);
  await say({
    ok: run.ok, errors: run.errors.length, firstErrors: run.errors.slice(0, 3),
    p50: quantile(run.latencies, 0.5), p99: quantile(run.latencies, 0.99), max, n: run.latencies.length,
  });
  process.exit(0);
} else {
  console.error('usage: slow-readers-load.mjs slow <port> <count> <seconds> | normal <port> <clients> <ms> <prefix>');
  process.exit(2);
}
