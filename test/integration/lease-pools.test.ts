import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startStandalone, type ValkeyNode } from '../harness/valkey-processes.js';
import { parseInfo, rawCall, ReplyError } from '../harness/raw-client.js';
import { DEFAULT_CONFIG } from '../../src/config/defaults.js';
import type { DedicatedConfig, RespoolConfig } from '../../src/config/types.js';
import { LeasePools, type LeasePoolsOptions, type UnblockFn } from '../../src/upstream/lease-pools.js';
import { LeasedConnection } from '../../src/upstream/leased-connection.js';
import type { LinkFailureCause } from '../../src/upstream/link.js';
import { encodeCommand } from '../../src/resp/encode.js';
import { decodeReply, type RespValue } from '../../src/resp/decode.js';
import { Metrics } from '../../src/metrics/metrics.js';
import { sleep, waitFor } from '../helpers/wait.js';

/** A failure as a LinkRequest saw it. */
class LinkFailure extends Error {
  constructor(
    message: string,
    readonly written: boolean,
    override readonly cause?: LinkFailureCause,
  ) {
    super(message);
  }
}

/** One request on a leased connection; resolves with the decoded reply. */
function request(conn: LeasedConnection, ...args: Array<string | number>): Promise<RespValue> {
  return new Promise((resolve, reject) => {
    conn.send(encodeCommand(args), {
      sentAt: 0,
      onReply: (frame) => resolve(decodeReply(Buffer.from(frame))),
      onLinkFailure: (error, written, cause) => reject(new LinkFailure(error, written, cause)),
    });
  });
}

const text = (v: RespValue): string => (Buffer.isBuffer(v) ? v.toString() : String(v));

async function clientIds(server: ValkeyNode): Promise<number[]> {
  const list = (await server.call('CLIENT', 'LIST')) as string;
  return [...list.matchAll(/^id=(\d+) /gm)].map((m) => Number(m[1]));
}

async function clientLine(server: ValkeyNode, id: number): Promise<string | undefined> {
  const list = (await server.call('CLIENT', 'LIST')) as string;
  return list.split('\n').find((line) => line.startsWith(`id=${id} `));
}

async function blockedClients(server: ValkeyNode): Promise<number> {
  return Number(parseInfo(await server.call('INFO', 'clients'))['blocked_clients']);
}

/** The server's wiring, in miniature: CLIENT UNBLOCK over a short-lived control connection. */
const unblockVia: UnblockFn = async (host, port, clientId) => {
  const reply = await rawCall(port, ['CLIENT', 'UNBLOCK', clientId], { host });
  if (reply instanceof ReplyError) throw reply;
};

function configWith(dedicated: Partial<DedicatedConfig>, upstreamAuth: RespoolConfig['upstreamAuth'] = null): RespoolConfig {
  const base = structuredClone(DEFAULT_CONFIG) as RespoolConfig;
  return { ...base, upstreamAuth, timeouts: { ...base.timeouts, connectMs: 1000 }, dedicated: { ...base.dedicated, ...dedicated } };
}

describe('leased upstream connections (LeasePools) against a real valkey-server', () => {
  let a: ValkeyNode;
  let b: ValkeyNode;
  const made: LeasePools[] = [];

  function pools(dedicated: Partial<DedicatedConfig> = {}, options: LeasePoolsOptions & { unblock?: UnblockFn } = {}): LeasePools {
    const p = new LeasePools(configWith(dedicated), options.unblock ?? unblockVia, options);
    made.push(p);
    return p;
  }

  beforeAll(async () => {
    [a, b] = await Promise.all([startStandalone(), startStandalone()]);
  });

  afterEach(async () => {
    await Promise.all(made.splice(0).map((p) => p.closeAll()));
  });

  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
  });

  it('leases a ready connection, named and identified, and reuses it after a clean release', async () => {
    const p = pools();
    const conn = await p.acquire(a.host, a.port, 2);
    expect(conn.state).toBe('ready');
    expect(conn.address).toBe(a.address);
    expect(conn.clientId).toBeGreaterThan(0);
    expect(await request(conn, 'CLIENT', 'ID')).toBe(conn.clientId);
    expect(text(await request(conn, 'CLIENT', 'GETNAME'))).toBe('respool-lease');
    // pipelined, answered in order
    const [set, get, ping] = await Promise.all([request(conn, 'SET', 'lease:k', 'v1'), request(conn, 'GET', 'lease:k'), request(conn, 'PING')]);
    expect([text(set!), text(get!), text(ping!)]).toEqual(['OK', 'v1', 'PONG']);
    expect(p.stats().byNode[a.address]).toMatchObject({ inUse: 1, idle: 0, waiting: 0 });

    p.release(conn, true);
    expect(p.stats().byNode[a.address]).toMatchObject({ inUse: 0 });
    await waitFor(() => p.stats().byNode[a.address]!.idle === 1, 'the connection to be idle');

    const again = await p.acquire(a.host, a.port, 2);
    expect(again).toBe(conn);
    expect(await request(again, 'CLIENT', 'ID')).toBe(conn.clientId);
    expect(p.stats().total).toBe(1);
    p.release(again, true);
    p.release(again, true); // twice: ignored
    await waitFor(() => p.stats().byNode[a.address]!.idle === 1, 'the connection to be idle');
    expect(p.stats().total).toBe(1);
  });

  it('keeps a BLPOP with timeout 0 waiting (no command timeout) until another client pushes', async () => {
    const p = pools();
    const conn = await p.acquire(a.host, a.port, 2);
    let answered = false;
    const pop = request(conn, 'BLPOP', 'lease:list', 0).finally(() => (answered = true));
    await waitFor(async () => (await blockedClients(a)) === 1, 'BLPOP to block');
    await sleep(1500); // longer than any internal tick would be; nothing may kill it
    expect(answered).toBe(false);
    expect(conn.state).toBe('ready');
    expect(conn.inflightCount).toBe(1);

    expect(await a.call('LPUSH', 'lease:list', 'x')).toBe(1);
    const reply = (await pop) as RespValue[];
    expect(reply.map(text)).toEqual(['lease:list', 'x']);
    expect(conn.inflightCount).toBe(0);
    p.release(conn, true);
  });

  it('setDeadline fails a stuck request with a timeout and closes the connection; release then destroys it', async () => {
    const p = pools();
    const conn = await p.acquire(a.host, a.port, 2);
    const id = conn.clientId;
    conn.setDeadline(300);
    const started = Date.now();
    const stuck = request(conn, 'BLPOP', 'lease:never', 0);
    const behind = request(conn, 'PING').catch((e: unknown) => e);
    const err = (await stuck.catch((e: unknown) => e)) as LinkFailure;
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    expect(err).toBeInstanceOf(LinkFailure);
    expect(err.message).toBe(`ERR respool: upstream ${a.address} did not answer within 300 ms; the command may or may not have run`);
    expect(err.written).toBe(true);
    expect(err.cause).toBe('timeout');
    expect(await behind).toMatchObject({ cause: 'timeout', written: true });
    expect(conn.state).toBe('closed');
    expect(conn.timedOut).toBe(true);
    // after close, a send fails at once as not written
    await expect(request(conn, 'PING')).rejects.toMatchObject({ written: false });

    p.release(conn, true); // "clean" but closed: destroyed, not reused
    await waitFor(() => p.stats().total === 0, 'the lease to be given back');
    await waitFor(async () => !(await clientIds(a)).includes(id), 'the server to drop the connection');
  });

  it('a deadline does not fire while replies come in time, and null turns it off', async () => {
    const p = pools();
    const conn = await p.acquire(a.host, a.port, 2);
    conn.setDeadline(400);
    for (let i = 0; i < 5; i++) {
      expect(text((await request(conn, 'PING'))!)).toBe('PONG');
      await sleep(150); // total well past 400 ms, but every request answered at once
    }
    const pop = request(conn, 'BLPOP', 'lease:late', 0);
    await sleep(100);
    conn.setDeadline(null);
    await sleep(600);
    expect(conn.state).toBe('ready');
    await a.call('RPUSH', 'lease:late', 'y');
    expect(((await pop) as RespValue[]).map(text)).toEqual(['lease:late', 'y']);
    p.release(conn, true);
  });

  it('maxPerNode: a third acquire waits acquireTimeoutMs, then is refused naming the limit; a release meanwhile serves it', async () => {
    const metrics = new Metrics({ defaultMetrics: false });
    const p = pools({ maxPerNode: 2, acquireTimeoutMs: 400 }, { metrics });
    const c1 = await p.acquire(a.host, a.port, 2);
    const c2 = await p.acquire(a.host, a.port, 2);
    expect(c1).not.toBe(c2);

    const started = Date.now();
    const err = (await p.acquire(a.host, a.port, 2).catch((e: unknown) => e)) as Error;
    const waited = Date.now() - started;
    expect(err.message).toBe(`ERR respool: no leased upstream connection to ${a.address} within 400 ms (dedicated.maxPerNode 2 reached)`);
    expect(waited).toBeGreaterThanOrEqual(350);
    expect(waited).toBeLessThan(5000);
    expect(p.stats().refusals.max_per_node).toBe(1);

    // waiting shows up while parked
    const third = p.acquire(a.host, a.port, 2);
    await sleep(50);
    expect(p.stats().byNode[a.address]).toMatchObject({ inUse: 2, waiting: 1 });
    const rendered = await metrics.render();
    expect(rendered).toContain(`respool_leased_connections{node="${a.address}",state="waiting"} 1`);
    expect(rendered).toContain(`respool_leased_connections{node="${a.address}",state="in_use"} 2`);
    expect(rendered).toContain(`respool_lease_refusals_total{reason="max_per_node"} 1`);

    p.release(c1, true);
    expect(await third).toBe(c1);
    expect(p.stats().byNode[a.address]).toMatchObject({ inUse: 2, waiting: 0 });
    expect(p.stats().total).toBe(2);
    // The gauges are set at scrape time from what changed since the last one (not on every lease).
    const after = await metrics.render();
    expect(after).toContain(`respool_leased_connections{node="${a.address}",state="waiting"} 0`);
    expect(after).toContain(`respool_leased_connections{node="${a.address}",state="in_use"} 2`);

    // a dirty release frees a place too: the waiter gets a new connection
    const fourth = p.acquire(a.host, a.port, 2);
    await sleep(50);
    p.release(c2, false);
    const c4 = await fourth;
    expect(c4).not.toBe(c2);
    expect(c4.state).toBe('ready');
    expect(p.stats().total).toBe(2);
    expect(p.stats().refusals.max_per_node).toBe(1);
  });

  it('waiters for one node are served in order', async () => {
    const p = pools({ maxPerNode: 1, acquireTimeoutMs: 3000 });
    const c = await p.acquire(a.host, a.port, 2);
    const order: number[] = [];
    const w1 = p.acquire(a.host, a.port, 2).then((conn) => (order.push(1), conn));
    const w2 = p.acquire(a.host, a.port, 2).then((conn) => (order.push(2), conn));
    p.release(c, true);
    const got1 = await w1;
    p.release(got1, true);
    const got2 = await w2;
    expect(order).toEqual([1, 2]);
    expect(got2).toBe(c);
  });

  it('maxTotal counts leases across nodes; an idle connection elsewhere is closed to make room', async () => {
    const p = pools({ maxPerNode: 10, maxTotal: 2, acquireTimeoutMs: 400 });
    const onA = await p.acquire(a.host, a.port, 2);
    const onB = await p.acquire(b.host, b.port, 2);
    const err = (await p.acquire(a.host, a.port, 3).catch((e: unknown) => e)) as Error;
    expect(err.message).toBe(`ERR respool: no leased upstream connection to ${a.address} within 400 ms (dedicated.maxTotal 2 reached)`);
    expect(p.stats().refusals.max_total).toBe(1);

    // B's connection goes idle: it must not keep A's waiter out
    const bId = onB.clientId;
    const waiting = p.acquire(a.host, a.port, 2);
    await sleep(50);
    p.release(onB, true);
    const second = await waiting;
    expect(second).not.toBe(onA);
    expect(second.address).toBe(a.address);
    expect(p.stats().total).toBe(2);
    expect(p.stats().byNode[b.address]).toMatchObject({ inUse: 0, idle: 0 });
    await waitFor(async () => !(await clientIds(b)).includes(bId), "B's idle connection to be closed");

    // a release on A serves a waiter for B
    const forB = p.acquire(b.host, b.port, 2);
    await sleep(50);
    p.release(second, false);
    expect((await forB).address).toBe(b.address);
    expect(p.stats().total).toBe(2);
  });

  it('release(dirty) closes the connection: the server no longer lists its id', async () => {
    const p = pools();
    const conn = await p.acquire(a.host, a.port, 2);
    await request(conn, 'WATCH', 'lease:w');
    const id = conn.clientId;
    expect(await clientIds(a)).toContain(id);
    p.release(conn, false);
    expect(conn.state).toBe('closed');
    await waitFor(async () => !(await clientIds(a)).includes(id), 'the server to drop the connection');
    await waitFor(() => p.stats().total === 0, 'the count to drop');
    // and the next lease is a fresh connection
    const next = await p.acquire(a.host, a.port, 2);
    expect(next.clientId).not.toBe(id);
    p.release(next, true);
  });

  it('release(clean) with a request still in flight closes instead of reusing', async () => {
    const p = pools();
    const conn = await p.acquire(a.host, a.port, 2);
    const pop = request(conn, 'BLPOP', 'lease:inflight', 0);
    await waitFor(async () => (await blockedClients(a)) === 1, 'BLPOP to block');
    p.release(conn, true);
    await expect(pop).rejects.toMatchObject({ written: true });
    await waitFor(async () => (await blockedClients(a)) === 0, 'the blocked client to go');
    expect(p.stats().total).toBe(0);
  });

  it('abandon(): CLIENT UNBLOCK the blocked lease, then reuse it', async () => {
    const p = pools();
    const conn = await p.acquire(a.host, a.port, 2);
    const id = conn.clientId;
    const pop = request(conn, 'BLPOP', 'lease:abandon', 0);
    await waitFor(async () => (await blockedClients(a)) === 1, 'BLPOP to block');

    p.abandon(conn);
    expect(await pop).toBe(null); // CLIENT UNBLOCK answers it as a timeout
    await waitFor(async () => (await blockedClients(a)) === 0, 'blocked_clients back to 0');
    await waitFor(() => p.stats().byNode[a.address]!.idle === 1, 'the connection to be idle again');
    expect(p.stats()).toMatchObject({ total: 1, byNode: { [a.address]: { inUse: 0, idle: 1 } } });

    const again = await p.acquire(a.host, a.port, 2);
    expect(again).toBe(conn);
    expect(again.clientId).toBe(id);
    expect(text((await request(again, 'PING'))!)).toBe('PONG');
    p.release(again, true);
  });

  it('abandon(): a failed unblock, or no reply within the grace period, closes the lease', async () => {
    // the unblock fails
    const failing = pools({}, { unblock: async () => Promise.reject(new Error('control link down')) });
    const c1 = await failing.acquire(a.host, a.port, 2);
    const id1 = c1.clientId;
    const pop1 = request(c1, 'BLPOP', 'lease:fail1', 0);
    await waitFor(async () => (await blockedClients(a)) === 1, 'BLPOP to block');
    failing.abandon(c1);
    await expect(pop1).rejects.toMatchObject({ written: true });
    await waitFor(async () => (await blockedClients(a)) === 0, 'blocked_clients back to 0');
    await waitFor(async () => !(await clientIds(a)).includes(id1), 'the server to drop it');
    expect(failing.stats().total).toBe(0);

    // the unblock "succeeds" but the command stays blocked (wrong id): closed after the grace period
    const silent = pools({}, { unblock: async () => {}, abandonGraceMs: 300 });
    const c2 = await silent.acquire(a.host, a.port, 2);
    const pop2 = request(c2, 'BLPOP', 'lease:fail2', 0);
    await waitFor(async () => (await blockedClients(a)) === 1, 'BLPOP to block');
    const started = Date.now();
    silent.abandon(c2);
    silent.release(c2, true); // ignored while abandoning
    await expect(pop2).rejects.toMatchObject({ written: true });
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    await waitFor(async () => (await blockedClients(a)) === 0, 'blocked_clients back to 0');
    expect(silent.stats().total).toBe(0);
  });

  it('abandon() with nothing in flight releases it for reuse', async () => {
    const p = pools();
    const conn = await p.acquire(a.host, a.port, 2);
    p.abandon(conn);
    expect(await p.acquire(a.host, a.port, 2)).toBe(conn);
  });

  it('closes idle connections after idleMs', async () => {
    // idleMs 1000 (eviction runs every 500 ms): checked 300 ms in, it leaves ~700 ms of margin.
    const p = pools({ idleMs: 1000 });
    const conn = await p.acquire(a.host, a.port, 2);
    const id = conn.clientId;
    p.release(conn, true);
    await waitFor(() => p.stats().byNode[a.address]!.idle === 1, 'the connection to be idle');
    await sleep(300);
    expect(conn.state).toBe('ready'); // not before idleMs
    await waitFor(() => conn.state === 'closed', 'the idle connection to be evicted', 5000);
    expect(p.stats().total).toBe(0);
    await waitFor(async () => !(await clientIds(a)).includes(id), 'the server to drop it');
  });

  it('an idle connection the server closes is removed, and the next lease is a working one', async () => {
    const p = pools();
    const conn = await p.acquire(a.host, a.port, 2);
    const id = conn.clientId;
    p.release(conn, true);
    await waitFor(() => p.stats().byNode[a.address]!.idle === 1, 'the connection to be idle');
    expect(await a.call('CLIENT', 'KILL', 'ID', id)).toBe(1);
    await waitFor(() => conn.state === 'closed', 'the connection to notice');
    await waitFor(() => p.stats().total === 0, 'the dead idle connection to be removed', 3000);
    const next = await p.acquire(a.host, a.port, 2);
    expect(next).not.toBe(conn);
    expect(text((await request(next, 'PING'))!)).toBe('PONG');
    p.release(next, true);
  });

  it('a dead idle connection handed out before eviction is replaced transparently', async () => {
    const p = pools({ idleMs: 60_000 }); // eviction runs every second: race it
    const conn = await p.acquire(a.host, a.port, 2);
    p.release(conn, true);
    await waitFor(() => p.stats().byNode[a.address]!.idle === 1, 'the connection to be idle');
    await a.call('CLIENT', 'KILL', 'ID', conn.clientId);
    await waitFor(() => conn.state === 'closed', 'the connection to notice');
    const next = await p.acquire(a.host, a.port, 2);
    expect(next).not.toBe(conn);
    expect(next.state).toBe('ready');
    expect(p.stats().total).toBe(1);
    p.release(next, true);
  });

  it('speaks RESP3 on a RESP3 lease, and passes push frames to onPush', async () => {
    const p = pools();
    const conn = await p.acquire(a.host, a.port, 3);
    const line = await clientLine(a, conn.clientId);
    expect(line).toMatch(/ name=respool-lease /);
    expect(line).toMatch(/ resp=3 /);
    const pushes: RespValue[] = [];
    conn.onPush = (frame) => pushes.push(decodeReply(Buffer.from(frame)));

    await request(conn, 'HSET', 'lease:h', 'f', 'v');
    const map = await request(conn, 'HGETALL', 'lease:h');
    expect(map).toBeInstanceOf(Map); // a RESP3 map, not a flat array
    expect(text((await request(conn, 'CLIENT', 'TRACKING', 'on'))!)).toBe('OK');
    expect(text((await request(conn, 'GET', 'lease:t'))!)).toBe('null');
    await a.call('SET', 'lease:t', 'changed'); // invalidates: a push on the lease, between replies
    await waitFor(() => pushes.length > 0, 'the invalidation push');
    expect((pushes[0] as RespValue[]).map((v) => (Array.isArray(v) ? v.map(text) : text(v)))).toEqual(['invalidate', ['lease:t']]);
    expect(text((await request(conn, 'PING'))!)).toBe('PONG'); // replies still matched to requests
    // tracking is state: the caller hands it back dirty
    p.release(conn, false);
    // RESP2 and RESP3 leases to one node are separate pools
    const resp2 = await p.acquire(a.host, a.port, 2);
    expect(Array.isArray(await request(resp2, 'HGETALL', 'lease:h'))).toBe(true);
    p.release(resp2, true);
  });

  it('a killed server: acquire is refused with a clear error; a request on a lease fails as possibly run', async () => {
    const victim = await startStandalone();
    try {
      const p = pools({ acquireTimeoutMs: 300 });
      const conn = await p.acquire(victim.host, victim.port, 2);
      const pop = request(conn, 'BLPOP', 'lease:dead', 0).catch((e: unknown) => e);
      await waitFor(async () => (await blockedClients(victim)) === 1, 'BLPOP to block');
      victim.kill('SIGKILL');
      await victim.exited();
      const err = (await pop) as LinkFailure;
      expect(err.message).toBe(`ERR respool: connection to upstream ${victim.address} was lost; the command may or may not have run`);
      expect(err.written).toBe(true);
      p.release(conn, true); // closed: destroyed

      const started = Date.now();
      const refused = (await p.acquire(victim.host, victim.port, 2).catch((e: unknown) => e)) as Error;
      expect(refused).toBeInstanceOf(Error);
      expect(refused.message).toMatch(new RegExp(`^ERR respool: upstream ${victim.address} is unavailable \\(.*ECONNREFUSED`));
      expect(Date.now() - started).toBeLessThan(5000);
      expect(p.stats().refusals.upstream_unavailable).toBe(1);
      await waitFor(() => p.stats().total === 0, 'the failed dial to be counted out');
      // no retry storm: nothing is dialing any more
      expect(p.stats().byNode[victim.address]).toMatchObject({ inUse: 0, idle: 0, creating: 0, waiting: 0 });
    } finally {
      await victim.stop();
    }
  });

  it('authenticates on both protocols, and a wrong password is a clear refusal', async () => {
    const secured = await startStandalone({ password: 's3cret' });
    try {
      const good = new LeasePools(configWith({}, { username: null, password: 's3cret' }), unblockVia);
      made.push(good);
      for (const protocol of [2, 3] as const) {
        const conn = await good.acquire(secured.host, secured.port, protocol);
        expect(text((await request(conn, 'PING'))!)).toBe('PONG');
        good.release(conn, true);
      }
      const bad = new LeasePools(configWith({}, { username: null, password: 'wrong' }), unblockVia);
      made.push(bad);
      for (const protocol of [2, 3] as const) {
        const err = (await bad.acquire(secured.host, secured.port, protocol).catch((e: unknown) => e)) as Error;
        expect(err.message).toMatch(/^ERR respool: upstream 127\.0\.0\.1:\d+ is unavailable \(handshake (AUTH|HELLO) failed: WRONGPASS/);
      }
    } finally {
      await secured.stop();
    }
  });

  it('a connection queues requests sent before its handshake is done', async () => {
    const conn = new LeasedConnection({ host: a.host, port: a.port, protocol: 2, auth: null, connectTimeoutMs: 1000 });
    try {
      expect(conn.state).toBe('connecting');
      const ping = request(conn, 'PING');
      expect(conn.inflightCount).toBe(1);
      expect(text((await ping)!)).toBe('PONG');
      expect(conn.clientId).toBeGreaterThan(0);
    } finally {
      conn.close();
    }
    // nothing listening: the queued request fails as not written
    const dead = new LeasedConnection({ host: '127.0.0.1', port: 1, protocol: 2, auth: null, connectTimeoutMs: 1000 });
    const unsent = request(dead, 'PING');
    await expect(unsent).rejects.toMatchObject({ written: false });
    await expect(dead.opened).rejects.toThrow(/is unavailable/);
  });

  it('closeAll refuses waiters and closes leased and idle connections', async () => {
    const p = pools({ maxPerNode: 1, acquireTimeoutMs: 5000 });
    const leased = await p.acquire(a.host, a.port, 2);
    const idle = await p.acquire(b.host, b.port, 2);
    p.release(idle, true);
    await waitFor(() => p.stats().byNode[b.address]!.idle === 1, 'the connection to be idle');
    const waiter = p.acquire(a.host, a.port, 2);
    await sleep(50);
    await p.closeAll();
    await expect(waiter).rejects.toThrow('ERR respool: shutting down');
    expect(leased.state).toBe('closed');
    expect(idle.state).toBe('closed');
    expect(p.stats().total).toBe(0);
    await expect(p.acquire(a.host, a.port, 2)).rejects.toThrow('ERR respool: shutting down');
  });
});
