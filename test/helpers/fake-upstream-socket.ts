import { Writable } from 'node:stream';
import type net from 'node:net';
import type { OpenUpstreamSocket, UpstreamSocketHooks, UpstreamSocketOptions } from '../../src/upstream/upstream-socket.js';
import type { LinkFailureCause, LinkRequest } from '../../src/upstream/link.js';

/**
 * A stand-in for the socket of an upstream connection (upstream/upstream-socket.ts), for unit
 * tests of Link and NodePool without a server: the test plays the node — it opens the
 * connection (`open()`), reads what the owner wrote (`takeWritten()`, whole RESP requests), answers
 * with reply bytes (`reply()`), and fails it (`fail()`) as a reset or close would.
 */
export class FakeUpstreamSocket {
  readonly socket: net.Socket;
  readonly written: Buffer[] = [];
  connectDoneCalls = 0;
  destroyed = false;

  constructor(
    readonly options: UpstreamSocketOptions,
    private readonly hooks: UpstreamSocketHooks,
  ) {
    const written = this.written;
    this.socket = new Writable({
      write(chunk: Buffer, _enc, done) {
        written.push(Buffer.from(chunk));
        done();
      },
    }) as unknown as net.Socket;
  }

  /** The node accepted the connection: the owner starts its handshake. */
  open(): void {
    this.hooks.open();
  }

  /** Reply bytes from the node (a whole frame, several, or part of one). */
  reply(bytes: string | Buffer): void {
    this.hooks.data(typeof bytes === 'string' ? Buffer.from(bytes, 'latin1') : bytes);
  }

  /** The connection broke (reset, close, connect deadline). */
  fail(reason: string): void {
    this.hooks.fail(reason);
  }

  /** Everything written so far, as one latin1 string, and forgotten. */
  takeWritten(): string {
    const text = Buffer.concat(this.written).toString('latin1');
    this.written.length = 0;
    return text;
  }

  connectDone(): void {
    this.connectDoneCalls++;
  }

  destroy(): void {
    this.destroyed = true;
  }
}

/** An OpenUpstreamSocket that records every socket it opens (oldest first). */
export function fakeSockets(): { open: OpenUpstreamSocket; sockets: FakeUpstreamSocket[] } {
  const sockets: FakeUpstreamSocket[] = [];
  return {
    sockets,
    open: (options, hooks) => {
      const s = new FakeUpstreamSocket(options, hooks);
      sockets.push(s);
      return s;
    },
  };
}

/** The BatchedWriter of a link flushes on setImmediate: wait for it. */
export const flushWrites = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** One RESP request as a link writes it. */
export function resp(...args: string[]): string {
  return `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;
}

/** A request that records its replies and failures, and logs `name:reply` / `name:failed` in the order they happen. */
export interface RecordedRequest extends LinkRequest {
  replies: string[];
  failures: Array<{ error: string; written: boolean; cause: LinkFailureCause | undefined }>;
}

export function recordedRequest(name: string, log: string[]): RecordedRequest {
  const r: RecordedRequest = {
    sentAt: 0,
    replies: [],
    failures: [],
    onReply(frame) {
      r.replies.push(frame.toString('latin1'));
      log.push(`${name}:${frame.toString('latin1').trim()}`);
    },
    onLinkFailure(error, written, cause) {
      r.failures.push({ error, written, cause });
      log.push(`${name}:failed`);
    },
  };
  return r;
}
