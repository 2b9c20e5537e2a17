import net from 'node:net';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { acceptReadingShared, readClientSocket } from '../../src/session/shared-reads.js';
import { copyOut } from '../../src/util/shared-read-buffer.js';

function onChunk(this: net.Socket, chunk: Buffer): void {
  (this as net.Socket & { chunks: Buffer[] }).chunks.push(chunk);
}

/** A server whose accepted sockets go through readClientSocket; every chunk is recorded. */
async function server(opts: { straight?: boolean; maxConnections?: number } = {}): Promise<{ srv: net.Server; port: number; accepted: Array<{ socket: net.Socket; chunks: Buffer[]; raw: net.Socket }> }> {
  const accepted: Array<{ socket: net.Socket; chunks: Buffer[]; raw: net.Socket }> = [];
  // noDelay as a listener option makes acceptReadingShared leave accepting to Node (re-wrap path).
  const srv = net.createServer({ pauseOnConnect: true, noDelay: opts.straight !== true }, (raw) => {
    const chunks: Buffer[] = [];
    const socket = readClientSocket(raw, onChunk);
    (socket as net.Socket & { chunks: Buffer[] }).chunks = chunks;
    accepted.push({ socket, chunks, raw });
    socket.on('error', () => {});
    socket.resume();
  });
  if (opts.maxConnections !== undefined) srv.maxConnections = opts.maxConnections;
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  if (opts.straight === true) acceptReadingShared(srv);
  return { srv, port: (srv.address() as net.AddressInfo).port, accepted };
}

/** `socket` answers the client, and the server's close() completes once the client ends: the socket was counted as its connection. */
async function answersThenCountsItsClose(srv: net.Server, client: net.Socket, socket: net.Socket): Promise<void> {
  socket.write('+PONG\r\n');
  const [reply] = (await once(client, 'data')) as [Buffer];
  expect(reply.toString()).toBe('+PONG\r\n');
  const closed = new Promise<void>((resolve) => srv.close(() => resolve()));
  client.end();
  await once(socket, 'close');
  await closed;
}

describe('shared-buffer client reads', () => {
  it('re-wraps an accepted TCP socket: bytes arrive intact, chunks stay valid after later reads', async () => {
    const { srv, port, accepted } = await server();
    const client = net.connect(port, '127.0.0.1');
    await once(client, 'connect');
    const sent: Buffer[] = [];
    for (let i = 0; i < 200; i++) {
      const piece = Buffer.from(`*2\r\n$3\r\nGET\r\n$${String(i).length + 4}\r\nkey:${i}\r\n`);
      sent.push(piece);
      client.write(piece);
      if (i % 20 === 0) await new Promise((r) => setTimeout(r, 2)); // several reads
    }
    const big = Buffer.alloc(100_000, 0x61); // above the slab's own-buffer threshold
    client.write(big);
    const expected = Buffer.concat([...sent, big]);
    await expect.poll(() => accepted[0]?.chunks.reduce((n, c) => n + c.length, 0) ?? 0).toBe(expected.length);
    const { socket, chunks } = accepted[0]!;
    expect(socket.constructor).toBe(net.Socket);
    expect(chunks.length).toBeGreaterThan(1);
    // Every chunk still holds what was read into it, though the shared buffer was reused since.
    expect(Buffer.concat(chunks).equals(expected)).toBe(true);

    // Writes, pause/resume and remote address work on the re-wrapped socket.
    expect(socket.remotePort).toBe(client.localPort);
    socket.pause();
    client.write('late');
    await new Promise((r) => setTimeout(r, 50));
    expect(Buffer.concat(chunks).length).toBe(expected.length);
    socket.resume();
    await expect.poll(() => Buffer.concat(chunks).length).toBe(expected.length + 4);
    // The re-wrapped socket writes, and counts as the server's connection: close() completes once it ends.
    await answersThenCountsItsClose(srv, client, socket);
  });

  it('accepts straight into a shared-reading socket: one socket per connection, counted by the server, bytes intact', async () => {
    const { srv, port, accepted } = await server({ straight: true });
    const client = net.connect(port, '127.0.0.1');
    await once(client, 'connect');
    const sent = Buffer.from('*1\r\n$4\r\nPING\r\n'.repeat(500));
    for (let i = 0; i < sent.length; i += 1000) client.write(sent.subarray(i, i + 1000));
    await expect.poll(() => accepted[0]?.chunks.reduce((n, c) => n + c.length, 0) ?? 0).toBe(sent.length);
    const { socket, chunks, raw } = accepted[0]!;
    expect(socket).toBe(raw); // not re-wrapped: the listener built it reading through the shared buffer
    expect(Buffer.concat(chunks).equals(sent)).toBe(true);
    expect(await new Promise((r) => srv.getConnections((_e, n) => r(n)))).toBe(1);
    await answersThenCountsItsClose(srv, client, socket); // its close was counted down
  });

  it('leaves accepting to Node when the listener has a setting only Node applies (maxConnections): re-wrapped then', async () => {
    const { srv, port, accepted } = await server({ straight: true, maxConnections: 1 });
    const first = net.connect(port, '127.0.0.1');
    await once(first, 'connect');
    first.write('PING\r\n');
    await expect.poll(() => accepted[0]?.chunks.length ?? 0).toBe(1);
    expect(accepted[0]!.socket).not.toBe(accepted[0]!.raw);
    const second = net.connect(port, '127.0.0.1');
    second.on('error', () => {});
    await once(second, 'close'); // over maxConnections: Node's own path closed it
    expect(accepted).toHaveLength(1);
    const closed = new Promise<void>((resolve) => srv.close(() => resolve()));
    first.end();
    await closed;
  });

  it('copyOut keeps earlier copies intact when the source is reused', () => {
    const source = Buffer.alloc(64);
    const copies: Buffer[] = [];
    for (let i = 0; i < 2000; i++) { // spans several slabs
      source.fill(i % 251);
      copies.push(copyOut(source, 20));
    }
    copies.forEach((c, i) => expect(c.every((b) => b === i % 251)).toBe(true));
    const large = Buffer.alloc(20_000, 7);
    const own = copyOut(large, 20_000);
    large.fill(0);
    expect(own.every((b) => b === 7)).toBe(true);
  });
});
