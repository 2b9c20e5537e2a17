/**
 * Load for the slow-reader tests and benches (issue 35), independent of respool's own code:
 *  - SlowReader: pipelines GETs of big values, then reads its replies at a fixed rate (a client
 *    on a slow network, or stuck in a GC pause) — at most `bytesPerSecond`, one socket read at a
 *    time, paused in between, so the rest stays in the kernel and in whatever sits before it;
 *  - verifiedClients: clients that SET a small key and GET it back, checking every reply, timing
 *    each round trip, and remembering the last value the server acknowledged per key.
 */
import net from 'node:net';
import { encodeCommand } from './raw-client.js';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export interface SlowReaderOptions {
  port: number;
  host?: string;
  /** The keys it GETs, pipelined in one write. */
  keys: readonly string[];
  /** How fast it reads; it takes one socket read per tick of 1 s / (bytesPerSecond / 64 KiB). */
  bytesPerSecond: number;
}

export class SlowReader {
  /** Bytes of replies read so far. */
  received = 0;
  /** The connection ended (respool closed it, or stop()). Only seen while reading. */
  ended = false;
  private readonly socket: net.Socket;
  private timer: NodeJS.Timeout | null = null;
  private readonly chunks: Buffer[] = [];
  private fast = false;

  private constructor(socket: net.Socket, private readonly options: SlowReaderOptions) {
    this.socket = socket;
    socket.on('error', () => {});
    socket.on('close', () => {
      this.ended = true;
      if (this.timer !== null) clearInterval(this.timer);
    });
    socket.on('data', (d: Buffer) => {
      this.received += d.length;
      this.chunks.push(d);
      if (!this.fast) socket.pause();
    });
  }

  static async start(options: SlowReaderOptions): Promise<SlowReader> {
    const socket = net.connect(options.port, options.host ?? '127.0.0.1');
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    const reader = new SlowReader(socket, options);
    socket.pause();
    socket.write(Buffer.concat(options.keys.map((k) => encodeCommand(['GET', k]))));
    const tickMs = Math.max(1, Math.round(1000 / (options.bytesPerSecond / 65536)));
    reader.timer = setInterval(() => socket.resume(), tickMs);
    return reader;
  }

  /** Reads the rest as fast as it comes, for up to `ms`: true when the connection ended meanwhile (or had). */
  async drain(expectBytes: number, ms: number): Promise<boolean> {
    if (this.timer !== null) clearInterval(this.timer);
    this.fast = true;
    this.socket.resume();
    const deadline = Date.now() + ms;
    while (!this.ended && this.received < expectBytes && Date.now() < deadline) await sleep(20);
    return this.ended;
  }

  /** What it read, as one buffer. */
  bytes(): Buffer {
    return Buffer.concat(this.chunks);
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.socket.destroy();
  }
}

export interface VerifiedRun {
  ok: number;
  errors: string[];
  /** Round-trip times of SET + GET, ms. */
  latencies: number[];
  /** The last value the server acknowledged (+OK) per key. */
  acknowledged: Map<string, string>;
}

/**
 * `clients` connections, each setting its own key `${prefix}:${i}` to a fresh value and reading
 * it back (one pipeline of two), for `ms`; every reply checked. A connection that fails or times
 * out (`timeoutMs`) counts an error and is opened again.
 */
export async function verifiedClients(port: number, clients: number, ms: number, prefix: string, timeoutMs = 10_000): Promise<VerifiedRun> {
  const run: VerifiedRun = { ok: 0, errors: [], latencies: [], acknowledged: new Map() };
  const end = Date.now() + ms;
  await Promise.all(Array.from({ length: clients }, (_, i) => verifiedClient(port, `${prefix}:${i}`, end, timeoutMs, run)));
  return run;
}

async function verifiedClient(port: number, key: string, end: number, timeoutMs: number, run: VerifiedRun): Promise<void> {
  let seq = 0;
  while (Date.now() < end) {
    const socket = net.connect(port, '127.0.0.1');
    let text = '';
    let wake: (() => void) | null = null;
    let dead = false;
    const kick = () => wake?.();
    socket.on('data', (d: Buffer) => {
      text += d.toString('latin1');
      kick();
    });
    socket.on('error', () => {
      dead = true;
      kick();
    });
    socket.on('close', () => {
      dead = true;
      kick();
    });
    const connected = await new Promise<boolean>((resolve) => {
      socket.once('connect', () => resolve(true));
      socket.once('error', () => resolve(false));
    });
    if (!connected) {
      run.errors.push(`${key}: connect failed`);
      await sleep(100);
      continue;
    }
    while (Date.now() < end && !dead) {
      const value = `${key}=${++seq}`;
      const expected = `+OK\r\n$${value.length}\r\n${value}\r\n`;
      text = '';
      const started = performance.now();
      socket.write(Buffer.concat([encodeCommand(['SET', key, value]), encodeCommand(['GET', key])]));
      const got = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), timeoutMs);
        wake = () => {
          if (dead || text.length >= expected.length) {
            clearTimeout(timer);
            resolve(!dead || text.length >= expected.length);
          }
        };
        wake();
      });
      wake = null;
      run.latencies.push(performance.now() - started);
      if (text.startsWith('+OK\r\n')) run.acknowledged.set(key, value);
      if (!got || text !== expected) {
        run.errors.push(`${key}: ${got ? JSON.stringify(text.slice(0, 200)) : 'no reply'}`);
        break;
      }
      run.ok++;
    }
    socket.destroy();
  }
}

/** The q-quantile of `xs` (ms), 0 for none. */
export function quantile(xs: readonly number[], q: number): number {
  if (xs.length === 0) return 0;
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))]!;
}
