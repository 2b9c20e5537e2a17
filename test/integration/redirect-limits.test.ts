import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import net from 'node:net';
import calculateSlot from 'cluster-key-slot';
import { RequestFramer } from '../../src/resp/request-framer.js';
import type { RespoolProxy } from '../../src/server.js';
import { startTestProxy } from '../helpers/proxy.js';
import { RawConnection } from '../helpers/raw-resp.js';

type Reply = string | number | Reply[];

/** RESP2 encoding of nested arrays of bulk strings and integers (for CLUSTER SHARDS). */
function encode(value: Reply): string {
  if (typeof value === 'number') return `:${value}\r\n`;
  if (typeof value === 'string') return `$${Buffer.byteLength(value)}\r\n${value}\r\n`;
  return `*${value.length}\r\n${value.map(encode).join('')}`;
}

/**
 * A fake one-node cluster for the replies a real server will not give on demand: it owns every
 * slot, and answers GET by the key's name:
 *   "loop…"      → always MOVED to itself (a redirect loop)
 *   "tryagain…"  → TRYAGAIN `failures` times, then the key's value
 *   "down…"      → CLUSTERDOWN always
 * and counts how often each key was asked.
 */
async function startFakeClusterNode(failures: number) {
  const asked = new Map<string, number>();
  const server = net.createServer((socket) => {
    const framer = new RequestFramer();
    socket.on('error', () => {});
    socket.on('data', (chunk) => {
      framer.push(chunk);
      for (let f = framer.next(); f !== null; f = framer.next()) {
        const [name, ...rest] = f.args.map((a) => a.toString());
        const cmd = name!.toUpperCase();
        const port = (server.address() as net.AddressInfo).port;
        if (cmd === 'CLIENT' || cmd === 'READONLY' || cmd === 'AUTH' || cmd === 'ASKING') socket.write('+OK\r\n');
        else if (cmd === 'INFO') socket.write(encode('# Cluster\r\ncluster_enabled:1\r\n'));
        else if (cmd === 'COMMAND') socket.write('-ERR not here\r\n'); // respool keeps its built-in table
        else if (cmd === 'CLUSTER') {
          socket.write(encode([[
            'slots', [0, 16383],
            'nodes', [['id', 'fake0', 'port', port, 'ip', '127.0.0.1', 'endpoint', '127.0.0.1', 'role', 'master',
              'replication-offset', 0, 'health', 'online']],
          ]]));
        } else if (cmd === 'GET') {
          const key = rest[0]!;
          const n = (asked.get(key) ?? 0) + 1;
          asked.set(key, n);
          if (key.startsWith('loop')) socket.write(`-MOVED ${calculateSlot(key)} 127.0.0.1:${port}\r\n`);
          else if (key.startsWith('down')) socket.write('-CLUSTERDOWN The cluster is down\r\n');
          else if (key.startsWith('tryagain') && n <= failures) socket.write('-TRYAGAIN Multiple keys request during rehashing of slot\r\n');
          else socket.write(encode(`value-of-${key}`));
        } else socket.write('-ERR unexpected\r\n');
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    asked: (key: string) => asked.get(key) ?? 0,
    close: () => new Promise((r) => server.close(r)),
  };
}

describe('redirect and retry caps (fake cluster node)', () => {
  let node: Awaited<ReturnType<typeof startFakeClusterNode>>;
  let proxy: RespoolProxy;
  let raw: RawConnection;

  beforeAll(async () => {
    node = await startFakeClusterNode(2);
    proxy = await startTestProxy([{ host: '127.0.0.1', port: node.port }], {
      mode: 'cluster',
      cluster: { maxRedirects: 5, retryBudget: 3, retryBaseMs: 10, retryMaxMs: 40 } as never,
    });
    raw = await RawConnection.connect(proxy.address.port);
  });

  afterAll(async () => {
    raw?.close();
    await proxy?.close();
    await node?.close();
  });

  it('gives up on a MOVED loop after maxRedirects with a clear error', async () => {
    expect(await raw.call('GET', 'loop:1')).toBe("-ERR respool: GET was redirected more than 5 times; giving up\r\n");
    expect(node.asked('loop:1')).toBe(6); // the first send and 5 redirects
    const metrics = await proxy.metrics.render();
    expect(metrics).toMatch(/respool_command_errors_total\{command="get",kind="redirect_limit"\} 1/);
  });

  it('retries TRYAGAIN within its budget and answers the value', async () => {
    expect(await raw.call('GET', 'tryagain:1')).toBe('$19\r\nvalue-of-tryagain:1\r\n');
    expect(node.asked('tryagain:1')).toBe(3); // two TRYAGAIN, then the value
  });

  it('passes the server error on once the retry budget is spent', async () => {
    const reply = await raw.call('GET', 'down:1');
    expect(reply).toBe('-CLUSTERDOWN The cluster is down\r\n');
    expect(node.asked('down:1')).toBe(4); // 1 + retryBudget (3)
  });

  it('keeps the connection usable and in order afterwards', async () => {
    raw.send('GET', 'loop:2');
    raw.send('GET', 'plain');
    raw.send('PING');
    expect(await raw.read()).toMatch(/redirected more than 5 times/);
    expect(await raw.read()).toBe('$14\r\nvalue-of-plain\r\n');
    expect(await raw.read()).toBe('+PONG\r\n');
  });
});
