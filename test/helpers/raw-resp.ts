import net from 'node:net';
import { encodeCommand, RespDecoder } from '../harness/raw-client.js';

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
