// What a user's upstream identity costs (issue 18): GET throughput and respool CPU per request
// for a restricted user whose commands run as its mirrored identity, against a full-access user
// on respool's own links, in the same run; and how many upstream connections a node holds with
// 1, 10 and 100 such users.
//
//   npm run bench:identity      (= npm run build && node bench/identity.mjs)
//
// Env: BENCH_QUICK=1 (smoke run), BENCH_ROUNDS (5), BENCH_REQUESTS (200,000 per run at P=1,
//      ×4 at P=16), BENCH_CLIENTS (50).
//
// Set-up: one valkey-server; respool --mode standalone in front of it with a config file:
// `default` (nopass +@all ~* &*: respool's own links) and `app` (`on >secret +@all ~key:* &*`,
// restricted by its key pattern, users[].upstream: mirror), acl.upstream: mirror for the users
// made at run time. valkey-benchmark -t get -r 100000 -d 100 -c CLIENTS -P 1|16, once as default
// and once with `--user app -a secret`, alternating which goes first each round. CPU: utime +
// stime of respool's process (/proc/PID/stat) over each run, per request.
// Links: N users made with ACL SETUSER (mirrored), 5 clients each running one GET; the node's
// CLIENT LIST then counts respool's connections by user (its own: name=respool; identities:
// user=respool.<name>).
import fs from 'node:fs';
import path from 'node:path';
import {
  HOST, OUT_DIR, RespConn, envFlag, envInt, fmt, fmtInt, log, makeTmpRoot, mdTable, median, run, shellLine, spawn, startValkey,
  stop, uniquePort, waitForPing, writeOutputs,
} from './lib/common.mjs';
import { cpuSeconds, parseBenchmarkText } from './lib/measure.mjs';
import { writeSection } from './lib/results-file.mjs';
import { RESPOOL_BIN, respoolBuildLabel } from './lib/respool-build.mjs';

const QUICK = envFlag('BENCH_QUICK');
const ROUNDS = envInt('BENCH_ROUNDS', QUICK ? 1 : 5);
const REQUESTS = envInt('BENCH_REQUESTS', QUICK ? 30_000 : 200_000);
const CLIENTS = envInt('BENCH_CLIENTS', 50);
const USER_COUNTS = [1, 10, 100];

const tmp = makeTmpRoot('identity-');
const valkey = await startValkey({ tmpRoot: tmp });
const port = await uniquePort();
const config = path.join(tmp, 'respool.yaml');
fs.writeFileSync(config, [
  `listen: "${HOST}:${port}"`,
  `upstreams: ["${HOST}:${valkey.port}"]`,
  'mode: standalone',
  'logLevel: warn',
  'acl: { upstream: mirror }',
  'users:',
  '  - { name: default, rules: "on nopass +@all ~* &*" }',
  '  - { name: app, rules: "on >secret +@all ~key:* &*", upstream: mirror }',
  '  - { name: plain, rules: "on >plain +@all ~key:* &*", upstream: none }',
  '',
].join('\n'));
const respoolArgs = [RESPOOL_BIN, '--config', config];
fs.mkdirSync(OUT_DIR, { recursive: true });
const respool = spawn(process.execPath, respoolArgs, { logFile: path.join(OUT_DIR, 'identity-respool.log') });
await waitForPing(port, { child: respool, what: 'respool', timeoutMs: 15_000 });
const pid = respool.pid;

/** who: full (default user), restricted (plain: respool's ACL check, respool's own links), identity (app: the check and its own links). */
const bench = async (pipeline, who) => {
  const n = pipeline === 1 ? REQUESTS : REQUESTS * 4;
  const args = ['-h', HOST, '-p', String(port), '-t', 'get', '-n', String(n), '-c', String(CLIENTS), '-P', String(pipeline), '-r', '100000', '-d', '100'];
  if (who === 'identity') args.push('--user', 'app', '-a', 'secret');
  if (who === 'restricted') args.push('--user', 'plain', '-a', 'plain');
  const before = cpuSeconds(pid);
  const { out: stdout } = await run('valkey-benchmark', args, { timeoutMs: 600_000 });
  const cpu = cpuSeconds(pid) - before;
  const r = parseBenchmarkText(stdout).GET ?? {};
  return { rps: r.rps, p99Ms: r.p99Ms, cpuUsPerRequest: (cpu / n) * 1e6, requests: n, cmd: shellLine('valkey-benchmark', args) };
};

log(`identity bench: ${ROUNDS} rounds, ${REQUESTS} GETs at P=1 (×4 at P=16), ${CLIENTS} clients; respool ${respoolBuildLabel()}`);
await run('valkey-benchmark', ['-h', HOST, '-p', String(port), '-t', 'set', '-n', '100000', '-r', '100000', '-d', '100', '-c', '20', '-P', '16'], { timeoutMs: 120_000 });
const rounds = [];
for (let r = 0; r < ROUNDS; r++) {
  const round = {};
  for (const pipeline of [1, 16]) {
    const whos = ['full', 'restricted', 'identity'];
    const order = [...whos.slice(r % 3), ...whos.slice(0, r % 3)]; // each goes first in turn
    for (const who of order) round[`${who}-P${pipeline}`] = await bench(pipeline, who);
  }
  rounds.push(round);
  log(`round ${r + 1}: ${Object.entries(round).map(([k, v]) => `${k} ${fmtInt(v.rps)}/s ${fmt(v.cpuUsPerRequest, 1)}µs`).join(', ')}`);
}

// Links per node with N users.
const admin = await RespConn.connect(port);
const node = await RespConn.connect(valkey.port);
const census = async () => {
  const list = String(await node.call('CLIENT', 'LIST')).split('\n').filter(Boolean);
  const own = list.filter((l) => / name=respool /.test(l) && / user=default /.test(l)).length;
  // The users made here (u0, u1, …); app's links from the throughput runs are left out.
  const identity = list.filter((l) => / user=respool\.u\d+ /.test(l)).length;
  const users = new Set(list.map((l) => / user=(respool\.u\d+) /.exec(l)?.[1]).filter(Boolean)).size;
  return { own, identity, identityUsers: users, total: list.length - 1 }; // minus this census connection (app's links included)
};
const links = [];
let made = 0;
for (const count of USER_COUNTS) {
  for (; made < count; made++) await admin.call('ACL', 'SETUSER', `u${made}`, 'on', `>p${made}`, '+@all', `~u${made}:*`, '&*');
  const conns = [];
  for (let u = 0; u < count; u++) {
    for (let k = 0; k < 5; k++) {
      const c = await RespConn.connect(port);
      await c.call('AUTH', `u${u}`, `p${u}`);
      await c.call('GET', `u${u}:${k}`);
      conns.push(c);
    }
  }
  const c = await census();
  links.push({ users: count, clients: conns.length, ...c });
  log(`${count} users, ${conns.length} clients: node connections from respool ${c.total} (own ${c.own}, identities ${c.identity} over ${c.identityUsers} users)`);
  for (const conn of conns) conn.close();
}
admin.close();
node.close();
await stop(respool);
await stop(valkey.child);

const med = (key, f) => median(rounds.map((r) => r[key][f]));
const rows = [];
for (const pipeline of [1, 16]) {
  const full = (f) => med(`full-P${pipeline}`, f);
  const plain = (f) => med(`restricted-P${pipeline}`, f);
  const id = (f) => med(`identity-P${pipeline}`, f);
  rows.push([`P=${pipeline}`, fmtInt(full('rps')), fmtInt(plain('rps')), fmtInt(id('rps')), `${fmt(id('rps') / full('rps'), 2)}×`,
    fmt(full('cpuUsPerRequest'), 2), fmt(plain('cpuUsPerRequest'), 2), fmt(id('cpuUsPerRequest'), 2), `${fmt(id('cpuUsPerRequest') / full('cpuUsPerRequest'), 2)}×`,
    `${fmt(full('p99Ms'), 3)} / ${fmt(plain('p99Ms'), 3)} / ${fmt(id('p99Ms'), 3)}`]);
}
const perRound = rounds.map((r, i) => [String(i + 1), ...[1, 16].flatMap((p) => [
  `${fmtInt(r[`full-P${p}`].rps)} / ${fmtInt(r[`restricted-P${p}`].rps)} / ${fmtInt(r[`identity-P${p}`].rps)}`,
  `${fmt(r[`full-P${p}`].cpuUsPerRequest, 1)} / ${fmt(r[`restricted-P${p}`].cpuUsPerRequest, 1)} / ${fmt(r[`identity-P${p}`].cpuUsPerRequest, 1)}`,
])]);
const md = [
  `## identity — what a user's upstream identity costs`,
  '',
  `${new Date().toISOString().slice(0, 16)}Z, respool ${respoolBuildLabel()}, ${ROUNDS} rounds; medians. \`npm run bench:identity\`.`,
  `valkey-benchmark -t get -r 100000 -d 100 -c ${CLIENTS} (${fmtInt(REQUESTS)} requests at P=1, ${fmtInt(REQUESTS * 4)} at P=16), through one respool in front of one valkey-server:`,
  'a full-access user (respool\'s own links, no check), a restricted user without an identity (`+@all ~key:* &*`: respool checks every key, respool\'s own links) and the same rules with a mirrored identity (the check, and links of its own AUTHed as `respool.app`), same run, each first in turn.',
  '',
  mdTable(['pipeline', 'full GET/s', 'restricted GET/s', 'identity GET/s', 'identity / full', 'full CPU µs/req', 'restricted CPU µs/req', 'identity CPU µs/req', 'identity / full', 'p99 ms full / restricted / identity'], rows),
  '',
  'Per round (full / restricted / identity):',
  '',
  mdTable(['round', 'P=1 GET/s', 'P=1 CPU µs', 'P=16 GET/s', 'P=16 CPU µs'], perRound),
  '',
  'Upstream connections the node holds from respool with N users made with ACL SETUSER (mirrored, acl.upstream: mirror), 5 clients each having run one GET (connectionsPerNode 2):',
  '',
  mdTable(['users', 'clients', 'respool\'s own links', 'identity links', 'users with links', 'all from respool'], links.map((l) => [String(l.users), String(l.clients), String(l.own), String(l.identity), String(l.identityUsers), String(l.total)])),
  '',
  'The CPU a restricted user costs above a full-access one is respool\'s own ACL check (restricted vs full); the identity adds its links: each user with an identity holds up to connectionsPerNode links per node while it has traffic (closed after dedicated.idleMs without a request), so a node sees about 2 + 2 × (active users) connections from respool.',
].join('\n');
writeOutputs('identity', { rounds, links }, md);
writeSection('identity', md);
log('wrote bench/RESULTS.md (identity)');
fs.rmSync(tmp, { recursive: true, force: true });
