/**
 * Real valkey-server processes for the integration tests, the demo and the benches.
 * `server: 'redis'` starts redis-server (and uses redis-cli) instead, for Redis 7 upstreams.
 *
 * - Every server listens on 127.0.0.1 only, on a port from freePort() (its cluster bus port,
 *   port + 10000, is free as well), and lives in its own temp dir (os.tmpdir()/respool-test-*),
 *   with no persistence and its log in <dir>/valkey.log.
 * - Servers never outlive the process that started them: on Linux they are launched through
 *   `setpriv --pdeathsig KILL` (the kernel kills them when our process dies, even by SIGKILL), and a
 *   process 'exit' handler SIGKILLs whatever is still running and removes the temp dirs.
 * - Readiness is checked by identity, not only by "something answers on the port": the server
 *   must report our child's pid in INFO server (another test worker may have won a port race).
 *   A server that lost a port race ("Address already in use") is retried on a new port.
 *
 * No vitest imports here: this file is compiled into build/harness/ (`npm run build:harness`) and
 * used by the demo and the benches.
 */
import { spawn, spawnSync, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parseInfo, rawCall, rawPipeline, ReplyError, type RespArg, type RespReply } from './raw-client.js';

export const VALKEY_SERVER = process.env['VALKEY_SERVER'] ?? 'valkey-server';
export const VALKEY_CLI = process.env['VALKEY_CLI'] ?? 'valkey-cli';
export const REDIS_SERVER = process.env['REDIS_SERVER'] ?? 'redis-server';
export const REDIS_CLI = process.env['REDIS_CLI'] ?? 'redis-cli';

/** Which server binary a node runs: valkey-server (the default) or redis-server (7.0+). */
export type ServerKind = 'valkey' | 'redis';

const SERVER_BINARY: Readonly<Record<ServerKind, { server: string; cli: string; label: string }>> = {
  valkey: { server: VALKEY_SERVER, cli: VALKEY_CLI, label: 'valkey' },
  redis: { server: REDIS_SERVER, cli: REDIS_CLI, label: 'redis' },
};

/** availability-zone is Valkey's (8.0+): redis-server refuses the option and the config name. */
function refuseZoneOnRedis(server: ServerKind, what: string): void {
  if (server === 'redis') throw new Error(`${what}: availability-zone is Valkey-only; redis-server does not accept it`);
}

export const CLUSTER_SLOTS = 16384;
/** The cluster bus listens on port + this offset (Valkey's default). */
export const CLUSTER_BUS_OFFSET = 10000;

/* ------------------------------------------------------------------------------------------------
 * Ports
 * --------------------------------------------------------------------------------------------- */

// Client ports are drawn from [12000, 22000) so bus ports (+10000) stay below Linux's ephemeral
// range (32768+), where outgoing connections could grab them between our check and the bind.
const PORT_MIN = 12000;
const PORT_MAX = 22000;
const handedOut = new Set<number>();

function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen({ host: '127.0.0.1', port, exclusive: true }, () => srv.close(() => resolve(true)));
  });
}

/**
 * A port p such that p and p + 10000 (the cluster bus) are both free on 127.0.0.1 right now.
 * Never returns the same port twice in one process. Random start, so parallel test workers rarely
 * collide; startStandalone/startCluster retry on a lost race anyway.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 1000; attempt++) {
    const p = randomInt(PORT_MIN, PORT_MAX);
    if (handedOut.has(p)) continue;
    if ((await canBind(p)) && (await canBind(p + CLUSTER_BUS_OFFSET))) {
      handedOut.add(p);
      return p;
    }
  }
  throw new Error('freePort: no free port pair found');
}

/* ------------------------------------------------------------------------------------------------
 * Process bookkeeping
 * --------------------------------------------------------------------------------------------- */

/** Nodes whose temp dir still exists (alive or not). */
const owned = new Set<ValkeyProcess>();
let exitHandlerInstalled = false;

function installExitHandler(): void {
  if (exitHandlerInstalled) return;
  exitHandlerInstalled = true;
  process.on('exit', () => {
    for (const node of owned) {
      if (node.alive) {
        try {
          process.kill(node.pid, 'SIGKILL');
        } catch {
          /* already gone */
        }
      }
      try {
        rmSync(node.dir, { recursive: true, force: true });
      } catch {
        /* best effort */
      }
    }
  });
}

let launcherPrefix: string[] | undefined;
/** `setpriv --pdeathsig KILL` when available (Linux, util-linux >= 2.33), else nothing. */
function launcher(): string[] {
  if (launcherPrefix === undefined) {
    launcherPrefix = [];
    if (process.platform === 'linux') {
      const r = spawnSync('setpriv', ['--pdeathsig', 'KILL', 'true'], { stdio: 'ignore' });
      if (r.status === 0) launcherPrefix = ['setpriv', '--pdeathsig', 'KILL'];
    }
  }
  return launcherPrefix;
}

/**
 * spawn(), but the child is SIGKILLed by the kernel when this process dies (setpriv --pdeathsig,
 * which execs, so child.pid is the real program's pid). When that is available the child also gets
 * its own process group, so a terminal's Ctrl-C reaches only us and we decide the shutdown order;
 * without it the child stays in our group (Ctrl-C then reaches it directly).
 */
export function spawnTied(command: string, args: readonly string[], options: SpawnOptions = {}): ChildProcess {
  const prefix = launcher();
  if (prefix.length === 0) return spawn(command, args, options);
  return spawn(prefix[0]!, [...prefix.slice(1), command, ...args], { ...options, detached: true });
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

class StartError extends Error {
  constructor(
    message: string,
    readonly portInUse: boolean,
  ) {
    super(message);
  }
}

/* ------------------------------------------------------------------------------------------------
 * One server
 * --------------------------------------------------------------------------------------------- */

export interface ValkeyNode {
  readonly host: '127.0.0.1';
  readonly port: number;
  /** pid of the current server process (changes after restart()). */
  readonly pid: number;
  /** The binary it runs: 'valkey' (valkey-server) or 'redis' (redis-server). */
  readonly server: ServerKind;
  /** Temp dir: working dir, nodes.conf, valkey.log. Removed by stop(). */
  readonly dir: string;
  /** availability-zone given to the server (INFO server availability_zone), if any. */
  readonly zone?: string;
  readonly password?: string;
  /** "127.0.0.1:<port>" */
  readonly address: string;
  readonly logFile: string;
  /** True while the current process has not exited. */
  readonly alive: boolean;
  /** SIGTERM, SIGKILL after 3 s, then removes the temp dir. Idempotent. */
  stop(): Promise<void>;
  /** Sends a signal (default SIGKILL) to the current process; does not wait (see exited()). */
  kill(signal?: NodeJS.Signals): void;
  /** Resolves once the current process has exited. */
  exited(): Promise<void>;
  /** Kills the process if alive, then starts it again on the same port and dir, waits until ready. */
  restart(): Promise<void>;
  /** One command on a fresh connection (AUTH first if a password is set); error replies resolve as ReplyError. */
  call(...args: RespArg[]): Promise<RespReply>;
  /**
   * CONFIG SET availability-zone (runtime-settable in Valkey 8.0), kept across restart(). Lets a
   * test arrange zones by live role, since valkey-cli's replica placement is not deterministic.
   */
  setZone(zone: string): Promise<void>;
  /** The last lines of valkey.log and stderr, for failure messages. */
  logs(maxChars?: number): string;
}

interface NodeSpec {
  server: ServerKind;
  args: string[];
  password?: string;
  zone?: string;
  startTimeoutMs: number;
}

class ValkeyProcess implements ValkeyNode {
  readonly host = '127.0.0.1' as const;
  readonly logFile: string;
  private child: ChildProcess | undefined;
  private exitPromise: Promise<void> = Promise.resolve();
  private running = false;
  private stopped = false;
  private stderrTail = '';

  constructor(
    readonly port: number,
    readonly dir: string,
    private spec: NodeSpec,
  ) {
    this.logFile = path.join(dir, 'valkey.log');
    owned.add(this);
    installExitHandler();
  }

  get pid(): number {
    return this.child?.pid ?? -1;
  }
  get server(): ServerKind {
    return this.spec.server;
  }
  get zone(): string | undefined {
    return this.spec.zone;
  }
  get password(): string | undefined {
    return this.spec.password;
  }
  get address(): string {
    return `${this.host}:${this.port}`;
  }
  get alive(): boolean {
    return this.running;
  }

  /** Spawns the server and waits until it answers as itself. */
  async start(): Promise<void> {
    if (this.stopped) throw new Error(`${this.address}: node was stopped (its dir is gone)`);
    if (this.running) throw new Error(`${this.address}: already running`);
    const argv = [
      '--port', String(this.port),
      '--bind', '127.0.0.1',
      '--daemonize', 'no',
      '--dir', this.dir,
      '--logfile', this.logFile,
      '--save', '',
      '--appendonly', 'no',
      '--enable-debug-command', 'yes',
      // Default is 5 s: every full sync of a replica would wait that long.
      '--repl-diskless-sync-delay', '0',
    ];
    if (this.spec.password !== undefined) argv.push('--requirepass', this.spec.password, '--masterauth', this.spec.password);
    if (this.spec.zone !== undefined) argv.push('--availability-zone', this.spec.zone);
    argv.push(...this.spec.args); // last, so callers can override any default above

    this.stderrTail = '';
    const child = spawnTied(SERVER_BINARY[this.spec.server].server, argv, { cwd: this.dir, stdio: ['ignore', 'ignore', 'pipe'] });
    this.child = child;
    this.running = true;
    this.exitPromise = new Promise<void>((resolve) => {
      const done = () => {
        if (this.child === child) this.running = false;
        resolve();
      };
      child.once('exit', done);
      child.once('error', (e) => {
        this.stderrTail += `\nspawn error: ${e.message}`;
        done();
      });
    });
    child.stderr?.on('data', (d: Buffer) => {
      this.stderrTail = (this.stderrTail + d.toString('utf8')).slice(-4000);
    });
    // A forgotten server must not keep our event loop alive; the exit handler kills it.
    child.unref();
    (child.stderr as unknown as { unref?: () => void } | null)?.unref?.();

    await this.waitReady();
  }

  private async waitReady(): Promise<void> {
    const deadline = Date.now() + this.spec.startTimeoutMs;
    let last = '';
    for (;;) {
      if (!this.running) {
        const logs = this.logs();
        throw new StartError(
          `${SERVER_BINARY[this.spec.server].label}-server on ${this.address} exited during startup:\n${logs}`,
          /Address already in use/i.test(logs),
        );
      }
      try {
        const [pong, info] = await rawPipeline(this.port, [['PING'], ['INFO', 'server']], {
          password: this.spec.password,
          connectTimeoutMs: 500,
          timeoutMs: 2000,
        });
        const pid = parseInfo(info ?? null)['process_id'];
        if (pong === 'PONG' && pid === String(this.pid)) return;
        last = pid !== String(this.pid) ? `another server (pid ${pid}) answers on the port` : `PING → ${String(pong)}`;
      } catch (e) {
        last = (e as Error).message;
      }
      if (Date.now() > deadline) {
        this.kill('SIGKILL');
        await this.waitExit(5000);
        throw new StartError(
          `${SERVER_BINARY[this.spec.server].label}-server on ${this.address} not ready after ${this.spec.startTimeoutMs} ms (${last}):\n${this.logs()}`,
          /another server|Address already in use/i.test(last + this.logs()),
        );
      }
      await Promise.race([sleep(15), this.exitPromise]);
    }
  }

  kill(signal: NodeJS.Signals = 'SIGKILL'): void {
    if (!this.running || this.child?.pid === undefined) return;
    try {
      process.kill(this.child.pid, signal);
    } catch {
      /* already gone */
    }
  }

  exited(): Promise<void> {
    if (!this.running) return this.exitPromise;
    const keepAlive = setInterval(() => undefined, 1000); // the child itself is unref'd
    return this.exitPromise.finally(() => clearInterval(keepAlive));
  }

  /** Waits for exit; a ref'd timer keeps the event loop alive meanwhile (the child is unref'd). */
  private async waitExit(timeoutMs: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timedOut = await Promise.race([
      this.exitPromise.then(() => false),
      new Promise<boolean>((r) => (timer = setTimeout(() => r(true), timeoutMs))),
    ]);
    clearTimeout(timer);
    return !timedOut;
  }

  /** SIGKILL (or the given signal, then SIGKILL after graceMs) and wait for exit. */
  async terminate(signal: NodeJS.Signals = 'SIGKILL', graceMs = 3000): Promise<void> {
    if (!this.running) return;
    this.kill(signal);
    if (await this.waitExit(graceMs)) return;
    this.kill('SIGKILL');
    if (!(await this.waitExit(5000))) throw new Error(`${this.address}: pid ${this.pid} did not exit after SIGKILL`);
  }

  async restart(): Promise<void> {
    await this.terminate('SIGKILL');
    try {
      await this.start();
    } catch (e) {
      if (e instanceof StartError && e.portInUse) {
        throw new Error(`${this.address}: cannot restart, the port was taken meanwhile\n${e.message}`);
      }
      throw e;
    }
  }

  async stop(): Promise<void> {
    await this.terminate('SIGTERM', 3000);
    this.stopped = true;
    await rm(this.dir, { recursive: true, force: true });
    owned.delete(this);
  }

  /** Immediate SIGKILL + dir removal (used by cluster.stop()). */
  async destroy(): Promise<void> {
    await this.terminate('SIGKILL');
    this.stopped = true;
    await rm(this.dir, { recursive: true, force: true });
    owned.delete(this);
  }

  call(...args: RespArg[]): Promise<RespReply> {
    return rawCall(this.port, args, { password: this.spec.password });
  }

  async setZone(zone: string): Promise<void> {
    refuseZoneOnRedis(this.spec.server, `${this.address}: setZone`);
    const r = await this.call('CONFIG', 'SET', 'availability-zone', zone);
    if (r instanceof ReplyError) throw new Error(`${this.address}: CONFIG SET availability-zone: ${r.message}`);
    this.spec = { ...this.spec, zone };
  }

  logs(maxChars = 3000): string {
    let log = '';
    try {
      if (existsSync(this.logFile)) log = readFileSync(this.logFile, 'utf8');
    } catch {
      /* ignore */
    }
    const out = [log.trim() && `--- ${this.logFile}\n${log.trim().slice(-maxChars)}`, this.stderrTail.trim() && `--- stderr\n${this.stderrTail.trim().slice(-maxChars)}`];
    return out.filter(Boolean).join('\n') || '(no output)';
  }
}

/** True if pid names a running process (a zombie counts as dead). */
function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== 'ESRCH';
  }
  try {
    // "pid (comm) S …": the state letter follows the last ')'.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return true; // no procfs: trust kill(0)
  }
}

const DIR_PREFIX = 'respool-test-';
const OWNER_FILE = 'owner.pid';
let swept = false;

/**
 * Removes temp dirs left by processes that died without running their exit handler (SIGKILL);
 * their servers died with them (pdeathsig). Only dirs whose owner.pid names a dead process.
 */
function sweepStaleDirs(): void {
  if (swept) return;
  swept = true;
  let entries: string[] = [];
  try {
    entries = readdirSync(os.tmpdir()).filter((e) => e.startsWith(DIR_PREFIX));
  } catch {
    return;
  }
  for (const e of entries) {
    const dir = path.join(os.tmpdir(), e);
    try {
      const owner = Number(readFileSync(path.join(dir, OWNER_FILE), 'utf8'));
      if (!Number.isInteger(owner) || owner <= 0 || owner === process.pid) continue;
      if (processAlive(owner)) continue;
      rmSync(dir, { recursive: true, force: true });
    } catch {
      /* no owner file or unreadable: leave it */
    }
  }
}

/** Starts one server on a fresh port and temp dir; retries a few times on a lost port race. */
async function startNode(spec: NodeSpec): Promise<ValkeyProcess> {
  sweepStaleDirs();
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const dir = mkdtempSync(path.join(os.tmpdir(), DIR_PREFIX));
    writeFileSync(path.join(dir, OWNER_FILE), String(process.pid));
    const node = new ValkeyProcess(port, dir, spec);
    try {
      await node.start();
      return node;
    } catch (e) {
      await node.destroy().catch(() => undefined);
      if (e instanceof StartError && e.portInUse && attempt < 5) continue;
      throw e;
    }
  }
}

export interface StandaloneOptions {
  /** valkey-server (default) or redis-server. */
  server?: ServerKind;
  /** Extra server arguments, e.g. ['--maxclients', '100']; they override the defaults. */
  args?: string[];
  /** Sets requirepass (and masterauth). */
  password?: string;
  /** Sets availability-zone (Valkey only: refused with server 'redis'). */
  zone?: string;
  /** Default 10000. */
  startTimeoutMs?: number;
}

/** Starts a standalone valkey-server (or redis-server); resolves once it answers PING as itself. */
export async function startStandalone(opts: StandaloneOptions = {}): Promise<ValkeyNode> {
  const server = opts.server ?? 'valkey';
  if (opts.zone !== undefined) refuseZoneOnRedis(server, 'startStandalone');
  return startNode({
    server,
    args: opts.args ?? [],
    password: opts.password,
    zone: opts.zone,
    startTimeoutMs: opts.startTimeoutMs ?? 10_000,
  });
}

/* ------------------------------------------------------------------------------------------------
 * Cluster
 * --------------------------------------------------------------------------------------------- */

export interface ClusterOptions {
  /** Default 3. */
  primaries?: number;
  /** Default 1. */
  replicasPerPrimary?: number;
  /** valkey-server and valkey-cli (default), or redis-server and redis-cli. */
  server?: ServerKind;
  /** availability-zone per node, in node order (primaries first, then replicas), cycled if shorter (Valkey only). */
  zones?: string[];
  /** Extra server arguments for every node. */
  args?: string[];
  password?: string;
  /** cluster-node-timeout in ms. Default 2000. */
  nodeTimeoutMs?: number;
  /** Budget for the whole cluster to become stable. Default 30000. */
  startTimeoutMs?: number;
}

export interface ClusterShard {
  primary: ValkeyNode;
  replicas: ValkeyNode[];
  /** Inclusive [start, end] ranges, ascending. */
  slots: [number, number][];
}

export interface ValkeyCluster {
  /** Every node ever started for this cluster, in creation order (primaries first at creation). */
  readonly nodes: readonly ValkeyNode[];
  readonly nodeTimeoutMs: number;
  readonly password?: string;
  /** Live primaries (per the cluster's own view; dead nodes excluded), ordered by first slot. */
  primaries(): Promise<ValkeyNode[]>;
  /** Live replicas, ordered by their primary's first slot, then port. */
  replicas(): Promise<ValkeyNode[]>;
  /** Live shards: primary, its live replicas, its slot ranges; ordered by first slot. */
  shards(): Promise<ClusterShard[]>;
  /** The live primary serving `slot`. */
  primaryForSlot(slot: number): Promise<ValkeyNode>;
  /** The node listening on `port`; throws if none. */
  nodeFor(port: number): ValkeyNode;
  /** One command to one node (by node or port), on a fresh connection; error replies resolve as ReplyError. */
  call(node: ValkeyNode | number, ...args: RespArg[]): Promise<RespReply>;
  /**
   * Waits until, among the live nodes: every node reports cluster_state:ok; all agree on the same
   * slot owners and replica → primary map, covering all 16384 slots with live primaries; every
   * live node is known and healthy in every view; every dead node is flagged `fail`; and every
   * live replica has master_link_status:up. Default timeout 30000 ms.
   */
  waitForStable(opts?: { timeoutMs?: number }): Promise<void>;
  /** SIGKILL a node and wait for its exit (its dir is kept for restartNode). */
  killNode(node: ValkeyNode): Promise<void>;
  /** Starts a dead (or kills and restarts a live) node on the same port and dir; it rejoins via nodes.conf. Does not wait for stability. */
  restartNode(node: ValkeyNode): Promise<void>;
  /** CLUSTER FAILOVER [FORCE|TAKEOVER] on a replica; resolves when it is a primary and the cluster is stable. */
  failover(replica: ValkeyNode, opts?: { mode?: 'FORCE' | 'TAKEOVER'; timeoutMs?: number }): Promise<void>;
  /** FLUSHALL on every live primary. */
  flushAll(): Promise<void>;
  /** SIGKILL every node and remove all temp dirs. Idempotent. */
  stop(): Promise<void>;
}

/** One line of CLUSTER NODES. */
export interface ClusterNodeView {
  id: string;
  port: number;
  flags: Set<string>;
  masterId: string | null;
  linkState: string;
  slots: [number, number][];
}

/** Parses CLUSTER NODES output. */
export function parseClusterNodes(text: string): ClusterNodeView[] {
  const out: ClusterNodeView[] = [];
  for (const line of text.split('\n')) {
    const f = line.trim().split(' ');
    if (f.length < 8) continue;
    const addr = f[1]!.split('@')[0]!.split(',')[0]!;
    const port = Number(addr.slice(addr.lastIndexOf(':') + 1));
    const slots: [number, number][] = [];
    for (const s of f.slice(8)) {
      if (s.startsWith('[')) continue; // migrating / importing markers
      const dash = s.indexOf('-');
      if (dash === -1) slots.push([Number(s), Number(s)]);
      else slots.push([Number(s.slice(0, dash)), Number(s.slice(dash + 1))]);
    }
    out.push({
      id: f[0]!,
      port,
      flags: new Set(f[2]!.split(',')),
      masterId: f[3] === '-' ? null : f[3]!,
      linkState: f[7]!,
      slots,
    });
  }
  return out;
}

const UNHEALTHY_FLAGS = ['fail', 'fail?', 'handshake', 'noaddr'];

class Cluster implements ValkeyCluster {
  private stopped = false;

  constructor(
    readonly nodes: ValkeyProcess[],
    readonly nodeTimeoutMs: number,
    readonly password: string | undefined,
  ) {}

  nodeFor(port: number): ValkeyNode {
    const n = this.nodes.find((x) => x.port === port);
    if (!n) throw new Error(`no cluster node on port ${port}`);
    return n;
  }

  call(node: ValkeyNode | number, ...args: RespArg[]): Promise<RespReply> {
    const port = typeof node === 'number' ? node : node.port;
    return rawCall(port, args, { password: this.password });
  }

  /** The cluster view of the first live node that answers. */
  private async view(): Promise<ClusterNodeView[]> {
    let lastErr: unknown = new Error('no live node');
    for (const n of this.nodes) {
      if (!n.alive) continue;
      try {
        const r = await this.call(n, 'CLUSTER', 'NODES');
        if (typeof r === 'string') return parseClusterNodes(r);
        lastErr = r;
      } catch (e) {
        lastErr = e;
      }
    }
    throw lastErr;
  }

  async shards(): Promise<ClusterShard[]> {
    const views = await this.view();
    const byPort = new Map(this.nodes.filter((n) => n.alive).map((n) => [n.port, n] as const));
    const usable = (v: ClusterNodeView) => byPort.has(v.port) && !v.flags.has('fail');
    const shards: (ClusterShard & { id: string })[] = [];
    for (const v of views) {
      if (!v.flags.has('master') || !usable(v)) continue;
      shards.push({ id: v.id, primary: byPort.get(v.port)!, replicas: [], slots: [...v.slots].sort((a, b) => a[0] - b[0]) });
    }
    for (const v of views) {
      if (!v.flags.has('slave') || !usable(v)) continue;
      shards.find((s) => s.id === v.masterId)?.replicas.push(byPort.get(v.port)!);
    }
    const first = (s: ClusterShard) => s.slots[0]?.[0] ?? CLUSTER_SLOTS + s.primary.port;
    shards.sort((a, b) => first(a) - first(b));
    return shards.map(({ primary, replicas, slots }) => ({ primary, slots, replicas: replicas.sort((a, b) => a.port - b.port) }));
  }

  async primaries(): Promise<ValkeyNode[]> {
    return (await this.shards()).map((s) => s.primary);
  }

  async replicas(): Promise<ValkeyNode[]> {
    return (await this.shards()).flatMap((s) => s.replicas);
  }

  async primaryForSlot(slot: number): Promise<ValkeyNode> {
    const s = (await this.shards()).find((x) => x.slots.some(([a, b]) => slot >= a && slot <= b));
    if (!s) throw new Error(`slot ${slot} is not served by a live primary`);
    return s.primary;
  }

  /** null when stable, else the first reason it is not. */
  async checkStable(): Promise<string | null> {
    const alive = this.nodes.filter((n) => n.alive);
    const dead = this.nodes.filter((n) => !n.alive);
    const alivePorts = new Set(alive.map((n) => n.port));
    if (alive.length === 0) return 'no live node';
    let signature: string | undefined;
    for (const n of alive) {
      let info: RespReply, nodesText: RespReply, repl: RespReply;
      try {
        [info, nodesText, repl] = (await rawPipeline(n.port, [['CLUSTER', 'INFO'], ['CLUSTER', 'NODES'], ['INFO', 'replication']], {
          password: this.password,
          connectTimeoutMs: 1000,
          timeoutMs: 3000,
        })) as [RespReply, RespReply, RespReply];
      } catch (e) {
        return `${n.address}: ${(e as Error).message}`;
      }
      if (typeof nodesText !== 'string') return `${n.address}: CLUSTER NODES → ${String(nodesText)}`;
      const state = parseInfo(info)['cluster_state'];
      if (state !== 'ok') return `${n.address}: cluster_state=${state}`;
      const views = parseClusterNodes(nodesText);
      const byPort = new Map(views.map((v) => [v.port, v] as const));
      const byId = new Map(views.map((v) => [v.id, v] as const));
      for (const m of alive) {
        const v = byPort.get(m.port);
        if (!v) return `${n.address} does not know ${m.address} yet`;
        const bad = UNHEALTHY_FLAGS.filter((f) => v.flags.has(f));
        if (bad.length) return `${n.address} sees ${m.address} as ${bad.join(',')}`;
        if (!v.flags.has('myself') && v.linkState !== 'connected') return `${n.address}: link to ${m.address} is ${v.linkState}`;
      }
      for (const m of dead) {
        const v = byPort.get(m.port);
        if (v && !v.flags.has('fail')) return `${n.address} has not flagged dead ${m.address} as fail yet (${[...v.flags].join(',')})`;
      }
      const owners: string[] = [];
      let covered = 0;
      for (const v of views) {
        if (!v.flags.has('master') || v.flags.has('fail')) continue;
        for (const [a, b] of v.slots) {
          if (!alivePorts.has(v.port)) return `${n.address}: slots ${a}-${b} still owned by dead 127.0.0.1:${v.port}`;
          owners.push(`${a}-${b}@${v.port}`);
          covered += b - a + 1;
        }
      }
      if (covered !== CLUSTER_SLOTS) return `${n.address}: ${covered}/${CLUSTER_SLOTS} slots covered`;
      const replicaMap = views
        .filter((v) => v.flags.has('slave') && !v.flags.has('fail'))
        .map((v) => `${v.port}>${v.masterId ? byId.get(v.masterId)?.port : '?'}`);
      const sig = `${owners.sort().join(' ')} | ${replicaMap.sort().join(' ')}`;
      if (signature === undefined) signature = sig;
      else if (sig !== signature) return `views differ: ${alive[0]!.address} has [${signature}], ${n.address} has [${sig}]`;
      const shardProblem = nodesConfShardProblem(n.dir);
      if (shardProblem) return `${n.address}: ${shardProblem}`;
      const me = views.find((v) => v.flags.has('myself'));
      if (me?.flags.has('slave')) {
        const r = parseInfo(repl);
        if (r['master_link_status'] !== 'up') return `${n.address}: replica link is ${r['master_link_status']}`;
        if (!alivePorts.has(Number(r['master_port']))) return `${n.address}: replicates dead port ${r['master_port']}`;
      }
    }
    return null;
  }

  async waitForStable(opts: { timeoutMs?: number } = {}): Promise<void> {
    const timeoutMs = opts.timeoutMs ?? 30_000;
    const deadline = Date.now() + timeoutMs;
    let reason: string | null = 'not checked';
    while (Date.now() <= deadline) {
      reason = await this.checkStable();
      if (reason === null) return;
      await sleep(50);
    }
    throw new Error(`cluster not stable after ${timeoutMs} ms: ${reason}`);
  }

  async killNode(node: ValkeyNode): Promise<void> {
    await this.own(node).terminate('SIGKILL');
  }

  async restartNode(node: ValkeyNode): Promise<void> {
    await this.own(node).restart();
  }

  async failover(replica: ValkeyNode, opts: { mode?: 'FORCE' | 'TAKEOVER'; timeoutMs?: number } = {}): Promise<void> {
    const timeoutMs = opts.timeoutMs ?? 30_000;
    const deadline = Date.now() + timeoutMs;
    const r = await this.call(replica, 'CLUSTER', 'FAILOVER', ...(opts.mode ? [opts.mode] : []));
    if (r instanceof ReplyError) throw r;
    for (;;) {
      const me = parseClusterNodes(String(await this.call(replica, 'CLUSTER', 'NODES'))).find((v) => v.flags.has('myself'));
      if (me?.flags.has('master')) break;
      if (Date.now() > deadline) throw new Error(`${replica.address} not promoted after ${timeoutMs} ms`);
      await sleep(50);
    }
    await this.waitForStable({ timeoutMs: Math.max(1000, deadline - Date.now()) });
  }

  async flushAll(): Promise<void> {
    for (const p of await this.primaries()) {
      const r = await this.call(p, 'FLUSHALL');
      if (r instanceof ReplyError) throw r;
    }
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    await Promise.all(this.nodes.map((n) => n.destroy()));
  }

  private own(node: ValkeyNode): ValkeyProcess {
    const n = this.nodes.find((x) => x === node || x.port === node.port);
    if (!n) throw new Error(`${node.address} is not a node of this cluster`);
    return n;
  }
}

function runCli(server: ServerKind, args: string[], timeoutMs: number): Promise<{ code: number | null; output: string }> {
  const { cli, label } = SERVER_BINARY[server];
  return new Promise((resolve) => {
    const child = spawn(cli, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const collect = (d: Buffer) => {
      output = (output + d.toString('utf8')).slice(-20_000);
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    const timer = setTimeout(() => {
      output += `\n(${label}-cli timed out after ${timeoutMs} ms)`;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.once('error', (e) => {
      clearTimeout(timer);
      resolve({ code: -1, output: `${output}\n${e.message}` });
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

/** Evenly split [0, 16383] into n ranges. */
function slotRanges(n: number): [number, number][] {
  const out: [number, number][] = [];
  for (let i = 0; i < n; i++) {
    out.push([Math.floor((i * CLUSTER_SLOTS) / n), Math.floor(((i + 1) * CLUSTER_SLOTS) / n) - 1]);
  }
  return out;
}

/**
 * Creates a 1- or 2-primary cluster by hand (valkey-cli --cluster create insists on >= 3 primaries).
 * Replica i (in node order after the primaries) replicates primary i % primaries.
 */
async function createSmallCluster(cluster: Cluster, primaries: number, deadline: number): Promise<void> {
  const nodes = cluster.nodes;
  const must = async (node: ValkeyNode, ...args: RespArg[]) => {
    const r = await cluster.call(node, ...args);
    if (r instanceof ReplyError) throw new Error(`${node.address} ${args.join(' ')}: ${r.message}`);
    return r;
  };
  const ranges = slotRanges(primaries);
  for (let i = 0; i < primaries; i++) {
    await must(nodes[i]!, 'CLUSTER', 'ADDSLOTSRANGE', ranges[i]![0], ranges[i]![1]);
    await must(nodes[i]!, 'CLUSTER', 'SET-CONFIG-EPOCH', i + 1);
  }
  for (const n of nodes.slice(1)) await must(n, 'CLUSTER', 'MEET', '127.0.0.1', nodes[0]!.port);
  // Wait until every node knows every other node, then attach replicas.
  for (;;) {
    let known = true;
    for (const n of nodes) {
      const views = parseClusterNodes(String(await must(n, 'CLUSTER', 'NODES')));
      if (views.length !== nodes.length || views.some((v) => v.flags.has('handshake'))) known = false;
    }
    if (known) break;
    if (Date.now() > deadline) throw new Error('cluster nodes did not meet in time');
    await sleep(50);
  }
  const ids = await Promise.all(nodes.slice(0, primaries).map(async (n) => String(await must(n, 'CLUSTER', 'MYID'))));
  for (let i = primaries; i < nodes.length; i++) {
    await must(nodes[i]!, 'CLUSTER', 'REPLICATE', ids[(i - primaries) % primaries]!);
  }
}

/**
 * A replica whose nodes.conf shard-id differs from its primary's: valkey-server 8.0 refuses to
 * restart from such a file ("corrupted cluster config file", valkey-io/valkey#774 and #2171), so
 * a node killed before the shard ids settle cannot rejoin. Stable means settled. null when the
 * file agrees (or has no shard ids: older servers).
 */
function nodesConfShardProblem(dir: string): string | null {
  let text: string;
  try {
    text = readFileSync(path.join(dir, 'nodes.conf'), 'utf8');
  } catch {
    return null;
  }
  const shardOf = new Map<string, string>();
  const primaryOf = new Map<string, string>();
  for (const line of text.split('\n')) {
    const f = line.split(' ');
    const shard = /shard-id=([0-9a-f]+)/.exec(f[1] ?? '')?.[1];
    if (!shard || f[0] === 'vars') continue;
    shardOf.set(f[0]!, shard);
    if ((f[2] ?? '').split(',').includes('slave') && f[3] && f[3] !== '-') primaryOf.set(f[0]!, f[3]);
  }
  for (const [replica, primary] of primaryOf) {
    const want = shardOf.get(primary);
    if (want && shardOf.get(replica) !== want) return `nodes.conf: replica ${replica.slice(0, 8)} shard-id differs from its primary's (not settled yet)`;
  }
  return null;
}

/**
 * Starts primaries * (1 + replicasPerPrimary) cluster-enabled servers, creates the cluster
 * (valkey-cli --cluster create … --cluster-replicas R for >= 3 primaries; by hand otherwise) and
 * waits until it is stable (see ValkeyCluster.waitForStable). At creation, nodes[0..primaries)
 * are the primaries; use primaries()/replicas()/shards() for the live roles.
 */
export async function startCluster(opts: ClusterOptions = {}): Promise<ValkeyCluster> {
  const primaries = opts.primaries ?? 3;
  const replicasPerPrimary = opts.replicasPerPrimary ?? 1;
  const nodeTimeoutMs = opts.nodeTimeoutMs ?? 2000;
  const startTimeoutMs = opts.startTimeoutMs ?? 30_000;
  if (!Number.isInteger(primaries) || primaries < 1) throw new Error('startCluster: primaries must be >= 1');
  if (!Number.isInteger(replicasPerPrimary) || replicasPerPrimary < 0) throw new Error('startCluster: replicasPerPrimary must be >= 0');
  const deadline = Date.now() + startTimeoutMs;
  const total = primaries * (1 + replicasPerPrimary);
  const zones = opts.zones && opts.zones.length > 0 ? opts.zones : undefined;
  const server = opts.server ?? 'valkey';
  if (zones) refuseZoneOnRedis(server, 'startCluster');
  const clusterArgs = [
    '--cluster-enabled', 'yes',
    '--cluster-config-file', 'nodes.conf',
    '--cluster-node-timeout', String(nodeTimeoutMs),
  ];

  const started = await Promise.allSettled(
    Array.from({ length: total }, (_, i) =>
      startNode({
        server,
        args: [...clusterArgs, ...(opts.args ?? [])],
        password: opts.password,
        zone: zones?.[i % zones.length],
        startTimeoutMs: 10_000,
      }),
    ),
  );
  const nodes = started.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const cluster = new Cluster(nodes, nodeTimeoutMs, opts.password);
  const failedStart = started.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failedStart) {
    await cluster.stop();
    throw failedStart.reason;
  }

  try {
    if (primaries >= 3) {
      const auth = opts.password !== undefined ? ['-a', opts.password, '--no-auth-warning'] : [];
      const { code, output } = await runCli(
        server,
        [...auth, '--cluster', 'create', ...nodes.map((n) => n.address), '--cluster-replicas', String(replicasPerPrimary), '--cluster-yes'],
        Math.max(1000, deadline - Date.now()),
      );
      if (code !== 0) throw new Error(`${SERVER_BINARY[server].label}-cli --cluster create failed (exit ${code}):\n${output}`);
    } else {
      await createSmallCluster(cluster, primaries, deadline);
    }
    await cluster.waitForStable({ timeoutMs: Math.max(1000, deadline - Date.now()) });
  } catch (e) {
    const logs = nodes.map((n) => `[${n.address}]\n${n.logs(800)}`).join('\n');
    await cluster.stop();
    throw new Error(`${(e as Error).message}\n${logs}`);
  }
  return cluster;
}
