import net from 'node:net';
import { encodeCommand, RespDecoder, type RespArg } from '../harness/raw-client.js';

/**
 * A bare RESP connection for exact-byte checks: send raw bytes or commands, read whole reply
 * frames as they arrived (undecoded), see when the server closes.
 *
 * Frames are delimited by the harness's own decoder (test/harness/raw-client.ts), never by
 * src/resp: the code under test must not be its own oracle.
 */
export class RawConnection {
  private readonly decoder = new RespDecoder();
  private readonly frames: Buffer[] = [];
  private waiters: Array<() => void> = [];
  /** Set when the server sent bytes that are not RESP; the connection is then closed. */
  private decodeError: Error | undefined;
  closed = false;

  private constructor(private readonly socket: net.Socket) {
    socket.on('data', (chunk: Buffer) => {
      if (this.decodeError) return;
      this.decoder.push(chunk);
      try {
        let frame: { raw: Buffer } | undefined;
        while ((frame = this.decoder.nextFrame()) !== undefined) this.frames.push(Buffer.from(frame.raw));
      } catch (e) {
        this.decodeError = e as Error;
        socket.destroy();
      }
      this.wake();
    });
    socket.on('close', () => {
      this.closed = true;
      this.wake();
    });
    socket.on('error', () => {});
  }

  static connect(port: number, host = '127.0.0.1'): Promise<RawConnection> {
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host, port }, () => resolve(new RawConnection(socket)));
      socket.once('error', reject);
    });
  }

  write(data: Buffer | string): void {
    this.socket.write(data);
  }

  send(...args: Array<string | Buffer | number>): void {
    this.socket.write(encodeCommand(args));
  }

  /** The next reply frame as text; rejects on timeout or when the connection closed first. */
  async read(timeoutMs = 5000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    while (this.frames.length === 0) {
      if (this.decodeError) throw this.decodeError;
      if (this.closed) throw new Error('connection closed');
      const left = deadline - Date.now();
      if (left <= 0) throw new Error('timed out waiting for a reply');
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return this.frames.shift()!.toString('utf8');
  }

  /** Every frame that arrived within `ms` (after one turn of the loop at least: bytes already sent are read first), without waiting for more. */
  async framesWithin(ms = 0): Promise<string[]> {
    await new Promise((r) => (ms > 0 ? setTimeout(r, ms) : setImmediate(r)));
    return this.frames.splice(0).map((f) => f.toString('utf8'));
  }

  async call(...args: Array<string | Buffer | number>): Promise<string> {
    this.send(...args);
    return this.read();
  }

  /** Resolves once the peer has closed the connection. */
  async waitClosed(timeoutMs = 5000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!this.closed) {
      if (Date.now() > deadline) throw new Error('connection still open');
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  close(): void {
    this.socket.destroy();
  }

  /** Half-close: sends FIN, still reads what the server sends until it closes. */
  end(): void {
    this.socket.end();
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }
}

export interface RawExchangeOptions {
  /** Send HELLO 3 first and wait for its reply, which is left out of the result. */
  resp3?: boolean;
  /** Done once this holds for the bytes received so far (a byte count, a closing reply, …). */
  until?: (got: string) => boolean;
  /** Instead of `until`: everything that arrived within this many ms of the write. */
  collectMs?: number;
  /** With `until`: rejects when it still does not hold after this many ms. */
  timeoutMs?: number;
}

/**
 * Opens a bare socket, writes `commands` (RESP-encoded) in one write and returns the exact reply
 * bytes as a latin1 string (one character per byte), complete when `until` holds or after
 * `collectMs`. Rejects when the server closes or `timeoutMs` passes before `until` holds.
 */
export function rawExchange(port: number, commands: ReadonlyArray<readonly RespArg[]>, opts: RawExchangeOptions): Promise<string> {
  const { resp3 = false, until, collectMs, timeoutMs = 10_000 } = opts;
  if ((until === undefined) === (collectMs === undefined)) throw new Error('rawExchange: give exactly one of until and collectMs');
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    let hello = resp3 ? new RespDecoder() : undefined;
    let got = '';
    let done = false;
    const finish = (error?: Error) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      if (error) reject(error);
      else resolve(got);
    };
    let timer = until === undefined ? undefined : setTimeout(() => finish(new Error(`no complete reply within ${timeoutMs} ms; got ${JSON.stringify(got)}`)), timeoutMs);
    const send = () => {
      socket.write(Buffer.concat(commands.map((c) => encodeCommand(c))));
      if (collectMs !== undefined) timer = setTimeout(() => finish(), collectMs);
    };
    socket.on('error', (e) => finish(e));
    socket.on('close', () => {
      if (until !== undefined || hello !== undefined) finish(new Error(`connection closed before the reply was complete; got ${JSON.stringify(got)}`));
    });
    socket.on('connect', () => (hello ? socket.write(encodeCommand(['HELLO', '3'])) : send()));
    socket.on('data', (chunk: Buffer) => {
      if (done) return;
      if (hello) {
        hello.push(chunk);
        const frame = hello.nextFrame();
        if (frame === undefined) return;
        if (frame.raw[0] !== 0x25 /* % */) return finish(new Error(`HELLO 3 answered ${JSON.stringify(frame.raw.toString('latin1'))}`));
        hello = undefined;
        send();
        return;
      }
      got += chunk.toString('latin1');
      if (until?.(got)) finish();
    });
  });
}
