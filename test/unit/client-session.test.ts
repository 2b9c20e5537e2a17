import { Duplex } from 'node:stream';
import type net from 'node:net';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { ClientSession } from '../../src/session/client-session.js';
import { Router } from '../../src/routing/router.js';
import { Topology, type ClusterNode } from '../../src/cluster/topology.js';
import type { TopologyRefresher } from '../../src/cluster/topology-refresher.js';
import type { UpstreamPools } from '../../src/upstream/upstream-pools.js';
import type { Link, LinkRequest } from '../../src/upstream/link.js';
import { CommandTable } from '../../src/commands/command-table.js';
import { UserDirectory } from '../../src/acl/user-directory.js';
import { ClientPause } from '../../src/client/client-pause.js';
import { MonitorFeed } from '../../src/client/monitor-feed.js';
import { ScriptCache } from '../../src/scripts/script-cache.js';
import { RunningScripts } from '../../src/scripts/running-scripts.js';
import type { ServerContext } from '../../src/client/server-context.js';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import type { RespoolConfig } from '../../src/config/types.js';
import { ProxyError } from '../../src/errors.js';

// One ClientSession over a fake socket, with the real dispatch and router in front of fake
// pools (no server): replies in request order whatever order the node answers in, the pending
// bound and its backpressure, the query and output bounds, NOAUTH, and CLIENT PAUSE's hold.

const table = CommandTable.builtin();
const NODE: ClusterNode = { id: 'n', host: '10.0.0.5', port: 6379, address: '10.0.0.5:6379', role: 'primary', health: 'online', zone: null, replicationOffset: 0 };

/** The client's end: what respool wrote to it, and whether respool reads it. */
class FakeClientSocket extends Duplex {
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
  /** The client sends bytes. */
  send(text: string): void {
    this.emit('data', Buffer.from(text, 'latin1'));
  }
  text(): string {
    return Buffer.concat(this.received).toString('latin1');
  }
}

/** The node's side, as the router reaches it: every call it sends, to answer by hand. */
class FakePools {
  readonly sent: Array<{ raw: string; req: LinkRequest }> = [];
  forNode() {
    return { placeFor: (client: { id: number }) => client.id, send: (raw: Buffer, req: LinkRequest) => this.sent.push({ raw: raw.toString('latin1'), req }) };
  }
  health() {
    return { tryRetry: () => false };
  }
  answer(i: number, text: string): void {
    this.sent[i]!.req.onReply(Buffer.from(text, 'latin1'), { address: NODE.address } as unknown as Link);
  }
}

function newSession(tune: (c: RespoolConfig) => void = () => {}, users: RespoolConfig['users'] = []) {
  const config = structuredClone(DEFAULT_CONFIG) as RespoolConfig;
  config.users = users;
  tune(config);
  const pools = new FakePools();
  const refresher = { current: Topology.standalone(NODE.host, NODE.port), requestRefresh() {}, install() {} };
  const router = new Router(refresher as unknown as TopologyRefresher, pools as unknown as UpstreamPools, config.cluster, pino({ level: 'silent' }));
  const closed: ClientSession[] = [];
  let ids = 0;
  const ctx = {
    config,
    router,
    log: pino({ level: 'silent' }),
    users: new UserDirectory(config, () => table, () => []),
    clientPause: new ClientPause(),
    monitors: new MonitorFeed(),
    scripts: new ScriptCache(),
    runningScripts: new RunningScripts(),
    commands: () => table,
    isCluster: () => false,
    nextClientId: () => ++ids,
    onSessionClosed: (s: ClientSession) => closed.push(s),
    sessions: () => [],
    sessionById: () => undefined,
  } as unknown as ServerContext;
  const socket = new FakeClientSocket();
  const session = new ClientSession(socket as unknown as net.Socket, ctx);
  return { session, socket, pools, closed, ctx };
}

const cmd = (...a: string[]) => `*${a.length}\r\n${a.map((x) => `$${x.length}\r\n${x}\r\n`).join('')}`;
const turn = () => new Promise<void>((r) => setImmediate(r)); // replies leave on a microtask; let them out

describe('ClientSession (fake socket, fake pools, no server)', () => {
  it('writes replies in request order when the node answers out of order', async () => {
    const { socket, pools } = newSession();
    socket.send(cmd('GET', 'a') + cmd('GET', 'b') + cmd('PING'));
    expect(pools.sent.map((s) => s.raw)).toEqual([cmd('GET', 'a'), cmd('GET', 'b')]); // PING is answered by respool
    await turn();
    expect(socket.text()).toBe(''); // PONG waits behind the two GETs
    pools.answer(1, '$1\r\nB\r\n');
    await turn();
    expect(socket.text()).toBe('');
    pools.answer(0, '$1\r\nA\r\n');
    await turn();
    expect(socket.text()).toBe('$1\r\nA\r\n$1\r\nB\r\n+PONG\r\n');
  });

  it('stops reading at limits.maxPendingPerClient and reads again once half have drained', async () => {
    const { session, socket, pools } = newSession((c) => (c.limits.maxPendingPerClient = 4));
    const resumedAtStart = socket.resumed; // a 'data' listener resumes a Readable once
    socket.send(Array.from({ length: 10 }, (_, i) => cmd('GET', `k${i}`)).join(''));
    expect(pools.sent.length).toBe(4);
    expect(session.pending).toBe(4);
    expect(socket.isPaused()).toBe(true);
    pools.answer(0, ':0\r\n');
    await turn();
    expect(pools.sent.length).toBe(4); // 3 pending > half of 4: still held back
    expect(socket.resumed).toBe(resumedAtStart);
    pools.answer(1, ':1\r\n');
    await turn();
    expect(socket.resumed).toBe(resumedAtStart + 1); // half drained: reading again, buffered requests first, up to the bound
    expect(pools.sent.length).toBe(6);
    expect(pools.sent.map((s) => s.raw).slice(4)).toEqual([cmd('GET', 'k4'), cmd('GET', 'k5')]);
    expect(socket.isPaused()).toBe(true); // at the bound again
    expect(socket.text()).toBe(':0\r\n:1\r\n');
  });

  it('answers a partial request past limits.maxQueryBytesPerClient with an error and closes', async () => {
    const { socket, closed, pools } = newSession((c) => (c.limits.maxQueryBytesPerClient = 1024));
    socket.send(`*2\r\n$3\r\nSET\r\n$5000\r\n${'x'.repeat(2000)}`);
    await turn();
    expect(socket.text()).toBe(`-${ProxyError.queryBufferExceeded(20 + 2000, 1024)}\r\n`);
    expect(pools.sent).toEqual([]);
    await turn();
    expect(closed.length).toBe(1);
  });

  it('a request whose handling throws (a bug in respool) disconnects that client only, logged, and nothing escapes', async () => {
    const { socket, pools, closed, ctx } = newSession();
    const logged: unknown[] = [];
    (ctx as unknown as { log: { error: (o: unknown) => void } }).log = { error: (o: unknown) => logged.push(o) } as never;
    const send = pools.forNode().send;
    pools.forNode = () => ({
      placeFor: (client: { id: number }) => client.id,
      send: (raw: Buffer, req: LinkRequest): number => {
        if (raw.includes('boom')) throw new RangeError('a bug');
        return send(raw, req);
      },
    });
    expect(() => socket.send(cmd('GET', 'a') + cmd('GET', 'boom') + cmd('GET', 'c'))).not.toThrow();
    await turn();
    expect(closed.length).toBe(1);
    expect(logged.length).toBe(1);
    expect(pools.sent.map((s) => s.raw)).toEqual([cmd('GET', 'a')]); // nothing after the failed request is sent
    pools.answer(0, '$1\r\nA\r\n'); // a reply arriving for the gone client is dropped
    await turn();
    expect(socket.text()).toBe('');
    // Another client of the same server is served as before.
    const otherSocket = new FakeClientSocket();
    new ClientSession(otherSocket as unknown as net.Socket, ctx);
    otherSocket.send(cmd('GET', 'd'));
    expect(pools.sent.map((s) => s.raw)).toEqual([cmd('GET', 'a'), cmd('GET', 'd')]);
    pools.answer(1, '$1\r\nD\r\n');
    await turn();
    expect(otherSocket.text()).toBe('$1\r\nD\r\n');
  });

  it('a protocol error is answered after the replies owed, then the connection closes', async () => {
    const { socket, pools } = newSession();
    socket.send(cmd('GET', 'a') + '*1\r\n$x\r\n');
    await turn();
    expect(socket.text()).toBe('');
    pools.answer(0, '$1\r\nA\r\n');
    await turn();
    expect(socket.text()).toMatch(/^\$1\r\nA\r\n-ERR Protocol error: .*\r\n$/);
  });

  it('disconnects a client that stops reading its replies past clients.maxOutputBytesPerClient', async () => {
    const { socket, pools, closed } = newSession((c) => (c.clients.maxOutputBytesPerClient = 4096));
    socket.reads = false;
    socket.send(cmd('GET', 'big'));
    pools.answer(0, `$10000\r\n${'v'.repeat(10000)}\r\n`);
    await turn();
    expect(closed.length).toBe(1);
    expect(socket.destroyed).toBe(true);
  });

  it('NOAUTH: before AUTH only the table\'s no_auth commands run (QUIT does, GET and PING do not)', async () => {
    const { socket, pools } = newSession(() => {}, [{ name: 'app', password: 'secret-password', rules: 'on ~* +@all' }]);
    socket.send(cmd('GET', 'a') + cmd('PING') + cmd('QUIT'));
    await turn();
    const noauth = `-${ProxyError.noAuth()}\r\n`;
    expect(socket.text()).toBe(`${noauth}${noauth}+OK\r\n`);
    expect(pools.sent).toEqual([]);
  });

  it('CLIENT PAUSE WRITE holds a write (and what follows it) until the pause ends; reads before it go on', async () => {
    const { socket, pools, ctx } = newSession();
    ctx.clientPause.pause(60_000, false);
    socket.send(cmd('GET', 'a') + cmd('SET', 'a', '1') + cmd('GET', 'b'));
    expect(pools.sent.map((s) => s.raw)).toEqual([cmd('GET', 'a')]);
    ctx.clientPause.unpause();
    expect(pools.sent.map((s) => s.raw)).toEqual([cmd('GET', 'a'), cmd('SET', 'a', '1'), cmd('GET', 'b')]);
    pools.answer(2, '$1\r\nb\r\n');
    pools.answer(1, '+OK\r\n');
    pools.answer(0, '$-1\r\n');
    await turn();
    expect(socket.text()).toBe('$-1\r\n+OK\r\n$1\r\nb\r\n');
  });
});
