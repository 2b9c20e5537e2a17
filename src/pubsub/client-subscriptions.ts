/**
 * One client's subscriptions, as Valkey keeps them per client (client->pubsub_channels,
 * ->pubsub_patterns, ->pubsubshard_channels in Valkey 8.0 src/pubsub.c). Names are kept as
 * latin1 strings: one char per byte, so any binary name round-trips exactly
 * (Buffer.from(key, 'latin1')).
 *
 * Counts, as Valkey reports them in confirmations (pubsub.c clientSubscriptionsCount and
 * clientShardSubscriptionsCount):
 *   count()      = channels + patterns → subscribe / unsubscribe / psubscribe / punsubscribe
 *   shardCount() = shard channels      → ssubscribe / sunsubscribe
 *   total()      = both; 0 means the client leaves subscribed mode (RESP2 rules end)
 *
 * Sets keep insertion order; a mass unsubscribe lists names in that order (Valkey's own order
 * is its dict's, which no client can rely on).
 */
import type { Subscriber, SubscriptionKind } from './hub.js';

export function nameKey(name: Buffer): string {
  return name.toString('latin1');
}

export function keyName(key: string): Buffer {
  return Buffer.from(key, 'latin1');
}

export class ClientSubscriptions {
  readonly channels = new Set<string>();
  readonly patterns = new Set<string>();
  readonly shardChannels = new Set<string>();
  /**
   * This client as the hub knows it (handlers/pubsub.ts sets it on the first SUBSCRIBE): what
   * hub.unsubscribeAll() takes on close and RESET.
   */
  owner: Subscriber | null = null;

  set(kind: SubscriptionKind): Set<string> {
    return kind === 'channel' ? this.channels : kind === 'pattern' ? this.patterns : this.shardChannels;
  }

  /** Adds; false when already held (Valkey still confirms it, with an unchanged count). */
  add(kind: SubscriptionKind, name: Buffer | string): boolean {
    const set = this.set(kind);
    const key = typeof name === 'string' ? name : nameKey(name);
    if (set.has(key)) return false;
    set.add(key);
    return true;
  }

  /** Removes; false when not held (Valkey still confirms it, with an unchanged count). */
  remove(kind: SubscriptionKind, name: Buffer | string): boolean {
    return this.set(kind).delete(typeof name === 'string' ? name : nameKey(name));
  }

  has(kind: SubscriptionKind, name: Buffer | string): boolean {
    return this.set(kind).has(typeof name === 'string' ? name : nameKey(name));
  }

  /** The names of one kind, as Buffers, in subscription order (for a mass unsubscribe). */
  names(kind: SubscriptionKind): Buffer[] {
    return [...this.set(kind)].map(keyName);
  }

  /** Channels + patterns: the count in subscribe/unsubscribe/psubscribe/punsubscribe confirmations. */
  count(): number {
    return this.channels.size + this.patterns.size;
  }

  /** Shard channels: the count in ssubscribe/sunsubscribe confirmations. */
  shardCount(): number {
    return this.shardChannels.size;
  }

  /** Everything; 0 = the client is no longer in subscribed mode. */
  total(): number {
    return this.count() + this.shardCount();
  }

  /** The count a confirmation of `kind` carries. */
  countFor(kind: SubscriptionKind): number {
    return kind === 'shard' ? this.shardCount() : this.count();
  }

  clear(): void {
    this.channels.clear();
    this.patterns.clear();
    this.shardChannels.clear();
  }
}
