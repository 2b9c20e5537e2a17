// respool's heap per waiting client (bench/parked-pops.mjs): respool in this process (dist/), in
// front of the upstream given, N clients connected and answered a PING, the heap read after
// forced collections; then every client in BLPOP <its own key> 0, read again. Prints one JSON
// line: { mode, clients, waiting, heapPerClient, entryPerClient }.
//
//   node --expose-gc bench/lib/parked-memory.mjs N parked|leased host:port
//
// `entryPerClient`: the heap a reply-queue entry and a copy of a 40-byte request take (in a
// wrapper pair) — what any request awaiting its reply holds at respool — so the parked figure
// reads as that plus parking's own cost.
import net from 'node:net';
import path from 'node:path';
import { ROOT_DIR } from './common.mjs';

const [nText, mode, upstream] = process.argv.slice(2);
const N = Number(nText);
if (!globalThis.gc || !N || !['parked', 'leased'].includes(mode) || !upstream) {
  console.error('usage: node --expose-gc bench/lib/parked-memory.mjs N parked|leased host:port');
  process.exit(2);
}
const { pino } = await import(path.join(ROOT_DIR, 'node_modules/pino/pino.js'));
const { DEFAULT_CONFIG } = await import(path.join(ROOT_DIR, 'dist/config/defaults.js'));
const { startProxy } = await import(path.join(ROOT_DIR, 'dist/server.js'));
const { ReplyEntry } = await import(path.join(ROOT_DIR, 'dist/client/reply-queue.js'));

const [host, port] = [upstream.slice(0, upstream.lastIndexOf(':')), Number(upstream.slice(upstream.lastIndexOf(':') + 1))];
const base = structuredClone(DEFAULT_CONFIG);
const config = {
  ...base,
  listen: { host: '127.0.0.1', port: 0 },
  upstreams: [{ host, port }],
  clients: { ...base.clients, maxClients: N + 100 },
  dedicated: { ...base.dedicated, parkPops: mode === 'parked', maxPerNode: N + 10, maxTotal: N + 10 },
};
const proxy = await startProxy(config, { log: pino({ level: 'silent' }) });
const heap = () => {
  globalThis.gc();
  globalThis.gc();
  return process.memoryUsage().heapUsed;
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const sockets = [];
const got = [];
for (let i = 0; i < N; i++) {
  const s = net.connect(proxy.address.port, '127.0.0.1');
  s.setEncoding('latin1');
  got.push('');
  s.on('data', (d) => {
    got[i] += d;
  });
  s.on('error', () => {});
  s.write('*1\r\n$4\r\nPING\r\n');
  sockets.push(s);
  if (i % 500 === 499) await sleep(50);
}
while (got.some((g) => g === '')) await sleep(50);
await sleep(500);
const idle = heap();
for (let i = 0; i < N; i++) {
  const key = `pmem:${i}`;
  got[i] = '';
  sockets[i].write(`*3\r\n$5\r\nBLPOP\r\n$${key.length}\r\n${key}\r\n$1\r\n0\r\n`);
}
for (let t = 0; t < 600; t++) {
  const waiting = mode === 'parked' ? proxy.parking.parked : proxy.clientCount();
  if (waiting >= N) break;
  await sleep(50);
}
await sleep(2000);
const waitingHeap = heap();
// A reply entry and a 40-byte request copy, as every request awaiting its reply holds them.
const before = heap();
const entries = Array.from({ length: N }, () => [new ReplyEntry({ onEntryDone() {} }), Buffer.from('*3\r\n$5\r\nBLPOP\r\n$9\r\npmem:1234\r\n$1\r\n0\r\n')]);
const entryPerClient = Math.round((heap() - before) / N);
console.log(JSON.stringify({ mode, clients: N, waiting: mode === 'parked' ? proxy.parking.parked : null, heapPerClient: Math.round((waitingHeap - idle) / N), entryPerClient, kept: entries.length }));
for (const s of sockets) s.destroy();
await proxy.close();
process.exit(0);
