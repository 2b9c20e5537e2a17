// Commands over keys in several slots through respool (issue 19), each next to the same command
// over keys of one slot (one hash tag), through the same respool in front of a 3-primary cluster:
//
//  tx     a 10-command MULTI … EXEC (INCR, SET, GET, APPEND, STRLEN over 10 keys): the keys in 10
//         slots on all 3 primaries (respool writes one MULTI … EXEC block per slot and merges
//         them) vs the 10 keys under one tag (one block). CLIENTS clients, one transaction in
//         flight each. Transactions/s, p50/p99 of EXEC (from MULTI sent to EXEC's reply), respool
//         CPU µs per transaction and per command (12 requests: MULTI, 10 commands, EXEC).
//  wake   BLPOP over 5 lists — in 5 slots (one lease per slot, the others cancelled when one
//         answers) vs under one tag (one lease) — woken by one RPUSH to a random one of them,
//         WAKES (500) times: wake latency = from the RPUSH written to the BLPOP reply read, p50/p99;
//         respool CPU µs per BLPOP (the whole cycle: immediate checks, leases, wake, cancels).
//  sunion SUNION of 3 sets of 20 members: 3 slots (DUMP, RESTORE on one node, SUNION, DEL) vs one
//         slot (forwarded). CLIENTS clients, one in flight. Reads/s, p50/p99, respool CPU µs.
//
//   npm run bench:cross-slot    (= npm run build && npm run build:harness && node bench/cross-slot.mjs)
//
// Env: BENCH_QUICK=1 (smoke), BENCH_ROUNDS (5), BENCH_CLIENTS (20), BENCH_CROSS_SLOT_SECONDS (5
//      per tx / sunion run), BENCH_CROSS_SLOT_WAKES (500 per wake run), RESPOOL_BENCH_BIN.
// Rounds alternate (several slots, one slot, several, one …); medians over rounds, each round's
// value shown. Correctness: every EXEC array, BLPOP reply and SUNION reply is checked.
// Everything on 127.0.0.1, started here and stopped at the end.
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { execFileSync } from 'node:child_process';
import {
  HOST, OUT_DIR, ROOT_DIR, RespConn, envFlag, envInt, fmt, fmtInt, log, mdTable, median, percentile,
  shellLine, sleep, spawn, stop, uniquePort, waitForPing, writeOutputs,
} from './lib/common.mjs';
import { cpuSeconds } from './lib/measure.mjs';
import { writeSection } from './lib/results-file.mjs';
import { RESPOOL_BIN, respoolBuildLabel } from './lib/respool-build.mjs';

const QUICK = envFlag('BENCH_QUICK');
const ROUNDS = envInt('BENCH_ROUNDS', QUICK ? 1 : 5);
const CLIENTS = envInt('BENCH_CLIENTS', 20);
const RUN_S = envInt('BENCH_CROSS_SLOT_SECONDS', QUICK ? 1 : 5);
const WAKES = envInt('BENCH_CROSS_SLOT_WAKES', QUICK ? 50 : 500);

const { startCluster } = await import(path.join(ROOT_DIR, 'build/harness/valkey-processes.js'));
const calculateSlot = (await import('cluster-key-slot')).default;

const loadavg = () => fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

/** `n` key names in n distinct slots, round robin over the primaries (ownerOf: slot → port). */
function keysOverSlots(prefix, n, ownerOf, ports) {
  const out = [];
  const slots = new Set();
  for (let i = 0; out.length < n; i++) {
    const key = `${prefix}${i}`;
    const slot = calculateSlot(key);
    if (slots.has(slot) || ownerOf[slot] !== ports[out.length % ports.length]) continue;
    slots.add(slot);
    out.push(key);
  }
  return out;
}

/** The 10 commands of one transaction over `keys` (10 of them), and a check of EXEC's array. */
function transaction(keys, round) {
  const cmds = keys.map((k, i) => {
    switch (i % 5) {
      case 0: return ['INCR', `${k}:n`];
      case 1: return ['SET', k, `r${round}`];
      case 2: return ['GET', keys[i - 1]];
      case 3: return ['APPEND', k, 'x'];
      default: return ['STRLEN', keys[i - 1]];
    }
  });
  const check = (reply) => Array.isArray(reply) && reply.length === 10 && reply[1] === 'OK' && reply[2] === `r${round}` && typeof reply[0] === 'number';
  return { cmds, check };
}

/** CLIENTS connections each running `op(conn)` back to back for `seconds`; `ok(result)` checks each answer. */
async function driveClosedLoop(port, seconds, op, ok) {
  const conns = await Promise.all(Array.from({ length: CLIENTS }, () => RespConn.connect(port)));
  const lat = [];
  let n = 0;
  let bad = 0;
  const t0 = performance.now();
  const deadline = t0 + seconds * 1000;
  await Promise.all(conns.map(async (c) => {
    while (performance.now() < deadline) {
      const a = performance.now();
      const result = await op(c);
      lat.push(performance.now() - a);
      n++;
      if (!ok(result)) bad++;
    }
  }));
  const s = (performance.now() - t0) / 1000;
  for (const c of conns) c.close();
  return { n, perS: n / s, p50: percentile(lat, 50), p99: percentile(lat, 99), bad, seconds: s };
}

function driveTx(port, keys, round, seconds) {
  const { cmds, check } = transaction(keys, round);
  return driveClosedLoop(port, seconds,
    (c) => Promise.all([c.call('MULTI'), ...cmds.map((cmd) => c.call(...cmd)), c.call('EXEC')]),
    (replies) => check(replies[replies.length - 1]));
}

function driveSunion(port, keys, seconds) {
  return driveClosedLoop(port, seconds, (c) => c.call('SUNION', ...keys), (reply) => Array.isArray(reply) && reply.length === 40);
}

/** WAKES times: BLPOP over `lists` (blocked), then one RPUSH to a random one; wake latency per wake. */
async function driveWake(port, lists, blockedOnNodes) {
  const consumer = await RespConn.connect(port);
  const producer = await RespConn.connect(port);
  const lat = [];
  let bad = 0;
  for (let i = 0; i < WAKES; i++) {
    const list = lists[Math.floor(Math.random() * lists.length)];
    const reply = consumer.call('BLPOP', ...lists, '0');
    await blockedOnNodes(); // every lease blocked on its node: the wake, not the set-up, is timed
    const a = performance.now();
    const pushed = producer.call('RPUSH', list, `w${i}`);
    const r = await reply;
    lat.push(performance.now() - a);
    await pushed;
    if (!Array.isArray(r) || r[0] !== list || r[1] !== `w${i}`) bad++;
  }
  consumer.close();
  producer.close();
  return { wakes: WAKES, p50: percentile(lat, 50), p99: percentile(lat, 99), bad };
}

async function main() {
  const result = { bench: 'cross-slot', started: new Date().toISOString(), loadavgStart: loadavg(), quick: QUICK,
    config: { rounds: ROUNDS, clients: CLIENTS, runSeconds: RUN_S, wakes: WAKES }, machine: machine(), rounds: [], errors: [] };
  let cluster;
  let respool;
  const admin = [];
  try {
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 0 });
    const primaries = await cluster.primaries();
    const ownerOf = new Array(16384);
    for (const s of await cluster.shards()) for (const [a, b] of s.slots) for (let i = a; i <= b; i++) ownerOf[i] = s.primary.port;
    const ports = primaries.map((p) => p.port);
    const port = await uniquePort();
    const args = [RESPOOL_BIN, '--listen', `${HOST}:${port}`, '--upstream', ports.map((p) => `${HOST}:${p}`).join(','), '--mode', 'cluster', '--log-level', 'warn'];
    fs.mkdirSync(OUT_DIR, { recursive: true });
    respool = spawn(process.execPath, args, { logFile: path.join(OUT_DIR, 'respool-cross-slot.log') });
    await waitForPing(port, { child: respool, what: 'respool', timeoutMs: 15_000 });
    result.respool = { cmd: shellLine('node', args), build: respoolBuildLabel() };
    for (const p of ports) admin.push(await RespConn.connect(p));
    const nodeBlocked = async (n) => {
      for (;;) {
        let b = 0;
        for (const c of admin) b += Number(/blocked_clients:(\d+)/.exec(await c.call('INFO', 'clients'))[1]);
        if (b >= n) return;
        await sleep(1);
      }
    };

    const tx = { several: keysOverSlots('tx:', 10, ownerOf, ports), one: Array.from({ length: 10 }, (_, i) => `{tx}:${i}`) };
    const wake = { several: keysOverSlots('wake:', 5, ownerOf, ports), one: Array.from({ length: 5 }, (_, i) => `{wake}:${i}`) };
    const sets = { several: keysOverSlots('set:', 3, ownerOf, ports), one: ['{set}:0', '{set}:1', '{set}:2'] };
    const setup = await RespConn.connect(port);
    for (const group of [sets.several, sets.one]) {
      for (let i = 0; i < 3; i++) await setup.call('SADD', group[i], ...Array.from({ length: 20 }, (_, j) => `m${i * 10 + j}`)); // 40 distinct members
    }
    setup.close();
    result.keys = { tx, wake, sets, slots: Object.fromEntries(Object.entries({ tx, wake, sets }).map(([k, v]) => [k, new Set(v.several.map((x) => calculateSlot(x))).size])) };

    // warm-up (JIT, leases, links): not recorded
    await driveTx(port, tx.several, 0, QUICK ? 0.3 : 1);
    await driveTx(port, tx.one, 0, QUICK ? 0.3 : 1);
    await driveSunion(port, sets.several, QUICK ? 0.3 : 1);

    const cpuPer = async (fn, count) => {
      const c0 = cpuSeconds(respool.pid);
      const r = await fn();
      return { ...r, cpuUs: ((cpuSeconds(respool.pid) - c0) * 1e6) / count(r) };
    };
    for (let round = 1; round <= ROUNDS; round++) {
      log(`round ${round}/${ROUNDS} (load ${loadavg()})`);
      const runs = {};
      for (const kind of ['several', 'one']) {
        runs[`tx-${kind}`] = await cpuPer(() => driveTx(port, tx[kind], round, RUN_S), (r) => r.n);
        runs[`wake-${kind}`] = await cpuPer(() => driveWake(port, wake[kind], () => nodeBlocked(kind === 'several' ? 5 : 1)), (r) => r.wakes);
        runs[`sunion-${kind}`] = await cpuPer(() => driveSunion(port, sets[kind], RUN_S), (r) => r.n);
        for (const name of [`tx-${kind}`, `wake-${kind}`, `sunion-${kind}`]) {
          const r = runs[name];
          log(`  ${name.padEnd(14)} ${r.perS ? `${fmtInt(r.perS)}/s ` : ''}p50 ${fmt(r.p50, 3)} ms p99 ${fmt(r.p99, 3)} ms respool CPU ${fmt(r.cpuUs, 1)} µs each; bad ${r.bad}`);
          if (r.bad) result.errors.push(`round ${round} ${name}: ${r.bad} wrong replies`);
        }
      }
      result.rounds.push(runs);
      if (respool.exitCode !== null) throw new Error('respool exited');
    }
  } finally {
    for (const c of admin) c.close();
    await stop(respool);
    await cluster?.stop();
  }
  result.finished = new Date().toISOString();
  result.loadavgEnd = loadavg();
  report(result);
}

function machine() {
  const cpu = (fs.readFileSync('/proc/cpuinfo', 'utf8').match(/model name\s*:\s*(.*)/)?.[1] ?? os.cpus()[0]?.model ?? '?').trim();
  let valkey = '?';
  try {
    valkey = execFileSync('valkey-server', ['--version'], { encoding: 'utf8' }).trim().replace(/ sha=.*/, '');
  } catch { /* not found */ }
  return { nproc: os.availableParallelism?.() ?? os.cpus().length, cpu, kernel: `${os.type()} ${os.release()}`, node: process.version, valkey };
}

function report(result) {
  const R = result.rounds;
  const med = (name, f) => median(R.map((r) => f(r[name])));
  const each = (name, f, d) => R.map((r) => fmt(f(r[name]), d)).join(' / ');
  const ratio = (a, b, f) => median(R.map((r) => f(r[a]) / f(r[b])));
  const rows = [];
  const add = (what, kind, name, unit, perCommand) => {
    rows.push([
      what, kind,
      unit ? `${fmtInt(med(name, (x) => x.perS))} (${each(name, (x) => x.perS, 0)})` : '—',
      `${fmt(med(name, (x) => x.p50), 3)} (${each(name, (x) => x.p50, 3)})`,
      `${fmt(med(name, (x) => x.p99), 3)} (${each(name, (x) => x.p99, 3)})`,
      `${fmt(med(name, (x) => x.cpuUs), 1)} (${each(name, (x) => x.cpuUs, 0)})`,
      perCommand ? fmt(med(name, (x) => x.cpuUs) / perCommand, 2) : '—',
    ]);
  };
  add('10-command MULTI … EXEC', `10 slots, 3 primaries (${R.length ? 'split into 10 blocks' : ''})`, 'tx-several', 'tx', 12);
  add('10-command MULTI … EXEC', '1 slot (one tag)', 'tx-one', 'tx', 12);
  add('BLPOP over 5 lists, woken by one RPUSH', '5 slots, 3 primaries (5 leases)', 'wake-several', null, 0);
  add('BLPOP over 5 lists, woken by one RPUSH', '1 slot (one lease)', 'wake-one', null, 0);
  add('SUNION of 3 sets of 20', '3 slots (copies on one node)', 'sunion-several', 'read', 0);
  add('SUNION of 3 sets of 20', '1 slot (forwarded)', 'sunion-one', 'read', 0);
  const table = mdTable(
    ['command', 'keys', 'per second, median (per round)', 'p50 ms (per round)', 'p99 ms (per round)', 'respool CPU µs per command (per round)', 'respool CPU µs per request (tx: ÷ 12)'],
    rows, ['l', 'l', 'r', 'r', 'r', 'r', 'r'],
  );
  const m = result.machine;
  const md = [
    '## Commands over keys in several slots (issue 19): transactions, blocking pops, reads',
    '',
    `**Rerun:** \`npm run bench:cross-slot\` (= \`npm run build && npm run build:harness && node bench/cross-slot.mjs\`; ${result.quick ? '**BENCH_QUICK=1 smoke run — not for comparison** — ' : ''}` +
      `${R.length} rounds, each running every command over several slots and then over one slot; ${CLIENTS} raw RESP clients per transaction / SUNION run (one in flight each, ${RUN_S} s), ` +
      `${WAKES} wakes per BLPOP run (one consumer, one producer; the RPUSH is sent once every lease is blocked on its node). respool (${result.respool.build}): \`${result.respool.cmd}\` ` +
      'in front of 3 primaries without replicas (bench harness, build/harness/valkey-processes.js). Knobs in the header of bench/cross-slot.mjs.',
    '',
    `**Machine:** ${m.nproc} cores (${m.cpu}), ${m.kernel}, node ${m.node}, ${m.valkey}; load average ${result.loadavgStart} at the start, ${result.loadavgEnd} at the end — shared and noisy; every process on the same cores. **Date:** ${result.started} – ${result.finished}.`,
    '',
    table,
    '',
    `**Ratios (median of per-round ratios), several slots / one slot:** transactions/s ${fmt(ratio('tx-several', 'tx-one', (x) => x.perS), 2)}, ` +
      `EXEC p99 ${fmt(ratio('tx-several', 'tx-one', (x) => x.p99), 2)}, respool CPU per transaction ${fmt(ratio('tx-several', 'tx-one', (x) => x.cpuUs), 2)}; ` +
      `BLPOP wake p50 ${fmt(ratio('wake-several', 'wake-one', (x) => x.p50), 2)}, p99 ${fmt(ratio('wake-several', 'wake-one', (x) => x.p99), 2)}, respool CPU per BLPOP ${fmt(ratio('wake-several', 'wake-one', (x) => x.cpuUs), 2)}; ` +
      `SUNION/s ${fmt(ratio('sunion-several', 'sunion-one', (x) => x.perS), 2)}, respool CPU per SUNION ${fmt(ratio('sunion-several', 'sunion-one', (x) => x.cpuUs), 2)}.`,
    '',
    `**Checked:** every EXEC array, BLPOP reply and SUNION reply; wrong replies: ${result.errors.length === 0 ? 'none' : result.errors.join('; ')}.`,
    '',
    '**What it shows.** A transaction over 10 slots is written as 10 MULTI … EXEC blocks (30 upstream requests instead of 12) on 3 primaries at once, ' +
      'and costs respool about what one block does: its CPU goes mostly to the 12 client requests it reads and answers, not to the blocks. ' +
      'A BLPOP over 5 slots is woken as fast as the first slot answers (its reply goes out before the 4 other leases are cancelled); ' +
      'each BLPOP cycle costs more CPU — the immediate checks (EXISTS of the later runs, the first run inside MULTI … EXEC), ' +
      '5 leases instead of 1, and 4 CLIENT UNBLOCKs with their nil replies. ' +
      'A SUNION over 3 slots takes two round trips (the DUMPs, then RESTORE, SUNION and DEL on one node) instead of one. ' +
      `CPU comes from /proc in 10 ms ticks: ±${fmt(10_000 / WAKES, 0)} µs per BLPOP at ${WAKES} wakes.`,
  ].join('\n');
  writeOutputs('cross-slot', result, md);
  if (!result.quick) writeSection('cross-slot', md);
  log(md);
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
