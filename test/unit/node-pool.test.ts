import { afterEach, describe, expect, it, vi } from 'vitest';
import { NodePool, type NodePoolLimits } from '../../src/upstream/node-pool.js';
import { NodeHealth } from '../../src/upstream/node-health.js';
import { ProcessLoad } from '../../src/upstream/process-load.js';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import { ProxyError } from '../../src/errors.js';
import { fakeSockets, flushWrites, recordedRequest, resp, type FakeUpstreamSocket, type RecordedRequest } from '../helpers/fake-upstream-socket.js';

// NodePool against fake sockets (no server): which link a client's requests take, the order of
// requests that waited for a link, every bound (in flight per link, waiting, process-wide) and
// the queueing window. In the style of Envoy's conn_pool_impl_test.cc.

const ADDRESS = '10.0.0.2:6379';
const LIMITS: NodePoolLimits = { queueWindowMs: 250, maxQueued: 100, maxQueuedBytes: 1 << 20, maxInflightPerLink: 100, maxInflightBytesPerLink: 1 << 20 };

function newPool(size: number, limits: Partial<NodePoolLimits> = {}, load?: ProcessLoad): { pool: NodePool; sockets: FakeUpstreamSocket[] } {
  const fake = fakeSockets();
  const pool = new NodePool('10.0.0.2', 6379, {
    size,
    role: 'primary',
    protocol: 2,
    readonly: false,
    auth: null,
    clientName: 'respool',
    connectTimeoutMs: 1000,
    commandTimeoutMs: 1000,
    health: new NodeHealth(ADDRESS, DEFAULT_CONFIG.resilience),
    limits: { ...LIMITS, ...limits },
    load,
    openSocket: fake.open,
  });
  return { pool, sockets: fake.sockets };
}

/** Opens a fake link and answers its handshake. */
async function openLink(socket: FakeUpstreamSocket): Promise<void> {
  socket.open();
  await flushWrites();
  expect(socket.takeWritten()).toBe(resp('CLIENT', 'SETNAME', 'respool'));
  socket.reply('+OK\r\n');
}

const GET = (k: string) => Buffer.from(resp('GET', k));

afterEach(() => {
  vi.useRealTimers();
});

describe('NodePool (fake sockets, no server)', () => {
  it('dials a place only when a request is placed on it, never more than `size` links, each place\'s requests on its own link in order', async () => {
    const { pool, sockets } = newPool(2);
    const log: string[] = [];
    pool.send(GET('warm'), recordedRequest('warm', log), -1); // no place asked for: the first place only
    expect(sockets.length).toBe(1);
    await openLink(sockets[0]!);
    await flushWrites();
    expect(sockets[0]!.takeWritten()).toBe(resp('GET', 'warm'));
    sockets[0]!.reply('+w\r\n');
    pool.send(GET('p1'), recordedRequest('p1', log), 1); // place 1: dialed now
    expect(sockets.length).toBe(2);
    await openLink(sockets[1]!);
    for (let i = 0; i < 20; i++) pool.send(GET(`c${i % 4}`), recordedRequest(`c${i % 4}`, log), i % 4);
    await flushWrites();
    expect(sockets.length).toBe(2);
    // Places 0 and 2 share link 0, places 1 and 3 link 1: each place's commands on one link, in order.
    const onLink = sockets.map((s) => s.takeWritten());
    expect(onLink[0]).toBe([0, 4, 8, 12, 16].map((i) => resp('GET', `c${i % 4}`) + resp('GET', `c${(i + 2) % 4}`)).join(''));
    expect(onLink[1]).toBe(resp('GET', 'p1') + [1, 5, 9, 13, 17].map((i) => resp('GET', `c${i % 4}`) + resp('GET', `c${(i + 2) % 4}`)).join(''));
  });

  it('placeFor: a client with nothing outstanding goes to the first link; one with requests outstanding keeps its place', async () => {
    const { pool, sockets } = newPool(2);
    const idle = { id: 7, linkPlace: 1, pending: 1 };
    expect(pool.placeFor(idle)).toBe(0); // nothing else outstanding: placed afresh, on the first place
    expect(idle.linkPlace).toBe(0);
    const busy = { id: 8, linkPlace: 1, pending: 5 };
    expect(pool.placeFor(busy)).toBe(1); // requests outstanding: it stays where they went (order)
    const stranger = { id: 9 }; // not a client session: its id, over the interactive places
    expect(pool.placeFor(stranger)).toBe(1);
    expect(sockets.length).toBe(0); // placing dials nothing; a send does
  });

  it('requests that arrive with no open link wait, then leave in arrival order once one opens', async () => {
    const { pool, sockets } = newPool(1);
    const log: string[] = [];
    const reqs = ['a', 'b', 'c'].map((n) => recordedRequest(n, log));
    for (const [i, r] of reqs.entries()) pool.send(GET(`k${i}`), r, i);
    expect(pool.waitingCount).toBe(3);
    await openLink(sockets[0]!);
    expect(pool.waitingCount).toBe(0);
    await flushWrites();
    expect(sockets[0]!.takeWritten()).toBe(resp('GET', 'k0') + resp('GET', 'k1') + resp('GET', 'k2'));
    sockets[0]!.reply(':0\r\n:1\r\n:2\r\n');
    expect(log).toEqual(['a::0', 'b::1', 'c::2']);
  });

  it('fails waiting requests as unsent, naming the node, when the queueing window passes', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    const { pool, sockets } = newPool(1, { queueWindowMs: 250 });
    const log: string[] = [];
    const r = recordedRequest('r', log);
    pool.send(GET('k'), r, 0);
    vi.advanceTimersByTime(249);
    expect(r.failures).toEqual([]);
    vi.advanceTimersByTime(2);
    expect(r.failures).toEqual([{ error: ProxyError.upstreamUnavailable(ADDRESS, 'not connected yet'), written: false, cause: undefined }]);
    expect(pool.waitingCount).toBe(0);
    expect(sockets.length).toBe(1);
  });

  it('fails what waits at once when the only dial fails, with the dial\'s error', () => {
    const { pool, sockets } = newPool(1);
    const log: string[] = [];
    const r = recordedRequest('r', log);
    pool.send(GET('k'), r, 0);
    sockets[0]!.fail('connect ECONNREFUSED 10.0.0.2:6379');
    expect(r.failures).toEqual([{ error: ProxyError.upstreamUnavailable(ADDRESS, 'connect ECONNREFUSED 10.0.0.2:6379'), written: false, cause: undefined }]);
  });

  it('sheds past maxInflightPerLink: an error reply, cause "shed", nothing written', async () => {
    const { pool, sockets } = newPool(1, { maxInflightPerLink: 2 });
    const log: string[] = [];
    pool.send(GET('warm'), recordedRequest('warm', log));
    await openLink(sockets[0]!);
    const more = [recordedRequest('b', log), recordedRequest('c', log)];
    pool.send(GET('b'), more[0]!);
    pool.send(GET('c'), more[1]!);
    expect(more[0]!.failures).toEqual([]);
    expect(more[1]!.failures).toEqual([{ error: ProxyError.shed(ADDRESS, 'too many requests in flight on its links'), written: false, cause: 'shed' }]);
    await flushWrites();
    expect(sockets[0]!.takeWritten()).toBe(resp('GET', 'warm') + resp('GET', 'b'));
  });

  it('sheds past maxQueued and maxQueuedBytes while no link is open', () => {
    const counted = newPool(1, { maxQueued: 2 });
    const log: string[] = [];
    const reqs = [0, 1, 2].map((i) => recordedRequest(`r${i}`, log));
    for (const r of reqs) counted.pool.send(GET('k'), r);
    expect(counted.pool.waitingCount).toBe(2);
    expect(reqs[2]!.failures).toEqual([{ error: ProxyError.shed(ADDRESS, 'too many requests waiting for a connection'), written: false, cause: 'shed' }]);

    const sized = newPool(1, { maxQueuedBytes: 2 * GET('k').length });
    const big = recordedRequest('big', log);
    sized.pool.send(GET('k'), recordedRequest('small', log));
    sized.pool.send(Buffer.from(resp('SET', 'k', 'x'.repeat(100))), big);
    expect(big.failures[0]!.cause).toBe('shed');
    expect(sized.pool.waitingCount).toBe(1);
  });

  it('sheds when the process-wide bound is reached, whatever the link', async () => {
    const load = new ProcessLoad(1, 1 << 20);
    const { pool, sockets } = newPool(1, {}, load);
    const log: string[] = [];
    pool.send(GET('a'), recordedRequest('a', log));
    await openLink(sockets[0]!);
    const b = recordedRequest('b', log);
    pool.send(GET('b'), b);
    expect(b.failures).toEqual([{ error: ProxyError.shed(ADDRESS, 'respool has too many requests in flight'), written: false, cause: 'shed' }]);
    sockets[0]!.reply('+a\r\n');
    const c = recordedRequest('c', log);
    pool.send(GET('c'), c); // room again once a's reply came
    expect(c.failures).toEqual([]);
  });

  it('with queueWindowMs 0 a request for a node with no open link fails at once', () => {
    const { pool } = newPool(1, { queueWindowMs: 0 });
    const log: string[] = [];
    const r = recordedRequest('r', log);
    pool.send(GET('k'), r);
    expect(r.failures.length).toBe(1);
    expect(r.failures[0]!.written).toBe(false);
    expect(r.failures[0]!.cause).toBe('shed');
  });

  it('sendBlock writes every item on one link, back to back, or fails them all unsent', async () => {
    const { pool, sockets } = newPool(2);
    const log: string[] = [];
    const items = ['MULTI', 'EXEC'].map((c) => ({ data: Buffer.from(resp(c)), req: recordedRequest(c, log) }));
    pool.sendBlock(items, 1); // links still connecting: the block waits on one of them, in order
    for (const s of sockets) await openLink(s);
    await flushWrites();
    const written = sockets.map((s) => s.takeWritten()).filter((w) => w !== '');
    expect(written).toEqual([resp('MULTI') + resp('EXEC')]);

    const closed = newPool(1);
    closed.pool.close();
    const lost = [{ data: Buffer.from(resp('ASKING')), req: recordedRequest('x', log) }, { data: GET('k'), req: recordedRequest('y', log) }];
    closed.pool.sendBlock(lost);
    for (const { req } of lost) expect((req as RecordedRequest).failures[0]!.written).toBe(false);
  });
});
