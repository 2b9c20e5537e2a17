import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import net from 'node:net';
import { TopologyRefresher } from '../../src/cluster/topology-refresher.js';
import type { UpstreamPools } from '../../src/upstream/upstream-pools.js';
import { AcceptGate } from '../../src/session/accept-gate.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('topology refreshes: single flight, rate limited', () => {
  it('a storm of MOVED replies causes one refresh', async () => {
    let discoveries = 0;
    // Standalone discovery asks each node INFO server once (for its zone): count those calls.
    const pools = {
      get: () => ({
        call: async () => {
          discoveries++;
          await sleep(20);
          return Buffer.from('$0\r\n\r\n');
        },
      }),
    } as unknown as UpstreamPools;
    const refresher = new TopologyRefresher({
      seeds: [{ host: '127.0.0.1', port: 1 }], mode: 'standalone', pools,
      minIntervalMs: 300, periodMs: 3_600_000, log: pino({ level: 'silent' }),
    });
    await refresher.start();
    expect(discoveries).toBe(1);
    for (let i = 0; i < 5000; i++) refresher.requestRefresh('moved');
    await sleep(50);
    for (let i = 0; i < 5000; i++) refresher.requestRefresh('moved');
    await sleep(700);
    refresher.stop();
    expect(discoveries).toBe(2); // the start-up one, then exactly one for the whole storm
  });
});

describe('AcceptGate: new clients admitted at a bounded rate', () => {
  async function socketPair(): Promise<{ sockets: net.Socket[]; close: () => Promise<void> }> {
    const accepted: net.Socket[] = [];
    const server = net.createServer({ pauseOnConnect: true }, (s) => accepted.push(s));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as net.AddressInfo).port;
    const clients = await Promise.all(Array.from({ length: 300 }, () => new Promise<net.Socket>((resolve) => {
      const c = net.connect(port, '127.0.0.1', () => resolve(c));
    })));
    while (accepted.length < clients.length) await sleep(5);
    return {
      sockets: accepted,
      close: async () => {
        for (const c of [...clients, ...accepted]) c.destroy();
        await new Promise((r) => server.close(r));
      },
    };
  }

  it('admits a burst, then about ratePerSecond, oldest first; unlimited when the rate is 0', async () => {
    const { sockets, close } = await socketPair();
    const admitted: net.Socket[] = [];
    // A step budget of 1 s: this test checks the token bucket alone (the 0.3 ms default would let a
    // busy machine's preemption end the first step after one admission; tested below).
    const gate = new AcceptGate(1000, (s) => admitted.push(s), 1000); // burst of 100
    const t0 = performance.now();
    for (const s of sockets) gate.offer(s);
    expect(admitted.length).toBe(0); // never inside the accept callback itself
    expect(gate.parkedCount).toBe(300);
    await new Promise((r) => setImmediate(r)); // the step after this turn's I/O
    expect(admitted.length).toBe(100); // the burst
    expect(gate.parkedCount).toBe(200);
    while (admitted.length < 300) await sleep(5);
    const elapsed = performance.now() - t0;
    expect(elapsed).toBeGreaterThan(150); // 200 more at 1000/s ≈ 200 ms
    expect(elapsed).toBeLessThan(2000);
    expect(admitted).toEqual(sockets); // in arrival order

    const unlimited: net.Socket[] = [];
    const open = new AcceptGate(0, (s) => unlimited.push(s));
    for (const s of sockets) open.offer(s);
    expect(unlimited.length).toBe(300);
    expect(gate.close()).toEqual([]);
    await close();
  });

  it('a step stops after its time budget, leaving the rest for later steps', async () => {
    const { sockets, close } = await socketPair();
    const admitted: net.Socket[] = [];
    const spin = (ms: number) => {
      const end = performance.now() + ms;
      while (performance.now() < end);
    };
    // 100,000/s: a burst of 10,000 tokens, so only the 0.3 ms budget can end the first step.
    const gate = new AcceptGate(100_000, (s) => {
      admitted.push(s);
      spin(0.2);
    });
    for (const s of sockets) gate.offer(s);
    await new Promise((r) => setImmediate(r));
    expect(admitted.length).toBeGreaterThanOrEqual(1);
    expect(admitted.length).toBeLessThanOrEqual(2); // 0.2 ms each: the second passes the 0.3 ms budget
    while (admitted.length < 300) await sleep(1);
    expect(admitted).toEqual(sockets);
    await close();
  });

  it('close() hands back the parked sockets and admits no more', async () => {
    const { sockets, close } = await socketPair();
    const admitted: net.Socket[] = [];
    const gate = new AcceptGate(10, (s) => admitted.push(s));
    for (const s of sockets) gate.offer(s);
    await new Promise((r) => setImmediate(r));
    expect(admitted.length).toBe(1); // burst capacity of a 10/s gate
    const parked = gate.close();
    expect(admitted.length + parked.length).toBe(300);
    await sleep(300);
    expect(admitted.length).toBe(1);
    await close();
  });
});
