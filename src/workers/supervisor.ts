import cluster, { type Worker } from 'node:cluster';
import { nodeCrypto } from '../util/lazy-builtins.js';
import { removeSocket, replaceStale } from '../util/socket-file.js';
import { createServer, request as httpRequest, type IncomingMessage } from 'node:http';
import os from 'node:os';
import type { AggregatorRegistry, RegistryContentType } from 'prom-client';
import { aggregatorRegistry } from '../metrics/prom-client-parts.js';
import type { Logger } from 'pino';
import type { HostPort, RespoolConfig } from '../config/types.js';
import { PEER_COMMAND_MESSAGE } from './peer-commands.js';
import { TENANT_USAGE_MESSAGE } from './tenant-usage.js';
import { mergeWindowReports, REPORT_REQUEST, REPORT_RESPONSE, REPORT_TIMEOUT_MS, REPORTS_REQUEST, REPORTS_RESPONSE, type ReportsMessage } from './hot-key-reports.js';
import type { WindowReport } from '../hotkeys/detector.js';
import { usesFleetState } from '../fleet/fleet-state.js';
import { CLIENT_HANDOVER_MESSAGE, takeOver, type TakeoverSlots } from './takeover.js';
import type { Socket } from 'node:net';
import { stopKernelReads } from '../util/kernel-reads.js';
import { MigrationRelay } from './migration-relay.js';
import { isBroadcastMessage, relayBroadcast } from './peer-broadcast.js';
import { isMigrationMessage } from '../migration/migration-members.js';

/**
 * `workers: N` (N > 1), or `supervised: true`: this process becomes the supervisor of N worker
 * processes (node's cluster module). Each worker is a whole respool (its own sessions, topology,
 * upstream links: a node sees workers × connectionsPerNode links from one respool) and they share
 * the listen sockets: the supervisor accepts and hands connections to the workers in turn
 * (cluster's round-robin); one worker accepts them itself.
 *
 *   admin     : the supervisor serves config.admin. /metrics is the sum over workers (prom-client's
 *               AggregatorRegistry over IPC); /healthz is 200 while a worker is up; /readyz is 200
 *               when every worker's /readyz is; POST/DELETE (split rules, …) go to every worker,
 *               the first worker's answer is returned; /hotkeys merges every worker's report;
 *               other GETs (/topology, /config) are the first worker's. Workers run their
 *               admin servers on loopback ports of their own (reported to the supervisor),
 *               with the same token.
 *   signals   : SIGHUP is passed to every worker (each reloads, as a lone respool does); SIGTERM /
 *               SIGINT drain every worker, then the supervisor exits; SIGUSR2 is a takeover: each
 *               worker replaced by one running the code on disk now, without a dropped client
 *               (takeover.ts).
 *   crashes   : a worker that exits unasked is replaced after a backoff: 100 ms doubled per crash
 *               in the last minute, at most 10 s.
 *   RESPOOL   : a RESPOOL SPLIT change (or an automatic split) on one worker is passed to every
 *               other (peer-commands.ts); run-time split changes, admin ones included, are kept
 *               and replayed to a worker started later (a replacement), so all split the same keys.
 *   hot keys  : RESPOOL HOTKEYS / NODES on any worker merge every worker's report (hot-key-reports.ts).
 *   broadcast : a worker asks every other to act now and waits for their acks (peer-broadcast.ts:
 *               a namespace's flush stops every worker's tracking clients' per-key invalidations)
 *   migration : worker 0 runs a live migration, the others carry their clients' writes; their
 *               messages pass through here (migration-relay.ts), and /migration goes to worker 0.
 * Per worker still: the detection itself (each worker's detector sees its own clients; an
 * automatic split one decides reaches the others).
 *   a fleet   : with the fleet's shared state (cluster.fleetState, src/fleet) every worker is a
 *               member of it: split changes reach the workers through it, so a mutation goes to
 *               one worker only and nothing is kept for replay.
 */

export const WORKER_ADMIN_MESSAGE = 'respool:worker-admin';

const BACKOFF_BASE_MS = 100;
const BACKOFF_MAX_MS = 10_000;
const CRASH_WINDOW_MS = 60_000;

export function workerCount(setting: number | 'auto'): number {
  return setting === 'auto' ? Math.max(1, os.availableParallelism()) : setting;
}

/** A run-time split change, kept by the supervisor for workers started later (at most SPLIT_LOG_MAX). */
type SplitChange =
  | { kind: 'command'; message: object }
  | ({ kind: 'admin' } & AdminCall);

const SPLIT_LOG_MAX = 10_000;

interface WorkerSlot {
  worker: Worker;
  /** The worker's own admin server (loopback), once it reported it. */
  admin: HostPort | null;
  /** Resolves once the worker serves (its admin message, sent when its proxy has started: main.ts). */
  ready: Promise<void>;
}

export async function runSupervisor(config: RespoolConfig, count: number, log: Logger, drainMs: number): Promise<void> {
  // Mirrored users' passwords derive from one secret (src/acl/upstream-identity.ts): with none
  // configured, the workers must still share one, or each would lock the others' links out.
  if (config.unixSocket !== null) await replaceStale(config.unixSocket);
  const mirrorSecretEnv: Record<string, string> = config.acl.mirrorSecret === null && config.upstreamAuth === null
    ? { RESPOOL_ACL_MIRROR_SECRET: nodeCrypto().randomBytes(32).toString('hex') }
    : {};
  // One worker (supervised: true) accepts on the shared listen sockets itself, as a lone process
  // does: no hand-off over IPC per connection. With several, the supervisor deals connections
  // out in turn (the kernel's own spread is uneven). A takeover's new worker shares them too.
  if (count === 1) cluster.schedulingPolicy = cluster.SCHED_NONE;
  const slots: WorkerSlot[] = [];
  const crashes: number[] = [];
  // Split rule changes made at run time (RESPOOL SPLIT on a worker, admin POST/DELETE), in order:
  // a worker started later gets them replayed, so every worker splits the same keys.
  const splitLog: SplitChange[] = [];
  const replayTo = (slot: WorkerSlot) => {
    for (const change of splitLog) {
      if (change.kind === 'command') slot.worker.send(change.message);
      else if (slot.admin !== null) void forward(slot.admin, change).catch((err: Error) => log.warn({ err: err.message }, 'could not replay a split change to a new worker'));
    }
  };
  let stopping = false;
  // Workers a takeover replaced, draining: their exit is expected, not a crash (takeover.ts).
  const retiring = new Set<Worker>();

  // A live migration's messages between the workers, and what a worker started later joins.
  const migration = new MigrationRelay((index) => slots[index]?.worker, () => count);
  const fork = (index: number): WorkerSlot => {
    const worker = cluster.fork({ RESPOOL_WORKER_INDEX: String(index), RESPOOL_WORKER_COUNT: String(count), ...mirrorSecretEnv, ...migration.joinEnv(index) });
    let served!: () => void;
    const slot: WorkerSlot = { worker, admin: null, ready: new Promise((resolve) => (served = resolve)) };
    slots[index] = slot;
    worker.on('message', (msg: unknown, handle: unknown) => {
      const m = msg as { type?: string; admin?: HostPort | null };
      // A retiring worker's client connection: to the worker that took its place (takeover.ts).
      if (m?.type === CLIENT_HANDOVER_MESSAGE && handle != null) {
        // Node starts reading a socket it receives, and pause() stops only the stream, not the
        // read from the kernel: what the client sends meanwhile would be read here and lost.
        // readStop leaves it in the kernel for the new worker.
        stopKernelReads(handle as Socket);
        const next = slots[index]!.worker;
        if (next !== worker && next.isConnected()) next.send(msg as object, handle as Socket);
        else (handle as Socket).destroy();
        return;
      }
      if (m?.type === WORKER_ADMIN_MESSAGE) {
        slot.admin = m.admin ?? null;
        served();
        replayTo(slot); // a new (or replacement) worker: the split changes made since start
      }
      // A split change on one worker: to every other worker (peer-commands.ts), and kept for replay.
      if (m?.type === PEER_COMMAND_MESSAGE) {
        if (splitLog.length < SPLIT_LOG_MAX) splitLog.push({ kind: 'command', message: msg as object });
        for (const s of slots) if (s !== slot && !s.worker.isDead()) s.worker.send(msg as object);
      }
      // A worker's tenant usage (tenant-usage.ts): to every other worker, not kept (the next one comes within a period).
      if (m?.type === TENANT_USAGE_MESSAGE) for (const s of slots) if (s !== slot && !s.worker.isDead() && s.worker.isConnected()) s.worker.send(msg as object);
      if (m?.type === REPORTS_REQUEST) gatherReports(slot.worker, msg as ReportsMessage);
      if (isMigrationMessage(msg) && slots[index] === slot) migration.relay(index, msg); // a retired worker's are not its index's
      // One worker asks every other to do something now and waits for them (peer-broadcast.ts).
      if (isBroadcastMessage(msg) && slots[index] === slot) relayBroadcast(index, msg, slots.map((s) => s.worker));
      if (m?.type === REPORT_RESPONSE) gathering.get((msg as ReportsMessage).id)?.((msg as ReportsMessage).report);
    });
    worker.on('exit', (code, signal) => {
      if (stopping || retiring.has(worker)) return;
      const now = Date.now();
      crashes.push(now);
      while (crashes.length > 0 && crashes[0]! < now - CRASH_WINDOW_MS) crashes.shift();
      const delay = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** (crashes.length - 1));
      log.error({ event: 'worker_exited', worker: index, pid: worker.process.pid, code, signal, restartInMs: delay }, 'worker exited; replacing it');
      setTimeout(() => {
        if (!stopping && slots[index] === slot) fork(index);
      }, delay).unref();
    });
    return slot;
  };
  // RESPOOL HOTKEYS / NODES on a worker: every worker's window report (hot-key-reports.ts).
  const gathering = new Map<number, (report: WindowReport | undefined) => void>();
  let gatherId = 0;
  const gatherReports = (asker: Worker, ask: ReportsMessage) => {
    const id = ++gatherId;
    const live = slots.filter((s) => !s.worker.isDead());
    const reports: WindowReport[] = [];
    let left = live.length;
    const finish = () => {
      gathering.delete(id);
      clearTimeout(timer);
      if (!asker.isDead()) asker.send({ type: REPORTS_RESPONSE, id: ask.id, current: ask.current, reports } satisfies ReportsMessage);
    };
    const timer = setTimeout(finish, REPORT_TIMEOUT_MS);
    gathering.set(id, (report) => {
      if (report !== undefined) reports.push(report);
      if (--left === 0) finish();
    });
    for (const s of live) s.worker.send({ type: REPORT_REQUEST, id, current: ask.current } satisfies ReportsMessage);
  };
  for (let i = 0; i < count; i++) fork(i);
  log.info({ workers: count }, 'respool supervisor started its workers');

  const aggregator = new (aggregatorRegistry())();
  // A fleet's shared state carries split changes to every worker (and to workers started later):
  // a mutation goes to one worker, and nothing is kept for replay (it could undo a later change).
  const fleetShared = usesFleetState(config);
  const admin = config.admin === null ? null : await serveAdmin(config.admin, slots, aggregator, log, splitLog, fleetShared);

  // The workers share one Unix socket through this process: it replaces a stale file before they
  // listen and removes the file when it exits (util/socket-file.ts).
  const unixSocket = config.unixSocket;
  if (unixSocket !== null) process.on('exit', () => removeSocket(unixSocket));

  const stop = (signal: NodeJS.Signals) => {
    if (stopping) process.exit(1); // a second signal: stop now
    stopping = true;
    log.info({ signal, drainMs }, 'draining every worker');
    // Old workers still relaying a takeover's TLS clients (they left the supervisor) end now.
    for (const worker of retiring) if (!worker.isDead()) worker.process.kill('SIGTERM');
    const alive = slots.filter((s) => !s.worker.isDead());
    let left = alive.length;
    if (left === 0) process.exit(0);
    for (const s of alive) {
      s.worker.once('exit', () => {
        if (--left === 0) {
          admin?.close();
          process.exit(0);
        }
      });
      s.worker.process.kill('SIGTERM');
    }
    setTimeout(() => process.exit(0), drainMs + 5000).unref();
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGHUP', () => {
    for (const s of slots) if (!s.worker.isDead()) s.worker.process.kill('SIGHUP');
  });
  // SIGUSR2: takeover — every worker replaced by one running the code on disk now, one at a time,
  // without closing a listener or dropping a client (takeover.ts). A second SIGUSR2 meanwhile is ignored.
  let takingOver = false;
  const takeoverSlots: TakeoverSlots = {
    count,
    current: (index) => slots[index]!.worker,
    async replace(index, readyMs) {
      const before = slots[index]!;
      const slot = fork(index);
      let timer: NodeJS.Timeout | undefined;
      try {
        await Promise.race([slot.ready, new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`it did not serve within ${readyMs} ms`)), readyMs)))]);
        return slot.worker;
      } catch (err) {
        retiring.add(slot.worker);
        slot.worker.process.kill('SIGKILL');
        slots[index] = before;
        throw err;
      } finally {
        clearTimeout(timer);
      }
    },
  };
  process.on('SIGUSR2', () => {
    if (takingOver || stopping) return;
    takingOver = true;
    void takeOver(takeoverSlots, retiring, log, drainMs).finally(() => (takingOver = false));
  });
}

/** The supervisor's admin server (see the module comment). */
async function serveAdmin(addr: HostPort, slots: WorkerSlot[], aggregator: AggregatorRegistry<RegistryContentType>, log: Logger, splitLog: SplitChange[], fleetShared: boolean): Promise<ReturnType<typeof createServer>> {
  const live = () => slots.filter((s) => !s.worker.isDead() && s.admin !== null);
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const reply = (status: number, body: string, type = 'text/plain; charset=utf-8') => {
      res.writeHead(status, { 'content-type': type });
      res.end(req.method === 'HEAD' ? undefined : body);
    };
    if (req.method === 'GET' && path === '/metrics') {
      aggregator.clusterMetrics().then(
        (text: string) => reply(200, text, aggregator.contentType),
        (err: Error) => reply(500, `metrics from the workers failed: ${err.message}\n`),
      );
      return;
    }
    const workers = live();
    if ((req.method === 'GET' || req.method === 'HEAD') && path === '/healthz') {
      return workers.length > 0 ? reply(200, 'ok\n') : reply(503, 'no worker is up\n');
    }
    if (workers.length === 0) return reply(503, 'no worker is up\n');
    if ((req.method === 'GET' || req.method === 'HEAD') && path === '/readyz') {
      Promise.all(workers.map((s) => forward(s.admin!, adminCall(req, Buffer.alloc(0))))).then((answers) => {
        const notReady = answers.find((a) => a.status !== 200);
        const pids = workers.map((s) => s.worker.process.pid);
        if (workers.length < slots.length) reply(503, `only ${workers.length} of ${slots.length} workers are up\n`);
        else if (notReady !== undefined) reply(notReady.status, notReady.body.toString(), notReady.type);
        else reply(200, JSON.stringify({ ready: true, workers: pids }), 'application/json; charset=utf-8');
      }, (err: Error) => reply(503, `a worker did not answer /readyz: ${err.message}\n`));
      return;
    }
    if (req.method === 'GET' && path === '/hotkeys') {
      // Every worker's report; their detection windows merged (hot-key-reports.ts), stats summed.
      Promise.all(workers.map((s) => forward(s.admin!, adminCall(req, Buffer.alloc(0))))).then((answers) => {
        const bad = answers.find((a) => a.status !== 200);
        if (bad !== undefined) return reply(bad.status, bad.body.toString(), bad.type);
        reply(200, JSON.stringify(mergeHotKeyReports(answers.map((a) => JSON.parse(a.body.toString()) as HotKeysJson))), 'application/json; charset=utf-8');
      }, (err: Error) => reply(502, `a worker did not answer: ${err.message}\n`));
      return;
    }
    readBody(req).then(async (body) => {
      // Reads: the first worker's answer. Changes: every worker, the first one's answer. A
      // migration: worker 0's (it runs it; another worker answers GET and refuses the steps).
      const migrationPath = path?.startsWith('/migration') === true;
      const coordinator = migrationPath && workers.includes(slots[0]!) ? slots[0]! : null;
      const targets = coordinator !== null ? [coordinator] : req.method === 'GET' || req.method === 'HEAD' || fleetShared || migrationPath ? [workers[0]!] : workers;
      const call = adminCall(req, body);
      const answers = await Promise.all(targets.map((s) => forward(s.admin!, call)));
      const first = answers[0]!;
      if (!fleetShared && !migrationPath && req.method !== 'GET' && req.method !== 'HEAD' && first.status < 300 && splitLog.length < SPLIT_LOG_MAX) {
        splitLog.push({ kind: 'admin', ...call });
      }
      reply(first.status, first.body.toString(), first.type);
    }).catch((err: Error) => reply(502, `a worker did not answer: ${err.message}\n`));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port: addr.port, host: addr.host }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  log.info({ admin: server.address() }, 'supervisor admin server listening');
  return server;
}

/** The parts of a worker's /hotkeys JSON (hot-keys.ts report()) the supervisor merges. */
interface HotKeysJson {
  detection: { topK?: number };
  lastWindow: WindowReport | null;
  currentWindow: WindowReport | null;
  stats?: Record<string, unknown>;
  [other: string]: unknown;
}

/** Workers' /hotkeys as one: windows merged, numeric stats summed, the rest the first worker's (same rules everywhere). */
export function mergeHotKeyReports(reports: HotKeysJson[]): HotKeysJson {
  const first = reports[0]!;
  const topK = first.detection.topK ?? 10;
  const windows = (pick: (r: HotKeysJson) => WindowReport | null) => {
    const ws = reports.map(pick).filter((w): w is WindowReport => w !== null);
    return ws.length === 0 ? null : mergeWindowReports(ws, topK);
  };
  const stats: Record<string, unknown> = { ...(first.stats ?? {}) };
  for (const r of reports.slice(1)) {
    for (const [k, v] of Object.entries(r.stats ?? {})) if (typeof v === 'number' && typeof stats[k] === 'number') stats[k] = (stats[k] as number) + v;
  }
  return { ...first, lastWindow: windows((r) => r.lastWindow), currentWindow: windows((r) => r.currentWindow), stats, workers: reports.length };
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > 1 << 20) reject(new Error('request body over 1 MiB'));
      else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/** A request for a worker's own admin server: the client's, or a logged split change replayed. */
interface AdminCall {
  method: string;
  path: string;
  authorization: string | undefined;
  contentType: string | undefined;
  body: Buffer;
}

function adminCall(req: IncomingMessage, body: Buffer): AdminCall {
  return { method: req.method ?? 'GET', path: req.url ?? '/', authorization: req.headers.authorization, contentType: req.headers['content-type'], body };
}

/** One request to a worker's own admin server, with the client's method, path, headers and body. */
function forward(to: HostPort, call: AdminCall): Promise<{ status: number; body: Buffer; type: string }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { 'content-length': String(call.body.length) };
    if (call.authorization !== undefined) headers['authorization'] = call.authorization;
    if (call.contentType !== undefined) headers['content-type'] = call.contentType;
    const out = httpRequest({ host: to.host, port: to.port, method: call.method, path: call.path, headers, timeout: 5000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 502, body: Buffer.concat(chunks), type: String(res.headers['content-type'] ?? 'text/plain') }));
      res.on('error', reject);
    });
    out.on('timeout', () => out.destroy(new Error('timed out')));
    out.on('error', reject);
    out.end(call.body);
  });
}

