import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import net from 'node:net';
import { startStandalone, type ValkeyNode } from '../harness/valkey-processes.js';
import { RequestFramer } from '../../src/resp/request-framer.js';
import { encodeBulk } from '../../src/resp/encode.js';
import { clientFor, startTestProxy } from '../helpers/proxy.js';
import { RawConnection } from '../helpers/raw-resp.js';

/**
 * An in-process fake upstream for exact-fault cases: answers the link handshake and INFO, and
 * never answers anything else (a node that accepts and hangs).
 */
async function startSilentUpstream(): Promise<{ port: number; connections: () => number; close(): void }> {
  let connections = 0;
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    connections++;
    sockets.add(socket);
    const framer = new RequestFramer();
    // Like a real node it answers in order: after the first command it leaves unanswered, nothing.
    let stalled = false;
    socket.on('data', (chunk) => {
      framer.push(chunk);
      let frame;
      while ((frame = framer.next()) !== null) {
        const name = frame.args[0]!.toString().toUpperCase();
        if (stalled) continue;
        if (name === 'CLIENT' || name === 'AUTH' || name === 'READONLY') socket.write('+OK\r\n');
        else if (name === 'INFO') socket.write(encodeBulk('# Cluster\r\ncluster_enabled:0\r\n', 2));
        else stalled = true; // everything else: silence
      }
    });
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    connections: () => connections,
    close() {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

describe('client sessions: authentication, limits, timeouts', () => {
  let secured: ValkeyNode;
  beforeAll(async () => {
    secured = await startStandalone({ password: 'upstream-secret' });
  });
  afterAll(async () => {
    await secured?.stop();
  });

  it('authenticates its links to an upstream that requires a password', async () => {
    const proxy = await startTestProxy([{ host: secured.host, port: secured.port }], {
      upstreamAuth: { username: null, password: 'upstream-secret' },
    });
    const client = clientFor(proxy);
    expect(await client.set('auth:k', 'v')).toBe('OK');
    expect(await client.get('auth:k')).toBe('v');
    client.disconnect();
    await proxy.close();
  });

  it('reports a clear error when the upstream password is wrong', async () => {
    const proxy = await startTestProxy([{ host: secured.host, port: secured.port }], {
      mode: 'standalone',
      upstreamAuth: { username: null, password: 'wrong' },
    });
    const raw = await RawConnection.connect(proxy.address.port);
    expect(await raw.call('GET', 'auth:k')).toMatch(/^-ERR respool: upstream 127\.0\.0\.1:\d+ is unavailable \(handshake AUTH failed: WRONGPASS/);
    raw.close();
    await proxy.close();
  });

  it("checks clients against respool's own users", async () => {
    const proxy = await startTestProxy([{ host: secured.host, port: secured.port }], {
      upstreamAuth: { username: null, password: 'upstream-secret' },
      users: [{ name: 'app', password: 's3cret' }],
    });
    const raw = await RawConnection.connect(proxy.address.port);
    expect(await raw.call('GET', 'auth:k')).toBe('-NOAUTH Authentication required.\r\n');
    expect(await raw.call('AUTH', 'app', 'nope')).toMatch(/^-WRONGPASS/);
    expect(await raw.call('AUTH', 'app', 's3cret')).toBe('+OK\r\n');
    expect(await raw.call('GET', 'auth:k')).toBe('$1\r\nv\r\n');
    expect(await raw.call('RESET')).toBe('+RESET\r\n');
    expect(await raw.call('GET', 'auth:k')).toMatch(/^-NOAUTH/);
    const hello = await raw.call('HELLO', '3', 'AUTH', 'app', 's3cret', 'SETNAME', 'svc');
    expect(hello.startsWith('%')).toBe(true);
    expect(await raw.call('CLIENT', 'GETNAME')).toBe('$3\r\nsvc\r\n');
    raw.close();
    await proxy.close();
  });

  it('keeps order and loses nothing when a pipeline exceeds maxPendingPerClient (backpressure)', async () => {
    const proxy = await startTestProxy([{ host: secured.host, port: secured.port }], {
      upstreamAuth: { username: null, password: 'upstream-secret' },
      limits: { maxPendingPerClient: 8 } as never,
    });
    const client = clientFor(proxy);
    const pipeline = client.pipeline();
    for (let i = 0; i < 2000; i++) pipeline.set(`bp:${i}`, String(i)).get(`bp:${i}`);
    const results = (await pipeline.exec())!;
    expect(results).toHaveLength(4000);
    results.forEach(([err, value], i) => {
      expect(err).toBeNull();
      expect(value).toBe(i % 2 === 0 ? 'OK' : String((i - 1) / 2));
    });
    client.disconnect();
    await proxy.close();
  });

  it('closes a client whose unfinished request exceeds maxQueryBytesPerClient, and only that client', async () => {
    const proxy = await startTestProxy([{ host: secured.host, port: secured.port }], {
      upstreamAuth: { username: null, password: 'upstream-secret' },
      limits: { maxQueryBytesPerClient: 64 * 1024 } as never,
    });
    const other = clientFor(proxy);
    const greedy = await RawConnection.connect(proxy.address.port);
    greedy.write('*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1000000\r\n');
    greedy.write(Buffer.alloc(200 * 1024, 0x61));
    expect(await greedy.read()).toMatch(/^-ERR respool: query buffer of \d+ bytes exceeds the limit of 65536/);
    await greedy.waitClosed();
    expect(await other.ping()).toBe('PONG');
    other.disconnect();
    await proxy.close();
  });

  it('fails requests to a node that never answers with a timeout error, and replaces the link', async () => {
    const silent = await startSilentUpstream();
    const proxy = await startTestProxy([{ host: '127.0.0.1', port: silent.port }], {
      mode: 'standalone',
      connectionsPerNode: 1,
      admission: { bulkConnectionsPerNode: 0 }, // one link: the one that times out and is replaced
      timeouts: { connectMs: 1000, commandMs: 300 },
    } as never);
    const raw = await RawConnection.connect(proxy.address.port);
    raw.send('GET', 'a');
    raw.send('PING'); // answered locally, but must wait for the GET's answer to keep order
    expect(await raw.read(3000)).toMatch(/^-ERR respool: upstream 127\.0\.0\.1:\d+ did not answer within 300 ms/);
    expect(await raw.read()).toBe('+PONG\r\n');
    const before = silent.connections();
    raw.send('GET', 'b');
    expect(await raw.read(3000)).toMatch(/did not answer within 300 ms/);
    expect(silent.connections()).toBe(before + 1); // the timed-out link was replaced
    raw.close();
    await proxy.close();
    silent.close();
  });
});
