import net, { type Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { startKernelReads } from '../util/kernel-reads.js';

/**
 * A takeover's TLS clients (session-handover.ts). A TLS connection's session keys live in this
 * process and cannot travel, so this process keeps the TLS and relays its plaintext, both ways,
 * over a loopback connection whose other end goes to the new process, which serves it as it
 * serves a handed-over plain client. The client keeps its connection and never sees the change;
 * a client that resends nothing (node-redis, redis-py) loses no command to a close.
 *
 *   pair   : a throwaway listener on 127.0.0.1 port 0 accepts one connection from here (paused:
 *            nothing is read from it here; its far end is handed over) and closes
 *   relay  : the TLS socket's stored plaintext goes first, then each direction is piped; either
 *            side closing closes the other
 *   bound  : this process holds no upstream link any more (it closed them with its sessions) and
 *            exits when its last relay ends, or closes those left after RELAY_MAX_MS
 *            (main.ts): the clients then reconnect
 */
export const RELAY_MAX_MS = 10 * 60_000;

export class TlsRelays {
  private readonly open = new Set<Socket>();
  private readonly emptied: Array<() => void> = [];

  get count(): number {
    return this.open.size;
  }

  /**
   * The loopback connection's far end (not reading) for the new process; `tls` is relayed to its
   * near end from now on. `tls` has been held from reading (the session's hold); `release` takes
   * the session's listeners off it once the pair exists (on a failure they stay: the drain's).
   */
  async relay(tls: TLSSocket, release: (tls: TLSSocket) => void): Promise<Socket> {
    const [near, far] = await loopbackPair();
    release(tls);
    this.open.add(near);
    const closeBoth = () => {
      tls.destroy();
      near.destroy();
    };
    tls.on('error', closeBoth).on('close', closeBoth);
    near.on('error', closeBoth).on('close', () => {
      closeBoth();
      this.open.delete(near);
      if (this.open.size === 0) for (const fn of this.emptied.splice(0)) fn();
    });
    tls.setTimeout(0);
    tls.pipe(near);
    near.pipe(tls);
    startKernelReads(tls); // the session's hold stopped them (session-handover.ts)
    return far;
  }

  /** Resolves when every relay has ended, or closes those left after `maxMs`. */
  async settle(maxMs: number): Promise<void> {
    if (this.open.size === 0) return;
    const timer = setTimeout(() => {
      for (const near of this.open) near.destroy();
    }, maxMs);
    await new Promise<void>((resolve) => this.emptied.push(resolve));
    clearTimeout(timer);
  }
}

/** Two ends of one loopback TCP connection: `near` (reading) and `far`, accepted paused. */
async function loopbackPair(): Promise<[Socket, Socket]> {
  const server = net.createServer({ pauseOnConnect: true });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', () => resolve()));
  try {
    const { port } = server.address() as net.AddressInfo;
    const accepted = new Promise<Socket>((resolve) => server.once('connection', resolve));
    const near = net.connect(port, '127.0.0.1');
    await new Promise<void>((resolve, reject) => near.once('connect', resolve).once('error', reject));
    const far = await accepted;
    if (far.remotePort !== near.localPort) { // another process's connection got there first
      far.destroy();
      near.destroy();
      throw new Error('the loopback listener accepted a connection from elsewhere');
    }
    near.setNoDelay(true);
    far.setNoDelay(true);
    return [near, far];
  } finally {
    server.close();
  }
}
