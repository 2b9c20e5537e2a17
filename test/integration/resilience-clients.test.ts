import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import net from 'node:net';
import { execFileSync } from 'node:child_process';
import { startStandalone, type ValkeyNode } from '../harness/valkey-processes.js';
import { startFakeValkey } from '../helpers/fake-valkey.js';
import { startTestProxy } from '../helpers/proxy.js';
import { RawConnection } from '../helpers/raw-resp.js';
import type { RespoolProxy } from '../../src/server.js';
import { percentile } from '../helpers/test-data.js';
import { waitFor } from '../helpers/wait.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function metric(text: string, line: RegExp): number {
  const m = line.exec(text);
  return m ? Number(m[1]) : 0;
}

/** Round trips of PING-free GETs on one raw connection for `ms`; latencies in ms. */
async function steadyLoad(conn: RawConnection, ms: number): Promise<number[]> {
  const lat: number[] = [];
  const end = performance.now() + ms;
  while (performance.now() < end) {
    const t = performance.now();
    const r = await conn.call('GET', 'steady');
    if (r !== '$1\r\nv\r\n') throw new Error(`unexpected reply ${r}`);
    lat.push(performance.now() - t);
  }
  return lat;
}

describe('client-side storms: maxClients, accept rate, idle timeout, drain', () => {
  let server: ValkeyNode;
  beforeAll(async () => {
    server = await startStandalone();
    await server.call('SET', 'steady', 'v');
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('answers the client past maxClients with an error, then closes it', async () => {
    const proxy = await startTestProxy([{ host: server.host, port: server.port }], { clients: { maxClients: 3 } as never });
    const ok = await Promise.all([0, 1, 2].map(() => RawConnection.connect(proxy.address.port)));
    for (const c of ok) expect(await c.call('PING')).toBe('+PONG\r\n');
    const excess = await RawConnection.connect(proxy.address.port);
    expect(await excess.read()).toBe('-ERR max number of clients reached (respool limit 3)\r\n');
    await excess.waitClosed();
    // The established ones are unaffected; a freed place admits a new client.
    expect(await ok[0]!.call('GET', 'steady')).toBe('$1\r\nv\r\n');
    ok[2]!.close();
    // The proxy must have seen the close before the next accept, or it is still at maxClients.
    await waitFor(() => proxy.clientCount() === 2, 'the proxy to drop the closed client');
    const next = await RawConnection.connect(proxy.address.port);
    expect(await next.call('PING')).toBe('+PONG\r\n');
    const text = await proxy.metrics.render();
    expect(metric(text, /^respool_client_connections_rejected_total\{reason="max_clients"\} (\d+)/m)).toBe(1);
    for (const c of [...ok, next]) c.close();
    await proxy.close();
  });

  it('a connection storm is admitted at the accept rate while established clients keep their latency', async () => {
    const proxy = await startTestProxy([{ host: server.host, port: server.port }], {
      clients: { acceptRatePerSecond: 2000, maxClients: 5000 } as never,
    });
    const steady = await RawConnection.connect(proxy.address.port);
    const before = await steadyLoad(steady, 500);
    const storm: net.Socket[] = [];
    let connected = 0;
    const t0 = performance.now();
    for (let i = 0; i < 1000; i++) {
      const s = net.connect(proxy.address.port, '127.0.0.1', () => connected++);
      s.on('error', () => {});
      storm.push(s);
    }
    const during = await steadyLoad(steady, 400);
    while (proxy.clientCount() < 1001 && performance.now() - t0 < 10_000) await sleep(10);
    const admitMs = performance.now() - t0;
    expect(proxy.clientCount()).toBe(1001);
    expect(admitMs).toBeGreaterThan(300); // 1000 at 2000/s (burst 200) ≈ 400 ms: the rate held
    const p99Before = percentile(before, 99);
    const p99During = percentile(during, 99);
    // Established client served throughout; generous bound for a shared 2-core machine.
    expect(during.length).toBeGreaterThan(20);
    expect(p99During).toBeLessThan(Math.max(300, 5 * p99Before)); // a client held for the storm (~400 ms or more) would show above
    for (const s of storm) s.destroy();
    steady.close();
    await proxy.close();
  });

  // `ss -o` shows a socket's keepalive timer (SO_KEEPALIVE on, nothing else pending). On Linux the
  // listener passes TCP_NODELAY and keepalive on to accepted sockets (session/socket-options.ts).
  const hasSs = (() => {
    try {
      execFileSync('ss', ['-V'], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  })();
  it.skipIf(!hasSs)('client sockets have TCP keepalive as clients.tcpKeepAliveMs says (none when 0)', async () => {
    for (const tcpKeepAliveMs of [120_000, 0]) {
      const proxy = await startTestProxy([{ host: server.host, port: server.port }], { clients: { tcpKeepAliveMs } as never });
      await sleep(20); // past the first event-loop turn after listen: accepted sockets inherit the options
      const c = await RawConnection.connect(proxy.address.port);
      expect(await c.call('PING')).toBe('+PONG\r\n');
      const port = proxy.address.port;
      const line = execFileSync('ss', ['-Htno', 'state', 'established', `( sport = :${port} )`], { encoding: 'utf8' });
      expect(line).toContain(`127.0.0.1:${port}`);
      if (tcpKeepAliveMs > 0) expect(line).toMatch(/timer:\(keepalive,(1min5\d|2min)/);
      else expect(line).not.toContain('keepalive');
      c.close();
      await proxy.close();
    }
  });

  it('a client that closes its side after its replies is closed at once, its session gone', async () => {
    const proxy = await startTestProxy([{ host: server.host, port: server.port }]);
    const clients = await Promise.all(Array.from({ length: 20 }, () => RawConnection.connect(proxy.address.port)));
    for (const c of clients) expect(await c.call('PING')).toBe('+PONG\r\n');
    expect(proxy.clientCount()).toBe(20);
    const closed = clients.map((c) => c.waitClosed(2000));
    for (const c of clients) c.end(); // FIN: nothing owed to any of them
    await Promise.all(closed);
    for (let i = 0; i < 50 && proxy.clientCount() > 0; i++) await sleep(10);
    expect(proxy.clientCount()).toBe(0);
    await proxy.close();
  });

  it('closes idle clients, but not a client waiting for a reply', async () => {
    const slow = await startFakeValkey('delay');
    slow.delayMs = 600;
    const proxy = await startTestProxy([{ host: '127.0.0.1', port: slow.port }], {
      mode: 'standalone',
      clients: { idleTimeoutMs: 300 } as never,
    });
    const idle = await RawConnection.connect(proxy.address.port);
    const waiting = await RawConnection.connect(proxy.address.port);
    waiting.send('GET', 'slow');
    await idle.waitClosed(2000);
    expect(await waiting.read(3000)).toBe('$4\r\nslow\r\n');
    const text = await proxy.metrics.render();
    expect(metric(text, /^respool_client_disconnects_total\{reason="idle_timeout"\} (\d+)/m)).toBeGreaterThanOrEqual(1);
    waiting.close();
    await proxy.close();
    await slow.close();
  });

  it('drains gracefully: stops accepting, finishes in-flight requests, then closes', async () => {
    const slow = await startFakeValkey('delay');
    slow.delayMs = 300;
    const proxy = await startTestProxy([{ host: '127.0.0.1', port: slow.port }], { mode: 'standalone' });
    const busy = await RawConnection.connect(proxy.address.port);
    const idle = await RawConnection.connect(proxy.address.port);
    expect(await idle.call('PING')).toBe('+PONG\r\n');
    busy.send('GET', 'one');
    busy.send('GET', 'two');
    await sleep(50);
    const closing = proxy.close(5000);
    await idle.waitClosed(1000); // nothing owed: closed at once
    expect(await busy.read(2000)).toBe('$3\r\none\r\n');
    expect(await busy.read(2000)).toBe('$3\r\ntwo\r\n');
    await busy.waitClosed(2000);
    await closing;
    await expect(RawConnection.connect(proxy.address.port)).rejects.toThrow();
    await slow.close();
  });

  it('cuts what is left at the drain deadline', async () => {
    const slow = await startFakeValkey('silent');
    const proxy = await startTestProxy([{ host: '127.0.0.1', port: slow.port }], {
      mode: 'standalone',
      timeouts: { connectMs: 5000, commandMs: 10_000 },
    });
    await sleep(50);
    const stuck = await RawConnection.connect(proxy.address.port);
    stuck.send('GET', 'never');
    await sleep(50);
    const t0 = performance.now();
    await proxy.close(300);
    expect(performance.now() - t0).toBeLessThan(2000);
    await stuck.waitClosed(1000);
    await slow.close();
  });
});
