import calculateSlot from 'cluster-key-slot';
import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Router } from '../../src/routing/router.js';
import type { CallClient, CallOwner } from '../../src/routing/upstream-call.js';
import { Topology, type ClusterNode } from '../../src/cluster/topology.js';
import type { TopologyRefresher } from '../../src/cluster/topology-refresher.js';
import type { UpstreamPools } from '../../src/upstream/upstream-pools.js';
import type { Link, LinkRequest } from '../../src/upstream/link.js';
import { CommandTable } from '../../src/commands/command-table.js';
import { ProxyError } from '../../src/errors.js';

// The router against fake pools and a fake topology owner (no server, no link): which node gets
// a call, how MOVED / ASK are followed and bounded, which failures are retried (never a write
// that may have run), and when it gives up. The owner is a CallOwner, as a reply-queue entry is.

const table = CommandTable.builtin();

function node(port: number): ClusterNode {
  return { id: `n${port}`, host: '10.0.0.9', port, address: `10.0.0.9:${port}`, role: 'primary', health: 'online', zone: null, replicationOffset: 0 };
}

const A = node(7000);
const B = node(7001);
const C = node(7002);

/** Slots 0–8191 on A, the rest on B; C owns nothing until a MOVED says so. */
function twoShards(): Topology {
  return new Topology('cluster', [
    { primary: A, replicas: [], slots: [[0, 8191]] },
    { primary: B, replicas: [], slots: [[8192, 16383]] },
  ], 'test');
}

interface Sent {
  node: string;
  raw: string;
  req: LinkRequest;
}

class FakeRefresher {
  current: Topology | null = twoShards();
  refreshes: string[] = [];
  install(t: Topology): void {
    this.current = t;
  }
  requestRefresh(why: string): void {
    this.refreshes.push(why);
  }
}

class FakePools {
  sent: Sent[] = [];
  blocks: Array<{ node: string; raws: string[] }> = [];
  retryTokens = 100;
  private pool(address: string) {
    return {
      placeFor: (client: { id: number }) => client.id,
      send: (raw: Buffer, req: LinkRequest) => this.sent.push({ node: address, raw: raw.toString('latin1'), req }),
      sendBlock: (items: ReadonlyArray<{ data: Buffer; req: LinkRequest }>) => {
        this.blocks.push({ node: address, raws: items.map((i) => i.data.toString('latin1')) });
        for (const i of items) this.sent.push({ node: address, raw: i.data.toString('latin1'), req: i.req });
      },
    };
  }
  forNode(n: ClusterNode) {
    return this.pool(n.address);
  }
  get(host: string, port: number) {
    return this.pool(`${host}:${port}`);
  }
  health() {
    return { tryRetry: () => this.retryTokens-- > 0 };
  }
}

class Owner implements CallOwner {
  readonly client: CallClient = { id: 1, protocol: 2, db: 0, identity: null, closed: false };
  replies: string[] = [];
  onCallDone(reply: Buffer): void {
    this.replies.push(reply.toString('latin1'));
  }
}

function newRouter(options: Partial<{ maxRedirects: number; retryBudget: number }> = {}) {
  const refresher = new FakeRefresher();
  const pools = new FakePools();
  const router = new Router(refresher as unknown as TopologyRefresher, pools as unknown as UpstreamPools, { maxRedirects: 5, retryBudget: 3, retryBaseMs: 10, retryMaxMs: 40, ...options }, pino({ level: 'silent' }));
  return { router, refresher, pools };
}

const args = (...a: string[]) => a.map((x) => Buffer.from(x));
const raw = (...a: string[]) => Buffer.from(`*${a.length}\r\n${a.map((x) => `$${x.length}\r\n${x}\r\n`).join('')}`);

/** Routes one command the way handlers/keyed.ts does; returns its owner. */
function route(router: Router, ...command: string[]): { owner: Owner; error: Buffer | null } {
  const owner = new Owner();
  const a = args(...command);
  const spec = table.lookup(a);
  const error = router.send({ to: 'keys', owner, request: { raw: raw(...command), args: a, spec, command: spec?.name ?? command[0]!.toLowerCase() }, table });
  return { owner, error };
}

const link = (address: string) => ({ address }) as unknown as Link;
const reply = (s: Sent, text: string) => s.req.onReply(Buffer.from(text, 'latin1'), link(s.node));

/** A key whose slot A owns, and one B owns. */
const keyOnA = ['a', 'b', 'c', 'd', 'e', 'f'].find((k) => calculateSlot(k) <= 8191)!;
const keyOnB = ['a', 'b', 'c', 'd', 'e', 'f'].find((k) => calculateSlot(k) > 8191)!;

afterEach(() => {
  vi.useRealTimers();
});

describe('Router (fake pools and topology, no server)', () => {
  it('sends a keyed command to the primary owning its slot and hands the reply to its owner', () => {
    const { router, pools } = newRouter();
    const { owner, error } = route(router, 'GET', keyOnB);
    expect(error).toBeNull();
    expect(pools.sent.map((s) => s.node)).toEqual([B.address]);
    reply(pools.sent[0]!, '$1\r\nv\r\n');
    expect(owner.replies).toEqual(['$1\r\nv\r\n']);
  });

  it('refuses keys of two slots with CROSSSLOT before anything is sent', () => {
    const { router, pools } = newRouter();
    const { error } = route(router, 'MGET', keyOnA, keyOnB);
    expect(error?.toString()).toBe(`-${ProxyError.crossSlot()}\r\n`);
    expect(pools.sent).toEqual([]);
  });

  it('MOVED: the slot\'s new owner goes into the topology, a refresh is asked for, the call goes there', () => {
    const { router, pools, refresher } = newRouter();
    const slot = calculateSlot(keyOnA);
    const { owner } = route(router, 'GET', keyOnA);
    reply(pools.sent[0]!, `-MOVED ${slot} ${C.host}:${C.port}\r\n`);
    expect(refresher.current!.primaryForSlot(slot)?.address).toBe(C.address);
    expect(refresher.refreshes).toEqual(['moved']);
    expect(pools.sent.map((s) => s.node)).toEqual([A.address, C.address]);
    reply(pools.sent[1]!, '+v\r\n');
    expect(owner.replies).toEqual(['+v\r\n']);
  });

  it('ASK: ASKING and the command in one block to the named node; the topology stays', () => {
    const { router, pools, refresher } = newRouter();
    const slot = calculateSlot(keyOnA);
    route(router, 'GET', keyOnA);
    reply(pools.sent[0]!, `-ASK ${slot} :${C.port}\r\n`); // no host: the replying node's
    expect(pools.blocks).toEqual([{ node: C.address, raws: [raw('ASKING').toString(), raw('GET', keyOnA).toString()] }]);
    expect(refresher.current!.primaryForSlot(slot)?.address).toBe(A.address);
  });

  it('gives up after cluster.maxRedirects redirects with an error naming the command', () => {
    const { router, pools } = newRouter({ maxRedirects: 2 });
    const slot = calculateSlot(keyOnA);
    const { owner } = route(router, 'GET', keyOnA);
    for (let i = 0; i < 3; i++) reply(pools.sent.at(-1)!, `-MOVED ${slot} ${C.host}:${i % 2 === 0 ? C.port : A.port}\r\n`);
    expect(pools.sent.length).toBe(3); // the first send and two redirects
    expect(owner.replies).toEqual([`-${ProxyError.tooManyRedirects('GET', 2)}\r\n`]);
  });

  it('never re-sends a write whose bytes reached a link that then failed', () => {
    const { router, pools } = newRouter();
    const { owner } = route(router, 'INCR', keyOnA);
    pools.sent[0]!.req.onLinkFailure(ProxyError.connectionLost(A.address), true);
    expect(pools.sent.length).toBe(1);
    expect(owner.replies).toEqual([`-${ProxyError.connectionLost(A.address)}\r\n`]);
  });

  it('retries what was never written, after a jittered delay, on the slot\'s owner', () => {
    vi.useFakeTimers({ toFake: ['setTimeout'] });
    const { router, pools } = newRouter();
    const { owner } = route(router, 'INCR', keyOnA);
    pools.sent[0]!.req.onLinkFailure(ProxyError.upstreamUnavailable(A.address, 'connect ECONNREFUSED'), false);
    expect(pools.sent.length).toBe(1);
    vi.advanceTimersByTime(40); // retryMaxMs caps the first delay
    expect(pools.sent.map((s) => s.node)).toEqual([A.address, A.address]);
    reply(pools.sent[1]!, ':1\r\n');
    expect(owner.replies).toEqual([':1\r\n']);
  });

  it('re-sends a read that may have run (safe to repeat), but not after a timeout', () => {
    vi.useFakeTimers({ toFake: ['setTimeout'] });
    const { router, pools } = newRouter();
    route(router, 'GET', keyOnA);
    pools.sent[0]!.req.onLinkFailure(ProxyError.connectionLost(A.address), true);
    vi.advanceTimersByTime(40);
    expect(pools.sent.length).toBe(2);
    const timedOut = route(router, 'GET', keyOnB);
    pools.sent[2]!.req.onLinkFailure(ProxyError.timeout(B.address, 1000), true, 'timeout');
    vi.advanceTimersByTime(40);
    expect(pools.sent.length).toBe(3);
    expect(timedOut.owner.replies).toEqual([`-${ProxyError.timeout(B.address, 1000)}\r\n`]);
  });

  it('never retries a shed request (a bound was reached: a retry adds load where there is too much)', () => {
    vi.useFakeTimers({ toFake: ['setTimeout'] });
    const { router, pools, refresher } = newRouter();
    const { owner } = route(router, 'GET', keyOnA);
    const shed = ProxyError.shed(A.address, 'too many requests in flight on its links');
    pools.sent[0]!.req.onLinkFailure(shed, false, 'shed');
    vi.advanceTimersByTime(100);
    expect(pools.sent.length).toBe(1);
    expect(owner.replies).toEqual([`-${shed}\r\n`]);
    expect(refresher.refreshes).toEqual([]); // shedding says nothing about the topology
  });

  it('retries TRYAGAIN within the request\'s cap, then hands over the node\'s error', () => {
    vi.useFakeTimers({ toFake: ['setTimeout'] });
    const { router, pools } = newRouter({ retryBudget: 2 });
    const { owner } = route(router, 'MSET', `{${keyOnA}}1`, 'x', `{${keyOnA}}2`, 'y');
    for (let i = 0; i < 3; i++) {
      reply(pools.sent.at(-1)!, '-TRYAGAIN Multiple keys request during rehashing of slot\r\n');
      vi.advanceTimersByTime(40);
    }
    expect(pools.sent.length).toBe(3); // the first send and two retries
    expect(owner.replies).toEqual(['-TRYAGAIN Multiple keys request during rehashing of slot\r\n']);
  });

  it('a retry is refused when the node\'s retry budget is spent', () => {
    vi.useFakeTimers({ toFake: ['setTimeout'] });
    const { router, pools } = newRouter();
    pools.retryTokens = 0;
    const { owner } = route(router, 'INCR', keyOnA);
    pools.sent[0]!.req.onLinkFailure(ProxyError.upstreamUnavailable(A.address, 'down'), false);
    vi.advanceTimersByTime(100);
    expect(pools.sent.length).toBe(1);
    expect(owner.replies.length).toBe(1);
  });

  it('without a topology nothing is sent: the error says so', () => {
    const { router, refresher, pools } = newRouter();
    refresher.current = null;
    const { error } = route(router, 'GET', 'k');
    expect(error?.toString()).toBe(`-${ProxyError.topologyUnknown()}\r\n`);
    expect(pools.sent).toEqual([]);
  });
});
