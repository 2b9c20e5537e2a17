import { FLEET_TAG } from '../keys/reserved-tag.js';
import calculateSlot from 'cluster-key-slot';
import type { Logger } from 'pino';
import type { RespoolConfig } from '../config/types.js';
import type { TopologyRefresher } from '../cluster/topology-refresher.js';
import type { UpstreamPools } from '../upstream/upstream-pools.js';
import { decodeReply, RespError } from '../resp/decode.js';
import { subscriberConnectionFor, type SubscriberConnection, type SubscriberConnectionHandler } from '../pubsub/subscriber-connection.js';
import { Backoff } from '../upstream/backoff.js';

/**
 * The fleet's shared state lives in the upstream cluster itself — the replicated, highly
 * available store every member already depends on — under one hash tag, so every key is in one
 * slot and the scripts below run atomically on that slot's primary:
 *
 *   {respool-fleet}:state    hash: version (integer), doc (the runtime state as JSON: split rules)
 *   {respool-fleet}:members  hash: member id → { address, applied version, beat counter } as JSON
 *   {respool-fleet}:fill:<h> a fill's lock (SET NX PX): one fill of a split key at a time
 *   {respool-fleet}:bus      pub/sub channel: change notices, fill holds and their answers, hot-key reports
 *
 * Changes are compare-and-set on the version (a change made on a stale copy is refused and
 * retried on the current one). The channel only makes things faster: every member also polls
 * the version (BEAT, every few hundred ms), so a lost notice delays a change, it never loses it.
 */
export { FLEET_TAG };
export const STATE_KEY = `${FLEET_TAG}:state`;
export const MEMBERS_KEY = `${FLEET_TAG}:members`;
export const BUS_CHANNEL = `${FLEET_TAG}:bus`;
export const FLEET_SLOT = calculateSlot(FLEET_TAG);

/** Registers the member (its beat) and reads the state when its version is not the one known. */
const BEAT = `
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
local v = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
local doc = ''
if v ~= tonumber(ARGV[3]) then doc = redis.call('HGET', KEYS[1], 'doc') or '' end
return {v, doc, redis.call('HGETALL', KEYS[2])}`;

/** Replaces the doc when the version is still the expected one: {1, new version} or {0, current version}. */
const COMMIT = `
local v = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if v ~= tonumber(ARGV[1]) then return {0, v} end
redis.call('HSET', KEYS[1], 'version', v + 1, 'doc', ARGV[2])
return {1, v + 1}`;

const UNLOCK = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`;

export interface BeatResult {
  version: number;
  /** The doc when the version differs from the one known, else null. */
  doc: string | null;
  /** member id → its entry's JSON. */
  members: Map<string, string>;
}

export interface FleetStoreDeps {
  config: RespoolConfig;
  refresher: TopologyRefresher;
  pools: UpstreamPools;
  log: Logger;
}

export class FleetStore {
  private subscriber: SubscriberConnection | null = null;
  private resubscribeTimer: NodeJS.Timeout | null = null;
  private readonly backoff = new Backoff(100, 2000);
  private onMessage: ((payload: Buffer) => void) | null = null;
  private stopped = false;
  /** True while the bus subscription is confirmed (fills need it: they wait for answers on it). */
  subscribed = false;
  /** The node the bus subscription is on ("host:port"). */
  private subscribedTo: string | null = null;
  /** The subscription was closed to follow the slot: subscribed again at once, not backed off. */
  private moving = false;

  constructor(private readonly deps: FleetStoreDeps) {
    // Another node serves the state's slot now (a failover, a resharding, a migration's cutover):
    // the bus moves with it, or notices published there would reach nobody.
    deps.refresher.onChange((topology) => {
      const node = topology.primaryForSlot(FLEET_SLOT);
      if (this.subscriber !== null && node !== undefined && this.subscribedTo !== null && node.address !== this.subscribedTo) {
        this.moving = true;
        this.subscriber.close('the fleet state\'s slot moved to another node');
      }
    });
  }

  beat(memberId: string, entry: string, knownVersion: number): Promise<BeatResult> {
    return this.call(['EVAL', BEAT, 2, STATE_KEY, MEMBERS_KEY, memberId, entry, knownVersion]).then((reply) => {
      const [v, doc, flat] = reply as [number, Buffer | null, Buffer[]];
      const members = new Map<string, string>();
      for (let i = 0; i + 1 < flat.length; i += 2) members.set(flat[i]!.toString('utf8'), flat[i + 1]!.toString('utf8'));
      const text = doc === null ? '' : doc.toString('utf8');
      return { version: Number(v), doc: text === '' ? null : text, members };
    });
  }

  /** Compare-and-set: the new version, or null when the state moved on (read it again and retry). */
  async commit(expectedVersion: number, doc: string): Promise<number | null> {
    const [ok, v] = (await this.call(['EVAL', COMMIT, 1, STATE_KEY, expectedVersion, doc])) as [number, number];
    return ok === 1 ? Number(v) : null;
  }

  async forget(memberId: string): Promise<void> {
    await this.call(['HDEL', MEMBERS_KEY, memberId]);
  }

  async tryLock(name: string, owner: string, ttlMs: number): Promise<boolean> {
    const reply = await this.call(['SET', `${FLEET_TAG}:fill:${name}`, owner, 'NX', 'PX', ttlMs]);
    return reply !== null;
  }

  async unlock(name: string, owner: string): Promise<void> {
    await this.call(['EVAL', UNLOCK, 1, `${FLEET_TAG}:fill:${name}`, owner]);
  }

  async publish(message: object): Promise<void> {
    await this.call(['PUBLISH', BUS_CHANNEL, JSON.stringify(message)]);
  }

  /** Subscribes to the bus on the state slot's primary, again after every loss (backed off). */
  listen(onMessage: (payload: Buffer) => void): void {
    this.onMessage = onMessage;
    this.subscribe();
  }

  stop(): void {
    this.stopped = true;
    if (this.resubscribeTimer) clearTimeout(this.resubscribeTimer);
    this.subscriber?.close('fleet stopped');
  }

  /** One command on the primary serving the fleet's slot; the decoded reply (an error reply throws). */
  async call(args: Array<string | Buffer | number>): Promise<unknown> {
    const node = this.deps.refresher.current?.primaryForSlot(FLEET_SLOT);
    if (node === undefined) throw new Error(`no node serves the fleet state's slot ${FLEET_SLOT} yet`);
    const frame = await this.deps.pools.forNode(node, 2, 'primary').call(args);
    const reply = decodeReply(frame);
    if (reply instanceof RespError) {
      if (/^(MOVED|ASK|CLUSTERDOWN|READONLY) /.test(reply.message)) this.deps.refresher.requestRefresh('moved');
      throw new Error(reply.message);
    }
    return reply;
  }

  private subscribe(): void {
    if (this.stopped) return;
    const node = this.deps.refresher.current?.primaryForSlot(FLEET_SLOT);
    if (node === undefined) return this.retrySubscribe();
    const handler: SubscriberConnectionHandler = {
      ready: (conn) => {
        conn.subscribe('subscribe', [Buffer.from(BUS_CHANNEL)], {
          confirmed: () => {
            this.subscribed = true;
            this.backoff.reset();
          },
          failed: (error) => {
            this.deps.log.warn({ err: error }, 'fleet: could not subscribe to the bus');
            conn.close(error);
          },
        });
      },
      // A run of one or more messages (pubsub/message-run.ts): each frame from its offset to the next.
      message: (_conn, _kind, _pattern, _channel, frames, starts) => {
        for (let i = 0; i < starts.length; i++) {
          const value = decodeReply(frames.subarray(starts[i]!, i + 1 < starts.length ? starts[i + 1]! : frames.length));
          const payload = Array.isArray(value) ? value[2] : undefined;
          if (Buffer.isBuffer(payload)) this.onMessage?.(payload);
        }
      },
      shardChannelDropped: () => {},
      closed: (_conn, reason) => {
        this.subscribed = false;
        this.subscriber = null;
        if (this.moving && !this.stopped) {
          this.moving = false;
          this.subscribe();
        } else if (!this.stopped) {
          this.deps.log.debug({ reason }, 'fleet: bus subscription lost; subscribing again');
          this.deps.refresher.requestRefresh('error');
          this.retrySubscribe();
        }
      },
    };
    this.subscribedTo = node.address;
    this.subscriber = subscriberConnectionFor(this.deps.config, node.host, node.port, handler);
  }

  private retrySubscribe(): void {
    if (this.stopped || this.resubscribeTimer !== null) return;
    this.resubscribeTimer = setTimeout(() => {
      this.resubscribeTimer = null;
      this.subscribe();
    }, this.backoff.nextDelayMs());
    this.resubscribeTimer.unref();
  }
}
