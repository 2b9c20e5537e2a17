/**
 * The fault relay itself (test/harness/fault-relay.ts, issue 34), in front of an echo server:
 * each fault does what it says — delay per direction, chunks held back without loss or
 * reordering, a bandwidth cap, a blackhole, a half-close, a reset.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import net from 'node:net';
import { FaultRelay } from '../helpers/fault-relay.js';

describe('fault relay', () => {
  let echo: net.Server;
  let echoPort: number;
  let relay: FaultRelay | null = null;
  const sockets: net.Socket[] = [];

  beforeAll(async () => {
    echo = net.createServer((s) => {
      s.on('error', () => {});
      s.pipe(s);
    });
    await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
    echoPort = (echo.address() as net.AddressInfo).port;
  });

  afterEach(async () => {
    for (const s of sockets.splice(0)) s.destroy();
    await relay?.close();
    relay = null;
  });

  afterAll(async () => {
    await new Promise<void>((r) => echo.close(() => r()));
  });

  async function connect(): Promise<net.Socket> {
    const s = net.connect({ host: '127.0.0.1', port: relay!.port, noDelay: true });
    sockets.push(s);
    s.on('error', () => {});
    await new Promise<void>((r) => s.once('connect', r));
    return s;
  }

  /** Writes `data` and resolves with the time until `data.length` bytes came back, and those bytes. */
  function roundTrip(s: net.Socket, data: Buffer, timeoutMs = 5000): Promise<{ ms: number; got: Buffer }> {
    return new Promise((resolve, reject) => {
      const started = performance.now();
      const chunks: Buffer[] = [];
      let size = 0;
      const timer = setTimeout(() => reject(new Error(`only ${size} of ${data.length} bytes came back`)), timeoutMs);
      const onData = (chunk: Buffer) => {
        chunks.push(chunk);
        size += chunk.length;
        if (size < data.length) return;
        clearTimeout(timer);
        s.off('data', onData);
        resolve({ ms: performance.now() - started, got: Buffer.concat(chunks) });
      };
      s.on('data', onData);
      s.write(data);
    });
  }

  it('passes bytes unchanged without faults', async () => {
    relay = await FaultRelay.start({ host: '127.0.0.1', port: echoPort });
    const s = await connect();
    const data = Buffer.from('hello relay');
    expect((await roundTrip(s, data)).got).toEqual(data);
    expect(relay.connections).toBe(1);
  });

  it('delays each direction by its own amount', async () => {
    relay = await FaultRelay.start({ host: '127.0.0.1', port: echoPort }, { delayMs: { toNode: 30, toClient: 20 } });
    const s = await connect();
    const { ms } = await roundTrip(s, Buffer.from('x'));
    expect(ms).toBeGreaterThanOrEqual(49);
    relay.set({ delayMs: { toNode: 0, toClient: 0 } });
    expect((await roundTrip(s, Buffer.from('y'))).ms).toBeLessThan(45);
  });

  it('holds chunks back without losing or reordering any', async () => {
    relay = await FaultRelay.start({ host: '127.0.0.1', port: echoPort }, { holdShare: 0.5, holdMs: 40, jitterMs: 5 });
    const s = await connect();
    const parts: Buffer[] = [];
    const chunks: Buffer[] = [];
    let size = 0;
    const total = 200 * 8;
    const done = new Promise<void>((resolve) =>
      s.on('data', (chunk: Buffer) => {
        chunks.push(chunk);
        size += chunk.length;
        if (size >= total) resolve();
      }),
    );
    const started = performance.now();
    for (let i = 0; i < 200; i++) {
      const part = Buffer.from(String(i).padStart(8, '0'));
      parts.push(part);
      s.write(part);
      if (i % 10 === 0) await new Promise((r) => setImmediate(r)); // separate chunks
    }
    await done;
    expect(Buffer.concat(chunks)).toEqual(Buffer.concat(parts));
    expect(performance.now() - started).toBeGreaterThanOrEqual(40); // at least one chunk was held back
  });

  it('caps the bandwidth of a direction', async () => {
    relay = await FaultRelay.start({ host: '127.0.0.1', port: echoPort }, { bytesPerSecond: 1024 * 1024 });
    const s = await connect();
    const data = Buffer.alloc(512 * 1024, 7);
    const { ms, got } = await roundTrip(s, data, 10_000);
    expect(got.length).toBe(data.length);
    expect(ms).toBeGreaterThanOrEqual(450); // 512 KiB each way at 1 MiB/s, the two directions overlapping
  });

  it('a blackhole accepts, keeps the connection and answers nothing; relaying resumes when it is lifted', async () => {
    relay = await FaultRelay.start({ host: '127.0.0.1', port: echoPort }, { blackhole: true });
    const s = await connect();
    await expect(roundTrip(s, Buffer.from('lost'), 300)).rejects.toThrow(/only 0 of 4/);
    expect(s.destroyed).toBe(false);
    expect(relay.connections).toBe(1);
    s.removeAllListeners('data');
    relay.set({ blackhole: false });
    expect((await roundTrip(s, Buffer.from('back'))).got.toString()).toBe('back');
  });

  it('half-close sends FIN to the client; reset sends RST', async () => {
    relay = await FaultRelay.start({ host: '127.0.0.1', port: echoPort });
    const a = await connect();
    const ended = new Promise<void>((r) => a.once('end', r));
    relay.halfClose();
    await ended;
    const b = await connect();
    const failed = new Promise<NodeJS.ErrnoException>((r) => b.once('error', r));
    await new Promise((r) => setTimeout(r, 20)); // accepted on the relay's side
    relay.reset();
    expect((await failed).code).toBe('ECONNRESET');
  });
});
