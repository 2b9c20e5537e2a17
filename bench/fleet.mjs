// A fleet of three respool processes (cluster.peers) in front of a 3-primary + 3-replica cluster.
//
// (1) A member's death under load: 12 iovalkey Cluster clients' writes (closed loop, a fresh key
//     each) spread over the three members by their slots; one member is SIGKILLed (or SIGSTOPped:
//     silent, its checks time out) while they run. Measured: when the survivors' CLUSTER SLOTS
//     stop naming it, the clients' errors and when the last one came, and every acknowledged write
//     read back. Client settings: iovalkey's defaults (it retries a closed connection after
//     retryDelayOnFailover, 100 ms, with a slots refresh), and "no retry" (retryDelayOnFailover 0:
//     each error surfaces); both with a 1 s command timeout (iovalkey has none by default, and a
//     paused member would hang them) and slotsRefreshInterval 1 s (iovalkey refreshes its slots
//     on its own only after the errors it retries; without this option never otherwise).
// (2) A split added on one member until its first copy read on another: member B reads the key in
//     a closed loop; RESPOOL SPLIT ADD goes to member A; MONITOR on the primaries shows B's first
//     GET of a copy name (the names are the same on every member: hotkeys/placement.ts bandCopies).
//
//   npm run bench:fleet        (= node bench/fleet.mjs; needs `npm run build` and `npm run build:harness`)
//
// Env: BENCH_FLEET_ROUNDS (3 per death scenario), BENCH_FLEET_SPLITS (10), BENCH_QUICK=1 (1 round, 3 splits).
import net from 'node:net';
import path from 'node:path';
import {
  HOST, ROOT_DIR, RespConn, envFlag, envInt, fmt, fmtInt, log, median, mdTable, sleep, spawn, stop, uniquePort, waitForPing, writeOutputs,
} from './lib/common.mjs';
import { writeSection } from './lib/results-file.mjs';

const QUICK = envFlag('BENCH_QUICK');
const ROUNDS = envInt('BENCH_FLEET_ROUNDS', QUICK ? 1 : 3);
const SPLITS = envInt('BENCH_FLEET_SPLITS', QUICK ? 3 : 10);
const CLIENTS = 12;
const OP_TIMEOUT_MS = 1000;
const SLOTS_REFRESH_MS = 1000;

const { startCluster } = await import(path.join(ROOT_DIR, 'build/harness/valkey-processes.js'));
const { bandCopies } = await import(path.join(ROOT_DIR, 'dist/hotkeys/placement.js'));
const { Cluster } = await import('iovalkey');
const calculateSlot = (await import('cluster-key-slot')).default;

const cluster = await startCluster({ primaries: 3, replicasPerPrimary: 1 });
const ports = [await uniquePort(), await uniquePort(), await uniquePort()];
const peers = ports.map((p) => `${HOST}:${p}`).join(',');
const seed = `${cluster.nodes[0].host}:${cluster.nodes[0].port}`;
const argsFor = (port) => ['bin/respool.js', '--listen', `${HOST}:${port}`, '--upstream', seed, '--cluster-peer', peers, '--log-level', 'warn'];
const env = { ...process.env, RESPOOL_CLUSTER_PEER_REJOIN_AFTER_MS: '1s' };
const members = [];
const startMember = async (i) => {
  members[i] = spawn('node', argsFor(ports[i]), { env });
  await waitForPing(ports[i], { child: members[i], what: `member ${i}` });
};
await Promise.all([0, 1, 2].map(startMember));

async function slotOwners(port) {
  const c = await RespConn.connect(port);
  try {
    const reply = await c.callT(1000, 'CLUSTER', 'SLOTS');
    return new Set(reply.map((r) => r[2][1]));
  } finally {
    c.close();
  }
}

async function untilFleetWhole() {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    const views = await Promise.all(ports.map((p) => slotOwners(p).catch(() => new Set())));
    if (views.every((v) => v.size === 3)) return;
    await sleep(50);
  }
  throw new Error('the fleet did not see three members with slots');
}

// ---------------------------------------------------------------- (1) a member's death

async function deathRound(scenario, round) {
  await untilFleetWhole();
  const victim = 2;
  const client = new Cluster([{ host: HOST, port: ports[0] }], {
    redisOptions: { commandTimeout: OP_TIMEOUT_MS, maxRetriesPerRequest: 1 },
    slotsRefreshInterval: SLOTS_REFRESH_MS, // iovalkey has no periodic refresh by default
    ...(scenario.noRetry ? { retryDelayOnFailover: 0 } : {}),
  });
  await client.set('warm', '1');
  const acked = new Map();
  const errors = [];
  let running = true;
  let n = 0;
  const loops = Array.from({ length: CLIENTS }, async () => {
    while (running) {
      const key = `fleet:${scenario.name}:${round}:${n++}`;
      try {
        if ((await client.set(key, key)) === 'OK') acked.set(key, key);
      } catch (e) {
        errors.push({ at: Date.now(), message: String(e.message ?? e).replace(/\d+/g, 'N').slice(0, 80) });
        await sleep(5);
      }
    }
  });
  await sleep(2000);
  const diedAt = Date.now();
  if (scenario.signal === 'SIGKILL') members[victim].kill('SIGKILL');
  else members[victim].kill('SIGSTOP');
  let movedAt = 0;
  while (Date.now() - diedAt < 10_000) {
    if (!movedAt) {
      const [a, b] = await Promise.all([slotOwners(ports[0]), slotOwners(ports[1])]);
      if (!a.has(ports[victim]) && !b.has(ports[victim])) movedAt = Date.now();
    }
    await sleep(movedAt ? 100 : 10);
  }
  running = false;
  await Promise.all(loops);
  client.disconnect();
  // Every acknowledged write, read back through a survivor.
  const reader = await RespConn.connect(ports[0]);
  let lost = 0;
  for (const [k, v] of acked) if ((await reader.call('GET', k)) !== v) lost++;
  reader.close();
  // Back to three members.
  if (scenario.signal === 'SIGKILL') await startMember(victim);
  else members[victim].kill('SIGCONT');
  const after = errors.filter((e) => e.at >= diedAt);
  const kinds = {};
  for (const e of after) kinds[e.message] = (kinds[e.message] ?? 0) + 1;
  return {
    movedMs: movedAt - diedAt,
    errors: after.length,
    lastErrorMs: after.length === 0 ? 0 : Math.max(...after.map((e) => e.at)) - diedAt,
    acked: acked.size,
    lost,
    kinds,
  };
}

const scenarios = [
  { name: 'kill-default', signal: 'SIGKILL', noRetry: false, what: 'SIGKILL, iovalkey defaults' },
  { name: 'kill-noretry', signal: 'SIGKILL', noRetry: true, what: 'SIGKILL, no client retry' },
  { name: 'stop-default', signal: 'SIGSTOP', noRetry: false, what: 'SIGSTOP (silent), iovalkey defaults' },
];
const deaths = [];
for (const s of scenarios) {
  const rounds = [];
  for (let r = 0; r < ROUNDS; r++) {
    const result = await deathRound(s, r);
    log(`${s.what}, round ${r + 1}: slots moved after ${result.movedMs} ms; ${result.errors} errors, the last ${result.lastErrorMs} ms after; ${result.lost} of ${result.acked} acknowledged writes lost`);
    rounds.push(result);
  }
  deaths.push({ scenario: s, rounds });
}

// ---------------------------------------------------------------- (2) a split, A → B

/** MONITOR on every primary: resolves with the first GET of one of `names` after `since` (server time, ms). */
function firstCopyGet(primaries, names, since) {
  const wanted = new Set(names);
  const sockets = [];
  const seen = new Promise((resolve) => {
    for (const node of primaries) {
      const s = net.connect({ host: node.host, port: node.port });
      sockets.push(s);
      let buf = '';
      s.on('connect', () => s.write('MONITOR\r\n'));
      s.on('error', () => {});
      s.on('data', (d) => {
        buf += d.toString('latin1');
        let i;
        while ((i = buf.indexOf('\r\n')) >= 0) {
          const line = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const m = /^\+(\d+\.\d+) \[\d+ [^\]]+\] "GET" "([^"]*)"/.exec(line);
          if (m && wanted.has(m[2]) && Number(m[1]) * 1000 >= since) resolve(Number(m[1]) * 1000);
        }
      });
    }
  });
  return { seen, close: () => sockets.forEach((s) => s.destroy()) };
}

const splits = [];
{
  await untilFleetWhole();
  const primaries = (await cluster.shards()).map((s) => s.primary);
  const a = await RespConn.connect(ports[0]);
  const b = await RespConn.connect(ports[1]);
  for (let i = 0; i < SPLITS; i++) {
    const key = `fleet:split:${i}:${Date.now()}`;
    await a.call('SET', key, 'v');
    const names = bandCopies(Buffer.from(key), 3).slice(1).map((x) => x.toString('latin1'));
    const t0 = Date.now();
    const monitor = firstCopyGet(primaries, names, t0);
    await sleep(50); // MONITOR is on
    let reading = true;
    const reader = (async () => {
      while (reading) await b.call('GET', key);
    })();
    const sentAt = Date.now();
    const reply = await a.call('RESPOOL', 'SPLIT', 'ADD', key, '3');
    const answeredAt = Date.now();
    const firstRead = await Promise.race([monitor.seen, sleep(5000).then(() => NaN)]);
    reading = false;
    await reader;
    monitor.close();
    splits.push({ reply: String(reply), addMs: answeredAt - sentAt, firstCopyReadMs: firstRead - sentAt });
    log(`split ${i + 1}: ADD answered after ${answeredAt - sentAt} ms, B's first copy read ${fmt(firstRead - sentAt, 1)} ms after it was sent`);
    await a.call('RESPOOL', 'SPLIT', 'DEL', key);
  }
  a.close();
  b.close();
}

for (const m of members) {
  m.kill('SIGCONT');
  await stop(m);
}
await cluster.stop();

// ---------------------------------------------------------------- results

const deathRows = deaths.map(({ scenario, rounds }) => [
  scenario.what,
  rounds.map((r) => fmtInt(r.movedMs)).join(' / '),
  rounds.map((r) => fmtInt(r.errors)).join(' / '),
  rounds.map((r) => fmtInt(r.lastErrorMs)).join(' / '),
  fmtInt(median(rounds.map((r) => r.lastErrorMs))),
  `${fmtInt(rounds.reduce((n, r) => n + r.lost, 0))} of ${fmtInt(rounds.reduce((n, r) => n + r.acked, 0))}`,
]);
const kinds = deaths.map(({ scenario, rounds }) => {
  const all = {};
  for (const r of rounds) for (const [k, v] of Object.entries(r.kinds)) all[k] = (all[k] ?? 0) + v;
  const top = Object.entries(all).sort((x, y) => y[1] - x[1]).slice(0, 3).map(([k, v]) => `\`${k}\` ×${v}`).join('; ');
  return `- ${scenario.what}: ${top || 'none'}`;
});
const markdown = `## A fleet of three: a member's death, and a split across members (issue 20)

**Rerun:** \`npm run bench:fleet\` (3 respool processes, \`--cluster-peer\` each other, default timings (checks every 0.5 s ±50%, 0.5 s timeout, down after 1.5 s) but \`cluster.peerRejoinAfterMs\` 1 s; a 3 primaries + 3 replicas cluster; ${CLIENTS} concurrent writers in one iovalkey \`Cluster\` client seeded with member 0, \`commandTimeout\` ${OP_TIMEOUT_MS} ms, \`slotsRefreshInterval\` ${SLOTS_REFRESH_MS} ms; member 2 dies 2 s into each round and is brought back after it; ${ROUNDS} rounds per row, values per round).

| how member 2 died | its slots gone from both survivors' CLUSTER SLOTS (ms) | client errors | last client error after the death (ms) | median (ms) | acknowledged writes lost |
| :--- | ---: | ---: | ---: | ---: | ---: |
${deathRows.map((r) => `| ${r.join(' | ')} |`).join('\n')}

Errors seen:

${kinds.join('\n')}

A killed member is known dead at once (its check connection drops and a new dial is refused); a
silent one after \`cluster.peerDownAfterMs\` (1.5 s) without an answer. A client sees errors for
commands on their way to the dead member, and until its next slots refresh: iovalkey retries a
closed connection after a slots refresh (\`retryDelayOnFailover\`, 100 ms), and otherwise
refreshes only every \`slotsRefreshInterval\` — an option with no default: without it a client
that does not retry keeps sending the dead member's slots to it for good, whatever the fleet says.

**A split added on member A, until member B reads a copy** (${SPLITS} keys, one at a time; B reads
the key in a closed loop; MONITOR on the primaries sees B's first \`GET\` of a copy name):

${mdTable(['', 'median (ms)', 'min', 'max'], [
  ['RESPOOL SPLIT ADD on A answered', fmt(median(splits.map((s) => s.addMs)), 1), fmt(Math.min(...splits.map((s) => s.addMs)), 1), fmt(Math.max(...splits.map((s) => s.addMs)), 1)],
  ['B\'s first read of a copy (from ADD sent)', fmt(median(splits.map((s) => s.firstCopyReadMs)), 1), fmt(Math.min(...splits.map((s) => s.firstCopyReadMs)), 1), fmt(Math.max(...splits.map((s) => s.firstCopyReadMs)), 1)],
])}

ADD answers once every member applied the rule (fleet state version, compare-and-set in the
upstream, members' beats every 250 ms, or at once on the change notice) and the copies were filled
with every member's writes held; B reads copies from the \`filled\` notice on.

Measured ${new Date().toISOString()}.`;
writeOutputs('fleet', { deaths, splits }, markdown);
writeSection('fleet', markdown);
log('done');
process.exit(0);
