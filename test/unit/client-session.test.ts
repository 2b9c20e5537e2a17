import type net from 'node:net';
import { describe, expect, it } from 'vitest';
import { ClientSession } from '../../src/session/client-session.js';
import type { ClusterNode } from '../../src/cluster/topology.js';
import type { Link, LinkRequest } from '../../src/upstream/link.js';
import type { RespoolConfig } from '../../src/config/types.js';
import { FakeClientSocket, fakeContext, fakeSession } from '../helpers/fake-session.js';
import { ProxyError } from '../../src/errors.js';

// One ClientSession over a fake socket, with the real dispatch and router in front of fake
// pools (no server): replies in request order whatever order the node answers in, the pending
// bound and its backpressure, the query and output bounds, NOAUTH, and CLIENT PAUSE's hold.

const NODE: ClusterNode = { id: 'n', host: '10.0.0.5', port: 6379, address: '10.0.0.5:6379', role: 'primary', health: 'online', zone: null, replicationOffset: 0 };

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
  const pools = new FakePools();
  const { ctx, closed } = fakeContext(pools, NODE, tune, users);
  const { session, socket } = fakeSession(ctx);
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

  it('stops reading at limits.maxPendingPerClient, hands on a buffered request per reply, reads again once half have drained', async () => {
    const { session, socket, pools } = newSession((c) => (c.limits.maxPendingPerClient = 4));
    const resumedAtStart = socket.resumed; // a 'data' listener resumes a Readable once
    socket.send(Array.from({ length: 10 }, (_, i) => cmd('GET', `k${i}`)).join(''));
    expect(pools.sent.length).toBe(4);
    expect(session.pending).toBe(4);
    expect(socket.isPaused()).toBe(true);
    pools.answer(0, ':0\r\n');
    await turn();
    expect(pools.sent.length).toBe(5); // a reply came: the next buffered request takes its place in the window
    expect(pools.sent[4]!.raw).toBe(cmd('GET', 'k4'));
    expect(socket.resumed).toBe(resumedAtStart); // 3 owed > half of 4: not read further
    for (let i = 1; i < 6; i++) {
      pools.answer(i, `:${i}\r\n`);
      await turn();
    }
    expect(pools.sent.map((s) => s.raw).slice(4)).toEqual([4, 5, 6, 7, 8, 9].map((i) => cmd('GET', `k${i}`))); // in order, all of them
    expect(socket.resumed).toBe(resumedAtStart);
    pools.answer(6, ':6\r\n');
    pools.answer(7, ':7\r\n');
    await turn();
    expect(socket.resumed).toBe(resumedAtStart + 1); // half drained, nothing buffered: reading again
    expect(socket.isPaused()).toBe(false);
    expect(socket.text()).toBe([0, 1, 2, 3, 4, 5, 6, 7].map((i) => `:${i}\r\n`).join(''));
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
