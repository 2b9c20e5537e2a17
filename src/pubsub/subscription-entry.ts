import type { Logger } from 'pino';
import type { RedirectFollower } from '../routing/redirect-follower.js';
import type { TopologyRefresher } from '../cluster/topology-refresher.js';
import type { RespoolConfig } from '../config/types.js';
import type { MessageKind, SubscriberConnection, SubscriberConnectionHandler, UpstreamSubscribeCommand } from './subscriber-connection.js';

// What the hub (hub.ts) and its connection managers (classic-subscriber.ts, node-subscribers.ts,
// shard-subscribers.ts) share: one entry per name respool holds upstream, the requests waiting
// for entries, and the part of the hub the managers call.

export type SubscriptionKind = 'channel' | 'pattern' | 'shard';

/** A client session in subscribed mode, as the hub sees it. */
export interface Subscriber {
  readonly id: number;
  readonly protocol: 2 | 3;
  readonly closed: boolean;
  /**
   * One or more complete message frames (a run: message-run.ts), already in this subscriber's
   * protocol (RESP2 `*3 message ch payload` / `*4 pmessage pat ch payload` / `*3 smessage ch
   * payload`; RESP3 the same as `>` pushes). A view: copy to keep.
   */
  deliver(frames: Buffer): void;
  /** Valkey dropped a sharded channel (its slot moved, failover): respool's upstream subscription is gone. */
  shardChannelLost(channel: Buffer): void;
}

export interface Entry {
  readonly kind: SubscriptionKind;
  /** latin1 of the name: one char per byte, binary-safe map key. */
  readonly key: string;
  readonly name: Buffer;
  /** Shard channels: the name's hash slot (0 in standalone mode); -1 otherwise. */
  readonly slot: number;
  /** Subscribers whose subscribe completed: messages go to them. */
  readonly receivers: Set<Subscriber>;
  /** Unfinished requests that include this entry (confirmed or not yet). */
  readonly waiting: Set<SubscribeRequest>;
  /** idle: not (being) subscribed on a live connection; subscribing: command written; active: confirmed. */
  state: 'idle' | 'subscribing' | 'active';
  conn: SubscriberConnection | null;
  /**
   * Also held on every other primary (a pattern, or a `__keyspace@…` / `__keyevent@…` channel):
   * keyspace notifications are published only on the node owning the key.
   */
  readonly nodeWide: boolean;
  /**
   * Confirmed everywhere a subscriber needs it: active on its connection and, when nodeWide,
   * on every node connection that is up (node-subscribers.ts). Requests count entries not ready
   * (SubscribeRequest.remaining); the hub's refreshReady() keeps the two in step.
   */
  ready: boolean;
  /** Removed from its map: confirmations and messages for it are ignored. */
  dead: boolean;
  redirects: number;
}

export interface SubscribeRequest {
  readonly sub: Subscriber;
  readonly entries: Entry[];
  /** Entries the subscriber unsubscribed from before the request finished (not joined at completion). */
  readonly skipped: Set<Entry>;
  /** Entries of the request not ready now (and not skipped). */
  remaining: number;
  readonly done: (error: string | null) => void;
  timer: NodeJS.Timeout | null;
  finished: boolean;
}

export const SUBSCRIBE_COMMAND: Record<SubscriptionKind, UpstreamSubscribeCommand> = {
  channel: 'subscribe',
  pattern: 'psubscribe',
  shard: 'ssubscribe',
};
export const UNSUBSCRIBE_COMMAND: Record<SubscriptionKind, UpstreamSubscribeCommand> = {
  channel: 'unsubscribe',
  pattern: 'punsubscribe',
  shard: 'sunsubscribe',
};

const KEYSPACE_PREFIX = '__keyspace@';
const KEYEVENT_PREFIX = '__keyevent@';

/** A keyspace-notification channel name (latin1 key or bytes): published only where the key lives. */
export function isKeyspaceChannel(name: string | Buffer): boolean {
  const text = typeof name === 'string' ? name : name.toString('latin1', 0, KEYSPACE_PREFIX.length);
  return text.startsWith(KEYSPACE_PREFIX) || text.startsWith(KEYEVENT_PREFIX);
}

/** The hub as its connection managers use it (PubSubHub implements it). */
export interface HubCore {
  readonly log: Logger;
  readonly config: RespoolConfig;
  readonly refresher: TopologyRefresher;
  /** MOVED and ASK: the router's follower (routing/redirect-follower.ts). */
  readonly redirects: RedirectFollower;
  readonly closed: boolean;
  /** The live entries of one kind, by key. */
  entries(kind: SubscriptionKind): Map<string, Entry>;
  /** Live node-wide entries (patterns and keyspace channels). */
  readonly nodeWideCount: number;
  /** Writes (P|S)SUBSCRIBE of `entries` on `conn` (they become `subscribing` there). */
  sendSubscribe(conn: SubscriberConnection, entries: Entry[]): void;
  /** Recomputes e.ready (requests waiting for it complete, or wait again). */
  refreshReady(e: Entry): void;
  /** e's connection died: it is idle again, its waiting requests need it again. */
  deactivate(e: Entry): void;
  /** Ends a request with an error: its subscriber holds none of the names it added. */
  fail(r: SubscribeRequest, error: string): void;
  /** Drops e when nobody holds or waits for it (UNSUBSCRIBEd upstream if it was sent). */
  release(e: Entry): void;
  /** Removes e from its map; it is dead from now on. */
  forget(e: Entry): void;
  /** Respool no longer holds shard channel e: dropped, every receiver told. */
  lose(e: Entry, unsubscribe: boolean): void;
  /** A run of messages from `conn` for the entry it names (message-run.ts): fanned out to its receivers. */
  onMessage(conn: SubscriberConnection, kind: MessageKind, pattern: string | null, channel: string, frames: Buffer, starts: readonly number[]): void;
  /** A run of messages for `e` (`starts`: each frame's offset), to every receiver (node connections: keyspace events). */
  fanOut(e: Entry, frames: Buffer, starts?: readonly number[]): void;
  /** Dials a subscriber connection with the hub's settings. */
  connect(host: string, port: number, handler: SubscriberConnectionHandler): SubscriberConnection;
  /** Connections with nothing subscribed: closed after PubSubHub.idleCloseMs. */
  scheduleIdleChecks(): void;
}
