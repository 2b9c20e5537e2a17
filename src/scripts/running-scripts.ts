import { oneShotCommand, type OneShotOptions } from '../upstream/one-shot.js';

/** A script call in flight: where it was sent and when (UpstreamCall's `node` and `sentAt`). */
export interface RunningScript {
  readonly node: string;
  readonly sentAt: number;
}

/**
 * The scripts (EVAL*, FCALL*) respool has in flight, so that PING can tell what Valkey would:
 * a node running a long script answers other connections `-BUSY …`. PING is answered locally,
 * so without this a client would see PONG while its shard is stuck. When a script has run
 * longer than `probeAfterMs`, PING is asked of that node on a connection of its own (the shared
 * link is queued behind the script) and Valkey's own answer, BUSY or PONG, is relayed.
 *
 * Cost: nothing per script beyond a Set add/delete; probes only while a script runs long, and at
 * most one probe in flight per node (concurrent PINGs share it).
 */
export class RunningScripts {
  private readonly running = new Set<RunningScript>();
  private readonly probes = new Map<string, Promise<Buffer | null>>();

  constructor(private readonly probeAfterMs = 5) {}

  add(script: RunningScript): void {
    this.running.add(script);
  }

  delete(script: RunningScript): void {
    this.running.delete(script);
  }

  /** Addresses of nodes with a script in flight for at least probeAfterMs. */
  longRunning(now = performance.now()): string[] {
    const nodes = new Set<string>();
    for (const s of this.running) if (s.sentAt > 0 && s.node !== '' && now - s.sentAt >= this.probeAfterMs) nodes.add(s.node);
    return [...nodes];
  }

  /**
   * Valkey's BUSY error from a node running a long script, or null when none is busy (the
   * caller then answers PING itself). `connect` gives the one-shot options for a node address.
   */
  async busyReply(connect: (address: string) => OneShotOptions): Promise<Buffer | null> {
    const nodes = this.longRunning();
    if (nodes.length === 0) return null;
    const replies = await Promise.all(nodes.map((address) => this.probe(address, connect)));
    return replies.find((r) => r !== null) ?? null;
  }

  private probe(address: string, connect: (address: string) => OneShotOptions): Promise<Buffer | null> {
    let probe = this.probes.get(address);
    if (probe === undefined) {
      probe = oneShotCommand(connect(address), ['PING'])
        .then((reply) => (reply.toString('latin1', 0, 5) === '-BUSY' ? reply : null))
        .catch(() => null) // an unreachable node is for the command path to report, not PING
        .finally(() => this.probes.delete(address));
      this.probes.set(address, probe);
    }
    return probe;
  }
}
