/**
 * CLIENT TRACKING through respool (issue 8 step 5): invalidations as RESP3 pushes on the client's
 * own connection, one leased connection per node the tracking client touches.
 *
 * Standalone: every scripted sequence runs once directly against a reference valkey-server and
 * once through respool (in front of another valkey-server), and the frames each connection got —
 * replies and pushes — are compared byte for byte (frames cut by the harness's decoder, never by
 * src/resp). Cluster (3 primaries): keys on every primary, BCAST, MULTI on the lane, leases.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import calculateSlot from 'cluster-key-slot';
import { startCluster, startStandalone, type ValkeyCluster, type ValkeyNode } from '../harness/valkey-processes.js';
import type { RespoolProxy } from '../../src/server.js';
import { startTestProxy } from '../helpers/proxy.js';
import { RawConnection } from '../helpers/raw-resp.js';
import { connect, transcript as runSteps, type Step } from '../helpers/transcript.js';
import { sleep, waitFor } from '../helpers/wait.js';

/** How long a step waits for pushes its command may cause (to any connection). */
const SETTLE_MS = 60;
/**
 * Writes can cause pushes, and an invalidation through respool can take longer than SETTLE_MS on
 * a loaded machine (it then landed under the next step): after a write, a run with no reference
 * to wait for settles this long instead.
 */
const WRITE_SETTLE_MS = 200;
const WRITES = new Set(['SET', 'MSET', 'DEL', 'FLUSHALL']);
/** How long a step waits for the pushes the reference run got at that step. */
const PUSH_WAIT_MS = 3000;

/** Every frame that already arrived on `c` (pushes), without waiting. */
function pending(c: RawConnection): Promise<string[]> {
  return c.framesWithin(0);
}

/** Frames arriving on `c` within `ms`. */
function framesWithin(c: RawConnection, ms: number): Promise<string[]> {
  return c.framesWithin(ms);
}

/** Frames on `c` once at least one arrived (waits up to PUSH_WAIT_MS for it), then SETTLE_MS more for any others. */
async function framesAfterOne(c: RawConnection): Promise<string[]> {
  const out: string[] = [];
  const deadline = Date.now() + PUSH_WAIT_MS;
  while (out.length === 0 && Date.now() < deadline) out.push(...(await framesWithin(c, 10)));
  return [...out, ...(await framesWithin(c, SETTLE_MS))];
}

/** The number of push lines under each step of a transcript. */
function pushesPerStep(lines: string[]): number[] {
  const counts: number[] = [];
  for (const l of lines) {
    if (!l.startsWith('    ')) counts.push(0);
    else counts[counts.length - 1]!++;
  }
  return counts;
}

/**
 * Runs `steps` one at a time against `port`: each step's first frame is its reply; then, after a
 * pause, every frame any connection received meanwhile (pushes) is listed under it. Given the
 * `reference` run's transcript, a step first waits (up to PUSH_WAIT_MS) for as many pushes as the
 * reference got there, then SETTLE_MS for any more.
 */
function transcript(port: number, proto: 2 | 3, steps: Step[], reference?: string[]): Promise<string[]> {
  const want = reference === undefined ? undefined : pushesPerStep(reference);
  let step = 0;
  return runSteps(port, proto, steps, async (conns, out) => {
    const got = new Map<number, string[]>();
    const collect = async () => {
      let total = 0;
      for (const [j, c] of conns) {
        const frames = got.get(j) ?? [];
        frames.push(...(await pending(c)));
        got.set(j, frames);
        total += frames.length;
      }
      return total;
    };
    const deadline = Date.now() + PUSH_WAIT_MS;
    while (want !== undefined && (await collect()) < want[step]! && Date.now() < deadline) await sleep(10);
    const isWrite = WRITES.has(String(steps[step]![1]).toUpperCase());
    await sleep(want === undefined && isWrite ? WRITE_SETTLE_MS : SETTLE_MS);
    await collect();
    step++;
    for (const [j, frames] of [...got.entries()].sort((a, b) => a[0] - b[0])) {
      for (const frame of frames) out.push(`    [${j}] push ${JSON.stringify(frame)}`);
    }
  });
}

/** Leased connections in use, from respool's own metrics. */
async function leased(proxy: RespoolProxy): Promise<number> {
  const text = await proxy.metrics.render();
  let total = 0;
  for (const m of text.matchAll(/^respool_leased_connections\{[^}]*state="in_use"[^}]*\} (\d+)/gm)) total += Number(m[1]);
  return total;
}

const invalidate = (...keys: string[]) => `>2\r\n$10\r\ninvalidate\r\n*${keys.length}\r\n${keys.map((k) => `$${Buffer.byteLength(k)}\r\n${k}\r\n`).join('')}`;
const INVALIDATE_ALL = '>2\r\n$10\r\ninvalidate\r\n_\r\n';

/** Sequences that must give exactly Valkey's frames (replies and pushes), RESP3. */
const RESP3_SEQUENCES: Record<string, Step[]> = {
  'default mode: a read key is invalidated once when another client writes it; replies stay intact': [
    [0, 'CLIENT', 'TRACKING', 'ON'],
    [0, 'GET', 'k1'],
    [1, 'SET', 'k1', 'v'],
    [0, 'GET', 'k1'],
    [1, 'SET', 'k1', 'v2'],
    [1, 'SET', 'k1', 'v3'],
    [0, 'PING'],
    [0, 'MGET', 'k1', 'k2'],
    [1, 'DEL', 'k1', 'k2'],
    [0, 'CLIENT', 'GETREDIR'],
    [0, 'CLIENT', 'TRACKINGINFO'],
  ],
  'own writes are invalidated after their reply; NOLOOP: not at all': [
    [0, 'CLIENT', 'TRACKING', 'ON'],
    [0, 'GET', 'own'],
    [0, 'SET', 'own', '1'],
    [0, 'GET', 'own'],
    [0, 'CLIENT', 'TRACKING', 'ON', 'NOLOOP'],
    [0, 'CLIENT', 'TRACKINGINFO'],
    [0, 'GET', 'own'],
    [0, 'SET', 'own', '2'],
    [1, 'SET', 'own', '3'],
  ],
  'OPTIN: tracked only after CLIENT CACHING yes; CLIENT commands keep the flag; MULTI reads': [
    [0, 'CLIENT', 'TRACKING', 'ON', 'OPTIN'],
    [0, 'GET', 'in:a'],
    [0, 'CLIENT', 'CACHING', 'yes'],
    [0, 'CLIENT', 'TRACKINGINFO'],
    [0, 'GET', 'in:b'],
    [0, 'GET', 'in:c'],
    [0, 'CLIENT', 'CACHING', 'yes'],
    [0, 'CLIENT', 'GETNAME'],
    [0, 'GET', 'in:d'],
    [0, 'CLIENT', 'CACHING', 'yes'],
    [0, 'PING'],
    [0, 'GET', 'in:e'],
    [0, 'CLIENT', 'CACHING', 'YES'],
    [0, 'MULTI'],
    [0, 'GET', 'in:f'],
    [0, 'GET', 'in:g'],
    [0, 'EXEC'],
    [1, 'MSET', 'in:a', '1', 'in:b', '1', 'in:c', '1', 'in:d', '1', 'in:e', '1', 'in:f', '1', 'in:g', '1'],
  ],
  'OPTOUT: everything tracked but the command after CLIENT CACHING no': [
    [0, 'CLIENT', 'TRACKING', 'ON', 'OPTOUT'],
    [0, 'GET', 'out:a'],
    [0, 'CLIENT', 'CACHING', 'no'],
    [0, 'GET', 'out:b'],
    [0, 'GET', 'out:c'],
    [0, 'CLIENT', 'CACHING', 'no'],
    [0, 'MULTI'],
    [0, 'GET', 'out:d'],
    [0, 'DISCARD'],
    [0, 'GET', 'out:d'],
    [1, 'MSET', 'out:a', '1', 'out:b', '1', 'out:c', '1', 'out:d', '1'],
  ],
  'BCAST PREFIX: invalidations for matching keys written anywhere, none for others': [
    [0, 'CLIENT', 'TRACKING', 'ON', 'BCAST', 'PREFIX', 'a:'],
    [1, 'SET', 'a:1', 'x'],
    [1, 'SET', 'b:1', 'x'],
    [0, 'CLIENT', 'TRACKING', 'ON', 'BCAST', 'PREFIX', 'c:'],
    [1, 'SET', 'c:1', 'x'],
    [0, 'CLIENT', 'TRACKING', 'ON', 'BCAST', 'PREFIX', 'a:x'],
    [0, 'CLIENT', 'TRACKINGINFO'],
    [0, 'GET', 'b:1'],
    [1, 'SET', 'b:1', 'y'],
  ],
  'option errors are Valkey\'s, and leave tracking as it was': [
    [0, 'CLIENT', 'TRACKING', 'ON', 'PREFIX', 'a'],
    [0, 'CLIENT', 'TRACKING', 'ON', 'OPTIN', 'OPTOUT'],
    [0, 'CLIENT', 'TRACKING', 'ON', 'BCAST', 'OPTIN'],
    [0, 'CLIENT', 'TRACKING', 'ON', 'BOGUS'],
    [0, 'CLIENT', 'TRACKING', 'MAYBE'],
    [0, 'CLIENT', 'TRACKING'],
    [0, 'CLIENT', 'TRACKING', 'ON', 'BCAST', 'PREFIX', 'ab', 'PREFIX', 'a'],
    [0, 'CLIENT', 'GETREDIR'],
    [0, 'CLIENT', 'TRACKINGINFO'],
    [0, 'CLIENT', 'TRACKING', 'ON', 'OPTIN'],
    [0, 'CLIENT', 'TRACKING', 'ON', 'OPTOUT'],
    [0, 'CLIENT', 'TRACKING', 'ON', 'BCAST'],
    [0, 'CLIENT', 'TRACKINGINFO'],
    [0, 'CLIENT', 'TRACKING', 'OFF'],
    [0, 'CLIENT', 'TRACKING', 'ON', 'BCAST', 'PREFIX', 'p'],
    [0, 'CLIENT', 'TRACKING', 'ON', 'BCAST', 'PREFIX', 'pq'],
    [0, 'CLIENT', 'TRACKING', 'ON'],
    [0, 'CLIENT', 'TRACKINGINFO'],
  ],
  'CLIENT CACHING errors': [
    [0, 'CLIENT', 'CACHING', 'yes'],
    [0, 'CLIENT', 'CACHING'],
    [0, 'CLIENT', 'CACHING', 'yes', 'extra'],
    [0, 'CLIENT', 'TRACKING', 'ON'],
    [0, 'CLIENT', 'CACHING', 'yes'],
    [0, 'CLIENT', 'CACHING', 'no'],
    [0, 'CLIENT', 'CACHING', 'maybe'],
    [0, 'CLIENT', 'TRACKING', 'OFF'],
    [0, 'CLIENT', 'TRACKING', 'ON', 'OPTIN'],
    [0, 'CLIENT', 'CACHING', 'no'],
    [0, 'CLIENT', 'TRACKING', 'OFF'],
    [0, 'CLIENT', 'TRACKING', 'ON', 'OPTOUT'],
    [0, 'CLIENT', 'CACHING', 'yes'],
    [0, 'CLIENT', 'GETREDIR', 'x'],
  ],
  'OFF stops invalidations (and OFF when off is +OK); RESET turns tracking off': [
    [0, 'CLIENT', 'TRACKING', 'OFF'],
    [0, 'CLIENT', 'TRACKING', 'ON'],
    [0, 'GET', 'off:a'],
    [0, 'CLIENT', 'TRACKING', 'OFF'],
    [1, 'SET', 'off:a', '1'],
    [0, 'CLIENT', 'GETREDIR'],
    [0, 'CLIENT', 'TRACKINGINFO'],
    [0, 'CLIENT', 'TRACKING', 'ON'],
    [0, 'GET', 'off:b'],
    [0, 'RESET'],
    [1, 'SET', 'off:b', '1'],
    [0, 'CLIENT', 'TRACKINGINFO'],
  ],
  'FLUSHALL: a null invalidation': [
    [0, 'CLIENT', 'TRACKING', 'ON'],
    [0, 'GET', 'fl:a'],
    [1, 'FLUSHALL'],
    [0, 'GET', 'fl:a'],
  ],
};

describe('CLIENT TRACKING through respool, standalone, byte for byte against Valkey', () => {
  let ref: ValkeyNode;
  let node: ValkeyNode;
  let proxy: RespoolProxy;

  beforeAll(async () => {
    [ref, node] = await Promise.all([startStandalone(), startStandalone()]);
    proxy = await startTestProxy([{ host: node.host, port: node.port }]);
  });

  afterAll(async () => {
    await proxy?.close();
    await Promise.all([ref?.stop(), node?.stop()]);
  });

  /** Each RESP3 sequence's direct transcript, once run: what a later run through respool waits for. */
  const directRuns = new Map<string, string[]>();

  for (const [name, steps] of Object.entries(RESP3_SEQUENCES)) {
    it(`RESP3: ${name}`, async () => {
      const direct = await transcript(ref.port, 3, steps);
      directRuns.set(name, direct);
      const through = await transcript(proxy.address.port, 3, steps, direct);
      expect(through).toEqual(direct);
      await waitFor(async () => (await leased(proxy)) === 0, 'leases back');
    });
  }

  it('the expected pushes are there (the oracle is not vacuous)', async () => {
    const name = 'default mode: a read key is invalidated once when another client writes it; replies stay intact';
    const t = await transcript(proxy.address.port, 3, RESP3_SEQUENCES[name]!, directRuns.get(name));
    // SET, SET again after a new GET, DEL after MGET (k2 did not exist: nothing to invalidate)
    expect(t.filter((l) => l.includes('push'))).toEqual(Array(3).fill(`    [0] push ${JSON.stringify(invalidate('k1'))}`));
  });

  it('RESP2: tracking is accepted, and no invalidation reaches the connection (as Valkey without REDIRECT)', async () => {
    const steps: Step[] = [
      [0, 'CLIENT', 'TRACKING', 'ON'],
      [0, 'GET', 'r2:a'],
      [1, 'SET', 'r2:a', '1'],
      [0, 'GET', 'r2:a'],
      [0, 'CLIENT', 'TRACKINGINFO'],
      [0, 'CLIENT', 'TRACKING', 'OFF'],
    ];
    expect(await transcript(proxy.address.port, 2, steps)).toEqual(await transcript(ref.port, 2, steps));
  });

  /**
   * REDIRECT, run against `port`: the target (RESP2 subscribed to __redis__:invalidate, or RESP3)
   * gets the tracking client's invalidations; then the target leaves and the tracking client
   * (RESP3) is told the redirect broke. The target's id is shown as <id> (ids differ per server).
   */
  async function redirectTranscript(port: number, targetProto: 2 | 3, bcast: boolean): Promise<string[]> {
    const target = await connect(port, targetProto);
    const tracker = await connect(port, 3);
    const writer = await connect(port, 2);
    const out: string[] = [];
    try {
      const id = (await target.call('CLIENT', 'ID')).slice(1, -2);
      const norm = (frame: string) => frame.split(`:${id}\r\n`).join(':<id>\r\n');
      if (targetProto === 2) out.push(await target.call('SUBSCRIBE', '__redis__:invalidate'));
      out.push(await tracker.call('CLIENT', 'TRACKING', 'ON', 'REDIRECT', id, ...(bcast ? ['BCAST', 'PREFIX', 'rd:'] : [])));
      out.push(norm(await tracker.call('CLIENT', 'GETREDIR')));
      out.push(norm(await tracker.call('CLIENT', 'TRACKINGINFO')));
      out.push(await tracker.call('GET', 'rd:a'));
      out.push(await writer.call('SET', 'rd:a', '1'));
      out.push(...(await framesAfterOne(target)).map((f) => `target ${f}`));
      out.push(...(await framesWithin(tracker, 0)).map((f) => `tracker ${f}`));
      target.close();
      // The redirect breaks once the server (or respool) has dropped the target: wait for that, not a fixed time.
      await waitFor(async () => !new RegExp(`(^|\\n)id=${id} `).test(await writer.call('CLIENT', 'LIST')), 'the redirect target to be gone');
      out.push(await tracker.call('GET', 'rd:a'));
      out.push(await writer.call('SET', 'rd:a', '2'));
      out.push(...(await framesAfterOne(tracker)).map((f) => `tracker ${norm(f)}`));
      out.push(norm(await tracker.call('CLIENT', 'TRACKINGINFO')));
      out.push(await tracker.call('CLIENT', 'TRACKING', 'ON', 'REDIRECT', '999999'));
      out.push(await tracker.call('CLIENT', 'TRACKING', 'ON', 'REDIRECT', '1', 'REDIRECT', '2'));
      out.push(await tracker.call('CLIENT', 'TRACKING', 'ON', 'REDIRECT', 'x'));
      return out;
    } finally {
      target.close();
      tracker.close();
      writer.close();
    }
  }

  for (const [targetProto, bcast] of [[2, false], [3, false], [2, true]] as const) {
    it(`REDIRECT to a RESP${targetProto} client${bcast ? ' (BCAST)' : ''}: its invalidations, GETREDIR, TRACKINGINFO, redirect broken, errors — as Valkey`, async () => {
      const through = await redirectTranscript(proxy.address.port, targetProto, bcast);
      expect(through).toEqual(await redirectTranscript(ref.port, targetProto, bcast));
      expect(through.some((l) => l.startsWith('target ') && l.includes('rd:a'))).toBe(true); // not vacuous
      expect(through.some((l) => l.includes('tracking-redir-broken'))).toBe(true);
    });
  }

  it('PREFIX redirect is a prefix, not the option', async () => {
    const c = await connect(proxy.address.port, 3);
    try {
      expect(await c.call('CLIENT', 'TRACKING', 'ON', 'BCAST', 'PREFIX', 'redirect')).toBe('+OK\r\n');
    } finally {
      c.close();
    }
  });

  it('CLIENT TRACKING inside MULTI is refused at queue time (respool holds the tracking state)', async () => {
    const c = await connect(proxy.address.port, 3);
    try {
      expect(await c.call('MULTI')).toBe('+OK\r\n');
      expect(await c.call('CLIENT', 'TRACKING', 'ON')).toMatch(/^-ERR respool: CLIENT TRACKING cannot be queued inside MULTI/);
      expect(await c.call('EXEC')).toBe('-EXECABORT Transaction discarded because of previous errors.\r\n');
      expect(await c.call('CLIENT', 'GETREDIR')).toBe(':-1\r\n');
    } finally {
      c.close();
    }
  });

  it('CLIENT TRACKING during WATCH … EXEC opens lanes of its own; the WATCH lease goes back untouched', async () => {
    const c = await connect(proxy.address.port, 3);
    const direct = await RawConnection.connect(node.port);
    const leaseFlags = async () =>
      (await direct.call('CLIENT', 'LIST'))
        .split('\n')
        .filter((l) => l.includes(' name=respool-lease '))
        .map((l) => /flags=(\S+)/.exec(l)![1]!)
        .sort();
    try {
      expect(await c.call('WATCH', 'w:a')).toBe('+OK\r\n');
      expect(await c.call('CLIENT', 'TRACKING', 'ON')).toBe('+OK\r\n');
      expect(await c.call('MULTI')).toBe('+OK\r\n');
      expect(await c.call('GET', 'w:a')).toBe('+QUEUED\r\n');
      expect(await c.call('EXEC')).toBe('*1\r\n_\r\n');
      expect(await c.call('CLIENT', 'GETREDIR')).toBe(':0\r\n');
      expect(await leaseFlags()).toEqual(['N', 't']); // the idle WATCH lease, the tracking lane
    } finally {
      c.close();
      direct.close();
    }
    await waitFor(async () => (await leased(proxy)) === 0, 'leases back');
  });

  it('pipelined: pushes never land inside a reply, every reply in order', async () => {
    const c = await connect(proxy.address.port, 3);
    const w = await connect(proxy.address.port, 3);
    try {
      expect(await c.call('CLIENT', 'TRACKING', 'ON')).toBe('+OK\r\n');
      const n = 200;
      for (let i = 0; i < n; i++) c.send('GET', `pipe:${i}`);
      for (let i = 0; i < n; i++) expect(await c.read()).toBe('_\r\n');
      // Invalidations arrive while the client pipelines more commands.
      for (let i = 0; i < n; i++) {
        w.send('SET', `pipe:${i}`, 'x'.repeat(i));
        c.send('ECHO', `e${i}`);
        c.send('GET', `other:${i}`);
      }
      const frames: string[] = [];
      const end = Date.now() + 5000;
      while (frames.length < 3 * n && Date.now() < end) frames.push(...(await framesWithin(c, 20)));
      const replies = frames.filter((f) => !f.startsWith('>'));
      const pushes = frames.filter((f) => f.startsWith('>'));
      expect(replies).toEqual(Array.from({ length: n }, (_, i) => [`$${`e${i}`.length}\r\ne${i}\r\n`, '_\r\n']).flat());
      expect(pushes.sort()).toEqual(Array.from({ length: n }, (_, i) => invalidate(`pipe:${i}`)).sort());
      for (let i = 0; i < n; i++) w.send('DEL', `pipe:${i}`);
      await framesWithin(w, 100);
    } finally {
      c.close();
      w.close();
    }
  });

  it('INFO clients counts tracking clients; OFF and disconnect free the leases', async () => {
    const a = await connect(proxy.address.port, 3);
    const b = await connect(proxy.address.port, 3);
    const info = async () => /tracking_clients:(\d+)/.exec(await a.call('INFO', 'clients'))![1];
    try {
      expect(await info()).toBe('0');
      expect(await a.call('CLIENT', 'TRACKING', 'ON')).toBe('+OK\r\n');
      expect(await b.call('CLIENT', 'TRACKING', 'ON', 'BCAST')).toBe('+OK\r\n');
      expect(await info()).toBe('2');
      expect(await leased(proxy)).toBe(2);
      expect(await a.call('CLIENT', 'TRACKING', 'OFF')).toBe('+OK\r\n');
      await waitFor(async () => (await leased(proxy)) === 1, 'one lease back after OFF');
      expect(await info()).toBe('1');
      b.close();
      await waitFor(async () => (await leased(proxy)) === 0, 'the disconnected client\'s lease back');
      expect(await info()).toBe('0');
    } finally {
      a.close();
      b.close();
    }
  });

  it('a lane lost under the client: "invalidate everything", then tracking goes on on a new lane', async () => {
    const c = await connect(proxy.address.port, 3);
    const w = await connect(proxy.address.port, 3);
    try {
      expect(await c.call('CLIENT', 'TRACKING', 'ON')).toBe('+OK\r\n');
      expect(await c.call('GET', 'lost:a')).toBe('_\r\n');
      const direct = await RawConnection.connect(node.port);
      const list = await direct.call('CLIENT', 'LIST');
      const lane = list.split('\n').find((l) => l.includes(' name=respool-lease ') && / flags=\S*t/.test(l));
      expect(lane, list).toBeDefined();
      const id = /id=(\d+)/.exec(lane!)![1]!;
      expect(await direct.call('CLIENT', 'KILL', 'ID', id)).toBe(':1\r\n');
      direct.close();
      expect(await framesWithin(c, 200)).toEqual([INVALIDATE_ALL]);
      expect(await c.call('GET', 'lost:a')).toBe('_\r\n');
      expect(await w.call('SET', 'lost:a', '1')).toBe('+OK\r\n');
      expect(await framesWithin(c, 200)).toEqual([invalidate('lost:a')]);
    } finally {
      c.close();
      w.close();
    }
  });

  it('a protocol change while tracking: new lanes in the new protocol', async () => {
    const c = await connect(proxy.address.port, 3);
    try {
      expect(await c.call('CLIENT', 'TRACKING', 'ON')).toBe('+OK\r\n');
      expect((await c.call('HELLO', '2')).startsWith('*')).toBe(true);
      expect(await c.call('GET', 'proto:a')).toBe('$-1\r\n');
      expect(await c.call('CLIENT', 'GETREDIR')).toBe(':0\r\n');
      expect((await c.call('CLIENT', 'TRACKINGINFO')).startsWith('*6\r\n')).toBe(true);
    } finally {
      c.close();
    }
    await waitFor(async () => (await leased(proxy)) === 0, 'leases back');
  });
});

describe('CLIENT TRACKING through respool in front of a 3-primary cluster', () => {
  let cluster: ValkeyCluster;
  let proxy: RespoolProxy;
  /** One key per primary (by port), prefixed. */
  let keysByPrimary: (prefix: string) => Promise<string[]>;

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 0 });
    const seed = cluster.nodes[0]!;
    proxy = await startTestProxy([{ host: seed.host, port: seed.port }]);
    const shards = await cluster.shards();
    const ownerOf = (key: string) => {
      const slot = calculateSlot(key);
      return shards.findIndex((s) => s.slots.some(([a, b]) => slot >= a && slot <= b));
    };
    keysByPrimary = async (prefix) => {
      const found: string[] = [];
      for (let i = 0; found.filter(Boolean).length < shards.length; i++) {
        const key = `${prefix}${i}`;
        const owner = ownerOf(key);
        if (found[owner] === undefined) found[owner] = key;
      }
      return found;
    };
  });

  afterAll(async () => {
    await proxy?.close();
    await cluster?.stop();
  });

  it('keys on three primaries: each invalidated exactly once, one lease per node, freed by OFF', async () => {
    const keys = await keysByPrimary('three:');
    const c = await connect(proxy.address.port, 3);
    const w = await connect(proxy.address.port, 3);
    try {
      expect(await c.call('CLIENT', 'TRACKING', 'ON')).toBe('+OK\r\n');
      for (const k of keys) expect(await c.call('GET', k)).toBe('_\r\n');
      expect(await leased(proxy)).toBe(3);
      for (const k of keys) expect(await w.call('SET', k, 'v')).toBe('+OK\r\n');
      const pushes = await framesWithin(c, 200);
      expect(pushes.sort()).toEqual(keys.map((k) => invalidate(k)).sort());
      for (const k of keys) expect(await c.call('GET', k)).toBe('$1\r\nv\r\n');
      expect(await c.call('DBSIZE')).toMatch(/^:\d+\r\n$/); // whole-data-set commands still merge
      expect(await c.call('MGET', keys[0]!, keys[1]!)).toBe("-CROSSSLOT Keys in request don't hash to the same slot\r\n");
      expect(await c.call('CLIENT', 'TRACKING', 'OFF')).toBe('+OK\r\n');
      await waitFor(async () => (await leased(proxy)) === 0, 'leases back after OFF');
      for (const k of keys) expect(await w.call('DEL', k)).toBe(':1\r\n');
      expect(await framesWithin(c, 150)).toEqual([]);
    } finally {
      c.close();
      w.close();
    }
  });

  it('REDIRECT to a RESP2 subscriber: keys on three primaries each reach it once; a listener per lane; OFF frees them all', async () => {
    const keys = await keysByPrimary('redir:');
    const target = await connect(proxy.address.port, 2);
    const c = await connect(proxy.address.port, 2);
    const w = await connect(proxy.address.port, 2);
    try {
      const id = (await target.call('CLIENT', 'ID')).slice(1, -2);
      await target.call('SUBSCRIBE', '__redis__:invalidate');
      expect(await c.call('CLIENT', 'TRACKING', 'ON', 'REDIRECT', id)).toBe('+OK\r\n');
      for (const k of keys) expect(await c.call('GET', k)).toBe('$-1\r\n');
      expect(await leased(proxy)).toBe(6); // a lane and its listener per primary
      for (const k of keys) expect(await w.call('SET', k, 'v')).toBe('+OK\r\n');
      const messages = await framesWithin(target, 200);
      const message = (k: string) => `*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*1\r\n$${k.length}\r\n${k}\r\n`;
      expect(messages.sort()).toEqual(keys.map(message).sort());
      expect(await framesWithin(c, 0)).toEqual([]);
      expect(await c.call('CLIENT', 'TRACKING', 'OFF')).toBe('+OK\r\n');
      await waitFor(async () => (await leased(proxy)) === 0, 'lanes and listeners back after OFF');
      for (const k of keys) await w.call('DEL', k);
    } finally {
      target.close();
      c.close();
      w.close();
    }
  });

  it('BCAST PREFIX a: → invalidations for a:* written on any primary, none for b:*', async () => {
    const a = await keysByPrimary('a:');
    const b = await keysByPrimary('b:');
    const c = await connect(proxy.address.port, 3);
    const w = await connect(proxy.address.port, 3);
    try {
      expect(await c.call('CLIENT', 'TRACKING', 'ON', 'BCAST', 'PREFIX', 'a:')).toBe('+OK\r\n');
      expect(await leased(proxy)).toBe(3);
      // One prefix, though every primary registered it (INFO stats: the largest count, not the sum).
      expect(await w.call('INFO', 'stats')).toMatch(/\r\ntracking_total_prefixes:1\r\n/);
      for (const k of [...a, ...b]) expect(await w.call('SET', k, '1')).toBe('+OK\r\n');
      const pushes = await framesWithin(c, 200);
      expect(pushes.sort()).toEqual(a.map((k) => invalidate(k)).sort());
      // BCAST option errors are still Valkey's
      expect(await c.call('CLIENT', 'TRACKING', 'ON', 'BCAST', 'PREFIX', 'a:b')).toBe("-ERR Prefix 'a:b' overlaps with an existing prefix 'a:'. Prefixes for a single client must not overlap.\r\n");
      expect(await c.call('CLIENT', 'TRACKING', 'ON')).toBe("-ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.\r\n");
      for (const k of [...a, ...b]) await w.call('DEL', k);
      await framesWithin(c, 100);
    } finally {
      c.close();
      w.close();
    }
    await waitFor(async () => (await leased(proxy)) === 0, 'leases back after disconnect');
  });

  it('MULTI … EXEC runs on the lane of its slot: reads inside it are tracked; OPTIN + CACHING yes', async () => {
    const [k0, k1] = await keysByPrimary('tx:');
    const c = await connect(proxy.address.port, 3);
    const w = await connect(proxy.address.port, 3);
    try {
      expect(await c.call('CLIENT', 'TRACKING', 'ON', 'OPTIN')).toBe('+OK\r\n');
      expect(await c.call('GET', k1!)).toBe('_\r\n'); // not opted in: not tracked
      expect(await c.call('CLIENT', 'CACHING', 'yes')).toBe('+OK\r\n');
      expect(await c.call('MULTI')).toBe('+OK\r\n');
      expect(await c.call('GET', k0!)).toBe('+QUEUED\r\n');
      expect(await c.call('EXEC')).toBe('*1\r\n_\r\n');
      expect(await c.call('CLIENT', 'CACHING', 'yes')).toBe('+OK\r\n');
      expect(await c.call('GET', k1!)).toBe('_\r\n'); // now opted in: tracked
      expect(await w.call('SET', k0!, '1')).toBe('+OK\r\n');
      expect(await w.call('SET', k1!, '1')).toBe('+OK\r\n');
      expect((await framesWithin(c, 200)).sort()).toEqual([invalidate(k0!), invalidate(k1!)].sort());
      await w.call('DEL', k0!);
      await w.call('DEL', k1!);
    } finally {
      c.close();
      w.close();
    }
    await waitFor(async () => (await leased(proxy)) === 0, 'leases back after disconnect');
  });
});
