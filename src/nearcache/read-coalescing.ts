import type { CallClient, CallOwner } from '../routing/upstream-call.js';

/**
 * Identical reads in flight, answered from one node reply (nearCache.coalesceAll: keys the cache
 * does not hold; the cache's own fills coalesce the keys it holds). "Identical": the same request
 * bytes from clients with the same protocol, database and identity on the nodes — the node would
 * answer each of them the same.
 *
 *   join    : a read whose twin is in flight waits for its reply instead of going to the node
 *   order   : a write of the key through respool detaches the twins in flight (forget): a read
 *             after the write never joins a read sent before it; a client's write waits for
 *             its own joined reads (handlers/index.ts, as for the cache's pending reads)
 *   bounds  : an entry lives while its first read is in flight; nothing is kept after the reply
 */

interface InFlight {
  readonly id: string;
  readonly name: string;
  /** The owners that joined, answered with a copy of the first read's reply. */
  readonly joined: CallOwner[];
}

export class ReadCoalescing {
  private readonly inFlight = new Map<string, InFlight>();
  /** The reads in flight per key name (db + key), for forget(). */
  private readonly byName = new Map<string, Set<InFlight>>();
  /** Reads answered from another's reply. */
  joined = 0;

  /** The id of a read: its bytes, and what makes two clients' answers the same. */
  static idOf(client: CallClient, raw: Buffer): string {
    return `${client.protocol}\u0000${client.db}\u0000${client.identity?.key ?? ''}\u0000${raw.toString('latin1')}`;
  }

  /** True when `owner` joined a twin in flight (answered with its reply). */
  join(id: string, owner: CallOwner): boolean {
    const twin = this.inFlight.get(id);
    if (twin === undefined) return false;
    twin.joined.push(owner);
    this.joined++;
    return true;
  }

  /**
   * The first of its kind, about to be sent: the owner to send it with, which answers `owner`
   * and every read that joins it meanwhile.
   */
  lead(id: string, name: string, owner: CallOwner): CallOwner {
    const entry: InFlight = { id, name, joined: [] };
    this.inFlight.set(id, entry);
    let reads = this.byName.get(name);
    if (reads === undefined) this.byName.set(name, (reads = new Set()));
    reads.add(entry);
    return {
      client: owner.client,
      upstreamTimed: (node, ms) => owner.upstreamTimed?.(node, ms),
      onCallDone: (reply, index) => {
        this.end(entry);
        if (entry.joined.length > 0) {
          const copy = Buffer.from(reply); // the link's read buffer is not theirs to keep
          for (const joined of entry.joined) joined.onCallDone(copy, 0);
        }
        owner.onCallDone(reply, index);
      },
    };
  }

  /** A write of `name` is about to be sent: reads in flight before it take no one else along. */
  forget(name: string): void {
    const reads = this.byName.get(name);
    if (reads === undefined) return;
    for (const read of reads) if (this.inFlight.get(read.id) === read) this.inFlight.delete(read.id);
    this.byName.delete(name);
  }

  /** Every read in flight detached (a flush). */
  forgetAll(): void {
    this.inFlight.clear();
    this.byName.clear();
  }

  private end(entry: InFlight): void {
    if (this.inFlight.get(entry.id) === entry) this.inFlight.delete(entry.id);
    const reads = this.byName.get(entry.name);
    if (reads === undefined) return;
    reads.delete(entry);
    if (reads.size === 0) this.byName.delete(entry.name);
  }
}
