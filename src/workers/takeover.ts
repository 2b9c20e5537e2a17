import type { Worker } from 'node:cluster';
import type { Logger } from 'pino';

/** To a worker a takeover replaced: retire, handing plain clients over (main.ts). */
export const RETIRE_MESSAGE = 'respool:retire';
/** A client connection (the socket, over IPC) and its state: retiring worker → supervisor → its replacement. */
export const CLIENT_HANDOVER_MESSAGE = 'respool:client-handover';

/** What the takeover asks of the supervisor's worker slots (supervisor.ts). */
export interface TakeoverSlots {
  readonly count: number;
  /** The worker serving at `index` now. */
  current(index: number): Worker;
  /**
   * Starts a new worker at `index` from the code on disk now (it becomes current(index)) and
   * resolves once it serves; rejects — the old worker put back at `index` — when it does not
   * within `readyMs`.
   */
  replace(index: number, readyMs: number): Promise<Worker>;
}

/** A new worker that has not said it serves by then fails the takeover (the old one stays). */
const READY_MS = 30_000;

/**
 * Retired workers still relaying TLS clients (session/tls-relay.ts: ~60 MB each, up to 10 min)
 * are kept for this many takeovers' worth of workers; past it the oldest end (their TLS clients
 * see a close and reconnect), so quick successive upgrades cannot pile processes up.
 */
export const RELAY_GENERATIONS = 2;

/** Relaying workers past `bound`, oldest first: those to end (`retiring` is in retirement order). */
export function relaysPastBound<W extends Pick<Worker, 'isDead' | 'isConnected'>>(retiring: Iterable<W>, bound: number): W[] {
  const relaying = [...retiring].filter((w) => !w.isDead() && !w.isConnected());
  return relaying.slice(0, Math.max(0, relaying.length - bound));
}

/**
 * Takeover (SIGUSR2 to the supervisor): an upgrade that drops no client. The supervisor holds the
 * listening sockets (TCP, TLS, Unix; node's cluster module hands accepted connections to the
 * workers), so replacing the processes behind them never closes a listener. Worker by worker:
 *
 *   start  : a new worker from the code on disk now (bin/respool.js is run again) at the same
 *            index; it serves (its ready message, main.ts) before the old one stops accepting,
 *            and gets the run-time split changes replayed (supervisor.ts replayTo); the fleet's
 *            shared state and ACL changes reach it as any member's
 *   retire : the old worker is told to retire (RETIRE_MESSAGE): it stops accepting and hands each
 *            plain client connection — its socket, over IPC through the supervisor, once it owes
 *            nothing — to the new worker, which adopts it with its state
 *            (session/session-handover.ts, server.ts adopt): the client never sees a close. A
 *            TLS connection stays with the old worker, relayed in plaintext to the new one
 *            (session/tls-relay.ts). One in a transaction or a blocked call goes once it is
 *            between requests; one whose state lives only there for as long as the client
 *            keeps it (a subscription, tracking …) is closed once its replies are written. It exits within the drain time — or, relaying TLS clients, leaves the
 *            supervisor (IPC disconnect) holding no upstream link and exits when they are gone;
 *            a worker still there and connected drainMs + 5 s later is killed
 *   order  : one index at a time, so at most one worker more than `count` holds upstream links,
 *            and never for longer than one drain
 *   abort  : a new worker that does not serve within READY_MS is stopped, the old one keeps
 *            serving, and the takeover ends there (logged)
 *   relays : at most count × RELAY_GENERATIONS retired workers relay TLS clients at once; past
 *            that the oldest end
 */
export async function takeOver(slots: TakeoverSlots, retiring: Set<Worker>, log: Logger, drainMs: number): Promise<boolean> {
  log.info({ event: 'takeover_started', workers: slots.count }, 'takeover: replacing every worker, one at a time');
  for (let index = 0; index < slots.count; index++) {
    const old = slots.current(index);
    retiring.add(old);
    let fresh: Worker;
    try {
      fresh = await slots.replace(index, READY_MS);
    } catch (err) {
      retiring.delete(old);
      log.error({ event: 'takeover_failed', worker: index, err: (err as Error).message }, 'takeover stopped: a new worker did not start; the old one keeps serving');
      return false;
    }
    // Done with it once it exits — or leaves the supervisor to relay its TLS clients to the new
    // worker (session/tls-relay.ts: it holds no upstream link then, and ends on its own).
    const released = new Promise<void>((resolve) => {
      if (old.isDead() || !old.isConnected()) return resolve();
      old.once('exit', () => resolve());
      old.once('disconnect', () => resolve());
    });
    old.once('exit', () => retiring.delete(old));
    // Its plain clients go to the new worker (session/session-handover.ts), the others close after their replies.
    if (old.isConnected()) old.send({ type: RETIRE_MESSAGE });
    else old.process.kill('SIGTERM');
    const deadline = setTimeout(() => old.process.kill('SIGKILL'), drainMs + 5000);
    await released;
    clearTimeout(deadline);
    if (old.isDead()) retiring.delete(old);
    for (const relay of relaysPastBound(retiring, slots.count * RELAY_GENERATIONS)) {
      log.warn({ event: 'tls_relay_ended', pid: relay.process.pid, bound: slots.count * RELAY_GENERATIONS }, 'takeover: too many retired workers still relay TLS clients; the oldest ends (its clients reconnect)');
      relay.process.kill('SIGTERM'); // a second signal to a stopping worker: it exits at once (main.ts)
    }
    log.info({ event: 'worker_taken_over', worker: index, old: old.process.pid, new: fresh.process.pid }, `takeover: worker ${index} is pid ${fresh.process.pid} now`);
  }
  log.info({ event: 'takeover_done', workers: slots.count }, 'takeover done: every worker replaced');
  return true;
}
