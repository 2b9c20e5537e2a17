import { afterEach, describe, expect, it } from 'vitest';
import { startFakeValkey, type FakeValkey } from '../helpers/fake-valkey.js';
import { startTestProxy } from '../helpers/proxy.js';
import { RawConnection } from '../helpers/raw-resp.js';
import { waitFor } from '../helpers/wait.js';
import { encodeCommand } from '../../src/resp/encode.js';
import type { RespoolProxy } from '../../src/server.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function metric(text: string, line: RegExp): number {
  const m = line.exec(text);
  return m ? Number(m[1]) : 0;
}

describe('a node that accepts connections but never answers (in-process fake)', () => {
  let fake: FakeValkey | undefined;
  let proxy: RespoolProxy | undefined;
  afterEach(async () => {
    await proxy?.close();
    await fake?.close();
    proxy = undefined;
    fake = undefined;
  });

  it('times requests out with a clear error, replaces the link, and keeps memory bounded', async () => {
    fake = await startFakeValkey('answer');
    proxy = await startTestProxy([{ host: '127.0.0.1', port: fake.port }], {
      mode: 'standalone',
      connectionsPerNode: 1,
      timeouts: { connectMs: 500, commandMs: 300 },
      resilience: { maxInflightPerLink: 200, queueWindowMs: 200 } as never,
    });
    const raw = await RawConnection.connect(proxy.address.port);
    expect(await raw.call('GET', 'hello')).toBe('$5\r\nhello\r\n');
    fake.mode = 'handshake-only'; // the node goes dark on the open link

    const t0 = performance.now();
    const reply = await raw.call('GET', 'a');
    expect(reply).toMatch(/^-ERR respool: upstream 127\.0\.0\.1:\d+ did not answer within 300 ms; the command may or may not have run/);
    expect(performance.now() - t0).toBeLessThan(1500);

    // Memory stays bounded: 5000 pipelined requests into the black hole. The link holds at most
    // maxInflightPerLink; the rest are refused at once; every request gets exactly one reply.
    const heapBefore = process.memoryUsage().heapUsed;
    const connectsBefore = fake.connections();
    const value = 'x'.repeat(1000);
    const burst = Buffer.concat(Array.from({ length: 5000 }, (_, i) => encodeCommand(['SET', `k${i}`, value])));
    raw.write(burst);
    const replies: string[] = [];
    for (let i = 0; i < 5000; i++) replies.push(await raw.read(10_000));
    // "is unavailable (… did not answer within 300 ms …)" names the earlier timeout as the cause
    // of a refusal: classify by the leading phrase, unavailable before timeout.
    const kind = (r: string) =>
      /refused: too many requests in flight on its links/.test(r) ? 'refused'
        : /^-ERR respool: upstream \S+ is unavailable/.test(r) ? 'unavailable'
          : /^-ERR respool: upstream \S+ did not answer within 300 ms/.test(r) ? 'timeout' : r;
    const count = (k: string) => replies.filter((r) => kind(r) === k).length;
    const [refused, timedOut, unavailable] = [count('refused'), count('timeout'), count('unavailable')];
    expect(refused + timedOut + unavailable, replies.find((r) => !['refused', 'timeout', 'unavailable'].includes(kind(r)))).toBe(5000);
    // Never queued without bound: refused at once by the link's bound when the replacement link
    // is open, or "unavailable" within queueWindowMs while the circuit still backs off after the
    // timeout (on a loaded machine the whole burst can arrive in that window).
    expect(refused + unavailable).toBeGreaterThan(1000);
    // Only what a link held could time out: at most maxInflightPerLink per link generation
    // (a slow machine reads the burst across several timeouts, hence several generations).
    const generations = fake.connections() - connectsBefore + 1;
    expect(timedOut).toBeLessThanOrEqual(200 * generations);
    expect(refused + unavailable + timedOut).toBe(5000);
    // Nothing left in flight: every request was answered; what the counter may still hold for a
    // moment is a replacement link's handshake, answered once that link is up.
    const pools = proxy.pools;
    await waitFor(() => pools.load.requests === 0, `no request in flight (now ${pools.load.requests})`);
    expect(process.memoryUsage().heapUsed - heapBefore).toBeLessThan(64 * 1024 * 1024);
    // The node comes back: the replaced link serves again.
    fake.mode = 'answer';
    let back = '';
    for (let i = 0; i < 20 && back !== '$4\r\nback\r\n'; i++) {
      back = await raw.call('GET', 'back');
      if (back !== '$4\r\nback\r\n') await sleep(100);
    }
    expect(back).toBe('$4\r\nback\r\n');
    // The timed-out link was closed and a new one dialed in its place.
    expect(fake.connections()).toBeGreaterThan(connectsBefore);
    const text = await proxy.metrics.render();
    expect(metric(text, /^respool_requests_shed_total\{reason="link_inflight"\} (\d+)/m)).toBe(refused);
    raw.close();
  });

  it('a node that never completes the handshake: clear error, circuit opens, requests then fail fast', async () => {
    fake = await startFakeValkey('silent');
    proxy = await startTestProxy([{ host: '127.0.0.1', port: fake.port }], {
      mode: 'standalone',
      connectionsPerNode: 2,
      timeouts: { connectMs: 150, commandMs: 300 },
      cluster: { retryBudget: 0 },
      resilience: { queueWindowMs: 100, circuitFailureThreshold: 2, backoffBaseMs: 50, backoffCapMs: 200 } as never,
    });
    const raw = await RawConnection.connect(proxy.address.port);
    const first = await raw.call('GET', 'a');
    expect(first).toMatch(/^-ERR respool: upstream 127\.0\.0\.1:\d+ is unavailable/);
    // Keep asking until the circuit is open.
    let last = first;
    for (let i = 0; i < 20 && !/circuit open/.test(last); i++) {
      last = await raw.call('GET', 'a');
      await sleep(60);
    }
    expect(last).toMatch(/is unavailable \(connect timeout after 150 ms; circuit open after \d+ consecutive failures\)/);
    // Open: a request waits at most the queueing window (plus one probe), never unbounded.
    const t0 = performance.now();
    expect(await raw.call('GET', 'b')).toMatch(/is unavailable/);
    expect(performance.now() - t0).toBeLessThan(1500); // window + one probe: ~250 ms at most; room for a loaded machine (unbounded: no answer)
    const text = await proxy.metrics.render();
    expect(metric(text, /^respool_circuit_opens_total\{node="127\.0\.0\.1:\d+"\} (\d+)/m)).toBeGreaterThanOrEqual(1);
    // Links that failed together did not redial together: one dial at a time after a failure.
    expect(fake.connections()).toBeLessThanOrEqual(2 + 20);
    raw.close();
  });
});
