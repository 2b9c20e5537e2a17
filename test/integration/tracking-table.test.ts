/**
 * respool's tracking table (client/tracked-keys.ts, issue 28): `tracking-table-max-keys` bounds
 * the keys tracked through respool as one server bounds its own. Each exchange runs against one
 * valkey-server (the oracle), respool in front of another, and respool in front of a 3-primary
 * cluster — where the nodes' own limits would keep a key per node and a client waiting for the
 * evicted keys' invalidations (Valkey's "Server is able to evacuate enough keys…") would wait for
 * ever.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, startStandalone, type ValkeyCluster, type ValkeyNode } from '../harness/valkey-processes.js';
import type { RespoolProxy } from '../../src/server.js';
import { startTestProxy } from '../helpers/proxy.js';
import type { RawConnection } from '../helpers/raw-resp.js';
import { connect } from '../helpers/transcript.js';
import { keysOverNodes } from '../helpers/one-server.js';

const KEYS = 40;
/** Valkey evicts at its next command or cron tick (10 Hz): every invalidation is there well within this. */
const READ_MS = 5000;

/** The key an invalidation names: RESP2 `message __redis__:invalidate [key]` or RESP3 `>2 invalidate [key]`. */
function invalidatedKey(frame: string): string {
  const m = /invalidate\r\n\*1\r\n\$\d+\r\n([^\r]*)\r\n$/.exec(frame);
  if (m === null) throw new Error(`not a one-key invalidation: ${JSON.stringify(frame)}`);
  return m[1]!;
}

interface Outcome {
  /** CONFIG SET's reply and CONFIG GET's after it. */
  set: string;
  get: string;
  /** Keys named by the invalidations that arrived, in order. */
  invalidated: string[];
  /** What arrived after them: PING's reply, then anything else (nothing, on Valkey). */
  after: string[];
}

/**
 * Tracks `KEYS` keys (or, with OPTIN, the even ones read after CLIENT CACHING yes), lowers
 * tracking-table-max-keys to 1, and collects the invalidations of the evicted keys: on a RESP2
 * subscriber the client redirects to, or on the client's own RESP3 connection.
 */
async function evict(port: number, mode: 'redirect' | 'resp3' | 'optin'): Promise<Outcome> {
  const w = await connect(port, 2);
  const target = mode === 'redirect' ? await connect(port, 2) : null;
  const c = await connect(port, mode === 'redirect' ? 2 : 3);
  try {
    await w.call('FLUSHALL');
    let expected = KEYS - 1;
    if (target !== null) {
      const id = (await target.call('CLIENT', 'ID')).slice(1, -2);
      await target.call('SUBSCRIBE', '__redis__:invalidate');
      expect(await c.call('CLIENT', 'TRACKING', 'ON', 'REDIRECT', id)).toBe('+OK\r\n');
    } else {
      expect(await c.call('CLIENT', 'TRACKING', 'ON', ...(mode === 'optin' ? ['OPTIN'] : []))).toBe('+OK\r\n');
    }
    for (let i = 0; i < KEYS; i++) {
      await w.call('SET', `key${i}`, String(i));
      if (mode === 'optin' && i % 2 === 0) expect(await c.call('CLIENT', 'CACHING', 'yes')).toBe('+OK\r\n');
      expect(await c.call('GET', `key${i}`)).toBe(`$${String(i).length}\r\n${i}\r\n`);
    }
    if (mode === 'optin') expected = KEYS / 2 - 1; // keys read without CACHING yes are not tracked
    const receiver = target ?? c;
    const set = await c.call('CONFIG', 'SET', 'tracking-table-max-keys', '1');
    const invalidated: string[] = [];
    for (let i = 0; i < expected; i++) invalidated.push(invalidatedKey(await receiver.read(READ_MS)));
    receiver.send('PING');
    const after = [await receiver.read(READ_MS), ...(await receiver.framesWithin(300))];
    const get = await c.call('CONFIG', 'GET', 'tracking-table-max-keys');
    expect(await c.call('CONFIG', 'SET', 'tracking-table-max-keys', '1000000')).toBe('+OK\r\n');
    return { set, get, invalidated, after };
  } finally {
    c.close();
    target?.close();
    w.close();
  }
}

/** The outcome as compared: which keys were evicted is the server's choice (Valkey: random ones), how many and that each is told once are not. */
function shape(o: Outcome, mode: 'redirect' | 'resp3' | 'optin'): unknown {
  const tracked = Array.from({ length: KEYS }, (_, i) => `key${i}`).filter((_, i) => mode !== 'optin' || i % 2 === 0);
  return {
    set: o.set,
    get: o.get,
    count: o.invalidated.length,
    distinct: new Set(o.invalidated).size,
    allTracked: o.invalidated.every((k) => tracked.includes(k)),
    after: o.after,
  };
}

const MODES = ['redirect', 'resp3', 'optin'] as const;

describe('tracking-table-max-keys: respool bounds the keys tracked through it as one server does', () => {
  let oracle: ValkeyNode;
  let single: ValkeyNode;
  let cluster: ValkeyCluster;
  let overSingle: RespoolProxy;
  let overCluster: RespoolProxy;
  const direct = new Map<string, unknown>();

  beforeAll(async () => {
    [oracle, single, cluster] = await Promise.all([startStandalone(), startStandalone(), startCluster({ primaries: 3, replicasPerPrimary: 0 })]);
    overSingle = await startTestProxy([{ host: single.host, port: single.port }]);
    overCluster = await startTestProxy([{ host: cluster.nodes[0]!.host, port: cluster.nodes[0]!.port }]);
    for (const mode of MODES) direct.set(mode, shape(await evict(oracle.port, mode), mode));
  });

  afterAll(async () => {
    await overSingle?.close();
    await overCluster?.close();
    await Promise.all([oracle?.stop(), single?.stop(), cluster?.stop()]);
  });

  it('the oracle evicts every tracked key but one, each told once (the comparison is not vacuous)', () => {
    expect(direct.get('redirect')).toMatchObject({ set: '+OK\r\n', count: KEYS - 1, distinct: KEYS - 1, allTracked: true });
    expect(direct.get('optin')).toMatchObject({ count: KEYS / 2 - 1, distinct: KEYS / 2 - 1 });
  });

  for (const mode of MODES) {
    it(`${mode}: through respool in front of one server, as Valkey`, async () => {
      expect(shape(await evict(overSingle.address.port, mode), mode)).toEqual(direct.get(mode));
    });
    it(`${mode}: through respool in front of a 3-primary cluster, as Valkey (the nodes' own limits would keep a key each)`, async () => {
      expect(shape(await evict(overCluster.address.port, mode), mode)).toEqual(direct.get(mode));
    });
  }

  it('INFO tracking_total_keys / items: as Valkey after reads by two clients, reads inside MULTI, and a FLUSHALL', async () => {
    const counts = async (port: number): Promise<string[]> => {
      const a = await connect(port, 3);
      const b = await connect(port, 3);
      // The FLUSHALL's "invalidate everything" push comes before INFO's reply: skipped.
      const info = async () => {
        a.send('INFO', 'stats');
        let reply = await a.read();
        while (reply.startsWith('>')) reply = await a.read();
        return /tracking_total_keys:(\d+)\r\ntracking_total_items:(\d+)/.exec(reply)!.slice(1).join('/');
      };
      try {
        await a.call('FLUSHALL');
        const out = [await info()];
        for (const c of [a, b]) expect(await c.call('CLIENT', 'TRACKING', 'ON')).toBe('+OK\r\n');
        await a.call('GET', 'info:1');
        await a.call('MGET', 'info:{t}2', 'info:{t}3');
        await b.call('GET', 'info:1');
        out.push(await info());
        await b.call('MULTI');
        await b.call('GET', 'info:{u}4');
        await b.call('STRLEN', 'info:{u}5');
        await b.call('EXEC');
        out.push(await info());
        await b.call('FLUSHALL');
        out.push(await info());
        return out;
      } finally {
        a.close();
        b.close();
      }
    };
    const want = await counts(oracle.port);
    expect(want).toEqual(['0/0', '3/4', '5/6', '0/0']);
    expect(await counts(overCluster.address.port)).toEqual(want);
    expect(await counts(overSingle.address.port)).toEqual(want);
  });

  it('a FLUSHALL, or a FLUSHDB inside MULTI, gives a tracking client one "invalidate everything" after the reply, as Valkey (not one per node)', async () => {
    const keys = await keysOverNodes(cluster, 'flush:', 3); // a lane on every primary
    const exchange = async (port: number): Promise<string[]> => {
      const c = await connect(port, 3);
      const w = await connect(port, 3);
      try {
        await w.call('FLUSHALL');
        expect(await c.call('CLIENT', 'TRACKING', 'ON')).toBe('+OK\r\n');
        for (const k of keys) await c.call('GET', k);
        const out = [await w.call('FLUSHALL'), ...(await c.framesWithin(300))];
        out.push(await c.call('PING'), ...(await c.framesWithin(300)));
        for (const k of keys) await c.call('GET', k);
        c.send('MULTI');
        c.send('FLUSHDB');
        c.send('EXEC');
        for (let i = 0; i < 3; i++) out.push(await c.read(READ_MS));
        out.push(...(await c.framesWithin(300)));
        out.push(await c.call('PING'), ...(await c.framesWithin(300)));
        return out;
      } finally {
        c.close();
        w.close();
      }
    };
    const want = await exchange(oracle.port);
    expect(want).toEqual(['+OK\r\n', '>2\r\n$10\r\ninvalidate\r\n_\r\n', '+PONG\r\n', '+OK\r\n', '+QUEUED\r\n', '*1\r\n+OK\r\n', '>2\r\n$10\r\ninvalidate\r\n_\r\n', '+PONG\r\n']);
    expect(await exchange(overCluster.address.port)).toEqual(want);
    expect(await exchange(overSingle.address.port)).toEqual(want);
  });

  it('a key read again after its eviction is tracked again: its change is invalidated once', async () => {
    const port = overCluster.address.port;
    const c = await connect(port, 3);
    const w = await connect(port, 3);
    try {
      expect(await c.call('CLIENT', 'TRACKING', 'ON')).toBe('+OK\r\n');
      await c.call('GET', 'again:a');
      await c.call('GET', 'again:b');
      expect(await c.call('CONFIG', 'SET', 'tracking-table-max-keys', '1')).toBe('+OK\r\n');
      expect(invalidatedKey(await c.read(READ_MS))).toBe('again:a'); // the oldest
      expect(await c.call('CONFIG', 'SET', 'tracking-table-max-keys', '0')).toBe('+OK\r\n'); // 0: no limit, as Valkey
      await c.call('GET', 'again:a');
      expect(await w.call('SET', 'again:a', '1')).toBe('+OK\r\n');
      const pushes = [await c.read(READ_MS), ...(await c.framesWithin(300))].map(invalidatedKey);
      expect(pushes).toEqual(['again:a']);
    } finally {
      await w.call('CONFIG', 'SET', 'tracking-table-max-keys', '1000000');
      c.close();
      w.close();
    }
  });
});
