// The respool fleet of bench/soak.mjs: member A (`--workers 2`: a supervisor and two workers, so
// SIGUSR2 replaces its workers — a takeover) and member B (one process: the one restarted), peers
// of each other (--cluster-peer), each with an admin port for /metrics, otherwise defaults in
// front of the cluster (--mode cluster). Started with common.mjs's spawn (killed by pid when the
// bench exits); logs in bench/out/soak-respool-<name>.log.
import fs from 'node:fs';
import path from 'node:path';
import { HOST, OUT_DIR, childPids, log, pidAlive, sleep, spawn, uniquePort, waitForPing } from './common.mjs';

export class FleetMember {
  constructor(name, { port, adminPort, workers, upstreams, peers }) {
    this.name = name;
    this.port = port;
    this.adminPort = adminPort;
    this.workers = workers;
    this.args = [
      'bin/respool.js', '--listen', `${HOST}:${port}`, '--upstream', upstreams.join(','), '--mode', 'cluster',
      '--cluster-peer', peers.join(','), '--admin', `${HOST}:${adminPort}`, '--log-level', 'warn',
      ...(workers > 1 ? ['--workers', String(workers)] : []),
    ];
    this.logFile = path.join(OUT_DIR, `soak-respool-${name}.log`);
    this.child = null;
  }

  get pid() {
    return this.child?.pid ?? 0;
  }

  /** Every pid of this member: the process and its children (the workers of a supervisor). */
  pids() {
    return this.pid ? [this.pid, ...childPids(this.pid)] : [];
  }

  async start() {
    this.child = spawn(process.execPath, this.args, { logFile: this.logFile });
    await waitForPing(this.port, { child: this.child, what: `respool ${this.name}`, timeoutMs: 30_000 });
    if (this.workers > 1) await this.waitWorkers(new Set(), 30_000);
  }

  /** Waits until `workers` children run, none of them in `old`, and every old one has exited. */
  async waitWorkers(old, timeoutMs) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const now = childPids(this.pid);
      if (now.length >= this.workers && now.every((p) => !old.has(p)) && [...old].every((p) => !pidAlive(p))) return now;
      if (Date.now() > deadline) throw new Error(`respool ${this.name}: workers ${now.join(',')} (old ${[...old].join(',')}) after ${timeoutMs} ms`);
      await sleep(100);
    }
  }

  /** SIGTERM (drain), wait for the exit (SIGKILL after 30 s), start again on the same port. */
  async restart() {
    const child = this.child;
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    const { code, signal } = await child.exited;
    clearTimeout(killer);
    const gone = Date.now();
    await this.start();
    return `pid ${child.pid} exited (code ${code}, signal ${signal}); pid ${this.pid} answering ${Date.now() - gone} ms later`;
  }

  /** SIGUSR2 to the supervisor; resolves once every worker is a new process and the old ones are gone. */
  async takeover() {
    const old = new Set(childPids(this.pid));
    process.kill(this.pid, 'SIGUSR2');
    const now = await this.waitWorkers(old, 120_000);
    return `workers ${[...old].join(',')} → ${now.join(',')}`;
  }

  async stop() {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await child.exited;
    clearTimeout(killer);
  }
}

/** Starts members A (2 workers) and B (1 process), peers of each other, in front of `upstreams`. */
export async function startFleet(upstreams) {
  const ports = [await uniquePort(), await uniquePort()];
  const admins = [await uniquePort(), await uniquePort()];
  const peers = ports.map((p) => `${HOST}:${p}`);
  const a = new FleetMember('A', { port: ports[0], adminPort: admins[0], workers: 2, upstreams, peers });
  const b = new FleetMember('B', { port: ports[1], adminPort: admins[1], workers: 1, upstreams, peers });
  for (const m of [a, b]) fs.writeFileSync(m.logFile, '');
  await Promise.all([a.start(), b.start()]);
  log(`soak: respool A on ${HOST}:${a.port} (pid ${a.pid}, workers ${childPids(a.pid).join(',')}), B on ${HOST}:${b.port} (pid ${b.pid})`);
  return { a, b, members: [a, b], command: (m) => `node ${m.args.join(' ')}` };
}
