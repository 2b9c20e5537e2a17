/**
 * Takeover (issue 34, src/workers/takeover.ts): `--workers 2`, and one worker under
 * `--supervised`; SIGUSR2 to the supervisor three times in a row while iovalkey clients run
 * verified commands over TCP, TLS and the Unix socket, node-redis (npm `redis`) over each of the
 * three, and redis-py (test/clients/redis-py-loop.py) over TCP — node-redis and redis-py with
 * their defaults (neither resends a command): the plain TCP and Unix connections are handed to
 * the new workers (session/session-handover.ts) and never close; a TLS one stays with the old
 * worker, relayed in plaintext to the new one (session/tls-relay.ts), and never closes either.
 * A node-redis BLPOP worker and a MULTI … EXEC loop go once between requests (takeIdle): every
 * pushed item popped once, every transaction counted. Every worker is replaced each time (new pids serve; the old ones exit, a relaying one when its
 * last TLS client has gone), no command fails,
 * every acknowledged write is read back, and the upstream connections stay below twice their
 * number before the takeovers (one worker more than two, for one drain at a time).
 * Run-time changes made before the first takeover — a user (ACL SETUSER) and a split rule
 * (RESPOOL SPLIT ADD) — hold on both workers serving after the third (supervisor.ts replayTo).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Valkey } from 'iovalkey';
import { createClient } from 'redis';
import { freePort, startStandalone, type ValkeyNode } from '../harness/valkey-processes.js';
import { RawConnection } from '../helpers/raw-resp.js';
import { RESPOOL_BIN as BIN } from '../helpers/respool-cli.js';
import { pidServing, servingPids } from '../helpers/serving-pids.js';
import { makeTestCerts, type TestCerts } from '../harness/valkey-tls.js';
import { sleep, until } from '../helpers/wait.js';


const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** How respool runs: two workers, or one under the supervisor (--supervised). */
const SETUPS = [
  { label: '--workers 2', args: ['--workers', '2'], workers: 2 },
  { label: '--supervised, one worker', args: ['--supervised'], workers: 1 },
];

describe.each(SETUPS)('takeover: SIGUSR2 replaces every worker without a failed command ($label)', ({ args, workers }) => {
  let server: ValkeyNode;
  let child: ChildProcess;
  let port: number;
  const socketPath = path.join(os.tmpdir(), `respool-takeover-${process.pid}-${workers}.sock`);
  const configPath = path.join(os.tmpdir(), `respool-takeover-${process.pid}-${workers}.yaml`);
  // Every worker a takeover replaced: each must exit once its TLS clients (relayed) are gone.
  const replaced = new Set<number>();
  const takeoversDone = () => stderr.split('"event":"takeover_done"').length - 1;
  let stderr = '';
  let certs: TestCerts;
  let tlsPort: number;
  // Made at run time before the first takeover (beforeAll); checked after the third (the second test).
  const USER = 'tkuser';
  const PASSWORD = 'tk-pw-0123456789';
  const SPLIT_KEY = 'tk:split-kept';
  let takeovers = 0;
  let finalPids = new Set<number>();

  beforeAll(async () => {
    server = await startStandalone();
    port = await freePort();
    tlsPort = await freePort();
    certs = makeTestCerts();
    // The Unix socket beside TCP is a config file's (unixSocket:).
    fs.writeFileSync(configPath, `unixSocket: ${socketPath}\n`);
    child = spawn('node', [BIN, '--config', configPath, ...args, '--listen', `127.0.0.1:${port}`, '--listen-tls', `127.0.0.1:${tlsPort}`, '--tls-cert', certs.serverCert, '--tls-key', certs.serverKey, '--upstream', `${server.host}:${server.port}`, '--mode', 'standalone', '--log-level', 'info'], { stdio: ['ignore', 'ignore', 'pipe'] });
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString())); // info: a few lines per takeover
    await until(`${workers} workers serving`, async () => ((await servingPids(port)).size === workers ? true : undefined), 30_000).catch((err: Error) => {
      throw new Error(`${err.message}; respool said: ${stderr.slice(-500)}`);
    });
    // Through a client, on one worker: the supervisor passes them to the other and replays them to replacements.
    const admin = await RawConnection.connect(port);
    try {
      expect(await admin.call('ACL', 'SETUSER', USER, 'on', `>${PASSWORD}`, '+@all', '~*')).toBe('+OK\r\n');
      expect(await admin.call('RESPOOL', 'SPLIT', 'ADD', SPLIT_KEY)).toBe('+OK\r\n');
      expect(await admin.call('RESPOOL', 'SPLIT', 'LIST')).toContain(SPLIT_KEY);
    } finally {
      admin.close();
    }
  }, 60_000);

  afterAll(async () => {
    if (child?.exitCode === null) {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    }
    await server?.stop();
    fs.rmSync(configPath, { force: true });
    certs?.remove();
  });

  it('three takeovers in a row (TCP, TLS, Unix socket): new pids, old ones gone, 0 failed commands, every write read back, upstream links bounded', async () => {
    const t0 = performance.now();
    const at = () => `+${(performance.now() - t0).toFixed(0)} ms`;
    const clients = [
      new Valkey({ port, host: '127.0.0.1' }),
      new Valkey({ port, host: '127.0.0.1' }),
      new Valkey({ path: socketPath }),
      new Valkey({ path: socketPath }),
      new Valkey({ port: tlsPort, host: '127.0.0.1', tls: { ca: fs.readFileSync(certs.ca), servername: 'localhost' } }),
    ];
    // A connection a draining worker closes shows as an error event (EPIPE, ECONNRESET) before
    // iovalkey reconnects and sends again what was not answered: counted, not failed commands.
    let reconnects = 0;
    for (const c of clients) c.on('error', () => reconnects++);
    let failed = 0;
    const failures: string[] = [];
    let increments = 0;
    const perClient = clients.map(() => 0);
    // Each GET's start and duration, and the takeovers' windows (SIGUSR2 → takeover_done): the pause a request sees.
    const gets: Array<[number, number]> = [];
    const windows: Array<[number, number]> = [];
    const written = new Map<string, string>();
    // node-redis with its defaults, over TCP: like redis-py it resends nothing (a command written
    // when its connection drops is rejected), so a closed connection would show as a failed command.
    // Counted on its own: its keys, its counter, its failures (with when, against the takeover windows).
    // Its default is RESP3 (HELLO 3): the worker serving it holds a RESP3 upstream link beside its
    // RESP2 one, so the upstream baseline below is taken once every client runs.
    // One over each listener: TCP and the Unix socket are handed over, TLS relayed.
    const nodeRedisClients = [
      { name: 'TCP', client: createClient({ socket: { host: '127.0.0.1', port } }) },
      { name: 'Unix socket', client: createClient({ socket: { path: socketPath, tls: false } }) },
      { name: 'TLS', client: createClient({ socket: { host: '127.0.0.1', port: tlsPort, tls: true, ca: fs.readFileSync(certs.ca), servername: 'localhost' } }) },
    ].map(({ name, client }, n) => ({ name, client, prefix: `tknr${n}`, written: new Map<string, string>(), increments: 0, failed: 0, failures: [] as string[], errors: [] as string[] }));
    for (const nr of nodeRedisClients) {
      nr.client.on('error', (err: Error) => {
        if (nr.errors.length < 5) nr.errors.push(`${at()}: ${err.message}`);
      });
      await nr.client.connect();
    }
    let running = true;
    const nrLoops = nodeRedisClients.map(async (nr) => {
      for (let i = 0; running; i++) {
        const key = `${nr.prefix}:${i}`;
        const value = `nr-${i}`;
        try {
          expect(await nr.client.set(key, value)).toBe('OK');
          nr.written.set(key, value);
          expect(await nr.client.get(key)).toBe(value);
          await nr.client.incr(`${nr.prefix}:counter`);
          nr.increments++;
        } catch (err) {
          nr.failed++;
          if (nr.failures.length < 5) nr.failures.push(`${key} ${at()}: ${(err as Error).message}`);
        }
      }
    });
    // Between requests, not only between connections: a BLPOP worker (node-redis, no resend) whose
    // next BLPOP is sent the moment the last one answers, fed by a producer; and MULTI … EXEC in a
    // loop. A takeover waits for the blocked call and the transaction to end, then hands the
    // connection over with the next request unread (session-handover.ts takeIdle).
    const queueKey = `tkq:${workers}`;
    const popper = createClient({ socket: { host: '127.0.0.1', port } });
    const pusher = createClient({ socket: { host: '127.0.0.1', port } });
    const transactor = createClient({ socket: { host: '127.0.0.1', port } });
    const between = { pushed: 0, popped: [] as string[], transactions: 0, failed: 0, failures: [] as string[] };
    for (const c of [popper, pusher, transactor]) {
      c.on('error', () => {});
      await c.connect();
    }
    const betweenLoops = [
      (async () => {
        while (running) {
          try {
            const got = await popper.blPop(queueKey, 0.2);
            if (got !== null) between.popped.push(got.element);
          } catch (err) {
            between.failed++;
            if (between.failures.length < 5) between.failures.push(`BLPOP ${at()}: ${(err as Error).message}`);
          }
        }
      })(),
      (async () => {
        for (let i = 0; running; i++) {
          try {
            await pusher.lPush(queueKey, `item-${i}`);
            between.pushed++;
          } catch (err) {
            between.failed++;
            if (between.failures.length < 5) between.failures.push(`LPUSH ${at()}: ${(err as Error).message}`);
          }
          await sleep(3);
        }
      })(),
      (async () => {
        for (let i = 0; running; i++) {
          try {
            const replies = await transactor.multi().set(`tktx:${i}`, `t-${i}`).incr('tktx:counter').exec();
            expect(replies[0]).toBe('OK');
            between.transactions++;
          } catch (err) {
            between.failed++;
            if (between.failures.length < 5) between.failures.push(`MULTI ${i} ${at()}: ${(err as Error).message}`);
          }
        }
      })(),
    ];
    const loops = clients.map(async (c, n) => {
      for (let i = 0; running; i++) {
        const key = `tk:${n}:${i}`;
        const value = `v${n}-${i}`;
        try {
          expect(await c.set(key, value)).toBe('OK');
          written.set(key, value);
          const asked = performance.now();
          expect(await c.get(key)).toBe(value);
          gets.push([asked, performance.now() - asked]);
          await c.incr('tk:counter');
          increments++;
          perClient[n]!++;
        } catch (err) {
          failed++;
          if (failures.length < 5) failures.push(`${key}: ${(err as Error).message}`);
        }
      }
    });

    // redis-py with its defaults (a pool, no retry), in a process of its own, until its stdin closes.
    const py = spawn('/usr/bin/python3', ['test/clients/redis-py-loop.py', String(port), 'tkpy'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let pyOut = '';
    py.stdout!.on('data', (d: Buffer) => (pyOut += d.toString()));
    py.stderr!.on('data', (d: Buffer) => (pyOut += d.toString()));
    const pyDone = new Promise<void>((resolve) => py.once('exit', () => resolve()));
    // The upstream connections (the nodes' connected_clients, this INFO's own included) with every
    // client running, then sampled through the takeovers.
    const upstreamClients = async () => Number(/connected_clients:(\d+)/.exec(String(await server.call('INFO', 'clients')))![1]);
    let baseline = 0;
    let most = 0;
    let sampling = true;
    let sampler = Promise.resolve();
    try {
      await sleep(500);
      most = baseline = await upstreamClients();
      sampler = (async () => {
        while (sampling) {
          most = Math.max(most, await upstreamClients());
          await sleep(25);
        }
      })();
      for (let round = 0; round < 3; round++) {
        const before = await servingPids(port);
        expect(before.size).toBe(workers);
        const windowStart = performance.now();
        child.kill('SIGUSR2');
        const after = await until(`takeover ${round + 1}: ${workers} new workers serving`, async () => {
          const now = await servingPids(port);
          return now.size === workers && [...now].every((pid) => !before.has(pid)) ? now : undefined;
        }, 30_000);
        // Done: every old worker exited, or left relaying its TLS clients (session/tls-relay.ts).
        await until(`takeover ${round + 1} done`, async () => (takeoversDone() === round + 1 ? true : undefined), 30_000);
        for (const pid of before) replaced.add(pid);
        windows.push([windowStart, performance.now()]);
        expect([...after].every(alive)).toBe(true);
        takeovers++;
        finalPids = after;
        await sleep(300);
      }
    } finally {
      running = false;
      py.stdin!.end();
      await Promise.all([...loops, ...nrLoops, ...betweenLoops]);
      await pyDone;
      sampling = false;
      await sampler;
    }

    const check = new Valkey({ port, host: '127.0.0.1' });
    try {
      let lost = 0;
      for (const [key, value] of written) if ((await check.get(key)) !== value) lost++;
      const counter = Number(await check.get('tk:counter'));
      const pyResult = JSON.parse(pyOut.trim().split('\n').pop()!) as { written: Record<string, string>; increments: number; failures: string[]; failed: number };
      for (const [key, value] of Object.entries(pyResult.written)) if ((await check.get(key)) !== value) lost++;
      const pyCounter = Number(await check.get('tkpy:counter'));
      const nrLost = nodeRedisClients.map(() => 0);
      const nrCounters: number[] = [];
      for (const [n, nr] of nodeRedisClients.entries()) {
        for (const [key, value] of nr.written) if ((await check.get(key)) !== value) nrLost[n]!++;
        nrCounters.push(Number(await check.get(`${nr.prefix}:counter`)));
      }
      console.log(`redis-py: ${Object.keys(pyResult.written).length} writes, ${pyResult.failed} failed commands ${JSON.stringify(pyResult.failures.slice(0, 3))}`);
      const windowsText = windows.map(([a, b]) => `+${(a - t0).toFixed(0)}..+${(b - t0).toFixed(0)} ms`).join(', ');
      for (const nr of nodeRedisClients) {
        console.log(`node-redis over ${nr.name}: ${nr.written.size} writes, ${nr.increments} INCRs, ${nr.failed} failed commands ${JSON.stringify(nr.failures.slice(0, 3))}, ${nr.errors.length} error events ${JSON.stringify(nr.errors.slice(0, 3))}${nr.failed + nr.errors.length > 0 ? `; takeover windows ${windowsText}` : ''}`);
      }
      const p99 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.99)] ?? 0;
      const during = gets.filter(([t]) => windows.some(([a, b]) => t >= a && t <= b)).map(([, ms]) => ms);
      const outside = gets.filter(([t]) => !windows.some(([a, b]) => t >= a && t <= b)).map(([, ms]) => ms);
      console.log(`GET p99 during the takeovers ${p99(during).toFixed(2)} ms (${during.length} GETs, max ${Math.max(...during).toFixed(1)}), outside them ${p99(outside).toFixed(2)} ms (${outside.length})`);
      console.log(`3 takeovers: ${written.size} writes, ${increments} INCRs, ${failed} failed commands, ${reconnects} connection errors iovalkey recovered from, upstream connections ${baseline} before, at most ${most} during`);
      // redis-py resends nothing by itself: its connection is handed to the new worker, never closed.
      expect(pyResult.failures).toEqual([]);
      expect(pyCounter).toBe(pyResult.increments);
      expect(Object.keys(pyResult.written).length).toBeGreaterThan(100);
      // Nor does node-redis: the same handover, the same 0.
      for (const [n, nr] of nodeRedisClients.entries()) {
        expect(nr.failures, nr.name).toEqual([]);
        expect(nr.failed).toBe(0);
        expect(nrLost[n]).toBe(0);
        expect(nrCounters[n]).toBe(nr.increments);
        expect(nr.written.size, nr.name).toBeGreaterThan(100);
      }
      expect(failures).toEqual([]);
      expect(failed).toBe(0);
      expect(lost).toBe(0);
      expect(counter).toBe(increments);
      expect(written.size).toBeGreaterThan(100);
      expect(perClient.every((count) => count > 10)).toBe(true); // TCP, Unix socket and TLS clients all ran
      // The BLPOP worker and the transactions: no failure, every pushed item popped once (or still queued), every EXEC counted.
      const left = (await check.lrange(queueKey, 0, -1)) as string[];
      console.log(`between requests: ${between.pushed} LPUSHes, ${between.popped.length} popped by BLPOP, ${left.length} left; ${between.transactions} transactions; ${between.failed} failed ${JSON.stringify(between.failures.slice(0, 3))}`);
      expect(between.failures).toEqual([]);
      expect(new Set(between.popped).size).toBe(between.popped.length);
      expect(between.popped.length + left.length).toBe(between.pushed);
      expect(between.popped.length).toBeGreaterThan(100);
      expect(Number(await check.get('tktx:counter'))).toBe(between.transactions);
      expect(between.transactions).toBeGreaterThan(100);
      expect(most).toBeLessThan(2 * baseline);
    } finally {
      check.disconnect();
      for (const c of clients) c.disconnect();
      for (const nr of nodeRedisClients) if (nr.client.isOpen) nr.client.destroy();
      for (const c of [popper, pusher, transactor]) if (c.isOpen) c.destroy();
    }
    // With its clients gone, no replaced worker is left (one relaying TLS exits with its last client).
    await until('every replaced worker exited', async () => ([...replaced].every((pid) => !alive(pid)) ? true : undefined), 15_000);
    expect(replaced.size).toBe(3 * workers);
  }, 120_000);

  it('the user (ACL SETUSER) and the split rule (RESPOOL SPLIT ADD) made before the first takeover hold on every worker after the third', async () => {
    expect(takeovers).toBe(3);
    // New connections, one after another, land on both workers (as servingPids'): each one is checked.
    const seen = new Set<number>();
    for (let i = 0; i < 8; i++) {
      const c = await RawConnection.connect(port);
      try {
        const pid = await pidServing(c);
        seen.add(pid);
        expect(await c.call('RESPOOL', 'SPLIT', 'LIST')).toContain(SPLIT_KEY);
        expect(await c.call('AUTH', USER, 'not-the-password')).toMatch(/^-WRONGPASS/);
        expect(await c.call('AUTH', USER, PASSWORD)).toBe('+OK\r\n');
        expect(await c.call('ACL', 'WHOAMI')).toBe(`$${USER.length}\r\n${USER}\r\n`);
        expect(await c.call('SET', `tk:acl:${i}`, String(pid))).toBe('+OK\r\n');
        expect(await c.call('GET', `tk:acl:${i}`)).toBe(`$${String(pid).length}\r\n${pid}\r\n`);
      } finally {
        c.close();
      }
    }
    console.log(`carry-over after ${takeovers} takeovers: user ${USER} and split rule ${SPLIT_KEY} on workers ${[...seen].join(', ')} (serving after the third: ${[...finalPids].join(', ')})`);
    expect(seen).toEqual(finalPids);
  });
});
