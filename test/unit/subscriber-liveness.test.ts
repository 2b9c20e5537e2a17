import { afterEach, describe, expect, it } from 'vitest';
import net from 'node:net';
import { SubscriberConnection, type SubscriberConnectionHandler } from '../../src/pubsub/subscriber-connection.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const HELLO_REPLY = '%1\r\n$6\r\nserver\r\n$6\r\nvalkey\r\n';
const PUSH = '>3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nx\r\n';

/**
 * A fake node (fault case: a reply queued behind a long stream of pushes) that answers HELLO and
 * CLIENT but never PING, and sends pushes while `streaming` is on.
 */
async function fakeNode(): Promise<{ port: number; stream(on: boolean): void; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  let timer: NodeJS.Timeout | null = null;
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('error', () => {});
    s.on('close', () => sockets.delete(s));
    s.on('data', (d) => {
      const text = d.toString('latin1').toUpperCase();
      if (text.includes('HELLO')) s.write(HELLO_REPLY);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as net.AddressInfo).port,
    stream(on) {
      if (timer) clearInterval(timer);
      timer = on ? setInterval(() => sockets.forEach((s) => s.write(PUSH)), 20) : null;
    },
    close: async () => {
      if (timer) clearInterval(timer);
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}

describe('subscriber connection liveness', () => {
  const cleanups: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0)) await c();
  });

  it('a node that keeps sending pushes is alive while its PING reply waits; silence closes it', async () => {
    const node = await fakeNode();
    cleanups.push(() => node.close());
    let closedReason: string | null = null;
    let messages = 0;
    let ready = false;
    const handler: SubscriberConnectionHandler = {
      ready: () => (ready = true),
      message: () => void messages++,
      shardChannelDropped: () => {},
      closed: (_c, reason) => (closedReason = reason),
    };
    const conn = new SubscriberConnection(
      { host: '127.0.0.1', port: node.port, auth: null, connectTimeoutMs: 1000, commandTimeoutMs: 1000, pingIntervalMs: 50 },
      handler,
    );
    cleanups.push(() => conn.close('test over'));
    while (!ready && closedReason === null) await sleep(5);
    expect(ready).toBe(true);
    node.stream(true);
    // PINGed at the first check (every 250 ms) after 50 ms idle; its reply never comes; pushes keep
    // arriving every 20 ms. The 1000 ms timeout leaves a stalled push stream ~1 s of margin; 2500 ms
    // lets several checks see the PING older than the timeout.
    await sleep(2500);
    expect(closedReason).toBeNull();
    expect(messages).toBeGreaterThan(10);
    node.stream(false);
    const deadline = Date.now() + 5000; // closed within ~1250 ms of the last push
    while (closedReason === null && Date.now() < deadline) await sleep(10);
    expect(closedReason).toBe('no reply within 1000 ms');
  });
});
