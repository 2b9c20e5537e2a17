import { Duplex } from 'node:stream';
import type net from 'node:net';
import pino from 'pino';
import { ClientSession } from '../../src/session/client-session.js';
import { Router } from '../../src/routing/router.js';
import { Topology } from '../../src/cluster/topology.js';
import type { TopologyRefresher } from '../../src/cluster/topology-refresher.js';
import type { UpstreamPools } from '../../src/upstream/upstream-pools.js';
import { CommandTable } from '../../src/commands/command-table.js';
import { UserDirectory } from '../../src/acl/user-directory.js';
import { ClientPause } from '../../src/client/client-pause.js';
import { FairAdmission } from '../../src/client/fair-admission.js';
import { MonitorFeed } from '../../src/client/monitor-feed.js';
import { ScriptCache } from '../../src/scripts/script-cache.js';
import { RunningScripts } from '../../src/scripts/running-scripts.js';
import { ParkedPops } from '../../src/parking/parked-pops.js';
import type { ServerContext } from '../../src/client/server-context.js';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import type { RespoolConfig } from '../../src/config/types.js';
import { TenantDirectory } from '../../src/tenants/tenant-directory.js';

// Client sessions without a server or a network: the real session, dispatch and router, over a
// fake client socket, in front of whatever pools the test gives (fakes of its own, or real
// NodePools over fake upstream sockets: fake-upstream-socket.ts).

const table = CommandTable.builtin();

/** The client's end: what respool wrote to it, and whether respool reads it. */
export class FakeClientSocket extends Duplex {
  readonly received: Buffer[] = [];
  /** false: the client stops reading (writes are never acknowledged). */
  reads = true;
  /** Times respool resumed reading this socket. */
  resumed = 0;
  private held: Array<() => void> = [];
  constructor() {
    super({ highWaterMark: 64 });
  }
  override _read(): void {}
  override _write(chunk: Buffer, _enc: BufferEncoding, done: (error?: Error | null) => void): void {
    this.received.push(Buffer.from(chunk));
    if (this.reads) done();
    else this.held.push(() => done());
  }
  override resume(): this {
    this.resumed++;
    return super.resume();
  }
  /** The client reads again: what respool wrote meanwhile is taken. */
  readAgain(): void {
    this.reads = true;
    const held = this.held;
    this.held = [];
    for (const done of held) done();
  }
  /** The client sends bytes. */
  send(text: string | Buffer): void {
    this.emit('data', typeof text === 'string' ? Buffer.from(text, 'latin1') : text);
  }
  text(): string {
    return Buffer.concat(this.received).toString('latin1');
  }
  /** Bytes received so far. */
  receivedBytes(): number {
    let n = 0;
    for (const b of this.received) n += b.length;
    return n;
  }
}

/** A ServerContext for sessions over `pools` in front of one standalone node at `node`. */
export function fakeContext(pools: unknown, node: { host: string; port: number }, tune: (c: RespoolConfig) => void = () => {}, users: RespoolConfig['users'] = []) {
  const config = structuredClone(DEFAULT_CONFIG) as RespoolConfig;
  config.users = users;
  tune(config);
  const refresher = { current: Topology.standalone(node.host, node.port), requestRefresh() {}, install() {} };
  const router = new Router(refresher as unknown as TopologyRefresher, pools as UpstreamPools, config.cluster, pino({ level: 'silent' }));
  const closed: ClientSession[] = [];
  let ids = 0;
  const ctx = {
    config,
    router,
    log: pino({ level: 'silent' }),
    users: new UserDirectory(config, () => table, () => []),
    tenants: new TenantDirectory(config.tenants, config.users),
    admission: new FairAdmission(),
    clientPause: new ClientPause(),
    monitors: new MonitorFeed(),
    scripts: new ScriptCache(),
    runningScripts: new RunningScripts(),
    parking: new ParkedPops(router, () => { throw new Error('no watch connections in a fake session'); }, pino({ level: 'silent' })),
    commands: () => table,
    isCluster: () => false,
    nextClientId: () => ++ids,
    onSessionClosed: (s: ClientSession) => closed.push(s),
    sessions: () => [],
    sessionById: () => undefined,
  } as unknown as ServerContext;
  return { ctx, closed };
}

/** A session on a new fake client socket. */
export function fakeSession(ctx: ServerContext): { session: ClientSession; socket: FakeClientSocket } {
  const socket = new FakeClientSocket();
  return { session: new ClientSession(socket as unknown as net.Socket, ctx), socket };
}
