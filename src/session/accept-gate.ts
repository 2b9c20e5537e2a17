import type { Socket } from 'node:net';
import { FifoQueue } from '../util/fifo-queue.js';

/**
 * Admits new client connections at most `ratePerSecond` (token bucket, burst of a tenth of a
 * second's worth, at least 1), so that a storm of connects cannot starve the clients already
 * being served.
 *
 *   offer(socket) : the listener accepted a socket (paused: pauseOnConnect, nothing is read).
 *                   It is parked; the next step admits it if a token is left.
 *   parked        : sockets waiting for admission, oldest first, still paused — a parked socket
 *                   costs its fd and a net.Socket, no session, no buffers, no timer, no socket
 *                   option call (TCP_NODELAY and keepalive come from the listener on Linux).
 *   admission     : parked sockets are admitted from a setImmediate/setTimeout step that runs
 *                   after the event loop has handled the established clients' I/O of that turn,
 *                   so they are served first; a step stops after STEP_BUDGET_MS of work (an
 *                   admission creates a session and starts reading; the new client's first
 *                   request is then handled among the next turns' I/O), so an established client
 *                   waits at most about that long for it. A whole connect + PING + close costs
 *                   respool 110-135 µs of CPU on the 2-core bench machine, a bare Node server
 *                   90-105, valkey-server 80-90 (npm run bench:storm, medians of two runs).
 *   invariant     : parked sockets count toward maxClients (the server checks parkedCount).
 */
// 0.3 ms: storm bench p99 during/before 2.04x and 2.01x, vs 1.86x-2.58x with 1 ms (noisy).
const STEP_BUDGET_MS = 0.3;

export class AcceptGate {
  private readonly parked = new FifoQueue<Socket>();
  private tokens: number;
  private last = performance.now();
  private readonly capacity: number;
  private step: NodeJS.Immediate | NodeJS.Timeout | null = null;
  private closed = false;

  constructor(
    private readonly ratePerSecond: number,
    private readonly admit: (socket: Socket) => void,
    /** Work one step may do (tests pass a large one to check the token bucket on its own). */
    private readonly stepBudgetMs = STEP_BUDGET_MS,
  ) {
    this.capacity = Math.max(1, Math.floor(ratePerSecond / 10));
    this.tokens = this.capacity;
  }

  get parkedCount(): number {
    return this.parked.length;
  }

  offer(socket: Socket): void {
    if (this.ratePerSecond <= 0) {
      this.admit(socket);
      return;
    }
    // Always through a step, never inside the accept callback: that runs in the poll phase,
    // among the established clients' I/O (libuv >= 1.45 accepts one connection per readiness
    // of the listener, so accepts themselves are already spread over loop iterations), and
    // admitting there would put a session, its syscalls and the new client's first request
    // ahead of the established clients' replies.
    this.parked.push(socket);
    this.schedule();
  }

  /** Stops admitting; returns the sockets still parked (the caller refuses them). */
  close(): Socket[] {
    this.closed = true;
    if (this.step !== null) {
      clearTimeout(this.step as NodeJS.Timeout);
      clearImmediate(this.step as NodeJS.Immediate);
      this.step = null;
    }
    return this.parked.drain();
  }

  private refill(): void {
    const now = performance.now();
    const t = this.tokens + ((now - this.last) * this.ratePerSecond) / 1000;
    this.last = now;
    this.tokens = t > this.capacity ? this.capacity : t;
  }

  private schedule(): void {
    if (this.step !== null || this.closed) return;
    this.refill();
    if (this.tokens >= 1) {
      this.step = setImmediate(this.run);
    } else {
      const wait = Math.max(1, Math.ceil(((1 - this.tokens) * 1000) / this.ratePerSecond));
      this.step = setTimeout(this.run, wait);
    }
  }

  private readonly run = (): void => {
    this.step = null;
    if (this.closed) return;
    this.refill();
    const start = performance.now();
    while (this.tokens >= 1 && performance.now() - start < this.stepBudgetMs) {
      const socket = this.parked.shift();
      if (socket === undefined) break;
      if (socket.destroyed) continue; // gave up while waiting: no token spent
      this.tokens -= 1;
      this.admit(socket);
    }
    if (this.parked.length > 0) this.schedule();
  };
}
