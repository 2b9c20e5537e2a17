import type { RespoolConfig } from '../config/types.js';
import type { HistogramSeries } from '../metrics/fast-histogram.js';
import { clockNow, holdClock, releaseClock } from '../util/read-clock.js';
import type { LaneClass } from './lane-class.js';

/** Replies a client may owe before its first reply was written (replyWindow). */
const COLD_WINDOW = 4;

/**
 * A client whose nodes are this far (its distanceMs, client-output.ts) or farther gets a wider
 * window, in proportion: a window of W replies lets a client run W ÷ round trip requests a second,
 * so at a distance the window, not the node, would bound a deep pipeline (bench/far-node.mjs:
 * 0.46× a direct client at 50 ms). Nearer than this nothing changes: the window keeps its job of
 * keeping one client's pipeline from filling the node's queue ahead of its neighbours.
 */
const NEAR_MS = 10;
/** At most this many times the window (a node that stalls for long still gets a bounded pile). */
const MAX_STRETCH = 16;

/**
 * Replies a client may owe at once: admission.maxInflightPerClient, fewer when its replies are
 * big (its share of admission.maxInflightReplyBytesPerClient at its average reply size), at
 * least one — and COLD_WINDOW until its first reply was written: before that nothing tells how
 * big its replies are, so a new connection's pipeline of twenty 1 MiB GETs does not put 20 MiB on
 * a link at once (a round trip more for a new client that pipelines deeper; none for one that
 * does not). Both bounds are stretched by `distanceMs` ÷ NEAR_MS past NEAR_MS (at most
 * MAX_STRETCH): what is owed at a distance is mostly on the wire. maxPendingPerClient always holds.
 */
export function replyWindow(repliesWritten: number, replyAverage: number, config: Pick<RespoolConfig, 'admission' | 'limits'>, distanceMs = 0): number {
  if (repliesWritten === 0) return COLD_WINDOW;
  const { maxInflightPerClient, maxInflightReplyBytesPerClient } = config.admission;
  const stretch = distanceMs > NEAR_MS ? Math.min(MAX_STRETCH, distanceMs / NEAR_MS) : 1;
  const byBytes = Math.floor((maxInflightReplyBytesPerClient * stretch) / Math.max(1, replyAverage));
  return Math.max(1, Math.min(Math.floor(maxInflightPerClient * stretch), byBytes, config.limits.maxPendingPerClient));
}

/** What the ring needs of a client session (ClientSession). */
export interface AdmittedClient {
  readonly closed: boolean;
  /** True while it waits in the ring: a client is in it at most once. */
  waitingTurn: boolean;
  /** When it started waiting (util/read-clock.ts clockNow), for the wait metric. */
  waitingSince: number;
  /** The lane its requests take now (the wait metric's label). */
  readonly laneClass: LaneClass;
  /** Hands on at most one slice of its requests; calls wantTurn again itself when more remain. */
  takeTurn(): void;
}

/**
 * Fair admission between clients: the order in which clients' requests reach dispatch (and so the
 * shared links). Valkey reads 16 KiB of a client per event and runs what it read, so a deep
 * pipeline takes turns with everyone else; respool does the same:
 *
 *   slice  : a client hands on at most admission.sliceRequests requests and sliceBytes bytes at
 *            once (the session counts them: ClientSession.processFrames), the one that arrived
 *            in this read callback included;
 *   ring   : a client with requests left after its slice waits here, in the order it started
 *            waiting. Once per event-loop turn (setImmediate: after the turn's reads, so every
 *            client read in the turn has had its first slice), each client in the ring gets one
 *            slice, in that order; one that still has requests goes to the back and waits for
 *            the next turn. No client gets a second slice of a turn before every waiting client
 *            got its first.
 *   window : a client owed admission.maxInflightPerClient replies (or its share of reply bytes)
 *            hands on nothing until its own replies come back (ClientSession.mayDispatch), and its
 *            other requests wait in its own buffer — read no further than a few slices ahead —
 *            never on a link.
 *
 *   invariants: a client is in the ring at most once (waitingTurn); a closed client is dropped
 *               at its turn; requests of one client are handed on in the order it sent them
 *               (only the client itself takes frames from its buffer).
 */
export class FairAdmission {
  private ring: AdmittedClient[] = [];
  private scheduled = false;
  private readonly waitSeries: Record<LaneClass, HistogramSeries> | null;

  constructor(waitSeries?: (lane: LaneClass) => HistogramSeries) {
    this.waitSeries = waitSeries === undefined ? null : { interactive: waitSeries('interactive'), bulk: waitSeries('bulk') };
  }

  /** Clients waiting for their turn now. */
  get waiting(): number {
    return this.ring.length;
  }

  /** `client` has requests left: it gets a slice on the next turn. */
  wantTurn(client: AdmittedClient): void {
    if (client.waitingTurn || client.closed) return;
    client.waitingTurn = true;
    client.waitingSince = clockNow();
    this.ring.push(client);
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(this.run);
  }

  private readonly run = (): void => {
    this.scheduled = false;
    const ring = this.ring;
    this.ring = []; // who asks again during this turn waits for the next one
    const now = holdClock(); // every request handed on in this turn is sent now (util/read-clock.ts)
    try {
      for (const client of ring) {
        client.waitingTurn = false;
        if (client.closed) continue;
        if (this.waitSeries !== null) this.waitSeries[client.laneClass].observe((now - client.waitingSince) / 1000);
        client.takeTurn();
      }
    } finally {
      releaseClock();
    }
  };
}
