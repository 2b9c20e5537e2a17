/**
 * Namespaced channels (users[].keyPrefix, issue 30): two users with the same channel and key
 * names subscribe, publish, watch keyspace notifications and track keys through respool — in front of a
 * standalone server and a 3+3 cluster, in RESP2 and RESP3 — and each gets byte for byte what one
 * valkey-server (the oracle) gives one application doing the same: its confirmations, its
 * messages (channels, patterns, shard channels, `__keyspace@0__:` and `__keyevent@0__:`), PUBSUB's
 * answers, and nothing of the other namespace's.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, startStandalone, type ValkeyCluster, type ValkeyNode } from '../harness/valkey-processes.js';
import type { RespoolConfig } from '../../src/config/types.js';
import type { RespoolProxy } from '../../src/server.js';
import { startTestProxy } from '../helpers/proxy.js';
import { RawConnection } from '../helpers/raw-resp.js';

const users = [
  { name: 'default', password: 'adminpw' },
  { name: 'a', password: 'pa', keyPrefix: 'a:' },
  { name: 'b', password: 'pb', keyPrefix: 'b:' },
] as unknown as RespoolConfig['users'];

const SUBSCRIPTIONS: string[][] = [
  ['SUBSCRIBE', 'news'],
  ['PSUBSCRIBE', 'n*'],
  ['SSUBSCRIBE', '{s}ch'],
  ['SUBSCRIBE', '__keyspace@0__:nk', '__keyevent@0__:set'],
  ['PSUBSCRIBE', '__keyspace@0__:n*'],
];
const CONFIRMATIONS = 6;
/** PUBLISH news: message + pmessage; SPUBLISH: smessage; SET nk: keyspace message, its pmessage, keyevent message. */
const MESSAGES = 6;

interface Seen {
  confirmations: string[];
  replies: string[];
  messages: string[];
}

async function connect(port: number, protocol: 2 | 3, auth: string[] | null): Promise<RawConnection> {
  const c = await RawConnection.connect(port);
  if (auth !== null) expect(await c.call('AUTH', ...auth)).toBe('+OK\r\n');
  if (protocol === 3) await c.call('HELLO', '3'); // respool's HELLO names respool: not compared
  return c;
}

/** One application's exchange: a subscriber, then a publisher writing a key and publishing. */
async function subscribe(port: number, protocol: 2 | 3, auth: string[] | null): Promise<{ sub: RawConnection; confirmations: string[] }> {
  const sub = await connect(port, protocol, auth);
  for (const s of SUBSCRIPTIONS) sub.send(...s);
  const confirmations: string[] = [];
  for (let i = 0; i < CONFIRMATIONS; i++) confirmations.push(await sub.read());
  return { sub, confirmations };
}

async function publish(port: number, protocol: 2 | 3, auth: string[] | null): Promise<string[]> {
  const pub = await connect(port, protocol, auth);
  try {
    const replies: string[] = [];
    for (const cmd of [
      ['SET', 'nk', '1'],
      ['PUBLISH', 'news', 'hello'],
      ['SPUBLISH', '{s}ch', 'sharded'],
      ['PUBSUB', 'CHANNELS', 'n*'],
      ['PUBSUB', 'NUMSUB', 'news', 'nope'],
      ['PUBSUB', 'SHARDCHANNELS'],
      ['PUBSUB', 'SHARDNUMSUB', '{s}ch'],
    ]) {
      replies.push(await pub.call(...cmd));
    }
    return replies;
  } finally {
    pub.close();
  }
}

async function messages(sub: RawConnection): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < MESSAGES; i++) out.push(await sub.read());
  // Nothing more comes: the other namespace's messages never reach this client.
  await expect(sub.read(300)).rejects.toThrow(/timed out/);
  // Three upstream connections (channels, shard channels, notifications) deliver in their own order.
  return out.sort();
}

/**
 * CLIENT TRACKING's invalidations for one application: a RESP3 client tracking what it read, one
 * tracking a prefix (BCAST), and a RESP2 client whose invalidations are redirected to another's
 * `__redis__:invalidate` subscription. Each tracking connection is handed back with the
 * connection the writes come from.
 */
async function tracking(port: number, auth: string[] | null): Promise<{ read: () => Promise<string[]>; write: (key: string) => Promise<void>; command: (...args: string[]) => Promise<string>; quiet: () => Promise<void>; close: () => void }> {
  const own = await connect(port, 3, auth);
  const bcast = await connect(port, 3, auth);
  const listener = await connect(port, 2, auth);
  const redirected = await connect(port, 2, auth);
  const writer = await connect(port, 2, auth);
  const id = (await listener.call('CLIENT', 'ID')).slice(1).trim();
  await listener.call('SUBSCRIBE', '__redis__:invalidate');
  expect(await own.call('CLIENT', 'TRACKING', 'ON')).toBe('+OK\r\n');
  expect(await bcast.call('CLIENT', 'TRACKING', 'ON', 'BCAST', 'PREFIX', 'bc:')).toBe('+OK\r\n');
  expect(await redirected.call('CLIENT', 'TRACKING', 'ON', 'REDIRECT', id)).toBe('+OK\r\n');
  await own.call('GET', 'tk');
  await redirected.call('GET', 'rk');
  return {
    write: async (key) => void (await writer.call('SET', key, 'x')),
    command: (...args) => writer.call(...args),
    quiet: async () => {
      for (const c of [own, bcast, listener]) await expect(c.read(300)).rejects.toThrow(/timed out/);
    },
    read: async () => {
      const got: string[] = [];
      for (const [name, c] of [['own', own], ['bcast', bcast], ['listener', listener]] as const) {
        got.push(await c.read().catch((e: Error) => Promise.reject(new Error(`${name}: ${e.message}; before it ${JSON.stringify(got)}`))));
      }
      for (const c of [own, bcast, listener]) await expect(c.read(300)).rejects.toThrow(/timed out/);
      return got;
    },
    close: () => [own, bcast, listener, redirected, writer].forEach((c) => c.close()),
  };
}

/**
 * A pattern that names no notification channel (`*`) beside one that does, as one application
 * sees them: its keyspace and key-event notifications, one pmessage per matching pattern, and
 * none once it left `*`. `other` writes the same key in another namespace meanwhile.
 */
async function patternNotifications(port: number, auth: string[] | null, other: string[] | null): Promise<string[]> {
  const sub = await connect(port, 2, auth);
  const writer = await connect(port, 2, auth);
  const stranger = other === null ? null : await connect(port, 2, other);
  const out: string[] = [];
  const messages = async (n: number) => {
    const got: string[] = [];
    for (let i = 0; i < n; i++) got.push(await sub.read());
    out.push(...got.sort()); // keyspace and key-event pushes of one write: compared as a set
    await expect(sub.read(300)).rejects.toThrow(/timed out/);
  };
  try {
    out.push(await sub.call('PSUBSCRIBE', '*'));
    if (stranger !== null) await stranger.call('SET', 'foo', 'theirs');
    await writer.call('SET', 'foo', 'bar');
    await messages(2);
    out.push(await sub.call('PSUBSCRIBE', '__keyevent@*__:*'));
    await writer.call('DEL', 'foo');
    await messages(3);
    out.push(await sub.call('PUNSUBSCRIBE', '*'));
    if (stranger !== null) await stranger.call('SET', 'foo', 'theirs again');
    await writer.call('SET', 'foo', '1');
    await messages(1);
  } finally {
    sub.close();
    writer.close();
    stranger?.close();
  }
  return out;
}

/**
 * BCAST prefixes as a client sees them: CLIENT TRACKINGINFO, and Valkey's overlap errors (with
 * another provided prefix, and with an existing one), in RESP2 and RESP3.
 */
async function trackingPrefixes(port: number, auth: string[] | null): Promise<string[]> {
  const out: string[] = [];
  for (const protocol of [2, 3] as const) {
    const c = await connect(port, protocol, auth);
    const d = await connect(port, protocol, auth);
    try {
      out.push(await c.call('CLIENT', 'TRACKINGINFO'));
      out.push(await c.call('CLIENT', 'TRACKING', 'ON', 'BCAST', 'PREFIX', 'foo', 'PREFIX', 'bar'));
      out.push(await c.call('CLIENT', 'TRACKINGINFO'));
      out.push(await c.call('CLIENT', 'TRACKING', 'ON', 'BCAST', 'PREFIX', 'foobar'));
      out.push(await d.call('CLIENT', 'TRACKING', 'ON', 'BCAST', 'PREFIX', 'FOOBAR', 'PREFIX', 'FOO'));
      out.push(await d.call('CLIENT', 'TRACKING', 'ON', 'BCAST'));
      out.push(await d.call('CLIENT', 'TRACKINGINFO'));
    } finally {
      c.close();
      d.close();
    }
  }
  return out;
}

describe('namespaced channels (users[].keyPrefix)', () => {
  let standalone: ValkeyNode;
  let cluster: ValkeyCluster;
  let oracle: ValkeyNode;
  const proxies: RespoolProxy[] = [];

  beforeAll(async () => {
    [standalone, cluster, oracle] = await Promise.all([startStandalone(), startCluster({ primaries: 3, replicasPerPrimary: 1 }), startStandalone()]);
    const primaries = await cluster.primaries();
    await Promise.all([standalone, oracle, ...primaries].map((n) => n.call('CONFIG', 'SET', 'notify-keyspace-events', 'KEA')));
  }, 120_000);

  afterAll(async () => {
    await Promise.all(proxies.map((p) => p.close()));
    await Promise.all([standalone?.stop(), cluster?.stop(), oracle?.stop()]);
  });

  const oracleExchange = async (protocol: 2 | 3): Promise<Seen> => {
    await oracle.call('FLUSHALL');
    const { sub, confirmations } = await subscribe(oracle.port, protocol, null);
    try {
      const replies = await publish(oracle.port, protocol, null);
      return { confirmations, replies, messages: await messages(sub) };
    } finally {
      sub.close();
    }
  };

  /** The tracking exchange against one valkey-server (the oracle), from an empty keyspace. */
  const oracleTracking = async (): Promise<string[]> => {
    await oracle.call('FLUSHALL');
    const alone = await tracking(oracle.port, null);
    try {
      for (const key of ['tk', 'bc:1', 'rk']) await alone.write(key);
      return await alone.read();
    } finally {
      alone.close();
    }
  };

  const upstreams: Array<{ name: string; seed: () => Array<{ host: string; port: number }> }> = [
    { name: 'standalone', seed: () => [{ host: standalone.host, port: standalone.port }] },
    { name: '3+3 cluster', seed: () => [{ host: cluster.nodes[0]!.host, port: cluster.nodes[0]!.port }] },
  ];

  for (const upstream of upstreams) {
    describe(upstream.name, () => {
      let proxy: RespoolProxy;
      beforeAll(async () => {
        proxy = await startTestProxy(upstream.seed(), { users, cluster: { refreshPeriodMs: 1000 } } as Partial<RespoolConfig>);
        proxies.push(proxy);
      }, 60_000);

      it('tracking invalidations name the client\'s keys, and only its own', async () => {
        const want = await oracleTracking();
        const a = await tracking(proxy.address.port, ['a', 'pa']);
        const b = await tracking(proxy.address.port, ['b', 'pb']);
        try {
          for (const key of ['tk', 'bc:1', 'rk']) await b.write(key);
          for (const key of ['tk', 'bc:1', 'rk']) await a.write(key);
          expect(await a.read()).toEqual(want);
          expect(await b.read()).toEqual(want);
        } finally {
          a.close();
          b.close();
        }
      });

      it('FLUSHDB tells the namespace\'s tracking clients once that everything changed, as one server\'s flush, and the other namespace\'s nothing', async () => {
        const keys = ['tk', 'bc:1', 'rk', ...Array.from({ length: 20 }, (_, i) => `k${i}`)];
        await oracle.call('FLUSHALL');
        for (const key of keys) await oracle.call('SET', key, '1');
        const alone = await tracking(oracle.port, null);
        let want: string[];
        try {
          expect(await alone.command('FLUSHDB')).toBe('+OK\r\n');
          want = await alone.read();
        } finally {
          alone.close();
        }
        const setter = await connect(proxy.address.port, 2, ['a', 'pa']);
        const other = await connect(proxy.address.port, 2, ['b', 'pb']);
        for (const key of keys) {
          await setter.call('SET', key, '1');
          await other.call('SET', key, '1');
        }
        setter.close();
        other.close();
        const a = await tracking(proxy.address.port, ['a', 'pa']);
        const b = await tracking(proxy.address.port, ['b', 'pb']);
        try {
          expect(await a.command('FLUSHDB')).toBe('+OK\r\n');
          expect(await a.read()).toEqual(want); // one null each (per-key invalidations of the removed keys before)
          await b.quiet();
          expect(await b.command('DBSIZE')).toBe(`:${keys.length}\r\n`);
        } finally {
          a.close();
          b.close();
        }
      });

      it('PSUBSCRIBE * gets the namespace\'s keyspace notifications as one server sends them, and no other namespace\'s', async () => {
        await oracle.call('FLUSHALL');
        const want = await patternNotifications(oracle.port, null, null);
        expect(await patternNotifications(proxy.address.port, ['a', 'pa'], ['b', 'pb'])).toEqual(want);
      });

      it("PUBSUB NUMPAT counts the namespace's own patterns, as one server of its own", async () => {
        const numpat = async (port: number, auth: string[] | null): Promise<string> => {
          const sub = await connect(port, 2, auth);
          const again = await connect(port, 2, auth);
          const asker = await connect(port, 2, auth);
          try {
            sub.send('PSUBSCRIBE', 'p1*', 'p2*', '*'); // * also catches the namespace's keyspace notifications (two patterns more on the node)
            for (let i = 0; i < 3; i++) await sub.read();
            again.send('PSUBSCRIBE', 'p1*');
            await again.read();
            return await asker.call('PUBSUB', 'NUMPAT');
          } finally {
            [sub, again, asker].forEach((c) => c.close());
          }
        };
        const want = await numpat(oracle.port, null);
        expect(want).toBe(':3\r\n');
        const b = await connect(proxy.address.port, 2, ['b', 'pb']);
        b.send('PSUBSCRIBE', 'bq*', 'br*'); // another namespace's, meanwhile
        await b.read();
        await b.read();
        expect(await numpat(proxy.address.port, ['a', 'pa'])).toBe(want);
        b.close();
      });

      it('CLIENT TRACKINGINFO and BCAST\'s overlap errors name the client\'s prefixes', async () => {
        const want = await trackingPrefixes(oracle.port, null);
        expect(await trackingPrefixes(proxy.address.port, ['a', 'pa'])).toEqual(want);
        const colocated = await startTestProxy(upstream.seed(), { colocate: [{ keys: '*', tag: 'all' }], cluster: { refreshPeriodMs: 1000 } } as Partial<RespoolConfig>);
        proxies.push(colocated);
        expect(await trackingPrefixes(colocated.address.port, null)).toEqual(want);
      });

      // BCAST PREFIX bc: under colocation rules: the nodes track every stored form of bc:… ({all}bc:…, {bc}bc:…).
      for (const colocate of [[{ keys: '*', tag: 'all' }], [{ keys: 'bc:*', tag: 'bc' }]]) {
        it(`tracking invalidations name the client's keys under the colocation rule ${colocate[0]!.keys} → {${colocate[0]!.tag}}`, async () => {
          const colocated = await startTestProxy(upstream.seed(), { colocate, cluster: { refreshPeriodMs: 1000 } } as Partial<RespoolConfig>);
          proxies.push(colocated);
          const want = await oracleTracking();
          const through = await tracking(colocated.address.port, null);
          try {
            for (const key of ['tk', 'bc:1', 'rk']) await through.write(key);
            expect(await through.read()).toEqual(want);
          } finally {
            through.close();
          }
        });
      }

      for (const protocol of [2, 3] as const) {
        it(`RESP${protocol}: each namespace's subscriber sees its own application's messages, as one server gives them`, async () => {
          const want = await oracleExchange(protocol);
          const port = proxy.address.port;
          const a = await subscribe(port, protocol, ['a', 'pa']);
          const b = await subscribe(port, protocol, ['b', 'pb']);
          try {
            const repliesA = await publish(port, protocol, ['a', 'pa']);
            const repliesB = await publish(port, protocol, ['b', 'pb']);
            const seen = { a: await messages(a.sub), b: await messages(b.sub) };
            expect({ confirmations: a.confirmations, replies: repliesA, messages: seen.a }).toEqual(want);
            expect({ confirmations: b.confirmations, replies: repliesB, messages: seen.b }).toEqual(want);
          } finally {
            a.sub.close();
            b.sub.close();
          }
        });
      }
    });
  }
});
