import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import calculateSlot from 'cluster-key-slot';
import { startCluster, type ValkeyCluster, type ValkeyNode } from '../harness/valkey-processes.js';
import { RawClient, type RespReply } from '../harness/raw-client.js';
import type { RespoolProxy } from '../../src/server.js';
import { PubSubHub } from '../../src/pubsub/hub.js';
import { startTestProxy } from '../helpers/proxy.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Keyspace notifications through respool in front of a 3-primary cluster. Valkey publishes a
 * key's `__keyspace@…` / `__keyevent@…` events only on the node owning the key (the cluster bus
 * does not carry them), while PUBLISH reaches every node: respool holds patterns and keyspace
 * channels on every primary, delivers only keyspace events from the nodes other than its classic
 * subscriber node, and so each event and each PUBLISH reaches a subscriber exactly once.
 */
describe('keyspace notifications through respool (3 primaries)', () => {
  let cluster: ValkeyCluster;
  let proxy: RespoolProxy;
  let primaries: ValkeyNode[];
  const opened: RawClient[] = [];
  const savedIdle = PubSubHub.idleCloseMs;

  beforeAll(async () => {
    PubSubHub.idleCloseMs = 300;
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 0 });
    primaries = await cluster.primaries();
    for (const node of primaries) await cluster.call(node, 'CONFIG', 'SET', 'notify-keyspace-events', 'KEA');
    const seed = cluster.nodes[0]!;
    proxy = await startTestProxy([{ host: seed.host, port: seed.port }]);
  });

  afterAll(async () => {
    PubSubHub.idleCloseMs = savedIdle;
    for (const c of opened) c.close();
    await proxy?.close();
    await cluster?.stop();
  });

  async function connect(): Promise<RawClient> {
    const c = await RawClient.connect(proxy.address.port);
    opened.push(c);
    return c;
  }

  /** respool's subscriber connections per primary port (CLIENT LIST lines named respool-pubsub). */
  async function links(): Promise<Map<number, string[]>> {
    const out = new Map<number, string[]>();
    for (const node of primaries) {
      const list = String(await cluster.call(node, 'CLIENT', 'LIST'));
      out.set(node.port, list.split('\n').filter((line) => / name=respool-pubsub /.test(line)));
    }
    return out;
  }

  function total(map: Map<number, string[]>): number {
    let n = 0;
    for (const lines of map.values()) n += lines.length;
    return n;
  }

  /** Keys whose slots are owned by each of the primaries, `perNode` of each. */
  async function keysOnEveryPrimary(prefix: string, perNode: number): Promise<string[]> {
    const byNode = new Map<number, string[]>();
    for (let i = 0; [...byNode.values()].filter((k) => k.length >= perNode).length < primaries.length; i++) {
      const key = `${prefix}${i}`;
      const owner = await cluster.primaryForSlot(calculateSlot(key));
      const list = byNode.get(owner.port) ?? [];
      if (list.length < perNode) list.push(key);
      byNode.set(owner.port, list);
    }
    return [...byNode.values()].flat();
  }

  const texts = (replies: RespReply[]): string[] => replies.map((r) => (Array.isArray(r) ? r.map(String).join(' ') : String(r)));
  const sorted = (a: string[]): string[] => [...a].sort();

  it('delivers each keyspace event and each PUBLISH exactly once, with one extra connection per other primary only while needed', async () => {
    expect(total(await links())).toBe(0);

    // A plain channel: the classic connection only.
    const plain = await connect();
    expect(await plain.call('SUBSCRIBE', 'ks:plain')).toEqual(['subscribe', 'ks:plain', 1]);
    await waitFor(async () => total(await links()) === 1, 'one classic connection', 10_000);
    await new Promise((r) => setTimeout(r, 200));
    expect(total(await links())).toBe(1);

    // A pattern and a keyevent channel: subscribed on every primary before the confirmation.
    const a = await connect();
    const b = await connect();
    expect(await a.call('PSUBSCRIBE', '*')).toEqual(['psubscribe', '*', 1]);
    expect(await b.call('SUBSCRIBE', '__keyevent@0__:set')).toEqual(['subscribe', '__keyevent@0__:set', 1]);
    const withWide = await links();
    expect([...withWide.values()].map((l) => l.length)).toEqual([1, 1, 1]);

    const keys = await keysOnEveryPrimary('ks:key:', 4);
    const writer = await connect();
    for (const key of keys) expect(await writer.call('SET', key, 'v')).toBe('OK');
    // The pattern subscriber counts once for PUBLISH (the classic node's view).
    for (let i = 0; i < 3; i++) expect(await writer.call('PUBLISH', 'ks:news', `n${i}`)).toBe(1);
    expect(await writer.call('PUBLISH', 'ks:plain', 'p')).toBe(2);

    const expectA = [
      ...keys.flatMap((k) => [`pmessage * __keyspace@0__:${k} set`, `pmessage * __keyevent@0__:set ${k}`]),
      ...[0, 1, 2].map((i) => `pmessage * ks:news n${i}`),
      'pmessage * ks:plain p',
    ];
    const expectB = keys.map((k) => `message __keyevent@0__:set ${k}`);
    await waitFor(() => a.unsolicited.length >= expectA.length && b.unsolicited.length >= expectB.length && plain.unsolicited.length >= 1, 'every message', 10_000);
    await new Promise((r) => setTimeout(r, 300)); // duplicates, if any, would have come by now
    expect(sorted(texts(a.unsolicited))).toEqual(sorted(expectA));
    expect(sorted(texts(b.unsolicited))).toEqual(sorted(expectB));
    expect(texts(plain.unsolicited)).toEqual(['message ks:plain p']);

    // Node-wide subscriptions gone: the extra connections close when idle; the classic one stays.
    expect(await a.call('PUNSUBSCRIBE')).toEqual(['punsubscribe', '*', 0]);
    expect(await b.call('UNSUBSCRIBE')).toEqual(['unsubscribe', '__keyevent@0__:set', 0]);
    await waitFor(async () => total(await links()) === 1, 'the extra connections to close', 10_000);
    expect(await plain.call('UNSUBSCRIBE')).toEqual(['unsubscribe', 'ks:plain', 0]);
    await waitFor(async () => total(await links()) === 0, 'every subscriber connection to close', 10_000);
  });

  it('re-subscribes on a primary whose connection was killed, and its keys’ events arrive again', async () => {
    const a = await connect();
    expect(await a.call('PSUBSCRIBE', '__key*')).toEqual(['psubscribe', '__key*', 1]);
    const before = await links();
    expect([...before.values()].map((l) => l.length)).toEqual([1, 1, 1]);

    // Kill respool's connection on two of the three primaries (the classic one among them, perhaps).
    for (const node of primaries.slice(1)) {
      const line = before.get(node.port)![0]!;
      const id = / id=(\d+) /.exec(` ${line}`)![1]!;
      await cluster.call(node, 'CLIENT', 'KILL', 'ID', id);
    }
    // Settled, not just passing through: right after the kill every primary's keyspace events come
    // from node connections (a state this check also accepts), then the classic connection is
    // dialed again (a jittered backoff later) and takes over its node — events published during that
    // handover may be lost, as a reconnecting subscriber loses them on Valkey. So the state must hold
    // for a second.
    const resubscribed = async () => [...(await links()).values()].every((l) => l.length === 1 && / psub=1 /.test(l[0]!));
    const settled = async () => {
      if (!(await resubscribed())) return false;
      await new Promise((r) => setTimeout(r, 1000));
      return resubscribed();
    };
    await waitFor(settled, 're-subscribed everywhere, and settled', 15_000);

    const keys = await keysOnEveryPrimary('ks:again:', 2);
    const writer = await connect();
    for (const key of keys) await writer.call('SET', key, 'v');
    const expectA = keys.flatMap((k) => [`pmessage __key* __keyspace@0__:${k} set`, `pmessage __key* __keyevent@0__:set ${k}`]);
    await waitFor(() => a.unsolicited.length >= expectA.length, 'every event', 10_000);
    await new Promise((r) => setTimeout(r, 300));
    expect(sorted(texts(a.unsolicited))).toEqual(sorted(expectA));
  });
});
