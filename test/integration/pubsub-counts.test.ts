import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type ValkeyCluster } from '../harness/valkey-processes.js';
import { RawClient } from '../harness/raw-client.js';
import type { RespoolProxy } from '../../src/server.js';
import { startTestProxy } from '../helpers/proxy.js';
import { waitFor } from '../helpers/wait.js';

/**
 * PUBLISH and PUBSUB NUMSUB/NUMPAT count receivers through respool as one server would, although
 * respool holds each channel and pattern upstream once for all its clients: compared with a
 * one-node cluster owning every slot, given the same subscriptions.
 */
describe('pub/sub counts through respool in front of a 3-primary cluster', () => {
  let cluster: ValkeyCluster;
  let single: ValkeyCluster;
  let proxy: RespoolProxy;
  const opened: RawClient[] = [];

  beforeAll(async () => {
    [cluster, single] = await Promise.all([
      startCluster({ primaries: 3, replicasPerPrimary: 0 }),
      startCluster({ primaries: 1, replicasPerPrimary: 0 }),
    ]);
    const seed = cluster.nodes[0]!;
    proxy = await startTestProxy([{ host: seed.host, port: seed.port }]);
  });

  afterAll(async () => {
    for (const c of opened) c.close();
    await proxy?.close();
    await Promise.all([cluster?.stop(), single?.stop()]);
  });

  async function scenario(port: number): Promise<unknown[]> {
    const connect = async () => {
      const c = await RawClient.connect(port);
      opened.push(c);
      return c;
    };
    const [a, b, c, publisher] = await Promise.all([connect(), connect(), connect(), connect()]);
    const out: unknown[] = [];
    out.push(await a.call('SUBSCRIBE', 'cnt:chan1', 'cnt:chan2'));
    out.push(await publisher.call('PUBLISH', 'cnt:chan1', 'hello'));
    out.push(await b.call('SUBSCRIBE', 'cnt:chan1'));
    out.push(await c.call('PSUBSCRIBE', 'cnt:chan*', 'cnt:*'));
    out.push(await publisher.call('PUBLISH', 'cnt:chan1', 'hello'));
    out.push(await publisher.call('PUBLISH', 'cnt:chan2', 'hello'));
    out.push(await publisher.call('PUBLISH', 'cnt:other', 'hello'));
    out.push(await publisher.call('PUBLISH', 'nobody', 'hello'));
    out.push(await publisher.call('PUBSUB', 'NUMSUB', 'cnt:chan1', 'cnt:chan2', 'nobody'));
    out.push(await publisher.call('PUBSUB', 'NUMPAT'));
    out.push(await publisher.call('PUBSUB', 'CHANNELS', 'cnt:*'));
    return out;
  }

  it('a PUBLISH right after the last subscriber left counts 0, as one server does (respool\'s UNSUBSCRIBE confirmed first)', async () => {
    // Seen in Valkey's suite (pubsub.tcl "PUBLISH/SUBSCRIBE basics") under load: the node had not
    // yet run respool's deferred UNSUBSCRIBE and still counted respool's connection.
    const sub = await RawClient.connect(proxy.address.port);
    const pub = await RawClient.connect(proxy.address.port);
    opened.push(sub, pub);
    const counts: unknown[] = [];
    for (let i = 0; i < 30; i++) {
      await sub.call('SUBSCRIBE', `race:${i}`);
      counts.push(await pub.call('PUBLISH', `race:${i}`, 'm'));
      const seen = sub.unsolicited.length + 1;
      await waitFor(() => sub.unsolicited.length >= seen, 'the message', 2000); // before UNSUBSCRIBE, so it is not taken for its reply
      await sub.call('UNSUBSCRIBE', `race:${i}`);
      counts.push(await pub.call('PUBLISH', `race:${i}`, 'm'));
    }
    expect(counts).toEqual(Array.from({ length: 60 }, (_, i) => (i % 2 === 0 ? 1 : 0)));
  });

  it('PUBLISH, NUMSUB, NUMPAT and CHANNELS answer as a single node does', async () => {
    const direct = await scenario(single.nodes[0]!.port);
    const through = await scenario(proxy.address.port);
    // CHANNELS order is a dict's: compare as sets
    const sortLast = (r: unknown[]) => [...r.slice(0, -1), [...(r[r.length - 1] as string[])].sort()];
    expect(sortLast(through)).toEqual(sortLast(direct));
    expect(direct.slice(4, 8)).toEqual([4, 3, 1, 0]);
  });
});

describe('PUBLISH and UNSUBSCRIBE inside MULTI, as one server answers them', () => {
  let cluster: ValkeyCluster;
  let single: ValkeyCluster;
  let proxy: RespoolProxy;
  const opened: RawClient[] = [];

  beforeAll(async () => {
    [cluster, single] = await Promise.all([
      startCluster({ primaries: 3, replicasPerPrimary: 0 }),
      startCluster({ primaries: 1, replicasPerPrimary: 0 }),
    ]);
    proxy = await startTestProxy([{ host: cluster.nodes[0]!.host, port: cluster.nodes[0]!.port }]);
  });

  afterAll(async () => {
    for (const c of opened) c.close();
    await proxy?.close();
    await Promise.all([cluster?.stop(), single?.stop()]);
  });

  it('publish to self inside MULTI counts the subscriber; UNSUBSCRIBE inside MULTI confirms in EXEC', async () => {
    const run = async (port: number) => {
      const c = await RawClient.connect(port);
      opened.push(c);
      await c.call('HELLO', '3');
      const out: unknown[] = [];
      out.push(await c.call('UNSUBSCRIBE'), await c.call('MULTI'), await c.call('UNSUBSCRIBE'), await c.call('EXEC'));
      out.push(await c.call('SUBSCRIBE', 'self:ch'));
      out.push(await c.call('MULTI'), await c.call('PUBLISH', 'self:ch', 'a'), await c.call('UNSUBSCRIBE', 'self:ch'), await c.call('PUBLISH', 'self:ch', 'b'));
      out.push(await c.call('EXEC'));
      return out;
    };
    const direct = await run(single.nodes[0]!.port);
    const through = await run(proxy.address.port);
    expect(through).toEqual(direct);
  });
});
