// Pub/sub fan-out: 10,000 subscriber connections on one channel, through respool and directly
// against one standalone valkey-server, side by side in one run.
//
//   npm run bench:pubsub        (= npm run build && npm run build:harness &&
//                                 bash -c 'ulimit -n <hard limit>; node bench/pubsub-fanout.mjs')
//
// Env: BENCH_QUICK=1 (1,000 subscribers, 1 round), BENCH_ROUNDS (3), BENCH_PUBSUB_SUBSCRIBERS
//      (10000; lowered to what the open-file limit allows), BENCH_PUBSUB_MESSAGES (200 per burst),
//      BENCH_PUBSUB_PACED (50 messages, one at a time: see below; BENCH_PUBSUB_PACED_GAP_MS = 5 ms between),
//      BENCH_PUBSUB_SAMPLE (100 subscribers timed per message), BENCH_PUBSUB_CHILDREN (2 processes
//      holding the other subscribers), BENCH_PUBSUB_SKIP_RESPOOL=1 (direct half only),
//      RESPOOL_BENCH_BIN (another checkout's bin/respool.js, e.g. a clean export of a commit; the
//      section names the build it ran).
//
// Per path and round:
//  - burst: one publisher writes BENCH_PUBSUB_MESSAGES PUBLISHes (100-byte payloads) back to back;
//    deliveries per second = every subscriber's messages / (last delivery − first publish);
//  - one at a time: BENCH_PUBSUB_PACED messages, each published once every timed subscriber has the
//    previous one (and a short gap), for per-message latency without the burst's queueing;
//  - latency: publish → receipt for BENCH_PUBSUB_SAMPLE subscribers held by this process (half
//    subscribed before the others, half after: Valkey delivers in subscription order, so they see
//    the start and the end of each fan-out); the others sit in child processes
//    (bench/lib/pubsub-subscribers.mjs) that only count messages;
//  - upstream connections: CLIENT LIST on the server while everyone is subscribed (pub/sub
//    clients = subscribed to something), respool's by client name.
// The two paths use different channels, so the idle half never receives the other's messages.
// Everything is on 127.0.0.1, started here, stopped at the end.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import {
  HOST, OUT_DIR, ROOT_DIR, RespConn, envFlag, envInt, fmt, fmtInt, log, mdTable, median, percentile, shellLine, sleep,
  spawn, stop, uniquePort, waitForPing, writeOutputs,
} from './lib/common.mjs';
import { clientCensus } from './lib/upstream-census.mjs';
import { writeSection } from './lib/results-file.mjs';
import { RESPOOL_BIN, respoolBuildLabel } from './lib/respool-build.mjs';

const QUICK = envFlag('BENCH_QUICK');
const ROUNDS = envInt('BENCH_ROUNDS', QUICK ? 1 : 3);
const WANT_SUBS = envInt('BENCH_PUBSUB_SUBSCRIBERS', QUICK ? 1000 : 10_000);
const MESSAGES = envInt('BENCH_PUBSUB_MESSAGES', QUICK ? 50 : 200);
const PACED = envInt('BENCH_PUBSUB_PACED', QUICK ? 20 : 50);
const PACED_GAP_MS = envInt('BENCH_PUBSUB_PACED_GAP_MS', 5);
const SAMPLE = envInt('BENCH_PUBSUB_SAMPLE', 100);
const CHILDREN = envInt('BENCH_PUBSUB_CHILDREN', 2);
const SKIP_RESPOOL = envFlag('BENCH_PUBSUB_SKIP_RESPOOL');
const PAYLOAD_BYTES = 100;
const MARKER = '@@FANOUT@@';
const WAIT_MS = 180_000;

const { startStandalone } = await import(path.join(ROOT_DIR, 'build/harness/valkey-processes.js'));

function openFileLimit() {
  const m = /Max open files\s+(\d+)/.exec(fs.readFileSync('/proc/self/limits', 'utf8'));
  return m ? Number(m[1]) : NaN;
}
const loadavg = () => fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
const wall = () => performance.timeOrigin + performance.now();

// Every process on a path holds one fd per subscriber of that path (the server: the direct ones;
// respool: its own clients; each child: its share), plus a margin for everything else.
const LIMIT = openFileLimit();
const SUBS = Math.max(SAMPLE + CHILDREN, Math.min(WANT_SUBS, LIMIT - 1000));

/** A 100-byte payload: marker, sequence number, send time (this process's performance.now()). */
function payload(seq, t) {
  const head = `${MARKER}${seq}:${t.toFixed(3)}:`;
  return head + 'x'.repeat(PAYLOAD_BYTES - head.length);
}

/** One subscriber in this process that parses every message's send time. */
async function sampleSubscriber(port, channel) {
  const s = net.connect({ port, host: HOST });
  s.setNoDelay(true);
  const sub = { s, lat: new Map(), error: null, buf: '' };
  await new Promise((resolve, reject) => {
    s.once('connect', resolve);
    s.once('error', reject);
  });
  let confirmed;
  const ok = new Promise((resolve) => (confirmed = resolve));
  s.on('data', (d) => {
    const now = performance.now();
    sub.buf += d.toString('latin1');
    if (!sub.confirmedAt) {
      if (sub.buf.startsWith('-')) {
        sub.error = sub.buf.split('\r\n')[0];
        confirmed();
        return;
      }
      sub.confirmedAt = now;
      confirmed();
    }
    for (let i = sub.buf.indexOf(MARKER); i >= 0; i = sub.buf.indexOf(MARKER)) {
      const rest = sub.buf.slice(i + MARKER.length);
      const m = /^(\d+):([\d.]+):/.exec(rest);
      if (!m) {
        sub.buf = sub.buf.slice(i); // partial: wait for more
        return;
      }
      sub.lat.set(Number(m[1]), now - Number(m[2]));
      sub.buf = rest.slice(m[0].length);
    }
    if (sub.buf.length > MARKER.length) sub.buf = sub.buf.slice(-MARKER.length);
  });
  s.on('error', (e) => (sub.error ??= e.code ?? e.message));
  s.on('close', () => (sub.error ??= 'closed'));
  s.write(`*2\r\n$9\r\nSUBSCRIBE\r\n$${channel.length}\r\n${channel}\r\n`);
  await ok;
  return sub;
}

async function main() {
  if (SUBS < WANT_SUBS) log(`ulimit -n is ${LIMIT}: ${SUBS} subscribers per path instead of ${WANT_SUBS} (run via npm run bench:pubsub)`);
  const started = new Date();
  const result = {
    bench: 'pubsub-fanout', started: started.toISOString(), loadavgStart: loadavg(), quick: QUICK,
    config: { rounds: ROUNDS, subscribers: SUBS, wanted: WANT_SUBS, fileLimit: LIMIT, messages: MESSAGES, paced: PACED, pacedGapMs: PACED_GAP_MS,
      sample: SAMPLE, children: CHILDREN, payloadBytes: PAYLOAD_BYTES },
    pubsubHandlerLog: gitLog(), respool: null, paths: {}, rounds: [], errors: [],
  };
  const server = await startStandalone({ args: ['--maxclients', String(SUBS + 1000)] });
  let respool;
  const groups = [];
  let monitor;
  try {
    monitor = await RespConn.connect(server.port);
    await monitor.callT(3000, 'CLIENT', 'SETNAME', 'bench-monitor');
    const paths = [{ name: 'direct', port: server.port, channel: 'fanout:direct' }];

    if (!SKIP_RESPOOL) {
      const port = await uniquePort();
      const adminPort = await uniquePort();
      const args = [RESPOOL_BIN, '--listen', `${HOST}:${port}`, '--upstream', `${HOST}:${server.port}`, '--mode', 'standalone',
        '--admin', `${HOST}:${adminPort}`, '--log-level', 'warn', '--max-clients', String(SUBS + 1000)];
      const logFile = path.join(OUT_DIR, 'respool-pubsub.log');
      fs.mkdirSync(OUT_DIR, { recursive: true });
      fs.writeFileSync(logFile, '');
      respool = spawn(process.execPath, args, { logFile });
      await waitForPing(port, { child: respool, what: 'respool', timeoutMs: 15_000 });
      result.respool = { cmd: shellLine('node', args), adminPort, build: respoolBuildLabel() };
      const probe = await probeSubscribe(port);
      result.respool.probe = probe;
      if (probe.ok) paths.unshift({ name: 'respool', port, channel: 'fanout:respool' });
      else {
        log(`respool does not take SUBSCRIBE yet (${probe.reply}); measuring the direct half only`);
        result.errors.push(`respool: SUBSCRIBE answered ${JSON.stringify(probe.reply)}; respool half skipped`);
        await stop(respool);
        respool = null;
      }
    }

    // Subscribe everyone, both paths (distinct channels), before measuring anything.
    const before = await clientCensus(monitor);
    for (const p of paths) {
      const t0 = performance.now();
      const firstHalf = [];
      for (let i = 0; i < SAMPLE / 2; i++) firstHalf.push(await sampleSubscriber(p.port, p.channel));
      const rest = SUBS - SAMPLE;
      const counts = Array.from({ length: CHILDREN }, (_, i) => Math.floor(rest / CHILDREN) + (i < rest % CHILDREN ? 1 : 0));
      const kids = counts.map((count) => startChild(p.port, p.channel, count));
      const ready = await Promise.all(kids.map((k) => k.next('ready', WAIT_MS)));
      const secondHalf = [];
      for (let i = SAMPLE / 2; i < SAMPLE; i++) secondHalf.push(await sampleSubscriber(p.port, p.channel));
      const samples = [...firstHalf, ...secondHalf];
      const subscribed = ready.reduce((a, r) => a + r.subscribed, 0) + samples.filter((s) => !s.error).length;
      const failed = ready.reduce((a, r) => a + r.failed, 0) + samples.filter((s) => s.error).length;
      const errors = Object.assign({}, ...ready.map((r) => r.errors));
      p.subscribeMs = performance.now() - t0;
      p.kids = kids;
      p.samples = samples;
      p.publisher = await RespConn.connect(p.port);
      result.paths[p.name] = { subscribed, failed, errors, subscribeMs: p.subscribeMs };
      groups.push(p);
      log(`${p.name}: ${subscribed} subscribed on ${p.channel} in ${fmtInt(p.subscribeMs)} ms${failed ? `, ${failed} FAILED ${JSON.stringify(errors)}` : ''}`);
    }
    await sleep(500);
    const census = await clientCensus(monitor);
    result.census = { before, during: census };
    for (const p of groups) {
      const n = await monitor.callT(5000, 'PUBSUB', 'NUMSUB', p.channel);
      result.paths[p.name].numsubOnServer = Number(n[1]);
    }
    log(`server: ${census.total} clients, ${census.pubsub} pub/sub; by name ${JSON.stringify(census.pubsubByName)}`);

    for (let round = 1; round <= ROUNDS; round++) {
      log(`round ${round}/${ROUNDS} (load ${loadavg()})`);
      const r = { round };
      for (const p of round % 2 ? groups : [...groups].reverse()) {
        r[p.name] = { burst: await publishRun(p, MESSAGES, false), paced: await publishRun(p, PACED, true) };
        if (respool && (respool.exitCode !== null || respool.signalCode !== null)) throw new Error('respool exited');
      }
      result.rounds.push(r);
    }
    if (respool) {
      result.respool.metrics = await respoolPubsubMetrics(result.respool.adminPort);
      result.respool.logWarnings = logWarnings(path.join(OUT_DIR, 'respool-pubsub.log'));
    }
  } finally {
    for (const p of groups) {
      p.publisher?.close();
      for (const s of p.samples ?? []) s.s.destroy();
      for (const k of p.kids ?? []) k.send({ cmd: 'exit' });
      await Promise.all((p.kids ?? []).map((k) => Promise.race([k.child.exited, sleep(5000)])));
      for (const k of p.kids ?? []) await stop(k.child);
    }
    monitor?.close();
    await stop(respool);
    await server.stop();
  }
  result.finished = new Date().toISOString();
  result.loadavgEnd = loadavg();
  report(result);
}

function gitLog() {
  try {
    return execFileSync('git', ['log', '--oneline', '-n', '5', '--', 'src/handlers/pubsub.ts'], { cwd: ROOT_DIR, encoding: 'utf8' }).trim();
  } catch {
    return '(git log failed)';
  }
}

/** respool's warn/error log lines, counted by message and reason. */
function logWarnings(file) {
  const counts = {};
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    let key;
    try {
      const j = JSON.parse(line);
      key = `${j.msg}${j.reason ? ` (${j.reason})` : ''}`;
    } catch {
      key = line.slice(0, 160);
    }
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return counts;
}

/** respool's /metrics lines about pub/sub (names containing "pubsub" or "subscri"), for the JSON. */
async function respoolPubsubMetrics(adminPort) {
  try {
    const text = await (await fetch(`http://${HOST}:${adminPort}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
    return text.split('\n').filter((l) => l && !l.startsWith('#') && /pubsub|subscri/i.test(l));
  } catch (e) {
    return [`(metrics: ${e.message})`];
  }
}

/** SUBSCRIBE on a fresh connection: ok when the first reply is the subscribe confirmation. */
async function probeSubscribe(port) {
  const s = net.connect({ port, host: HOST });
  try {
    const reply = await new Promise((resolve, reject) => {
      let buf = '';
      const t = setTimeout(() => reject(new Error('no reply to SUBSCRIBE in 3 s')), 3000);
      s.on('connect', () => s.write('*2\r\n$9\r\nSUBSCRIBE\r\n$13\r\nbench:probe:x\r\n'));
      s.on('data', (d) => {
        buf += d.toString('latin1');
        if (buf.startsWith('-') && buf.includes('\r\n')) {
          clearTimeout(t);
          resolve(buf.split('\r\n')[0]);
        } else if (/subscribe/i.test(buf) && buf.includes('bench:probe:x')) {
          clearTimeout(t);
          resolve(buf);
        }
      });
      s.on('error', (e) => {
        clearTimeout(t);
        reject(e);
      });
    });
    return { ok: !reply.startsWith('-'), reply: reply.replace(/\r\n/g, ' ').trim().slice(0, 200) };
  } catch (e) {
    return { ok: false, reply: e.message };
  } finally {
    s.destroy();
  }
}

/** A subscriber child process and its JSON-line channel. */
function startChild(port, channel, count) {
  const args = ['bench/lib/pubsub-subscribers.mjs', JSON.stringify({ port, channel, count, marker: MARKER })];
  const child = spawn(process.execPath, args, { stdin: 'pipe', match: `${process.execPath} bench/lib/pubsub-subscribers.mjs` });
  const queue = [];
  const waiters = [];
  let seen = 0;
  const poll = setInterval(() => {
    const lines = child.out.split('\n');
    while (seen < lines.length - 1) {
      const m = JSON.parse(lines[seen++]);
      const w = waiters.findIndex((x) => x.type === m.type);
      if (w >= 0) waiters.splice(w, 1)[0].resolve(m);
      else queue.push(m);
    }
  }, 5);
  child.exited.then(() => clearInterval(poll));
  return {
    child,
    send: (o) => {
      try {
        child.stdin.write(`${JSON.stringify(o)}\n`);
      } catch {
        /* gone */
      }
    },
    next(type, timeoutMs) {
      const i = queue.findIndex((m) => m.type === type);
      if (i >= 0) return Promise.resolve(queue.splice(i, 1)[0]);
      return new Promise((resolve, reject) => {
        const w = { type, resolve };
        waiters.push(w);
        const t = setTimeout(() => reject(new Error(`subscriber child: no "${type}" in ${timeoutMs} ms (${child.err.slice(0, 300)})`)), timeoutMs);
        const orig = w.resolve;
        w.resolve = (m) => {
          clearTimeout(t);
          orig(m);
        };
        child.exited.then(() => {
          clearTimeout(t);
          reject(new Error(`subscriber child exited: ${child.err.slice(0, 300)}`));
        });
      });
    },
  };
}

/**
 * Publish `n` messages on p.channel (oneAtATime false: written back to back; true: each once every
 * timed subscriber has the one before, then PACED_GAP_MS) and wait until every
 * subscriber has all of them. Returns deliveries, deliveries/s and sample latencies.
 */
async function publishRun(p, n, oneAtATime) {
  const label = oneAtATime ? `one at a time (${n})` : `burst (${n})`;
  for (const k of p.kids) k.send({ cmd: 'expect', n, timeoutMs: WAIT_MS });
  await Promise.all(p.kids.map((k) => k.next('armed', 10_000)));
  for (const s of p.samples) s.lat.clear();
  const firstPublishWall = wall();
  const replies = [];
  for (let seq = 0; seq < n; seq++) {
    replies.push(p.publisher.call('PUBLISH', p.channel, payload(seq, performance.now())));
    if (oneAtATime) {
      const until = Date.now() + 30_000;
      while (Date.now() < until && p.samples.some((sub) => !sub.error && !sub.lat.has(seq))) await sleep(1);
      await sleep(PACED_GAP_MS);
    }
  }
  const doneKids = Promise.all(p.kids.map((k) => k.next('done', WAIT_MS)));
  const receivers = await Promise.all(replies);
  // Sample subscribers: wait until each has every message (or the children are done and 2 s passed).
  const deadline = Date.now() + WAIT_MS;
  let sampleLastWall = 0;
  for (;;) {
    const missing = p.samples.filter((s) => !s.error && s.lat.size < n).length;
    if (missing === 0) {
      sampleLastWall = wall();
      break;
    }
    if (Date.now() > deadline) break;
    await sleep(1);
  }
  const kids = await doneKids;
  const healthySamples = p.samples.filter((s) => !s.error);
  const deliveries = kids.reduce((a, k) => a + k.deliveries, 0) + healthySamples.reduce((a, s) => a + s.lat.size, 0);
  const expected = (kids.reduce((a, k) => a + k.healthy, 0) + healthySamples.length) * n;
  const lastWall = Math.max(sampleLastWall, ...kids.map((k) => k.lastAt ?? 0));
  const seconds = (lastWall - firstPublishWall) / 1000;
  const lat = healthySamples.flatMap((s) => [...s.lat.values()]);
  const out = {
    n, oneAtATime, deliveries, expected, missing: expected - deliveries, seconds,
    deliveriesPerSecond: deliveries / seconds,
    publishReplies: [...new Set(receivers.map(String))].slice(0, 5),
    publishErrors: receivers.filter((x) => typeof x !== 'number').length,
    latency: { n: lat.length, p50: percentile(lat, 50), p99: percentile(lat, 99), max: lat.length ? Math.max(...lat) : NaN },
    timedOut: kids.some((k) => k.timedOut),
  };
  log(`  ${p.name} ${label}: ${fmtInt(deliveries)}/${fmtInt(expected)} delivered in ${fmt(seconds, 3)} s = ${fmtInt(out.deliveriesPerSecond)}/s; ` +
    `sample latency p50 ${fmt(out.latency.p50, 2)} ms p99 ${fmt(out.latency.p99, 2)} ms; PUBLISH replies ${out.publishReplies.join(',')}`);
  return out;
}

function report(result) {
  const R = result.rounds;
  const names = Object.keys(result.paths).filter((n) => R.every((r) => r[n]));
  const med = (f) => median(R.map(f));
  const per = (f, g = fmtInt) => R.map(f).map(g).join(' / ');
  const rows = [];
  for (const name of names) {
    for (const kind of ['burst', 'paced']) {
      const x = (r) => r[name][kind];
      rows.push([
        name, kind === 'burst' ? `burst of ${MESSAGES}` : `${PACED}, one at a time`,
        fmtInt(med((r) => x(r).deliveriesPerSecond)), per((r) => x(r).deliveriesPerSecond),
        fmt(med((r) => x(r).seconds), 3),
        fmt(med((r) => x(r).latency.p50), 2), fmt(med((r) => x(r).latency.p99), 2),
        per((r) => x(r).latency.p99, (v) => fmt(v, 1)),
        R.reduce((a, r) => a + x(r).missing, 0),
        R.reduce((a, r) => a + (x(r).publishErrors ?? 0), 0),
      ]);
    }
  }
  const table = mdTable(['path', 'messages', 'deliveries/s (median)', 'deliveries/s per round', 'first publish → last delivery (s)',
    'latency p50 ms', 'latency p99 ms', 'p99 per round', 'missing deliveries', 'PUBLISH error replies'], rows);
  const c = result.census.during;
  const connRows = [
    ['connections on the server (bench monitor excluded)', fmtInt(c.total)],
    ['of which subscribed (pub/sub clients)', fmtInt(c.pubsub)],
    ...Object.entries(c.pubsubByName).map(([k, v]) => [`pub/sub clients named ${k === '(unnamed)' ? '(no name): direct subscribers' : k}`, fmtInt(v)]),
    ...Object.entries(result.paths).map(([k, v]) => [`PUBSUB NUMSUB on the ${k} path's channel`, fmtInt(v.numsubOnServer)]),
  ];
  const connTable = mdTable([`while ${names.length > 1 ? 'both paths are' : 'everyone is'} subscribed`, 'count'], connRows);
  const subRows = Object.entries(result.paths).map(([k, v]) => [k, fmtInt(v.subscribed), v.failed, fmtInt(v.subscribeMs)]);
  const subTable = mdTable(['path', 'subscribed', 'failed', 'time to subscribe all (ms)'], subRows);
  const skipped = !names.includes('respool');
  const md = [
    '## Pub/sub fan-out: 10,000 subscribers on one channel'.replace('10,000', SUBS.toLocaleString('en-US')),
    '',
    `**Rerun:** \`npm run bench:pubsub\` (${QUICK ? '**BENCH_QUICK=1 smoke run** — ' : ''}${SUBS.toLocaleString('en-US')} subscriber connections per path` +
      `${SUBS < WANT_SUBS ? ` (the open-file limit, ${LIMIT}, allows no more than that; ${WANT_SUBS.toLocaleString('en-US')} wanted)` : ''}, ` +
      `one channel per path, **one standalone valkey-server**; ${PAYLOAD_BYTES}-byte messages; ${R.length} round(s), path order alternating per round). ` +
      `${SAMPLE} subscribers per path are timed in the bench process (half subscribed first, half last: Valkey delivers in subscription order), the others sit in ${CHILDREN} child processes that count messages.` +
      (result.respool ? ` respool (${result.respool.build}): \`${result.respool.cmd}\`.` : ''),
    '',
    `**Noisy machine:** 2 cores shared with other engineers' test runs (load average ${result.loadavgStart} at the start, ${result.loadavgEnd} at the end; 1/5/15 min); ` +
      'the server, respool, the publisher and all subscribers share the same 2 cores, so the receivers\' CPU is part of every figure. Medians over rounds, each round alongside.',
    '',
    ...(skipped ? [
      `**respool half not measured:** ${result.errors.filter((e) => e.startsWith('respool')).join('; ') || 'skipped (BENCH_PUBSUB_SKIP_RESPOOL=1)'}. ` +
        `\`git log --oneline -- src/handlers/pubsub.ts\` at the time: ${result.pubsubHandlerLog ? result.pubsubHandlerLog.split('\n').map((l) => `\`${l}\``).join(', ') : '(none)'}.`,
      '',
    ] : []),
    'Deliveries/s = every subscriber\'s messages / (last delivery − first PUBLISH written); for the one-at-a-time runs it is set by the pace ' +
      `(one message in flight, then a ${PACED_GAP_MS} ms gap), so only the burst rows measure fan-out capacity. ` +
      'Latency: PUBLISH written → message read by a timed subscriber (burst: includes waiting behind the earlier messages of the burst; one at a time: the next message is published once every timed subscriber has the previous one, so no queueing behind earlier messages).',
    '',
    table,
    '',
    subTable,
    '',
    '### Connections on the server',
    '',
    connTable,
    ...(result.respool?.logWarnings && Object.keys(result.respool.logWarnings).length
      ? ['', `respool's log (warn and above) during the run: ${Object.entries(result.respool.logWarnings).map(([k, v]) => `${v}× "${k}"`).join('; ')}.`]
      : []),
    ...(result.errors.filter((e) => !e.startsWith('respool: SUBSCRIBE')).length
      ? ['', `Notes: ${result.errors.filter((e) => !e.startsWith('respool: SUBSCRIBE')).join('; ')}`] : []),
    '',
    `Measured ${result.started} – ${result.finished}. Raw numbers: bench/out/pubsub-fanout.json.`,
  ].join('\n');
  writeOutputs('pubsub-fanout', result, md);
  writeSection('pubsub-fanout', md);
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
