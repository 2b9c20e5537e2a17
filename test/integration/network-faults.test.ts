/**
 * A slow or silent network between respool and one node (issue 34): a fault relay
 * (test/harness/fault-relay.ts) sits between respool and one primary of a 3+3 cluster — the
 * primary announces the relay's port (cluster-announce-port), so respool's topology reaches it
 * through the relay while the cluster bus and the replicas go direct.
 *
 *   far node   : 50 ms away (25 ms each way); requests to the two near primaries keep their
 *                latency while a client keeps a pipeline of requests in flight to the far one
 *   blackhole  : the node accepts and answers nothing; its requests fail within
 *                timeouts.commandMs with an error naming it, its circuit opens, the other shards
 *                answer as before, and once the silence ends every acknowledged write is there
 *
 * Bounds here are functional (a near request never waits for a far round trip); the figures
 * belong to bench/.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import calculateSlot from 'cluster-key-slot';
import { startCluster, type ValkeyCluster, type ValkeyNode } from '../harness/valkey-processes.js';
import type { RespoolProxy } from '../../src/server.js';
import { startTestProxy } from '../helpers/proxy.js';
import { FaultRelay } from '../helpers/fault-relay.js';
import { RawConnection } from '../helpers/raw-resp.js';
import { waitFor } from '../helpers/wait.js';

const COMMAND_MS = 400;

describe('one node behind a fault relay (3 primaries + 3 replicas)', () => {
  let cluster: ValkeyCluster;
  let far: ValkeyNode;
  let relay: FaultRelay;
  let proxy: RespoolProxy;
  let farKeys: string[];
  let nearKeys: string[];

  beforeAll(async () => {
    cluster = await startCluster({ primaries: 3, replicasPerPrimary: 1 });
    const shards = await cluster.shards();
    far = shards[0]!.primary;
    relay = await FaultRelay.start({ host: far.host, port: far.port });
    await cluster.call(far, 'CONFIG', 'SET', 'cluster-announce-port', String(relay.port));
    const near = shards.slice(1).map((s) => s.primary);
    // Every node's view names the far primary by the relay's port once the change has gossiped.
    await waitFor(async () => {
      const views = await Promise.all(near.map((n) => cluster.call(n, 'CLUSTER', 'SLOTS')));
      return views.every((slots) => JSON.stringify(slots).includes(String(relay.port)));
    }, 'the far primary announced at the relay port', 15_000);
    proxy = await startTestProxy([{ host: near[0]!.host, port: near[0]!.port }], {
      timeouts: { connectMs: 300, commandMs: COMMAND_MS },
      resilience: { circuitFailureThreshold: 2, backoffBaseMs: 100, backoffCapMs: 400 },
    } as never);
    await waitFor(() => proxy.refresher.current?.shards.some((s) => s.primary.port === relay.port) ?? false, "respool's topology with the relay", 10_000);
    const owner = (key: string): number => {
      const slot = calculateSlot(key);
      return shards.findIndex((s) => s.slots.some(([a, b]) => slot >= a && slot <= b));
    };
    const keys = Array.from({ length: 400 }, (_, i) => `nf:${i}`);
    farKeys = keys.filter((k) => owner(k) === 0).slice(0, 40);
    nearKeys = keys.filter((k) => owner(k) > 0).slice(0, 40);
    const setup = await RawConnection.connect(proxy.address.port);
    for (const k of [...farKeys, ...nearKeys]) expect(await setup.call('SET', k, `v-${k}`)).toBe('+OK\r\n');
    setup.close();
  }, 60_000);

  afterAll(async () => {
    await proxy?.close();
    await relay?.close();
    await cluster?.stop();
  });

  /**
   * A client keeping 10 GETs in flight to the far node while another times GETs to the near
   * primaries for a second: the near GETs' p99, and the far client's replies (each checked).
   */
  async function nearWhileFarBusy(): Promise<{ p99: number; near: number; farDone: number; farWrong: number }> {
    const farClient = await RawConnection.connect(proxy.address.port);
    const nearClient = await RawConnection.connect(proxy.address.port);
    try {
      let farDone = 0;
      let farWrong = 0;
      let stop = false;
      const farLoop = (async () => {
        while (!stop) {
          const batch = farKeys.slice(0, 10);
          for (const k of batch) farClient.send('GET', k);
          for (const k of batch) {
            if ((await farClient.read()) !== `$${`v-${k}`.length}\r\nv-${k}\r\n`) farWrong++;
            farDone++;
          }
        }
      })();
      const nearMs: number[] = [];
      const until = performance.now() + 1000;
      for (let i = 0; i < 200 || performance.now() < until; i++) {
        const k = nearKeys[i % nearKeys.length]!;
        const started = performance.now();
        expect(await nearClient.call('GET', k)).toBe(`$${`v-${k}`.length}\r\nv-${k}\r\n`);
        nearMs.push(performance.now() - started);
      }
      stop = true;
      await farLoop;
      nearMs.sort((a, b) => a - b);
      return { p99: nearMs[Math.floor(nearMs.length * 0.99)]!, near: nearMs.length, farDone, farWrong };
    } finally {
      farClient.close();
      nearClient.close();
    }
  }

  it('a node 50 ms away: the near primaries answer without waiting for it, every reply to its own request', async () => {
    const before = await nearWhileFarBusy(); // the same load, the far node near
    relay.set({ delayMs: { toNode: 25, toClient: 25 }, jitterMs: 2 });
    try {
      const during = await nearWhileFarBusy();
      console.log(`near GET p99 with the far node near ${before.p99.toFixed(2)} ms (${before.near} requests), 50 ms away ${during.p99.toFixed(2)} ms (${during.near} requests); far client ${during.farDone} replies meanwhile`);
      expect(before.farWrong + during.farWrong).toBe(0);
      expect(during.farDone).toBeGreaterThanOrEqual(100); // ≥ 10 round trips of 50 ms while the near client ran
      // A near request queued behind the far node would take ≥ 50 ms; the issue's figure (≤ 1 ms
      // more) is checked on an idle machine by the test's printed line, here with room for the
      // two cores this suite shares with everything else.
      expect(during.p99 - before.p99).toBeLessThan(10);
      const c = await RawConnection.connect(proxy.address.port);
      const farStarted = performance.now();
      await c.call('GET', farKeys[0]!);
      expect(performance.now() - farStarted).toBeGreaterThanOrEqual(45);
      c.close();
    } finally {
      relay.set({ delayMs: { toNode: 0, toClient: 0 }, jitterMs: 0 });
    }
  }, 30_000);

  it('a blackholed node: its requests fail within the command timeout naming it, its circuit opens, other shards unaffected, acknowledged writes kept', async () => {
    const c = await RawConnection.connect(proxy.address.port);
    const address = `127.0.0.1:${relay.port}`;
    try {
      expect(await c.call('SET', farKeys[1]!, 'acknowledged')).toBe('+OK\r\n');
      relay.set({ blackhole: true });
      const started = performance.now();
      const reply = await c.call('GET', farKeys[1]!);
      const took = performance.now() - started;
      expect(reply).toMatch(new RegExp(`^-ERR respool: upstream ${address.replace(/\./g, '\\.')} `));
      console.log(`blackholed node: first GET failed after ${took.toFixed(0)} ms (timeouts.commandMs ${COMMAND_MS})`);
      // At the bound, not a check interval later (upstream/link.ts checkTimeout); the margin is
      // timer lateness on a busy machine.
      expect(took).toBeLessThan(COMMAND_MS + 200);
      // More requests to it: the failures open its circuit; requests then fail at once.
      await waitFor(async () => {
        await c.call('GET', farKeys[2]!);
        return proxy.pools.health(address).circuit.state !== 'closed';
      }, 'the far node\'s circuit open', 15_000, 50);
      const fast = performance.now();
      expect(await c.call('GET', farKeys[3]!)).toMatch(/^-ERR respool: upstream /);
      expect(performance.now() - fast).toBeLessThan(COMMAND_MS + 1500);
      // The other shards answer as before, meanwhile.
      for (const k of nearKeys.slice(0, 10)) expect(await c.call('GET', k)).toBe(`$${`v-${k}`.length}\r\nv-${k}\r\n`);
      relay.set({ blackhole: false });
      // Back: the circuit closes after a probe, and the write acknowledged before the silence is there.
      await waitFor(async () => (await c.call('GET', farKeys[1]!)) === '$12\r\nacknowledged\r\n', 'the far node back, with the acknowledged write', 20_000, 100);
    } finally {
      relay.set({ blackhole: false });
      c.close();
    }
  }, 60_000);
  for (const fault of ['reset', 'halfClose'] as const) {
    it(`a ${fault === 'reset' ? 'reset (RST)' : 'half-close (FIN)'} under requests in flight: a read is sent again and answered, a write gets "may or may not have run", never a second run`, async () => {
      const c = await RawConnection.connect(proxy.address.port);
      try {
        expect(await c.call('SET', 'nf:counter{' + farKeys[0] + '}', '0')).toBe('+OK\r\n');
        relay.set({ delayMs: { toNode: 0, toClient: 250 } }); // the replies are on their way when the link breaks (held less than timeouts.commandMs)
        c.send('GET', farKeys[4]!);
        c.send('INCR', 'nf:counter{' + farKeys[0] + '}');
        // The relay has passed the INCR on (the node ran it; its reply is held 250 ms) before the
        // link breaks: read on the node itself, not a fixed wait a busy machine may outlast.
        await waitFor(async () => (await cluster.call(far, 'GET', 'nf:counter{' + farKeys[0] + '}')) === '1', 'the INCR on the node', 5_000, 5);
        relay[fault]();
        relay.set({ delayMs: { toNode: 0, toClient: 0 } });
        expect(await c.read(5000)).toBe(`$${`v-${farKeys[4]}`.length}\r\nv-${farKeys[4]}\r\n`);
        expect(await c.read(5000)).toMatch(/^-ERR respool: connection to upstream \S+ was lost; the command may or may not have run/);
        // It ran once on the node (the relay had passed it on), and was not sent again.
        await waitFor(async () => (await c.call('GET', 'nf:counter{' + farKeys[0] + '}')) === '$1\r\n1\r\n', 'the INCR ran exactly once', 10_000, 100);
      } finally {
        relay.set({ delayMs: { toNode: 0, toClient: 0 } });
        c.close();
      }
    }, 30_000);
  }
  it('1,000 verified writes from 4 clients across delay, held-back chunks, a reset and a half-close of the far node: 0 acknowledged lost, 0 misdelivered', async () => {
    const known = [...farKeys.slice(10, 20), ...nearKeys.slice(10, 20)]; // values v-<key>, set in beforeAll and never written since
    const schedule = (async () => {
      await new Promise((r) => setTimeout(r, 150));
      relay.set({ delayMs: { toNode: 10, toClient: 10 }, jitterMs: 5 });
      await new Promise((r) => setTimeout(r, 300));
      relay.set({ holdShare: 0.3, holdMs: 60 });
      await new Promise((r) => setTimeout(r, 300));
      relay.reset();
      await new Promise((r) => setTimeout(r, 300));
      relay.halfClose();
      await new Promise((r) => setTimeout(r, 300));
      relay.set({ delayMs: { toNode: 0, toClient: 0 }, jitterMs: 0, holdShare: 0 });
    })();
    const acknowledged = new Map<string, string>();
    let misdelivered = 0;
    let errors = 0;
    await Promise.all([0, 1, 2, 3].map(async (client) => {
      const c = await RawConnection.connect(proxy.address.port);
      try {
        for (let i = 0; i < 250; i += 5) {
          // A pipeline of 5 writes and 5 reads of known keys: each reply must be its own request's.
          const batch = Array.from({ length: 5 }, (_, j) => ({ key: `nf:w:${client}:${i + j}`, value: `w${client}-${i + j}`, read: known[(i + j + client) % known.length]! }));
          for (const b of batch) {
            c.send('SET', b.key, b.value);
            c.send('GET', b.read);
          }
          for (const b of batch) {
            const set = await c.read(10_000);
            if (set === '+OK\r\n') acknowledged.set(b.key, b.value);
            else if (set.startsWith('-')) errors++;
            else misdelivered++;
            const got = await c.read(10_000);
            if (got.startsWith('-')) errors++;
            else if (got !== `$${`v-${b.read}`.length}\r\nv-${b.read}\r\n`) misdelivered++;
          }
          await new Promise((r) => setTimeout(r, 5));
        }
      } finally {
        c.close();
      }
    }));
    await schedule;
    const check = await RawConnection.connect(proxy.address.port);
    let lost = 0;
    try {
      for (const [key, value] of acknowledged) {
        let got = await check.call('GET', key);
        for (let tries = 0; got.startsWith('-') && tries < 50; tries++) {
          await new Promise((r) => setTimeout(r, 100)); // the far node's circuit closing again
          got = await check.call('GET', key);
        }
        if (got !== `$${value.length}\r\n${value}\r\n`) lost++;
      }
    } finally {
      check.close();
    }
    console.log(`1,000 writes across faults: ${acknowledged.size} acknowledged, ${errors} error replies, ${lost} lost, ${misdelivered} misdelivered`);
    expect(misdelivered).toBe(0);
    expect(lost).toBe(0);
    expect(acknowledged.size).toBeGreaterThan(500);
  }, 60_000);
});
